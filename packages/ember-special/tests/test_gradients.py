"""Through ember-autograd's engine (only when it is installed): first- and second-order gradients of
every differentiable ember.special function equal torch.autograd's on the op table's float64 samples."""
import importlib.util
import pathlib
import warnings

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.autograd  # ember-special's nox session runs it after installing ember-autograd
pytest.importorskip("ember.autograd")

import optable_special as table  # noqa: E402
from optable import convert  # noqa: E402

import ember  # noqa: E402
from ember._registry import REGISTRY  # noqa: E402

_PATH = pathlib.Path(__file__).resolve().parents[2] / "ember-autograd" / "tests" / "test_op_gradients.py"
_spec = importlib.util.spec_from_file_location("autograd_op_gradients", _PATH)
ag = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ag)  # its _grads/_leaves: gradients and gradients of sum(grad * v), per library

LINES = {}
for _line in table.LINES:  # the first line of each differentiable op that calls it directly (as the VJP test)
    if _line.grad and "float64" in _line.dtypes and REGISTRY[_line.name].differentiable:
        LINES.setdefault(_line.name, _line)


@pytest.mark.parametrize("line", list(LINES.values()), ids=list(LINES))
def test_gradients_match_torch_to_second_order(line):
    rng = np.random.default_rng(7)
    compared = 0
    for args, kwargs in line.samples("float64", rng):
        values = [rng.standard_normal(4096) for _ in range(8)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = ag._grads(torch, line, ag._leaves(torch, convert(torch, args, "float64")),
                                     ag._leaves(torch, convert(torch, kwargs, "float64")), values)
            except Exception:  # noqa: BLE001 - bad input, in-place on a leaf, or no gradient in torch
                continue
            if expected is None:
                continue
            got = ag._grads(ember, line, ag._leaves(ember, convert(ember, args, "float64")),
                            ag._leaves(ember, convert(ember, kwargs, "float64")), values)
        for order, (e_set, t_set) in enumerate(zip(got, expected)):
            if t_set is None:
                continue
            if e_set is None:
                assert all(t is None or not torch.any(t != 0) for t in t_set), f"{line.name}: no order-2 gradient"
                continue
            for i, (e, t) in enumerate(zip(e_set, t_set)):
                where = f"{line.name} order {order + 1} input {i}"
                if t is None or not torch.any(t != 0):
                    assert e is None or not np.any(np.nan_to_num(e.detach().numpy())), where
                    continue
                assert e is not None, where
                np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-7, atol=1e-9,
                                           err_msg=where)
        compared += 1
    assert compared, f"{line.name}: no sample could be compared"


def test_no_gradient_for_igamma_input_and_zeta_order():
    a = ember.tensor([2.0], dtype=ember.float64, requires_grad=True)
    with pytest.raises(NotImplementedError):
        ember.autograd.grad(ember.special.gammainc(a, ember.tensor([1.0], dtype=ember.float64)).sum(), a)
    with pytest.raises(NotImplementedError):
        ember.autograd.grad(ember.special.zeta(a, ember.tensor([1.0], dtype=ember.float64)).sum(), a)
