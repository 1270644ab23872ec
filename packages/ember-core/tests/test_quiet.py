"""NumPy's floating-point warnings never escape an op (``ember._quiet``): PyTorch computes inf and NaN silently, so a
script under ``-W error`` or ``np.seterr(all="raise")`` must not fail on them (mixed precision overflows on
purpose); the caller's own NumPy error state is left as it was."""
import warnings

import numpy as np
import pytest

import ember
from ember._registry import REGISTRY

SPECIAL = [float("inf"), -float("inf"), float("nan"), 0.0, -1.0, 1e30, 3.0, -0.5]
FLOATS = (ember.float32, ember.float64, ember.float16, ember.bfloat16)


def _calls(x):
    """Argument lists most ops take: unary, binary (tensor, float, int), matrices, and a dim."""
    m = x.reshape(2, 4)
    return ((x,), (x, x), (x, 0.0), (x, 0), (x, 2.5), (m,), (m, x.reshape(4, 2)), (x, 0, 1))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_no_op_warns_on_special_values(dtype):
    x = ember.tensor(SPECIAL, dtype=dtype)  # (1e30 overflows float16: inf, silently)
    warned = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for name, op in sorted(REGISTRY.items()):
            if op.kind == "factory":
                continue
            for args in _calls(x):
                try:
                    op.fn(*args)
                except RuntimeWarning as w:
                    warned.setdefault(name, str(w))
                except Exception:  # noqa: BLE001 - arguments the op refuses: not what is tested
                    pass
    assert not warned


def test_split_ops_and_in_place_are_quiet():
    big = ember.full((1 << 20,), float("inf"))  # (split over the cores)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for r in (big - big, big * 0, big.clone().sub_(big), big.sum(), ember.tensor([70000.0]).half()):
            assert not bool(ember.isfinite(r).all())


def test_callers_error_state_is_kept():
    old = np.seterr(all="raise")
    try:
        x = ember.tensor([float("inf"), 1.0])
        assert bool(ember.isnan((x - x)[0])) and bool(ember.isinf(x.sum()))
        with pytest.raises(FloatingPointError):
            np.array([np.inf]) - np.array([np.inf])
        assert np.geterr()["invalid"] == "raise"
    finally:
        np.seterr(**old)
