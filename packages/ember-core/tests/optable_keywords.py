"""Op table lines for keyword arguments the family lines leave at their defaults (``test_optable_coverage.py``
finds them): a few samples per keyword, on a dtype or two (a keyword's handling does not depend on the dtype),
with the errors PyTorch raises for its invalid values."""
import numpy as np
import torch
from optable import DT, NC, Line, T, fn, meth, needs_nn, shape_of, values
from optable_layout import _factory
from optable_linalg import SINGULAR, ff, la, spd, wellcond
from optable_nn import _backward_call
from optable_pointwise import inplace
from optable_random import seeded

from ember._registry import REGISTRY

F32 = ("float32",)
F32_I64 = ("float32", "int64")


def _v(dtype, rng):
    return lambda *s: values(dtype, s, rng)  # noqa: E731


def alphas(dtype, rng):
    v = _v(dtype, rng)
    a, b = v(3, 4), v(4)
    return [((a, b), {"alpha": 2}), ((a, b), {"alpha": -3}), ((a, 2), {"alpha": 3}), ((a, b), {"alpha": 0.5}),
            ((a, b), {"alpha": True})]


def rounding_modes(dtype, rng):
    v = _v(dtype, rng)
    a, b = v(3, 4) * 3, np.abs(v(4)) + 1
    return [((a, b), {"rounding_mode": "trunc"}), ((a, b), {"rounding_mode": "floor"}),
            ((a, -b), {"rounding_mode": "floor"}), ((a, 2), {"rounding_mode": "trunc"}),
            ((a, b), {"rounding_mode": None}), ((a, b), {"rounding_mode": "bogus"})]


def closeness(dtype, rng):
    v = _v(dtype, rng)
    a = v(3, 4)
    a[0, 0] = np.nan
    b = a + 1e-3
    return [((a, b), {"rtol": 1e-2}), ((a, b), {"atol": 1e-2, "rtol": 0.0}), ((a, a), {"equal_nan": True}),
            ((a, b), {"rtol": -1.0}), ((a, b), {"atol": -1.0})]


def tolerance_edges(dtype, rng):
    """Differences on a grid of 0.0005 around the tolerance: a slightly different rtol or atol flips some."""
    other = np.full(200, 2.0)
    near = other + np.arange(200) * 0.0005
    return [((near, other), {"rtol": 0.01, "atol": 0.0}), ((near, other), {"rtol": 0.0, "atol": 0.01}),
            ((near, other), {"rtol": 0.005, "atol": 0.005})]


def allclose_edges(dtype, rng):
    """Every difference just above the tolerance (a slightly larger rtol or atol would pass them)."""
    other = np.full(4, 2.0)
    return [((other + 0.0205, other), {"rtol": 0.01, "atol": 0.0}),
            ((other + 0.0105, other), {"rtol": 0.0, "atol": 0.01}),
            ((other + 0.0195, other), {"rtol": 0.01, "atol": 0.0})]


def isin_keywords(dtype, rng):
    a, b = values(dtype, (3, 4), rng).round(), np.unique(values(dtype, (5,), rng).round())
    return [((np.unique(a), b), {"assume_unique": True}), ((2, b), {}), ((1, b), {"invert": True})]


def topk_unsorted(m, *a, **k):
    """topk(sorted=False) with its values sorted (their order is unspecified)."""
    values_, _ = m.topk(*a, sorted=False, **k)
    return values_.sort().values


def similarity_eps(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4, 3), v(4, 3)), {"eps": 0.5}), ((v(4, 3), np.zeros((4, 3))), {"eps": 1e-3}),
            ((v(4, 3) * 0.02, v(4, 3) * 0.05), {"eps": 0.5})]  # (norms below eps: eps divides)


def softplus_threshold_edges(dtype, rng):
    """beta * x just above threshold (the linear branch), where a slightly larger threshold takes the other."""
    x = np.array([0.50025, 0.5, 0.4999, 1.0, -1.0])
    return [((np.ones(5), x, 2.0, 1.0), {}), ((np.ones(5), x * 2, 1.0, 1.0), {})]


def shrink_edges(dtype, rng):
    x = np.array([1.5005, -1.5005, 1.5, 1.499, 3.0, -0.2])
    return [((x, 1.5), {}), ((x,), {"lambd": 1.5})]


def ceil_pools(dtype, rng):
    """Lengths where ceil_mode adds a last window (6 with kernel 3, stride 2: 2 windows, 3 with ceil_mode)."""
    v = _v(dtype, rng)
    return [((v(2, 3, 6), 3, 2, 0, True), {}), ((v(2, 3, 6), 3, 2, 0, False), {}), ((v(2, 3, 8), 2, 3, 1, True), {})]


def triplet_eps(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(3, 4), v(3, 4)), {"eps": 0.5}), ((v(3, 4), v(3, 4), v(3, 4)), {"eps": 0.5, "p": 1.0})]


def diagonal_scatter_dims(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3, 4), v(2, 3), 1, 1, 2), {}), ((v(2, 3, 4), v(4, 2), 0, 2, 0), {}),
            ((v(2, 3, 4), v(3, 3), 0, 1, 1), {})]


def split_keywords(dtype, rng):
    a = values(dtype, (7, 3), rng)
    return [((a,), {"sections": 3}), ((a,), {"indices": [1, 5]}), ((a,), {"sections": 2, "dim": 1}),
            ((a,), {"indices": (2,), "dim": -1}), ((a,), {"sections": 0})]


def elu_call(m, x, *args, **kwargs):
    """The elu op with its scale and input_scale (selu's and celu's constants; nn.functional.elu has only alpha)."""
    if m is torch:
        return torch._C._nn.elu(x, *args, **kwargs)
    return REGISTRY["elu"].fn(x, *args, **kwargs)


elu_call.direct = True


def elu_scales(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), 1.0, 1.5), {}), ((v(3, 4), 0.5, 2.0, 0.25), {}), ((v(0, 2), 1.0, 1.5, 3.0), {})]


def norm_keywords(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [((a,), {"dtype": DT("float64")}), ((a, 2, 1), {"keepdim": True}), ((a, "fro", (0, 1), True), {}),
            ((a,), {"dtype": DT("int64")})]


def matrix_norm_dtypes(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [((a,), {"dtype": DT("float64")}), ((a, "nuc"), {"dtype": DT("float64")}), ((a,), {"dtype": DT("int64")})]


def old_norm_dtypes(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [((a, 2, 1), {"dtype": DT("float64")}), ((a,), {"dtype": DT("float64")})]


def check_errors(square):
    def samples(dtype, rng):
        return [((SINGULAR if not square else -np.eye(3),), {"check_errors": True}), ((wellcond(3),) if not square
                                                                                      else (spd(3),),
                                                                                      {"check_errors": True})]
    return samples


def solve_ex_errors(dtype, rng):
    return [((SINGULAR, values(dtype, (3,), rng)), {"check_errors": True}),
            ((wellcond(3), values(dtype, (3,), rng)), {"check_errors": True})]


def cholesky_ex_upper(dtype, rng):
    return [((spd(3),), {"upper": True}), ((spd(3, 2, rng=rng),), {"upper": True})]


def pivots(dtype, rng):
    return [((wellcond(3),), {"pivot": True}), ((wellcond(3),), {"pivot": False})]


def rconds(dtype, rng):
    return [((SINGULAR,), {"rcond": 0.5}), ((values(dtype, (4, 3), rng),), {"rcond": 1e-3})]


def rank_rtols(dtype, rng):
    return [((SINGULAR,), {"rtol": 0.5}), ((SINGULAR,), {"rtol": 1e-9, "atol": 0.0})]


def drivers(dtype, rng):
    return [((values(dtype, (4, 3), rng),), {"driver": "gesvd"}), ((values(dtype, (4, 3), rng),), {"driver": None})]


def tensorsolve_dims(dtype, rng):
    a = np.moveaxis(wellcond(6).reshape(6, 2, 3), 0, 2).copy()  # (2, 3, 6): dims 0 and 1 move to the end
    return [((a, values(dtype, (6,), rng)), {"dims": (0, 1)}), ((a, values(dtype, (6,), rng)), {"dims": (0,)})]


def lstsq_rconds(dtype, rng):
    """rcond with the SVD drivers. (Not with gelsy, the default: LAPACK decides its rank from a pivoted QR, ember from
    the singular values, and a large rcond can then keep different ranks; not matched yet.)"""
    a, b = values(dtype, (5, 3), rng), values(dtype, (5, 2), rng)
    return [((a, b), {"rcond": 0.5, "driver": "gelsd"}), ((a, b), {"rcond": 1e-3, "driver": "gelss"}),
            ((SINGULAR, values(dtype, (3,), rng)), {"rcond": 0.1, "driver": "gelsd"})]


def istft_keywords(dtype, rng):
    spec = lambda *s: T(values(dtype, s, rng) + 1j * values(dtype, s, rng), "complex128")  # noqa: E731
    ones, w10 = np.ones(12), T(np.hanning(10) + 0.1, dtype)
    return [((spec(2, 7, 8), 12, 4), {"window": ones, "center": False}),
            ((spec(2, 7, 11), 12, 4), {"win_length": 10, "window": w10}),
            ((spec(2, 7, 11), 12, 4), {"win_length": 13})]


def to_keywords(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3), T(np.zeros(2), "int64")), {}), ((v(2, 3), T(np.zeros(()), "float64")), {}),
            ((v(2, 3), DT("float64")), {"copy": True}), ((v(2, 3), DT("float32")), {"copy": True}),
            ((v(2, 3),), {"dtype": DT("int32"), "copy": True}), ((v(2, 3), "cpu"), {"copy": True})]


def out_sizes(dtype, rng):
    from optable import Out
    return [((2, 3), {"out": Out("float32")}), ((4,), {"out": Out("float64")}), ((2,), {"out": Out("int64")})]


def lu_unpack_pivots(dtype, rng):
    import torch
    lu_, piv = torch.linalg.lu_factor(torch.from_numpy(values("float64", (4, 3), rng)))
    return [((lu_.numpy(), T(piv.numpy(), "int32")), {"unpack_pivots": False}),
            ((lu_.numpy(), T(piv.numpy(), "int32")), {"unpack_data": False, "unpack_pivots": False})]


def uniques_unsorted(dtype, rng):
    a = values(dtype, (4, 3), rng).round()
    return [((a,), {"sorted": True, "return_inverse": True}), ((a,), {"sorted": False, "return_counts": True})]


def lus(dtype, rng):
    return [((wellcond(3),), {"pivot": True}), ((wellcond(3), False), {})]


def dtype_views(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 4), DT("int32")), {}), ((v(2, 4), DT("float64")), {}), ((v(2, 4), DT("int16")), {}),
            ((v(2, 3), DT("float64")), {}), ((v(), DT("float64")), {}), ((NC(v(4, 2)), DT("float64")), {}),
            ((v(), DT("int32")), {})]


def functional_inplace(name, **kwargs):
    """``nn.functional.<name>(x, inplace=True)``: the written input, and whether the call returned it (ember's in-place
    functionals are ember-nn's)."""
    def call(m, x):
        if m is torch:
            f = getattr(torch.nn.functional, name)
        else:
            import ember.nn.functional as F
            f = getattr(F, name)
        return x, f(x, inplace=True, **kwargs) is x
    return call


def inplace_acts(dtype, rng):
    return [((values(dtype, (3, 4), rng),), {}), ((values(dtype, (0, 3), rng),), {})]  # (NaN/inf: the main lines)


INPLACE_ACTS = {"elu": {"alpha": 0.5}, "hardsigmoid": {}, "hardswish": {},
                "hardtanh": {"min_val": -0.5, "max_val": 2.0}, "leaky_relu": {"negative_slope": 0.2}, "mish": {},
                "silu": {}, "relu": {}, "selu": {}, "celu": {}, "relu6": {}, "rrelu": {},
                "threshold": {"threshold": 0.5, "value": -1.0}}

LINES = [Line(f"{name} (inplace=True)", functional_inplace(name, **kw), inplace_acts, dtypes=F32, marks=(needs_nn,))
         for name, kw in INPLACE_ACTS.items()] + [
    Line("add", fn("add"), alphas, dtypes=F32_I64), Line("sub", fn("sub"), alphas, dtypes=F32_I64),
    Line("subtract", fn("subtract"), alphas, dtypes=F32), Line("add_", inplace("add"), alphas, dtypes=F32),
    Line("div", fn("div"), rounding_modes, dtypes=F32_I64), Line("divide", fn("divide"), rounding_modes, dtypes=F32),
    Line("divide_", inplace("divide"), rounding_modes, dtypes=F32_I64),
    Line("isclose", fn("isclose"), closeness, dtypes=F32),
    Line("allclose", fn("allclose"), lambda d, r: closeness(d, r) + [((np.ones(3), np.ones(3) + 1e-9), {})],
         dtypes=F32),
    Line("allclose", fn("allclose"), allclose_edges, dtypes=("float64",)),
    Line("tensor_split", fn("tensor_split"), split_keywords, dtypes=F32, grad=False),
    Line("triu_indices", _factory("triu_indices", 4, 3, -1, dtype=DT("int32")), shape_of(((), (), {})),
         dtypes=("int64",)),
    Line("elu", elu_call, elu_scales, dtypes=("float32", "float64")),
    Line("isclose", fn("isclose"), tolerance_edges, dtypes=("float64",), grad=False),
    Line("_softplus_backward", _backward_call("softplus"), softplus_threshold_edges, dtypes=("float64",), grad=False),
    Line("hardshrink", fn("hardshrink"), shrink_edges, dtypes=("float64",), grad=False),
    Line("avg_pool1d", fn("avg_pool1d"), ceil_pools, dtypes=F32),
    Line("isin", fn("isin"), isin_keywords, dtypes=F32_I64),
    Line("topk", topk_unsorted, lambda d, r: [((values(d, (3, 6), r), 2), {}), ((values(d, (3, 6), r), 3, 0), {})],
         dtypes=F32_I64),
    Line("cosine_similarity", fn("cosine_similarity"), similarity_eps, dtypes=F32),
    Line("triplet_margin_loss", fn("triplet_margin_loss"), triplet_eps, dtypes=F32),
    Line("diagonal_scatter", fn("diagonal_scatter"), diagonal_scatter_dims, dtypes=F32),
    Line("linalg_norm", la("norm"), norm_keywords, dtypes=F32, grad=False),
    Line("linalg_matrix_norm", la("matrix_norm"), matrix_norm_dtypes, dtypes=F32, grad=False),
    Line("norm", fn("norm"), old_norm_dtypes, dtypes=F32, grad=False),
    Line("linalg_inv_ex", la("inv_ex"), check_errors(False), dtypes=F32, grad=False),
    Line("linalg_cholesky_ex", la("cholesky_ex"), check_errors(True), dtypes=F32, grad=False),
    Line("linalg_cholesky_ex", la("cholesky_ex"), cholesky_ex_upper, dtypes=F32, grad=False),
    Line("linalg_solve_ex", la("solve_ex"), solve_ex_errors, dtypes=F32, grad=False),
    Line("linalg_lu", la("lu"), pivots, dtypes=F32, grad=False,
         exempt={"pivot": "non-default values only raise on the CPU (sampled here)"}),
    Line("linalg_lu_factor", la("lu_factor"), pivots, dtypes=F32, grad=False,
         exempt={"pivot": "non-default values only raise on the CPU (sampled here)"}),
    Line("linalg_lu_factor_ex", la("lu_factor_ex"), pivots, dtypes=F32, grad=False,
         exempt={"pivot": "non-default values only raise on the CPU (sampled here)"}),
    Line("linalg_lu_factor_ex", la("lu_factor_ex"), check_errors(False), dtypes=F32, grad=False),
    Line("linalg_pinv", la("pinv"), rconds, dtypes=F32, grad=False),
    Line("linalg_matrix_rank", la("matrix_rank"), rank_rtols, dtypes=F32, grad=False),
    Line("linalg_svd", la("svd"), drivers, dtypes=F32, grad=False, values=False,
         exempt={"driver": "non-default values only raise on the CPU (sampled here)"}),
    Line("linalg_svdvals", la("svdvals"), drivers, dtypes=F32, grad=False,
         exempt={"driver": "non-default values only raise on the CPU (sampled here)"}),
    Line("linalg_tensorsolve", la("tensorsolve"), tensorsolve_dims, dtypes=F32, grad=False),
    # (cond's own line takes no part in the out= test: PyTorch leaves its gradient at singular samples undefined)
    Line("cond", la("cond"), lambda d, r: [((wellcond(3),), {}), ((wellcond(3), "fro"), {})], dtypes=F32, grad=False),
    Line("linalg_lstsq", la("lstsq"), lstsq_rconds, dtypes=F32, grad=False),
    Line("istft", fn("istft"), istft_keywords, dtypes=("float64",), grad=False),
    Line("lu_unpack", fn("lu_unpack"), lu_unpack_pivots, dtypes=F32, grad=False),
    Line("unique", meth("unique"), uniques_unsorted, dtypes=F32_I64, grad=False),
    Line("lu", meth("lu"), lus, dtypes=F32, grad=False,
         exempt={"pivot": "non-default values only raise on the CPU (sampled here)"}),
    Line("view", meth("view"), dtype_views, dtypes=F32, grad=False),
    Line("_to_copy", meth("to"), to_keywords, dtypes=F32, grad=False,
         exempt={"non_blocking": "no asynchronous copies on the CPU"}),
    Line("fftfreq", ff("fftfreq"), lambda d, r: [((5,), {}), ((4, 0.5), {})], dtypes=F32, grad=False),
    Line("rfftfreq", ff("rfftfreq"), lambda d, r: [((5,), {}), ((4, 0.5), {})], dtypes=F32, grad=False),
    Line("rand", seeded("rand"), out_sizes, dtypes=F32, grad=False, values=False),
    Line("randn", seeded("randn"), out_sizes, dtypes=F32, grad=False, values=False),
]
