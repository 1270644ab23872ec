"""PyTorch's older module names (torch.quantization, torch.nn.quantized and .dynamic, torch.nn.quantizable,
torch.nn.intrinsic, torch.nn.qat) are the ember.ao modules themselves: the same classes and functions under both
names, submodules included."""
import importlib
import subprocess
import sys

import pytest

import ember

ALIASES = [("ember.quantization", "ember.ao.quantization"), ("ember.quantization.observer",
                                                              "ember.ao.quantization.observer"),
           ("ember.nn.quantized", "ember.ao.nn.quantized"), ("ember.nn.quantized.dynamic",
                                                             "ember.ao.nn.quantized.dynamic"),
           ("ember.nn.quantized.functional", "ember.ao.nn.quantized.functional"),
           ("ember.nn.quantizable", "ember.ao.nn.quantizable"), ("ember.nn.intrinsic", "ember.ao.nn.intrinsic"),
           ("ember.nn.intrinsic.qat", "ember.ao.nn.intrinsic.qat"),
           ("ember.nn.intrinsic.quantized.dynamic", "ember.ao.nn.intrinsic.quantized.dynamic"),
           ("ember.nn.qat", "ember.ao.nn.qat"), ("ember.nn.qat.dynamic", "ember.ao.nn.qat.dynamic")]


@pytest.mark.parametrize("old, new", ALIASES)
def test_alias_is_the_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_attributes_and_recipes_under_old_names():
    assert ember.quantization.prepare is ember.ao.quantization.prepare
    assert ember.nn.quantized.Linear is ember.ao.nn.quantized.Linear
    assert ember.nn.quantizable.LSTM is ember.ao.nn.quantizable.LSTM
    from ember.quantization.observer import MinMaxObserver
    assert MinMaxObserver is ember.ao.quantization.MinMaxObserver
    model = ember.nn.Sequential(ember.nn.Linear(3, 2))
    q = ember.quantization.quantize_dynamic(model, {ember.nn.Linear})
    assert isinstance(q[0], ember.nn.quantized.dynamic.Linear)


def test_old_names_first_in_a_fresh_process():
    """Imported before ember.ao, the old names still give the ember.ao modules."""
    code = ("import ember.nn.quantized.dynamic as d, ember.quantization.stubs as s, ember.ao.nn.quantized.dynamic as n,"
            " ember.ao.quantization as q; assert d is n and s.QuantStub is q.QuantStub")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
