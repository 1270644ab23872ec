"""repr(ember tensor) must equal repr(torch tensor) of the same values, "torch." read as "ember."."""
import numpy as np
import pytest
import torch
import torch._tensor_str

import ember
from ember import _printing

nan, inf = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _reset_options():
    yield
    torch.set_printoptions(profile="default")
    ember.set_printoptions(profile="default")


def rand(shape, scale=1.0, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def ints(shape, lo, hi, dtype, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def cplx(shape, scale=1.0, seed=0, dtype=np.complex64):
    return (rand(shape, scale, seed, np.float64) + 1j * rand(shape, scale, seed + 1, np.float64)).astype(dtype)


def f32(*vals):
    return np.array(vals, dtype=np.float32)


CASES = {
    # floats across magnitudes and shapes
    **{f"randn_{s}_{sc:g}": rand(s, sc, seed=i) for i, (s, sc) in enumerate(
        [(s, sc) for s in [(5,), (3, 4), (2, 3, 4), (2, 1, 2, 3)]
         for sc in [1e-6, 1e-3, 1.0, 10.0, 1e3, 1e5, 1e9]])},
    "long_row": rand(100),
    "long_row_f64": rand(37, 100, dtype=np.float64),
    "wide_2d": rand((3, 30)),
    "summarized_1d": rand(1001),
    "summarized_2d": rand((40, 50)),
    "summarized_3d": rand((20, 30, 40), 1e3),
    "summarized_last_dim": rand((3, 1000)),
    "summarized_first_dim": rand((1000, 2)),
    "summarized_keeps_small_dims": rand((1, 1, 1200)),
    "summarized_int": ints((30, 40), -1000, 1000, np.int64),
    "summarized_bool": ints((2000,), 0, 2, np.bool_),
    "summarized_complex": cplx((50, 30)),
    # integer-valued floats, with and without sci mode
    "int_valued": f32(1, 2, 3),
    "int_valued_neg": f32(-1, 20, 300),
    "int_valued_ratio": f32(1, 1e5),
    "int_valued_big": f32(3e8, 2),
    "int_valued_2d": np.arange(12, dtype=np.float64).reshape(3, 4) * 7,
    "mixed_small": f32(1e-5, 1.0),
    "mixed_ratio": f32(0.5, 1234.5),
    "fraction": f32(1, 2.5),
    "below_sci": f32(0.0001, 0.05),
    # nan / inf / zeros
    "nan_inf": f32(0, nan, -inf, inf),
    "nan_only": f32(nan),
    "zeros": np.zeros((2, 3), np.float32),
    "neg_zero": f32(-0.0, 1),
    "neg_zero_only": f32(-0.0),
    "nan_with_frac": f32(nan, 1.5, -inf),
    "inf_with_sci": f32(inf, 1e-7, 3),
    "nan_int_valued_sci": f32(nan, 1e10, 1),
    # dtypes
    "f16": rand((3, 4), dtype=np.float16),
    "f16_sci": rand(7, 1e4, dtype=np.float16),
    "f16_int_valued": np.array([1, 2048, -3], np.float16),
    "f64": rand((2, 5), 1e-2, dtype=np.float64),
    "int8": ints((4, 5), -128, 128, np.int8),
    "uint8": ints((3, 7), 0, 256, np.uint8),
    "int16": ints(9, -30000, 30000, np.int16),
    "int32": ints((2, 3, 2), -5, 5, np.int32),
    "int64": ints(40, -(10**12), 10**12, np.int64),
    "int64_row": np.arange(-20, 20, dtype=np.int64),
    "bool": ints((3, 4), 0, 2, np.bool_),
    "complex64": np.array([1 + 2j, 3 - 1j], np.complex64),
    "complex_frac": np.array([1.5 + 2j, -3 - 0.0j, 0.25j], np.complex64),
    "complex_rand": cplx((3, 4)),
    "complex_sci": cplx(6, 1e5, dtype=np.complex128),
    "complex_nan": np.array([complex(nan, 1), complex(1, -inf), 2 + 0j], np.complex64),
    "complex_long": cplx(40),
    # empty and zero-dim
    "empty": np.zeros(0, np.float32),
    "empty_2d": np.zeros((0, 3), np.float32),
    "empty_3d_f64": np.zeros((2, 0, 4), np.float64),
    "empty_int32": np.zeros(0, np.int32),
    "empty_int64": np.zeros(0, np.int64),
    "empty_bool": np.zeros((0, 2), np.bool_),
    "scalar": np.array(3.0, np.float32),
    "scalar_frac": np.array(-3.25, np.float32),
    "scalar_small": np.array(1e-7, np.float64),
    "scalar_nan": np.array(nan, np.float32),
    "scalar_int": np.array(3, np.int64),
    "scalar_int8": np.array(-7, np.int8),
    "scalar_bool": np.array(True),
    "scalar_complex": np.array(1 - 2.5j, np.complex64),
    "scalar_f16": np.array(0.1, np.float16),
    # suffixes wrapping onto a new line
    **{f"f16_row_{n}": rand(n, seed=n, dtype=np.float16) for n in range(6, 13)},
    **{f"int8_row_{n}": ints(n, -100, 100, np.int8, seed=n) for n in (17, 18, 19, 20)},
}


def check(arr, bf16=False):
    t, e = torch.tensor(arr), ember.tensor(arr)
    if bf16:
        t, e = t.to(torch.bfloat16), e.to(ember.bfloat16)
    expected = repr(t).replace("torch.", "ember.")
    assert repr(e) == expected


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name):
    check(CASES[name])


@pytest.mark.parametrize("arr", [rand((3, 4)), rand(9, 1e4), f32(1, 256, -3), f32(0.1, nan), rand((30, 40)),
                                 np.array(0.3, np.float32)], ids=range(6))
def test_bfloat16(arr):
    check(arr, bf16=True)


OPTIONS = [
    dict(precision=2), dict(precision=8), dict(precision=0), dict(threshold=5), dict(threshold=5, edgeitems=1),
    dict(threshold=5, edgeitems=0), dict(edgeitems=1), dict(linewidth=40), dict(linewidth=200),
    dict(sci_mode=True), dict(sci_mode=False), dict(profile="short"), dict(profile="full"),
    dict(profile="default"), dict(profile="short", precision=6), dict(precision=3, sci_mode=True, linewidth=50),
]
OPTION_ARRAYS = ["randn_(3, 4)_1", "randn_(5,)_1e+09", "int_valued_ratio", "int_valued_2d", "long_row",
                 "summarized_2d", "summarized_3d", "summarized_int", "complex_rand", "nan_inf", "scalar_small",
                 "int64_row", "empty_2d", "f16_row_12"]


@pytest.mark.parametrize("opts", OPTIONS, ids=[str(o) for o in OPTIONS])
@pytest.mark.parametrize("name", OPTION_ARRAYS)
def test_options_match_torch(opts, name):
    torch.set_printoptions(**opts)
    ember.set_printoptions(**opts)
    check(CASES[name])


def test_full_profile_prints_everything():
    ember.set_printoptions(profile="full")
    assert "..." not in repr(ember.tensor(rand(1200)))


def test_options_state_matches_torch():
    calls = [dict(precision=7), dict(profile="nonexistent"), dict(sci_mode=True), dict(threshold=10),
             dict(profile="short"), dict(profile="full", linewidth=100)]
    for kwargs in calls:
        torch.set_printoptions(**kwargs)
        ember.set_printoptions(**kwargs)
        assert _printing.get_printoptions() == torch._tensor_str.get_printoptions()


def test_printoptions_context_restores():
    with _printing.printoptions(precision=1, sci_mode=True):
        assert repr(ember.tensor(f32(1.25, 2))) == "tensor([1.2e+00, 2.0e+00])"
    assert repr(ember.tensor(f32(1.25, 2))) == "tensor([1.2500, 2.0000])"


def test_default_dtype_float64():
    old = ember.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        ember.set_default_dtype(ember.float64)
        for arr in [rand(3), rand(3, dtype=np.float64), cplx(2), cplx(2, dtype=np.complex128), np.zeros(0)]:
            check(arr)
    finally:
        torch.set_default_dtype(torch.float32)
        ember.set_default_dtype(old)


class _Node:
    """Stands in for an autograd node, which ember-core does not have."""

    def name(self):
        return "AddBackward0"


@pytest.mark.parametrize("arr", [f32(1, 2), rand((3, 21)), rand(6, dtype=np.float16)], ids=range(3))
def test_grad_fn_suffix(arr):
    t = torch.tensor(arr, requires_grad=True) + 0
    e = ember.tensor(arr)
    e.grad_fn = _Node()
    assert repr(e) == repr(t).replace("torch.", "ember.")
