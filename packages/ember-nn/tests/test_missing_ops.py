"""No missing op surfaces as a KeyError: nn.functional looks ops up in ember-core's registry per call, and an op
this ember-core lacks is a NotImplementedError naming the function; attribute access on ember, ember.nn.functional
and Tensor for every name of PyTorch's API lists gives the attribute or an AttributeError, never a KeyError."""
import importlib
import pathlib
import re

import pytest

import ember
import ember.nn.functional as F
from ember._registry import REGISTRY
from ember.nn.functional._common import core, core_

API = pathlib.Path(__file__).resolve().parents[4] / "shared" / "api"
FUNCTIONAL = pathlib.Path(F.__file__).parent


def api_names(stem):
    path = API / f"{stem}.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    return [n.strip() for n in path.read_text().splitlines() if n.strip() and not n.startswith("#")]


@pytest.mark.parametrize("module_name,stem", [("ember.nn.functional", "nn_functional"), ("ember", "torch_functions")])
def test_module_attributes_are_there_or_attribute_errors(module_name, stem):
    module = importlib.import_module(module_name)
    missing = []
    for name in api_names(stem):
        try:
            getattr(module, name)
        except AttributeError:
            missing.append(name)  # (not provided: PyTorch users expect AttributeError)
        except KeyError as e:
            pytest.fail(f"{module_name}.{name} raised KeyError({e})")
    assert not set(missing) & set(getattr(module, "__all__", ())), "names in __all__ must be attributes"


def test_tensor_attributes_never_raise_key_errors():
    t = ember.randn(2, 3)
    for name in api_names("torch_Tensor_methods"):
        for owner in (ember.Tensor, t):
            try:
                getattr(owner, name)
            except KeyError as e:
                pytest.fail(f"Tensor.{name} raised KeyError({e})")
            except Exception:  # noqa: BLE001 - e.g. AttributeError, or a property refusing this tensor (t.imag)
                pass


def _registry_names():
    """Every op name the functional files look up (f-string names with their 1-3 d forms)."""
    names = set()
    for path in FUNCTIONAL.glob("*.py"):
        for name in re.findall(r"core_?\(f?\"([^\"]+)\"\)", path.read_text(encoding="utf-8")):
            names |= {name.replace("{n}", str(n)) for n in (1, 2, 3)} if "{n}" in name else {name}
    return sorted(n for n in names if "{" not in n)


def test_every_looked_up_op_is_there_or_named_when_missing():
    names = _registry_names()
    assert "_upsample" in names and "max_pool2d" in names
    for name in names:
        for lookup in (core, core_):
            try:
                assert callable(lookup(name)) or lookup is core_
            except NotImplementedError as e:
                assert name not in REGISTRY and f"'{name}'" in str(e)


def test_a_missing_op_names_the_function(monkeypatch):
    monkeypatch.delitem(REGISTRY, "relu")
    monkeypatch.delitem(REGISTRY, "_upsample")
    x = ember.randn(1, 1, 2, 2)
    with pytest.raises(NotImplementedError, match=r"ember\.nn\.functional\.relu\(\) needs the op 'relu'"):
        F.relu(x)
    with pytest.raises(NotImplementedError, match=r"relu\(\) needs the op 'relu'"):
        F.relu(x, inplace=True)
    with pytest.raises(NotImplementedError, match=r"interpolate\(\) needs the op '_upsample'"):
        F.interpolate(x, scale_factor=2)
