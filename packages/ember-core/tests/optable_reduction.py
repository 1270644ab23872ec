"""Op table lines of reductions, scans, sorting and statistics."""
import numpy as np
from optable import DT, FLOATS, NC, NUMERIC, Line, T, fn, meth, reduction, values

F64 = ("float32", "float64")


def distinct(dtype, shape, rng):
    """Values without ties (ops whose index results PyTorch leaves unspecified on ties)."""
    n = int(np.prod(shape))
    v = (rng.permutation(n) - n // 2).reshape(shape)
    return np.asarray(v if dtype == "int64" else v * 0.5)


def _special(dtype, shape, rng):
    return values(dtype, shape, rng, special=True)


def one_dim_reduction(dtype, rng):
    """Reductions over a single ``dim`` (prod, median...): int dims, keepdim, empty and zero-dim inputs."""
    a = values(dtype, (3, 4, 2), rng)
    return [((a,), {}), ((a, 1), {}), ((a, -1, True), {}), ((values(dtype, (0, 3), rng), 1), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((values(dtype, (), rng),), {}), ((values(dtype, (), rng), 0), {}),
            ((a, 3), {}), ((a, (0, 1)), {}), ((NC(values(dtype, (4, 3), rng)), 0), {}),
            ((_special(dtype, (3, 4), rng), 1), {})]


def prods(dtype, rng):
    z = values(dtype, (3, 4), rng)
    z[0, 1] = z[1, 1] = z[1, 2] = 0  # rows with one and two zeros
    return one_dim_reduction(dtype, rng) + [((z, 1), {}), ((z,), {}), ((z, 0), {"keepdim": True}),
                                            ((values(dtype, (3, 4), rng),), {"dtype": DT("float64")})]


def extrema(dtype, rng):
    """amax/amin: dims as tuples, NaN, empty inputs."""
    a = values(dtype, (3, 4, 2), rng)
    return [((a,), {}), ((a, 1), {}), ((a, (0, 2)), {"keepdim": True}), ((a, ()), {}), ((a, -1), {}),
            ((values(dtype, (0, 3), rng), 1), {}), ((values(dtype, (0, 3), rng), 0), {}),
            ((values(dtype, (0, 3), rng),), {}), ((values(dtype, (), rng),), {}),
            ((_special(dtype, (3, 4), rng), 1), {}), ((_special(dtype, (3, 4), rng),), {}),
            ((a, 3), {}), ((a, (0, 0)), {}), ((NC(values(dtype, (4, 3), rng)), 0), {})]


def max_min(dtype, rng):
    a = distinct(dtype, (3, 4), rng) if dtype != "bool" else values(dtype, (3, 4), rng)
    return [((a,), {}), ((a, 1), {}), ((a, 0, True), {}), ((a, -1), {"keepdim": False}),
            ((a, values(dtype, (4,), rng)), {}), ((a, T(values("float64", (3, 4), rng), "float64")), {}),
            ((values(dtype, (0, 3), rng),), {}), ((values(dtype, (0, 3), rng), 1), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((values(dtype, (), rng),), {}), ((values(dtype, (), rng), 0), {}),
            ((_special(dtype, (3, 4), rng), 1), {}), ((_special(dtype, (3, 4), rng),), {}), ((a, 2), {}),
            ((a, (0, 1)), {}), ((NC(distinct(dtype, (4, 3), rng) if dtype != "bool" else a.T), 0), {})]


def arg_extrema(dtype, rng):
    a = values(dtype, (3, 4), rng)  # ties: the first index wins
    return [((a,), {}), ((a, 1), {}), ((a, 0, True), {}), ((a, None, True), {}), ((values(dtype, (0, 3), rng),), {}),
            ((values(dtype, (0, 3), rng), 1), {}), ((values(dtype, (0, 3), rng), 0), {}),
            ((values(dtype, (), rng),), {}), ((values(dtype, (), rng), 0), {}), ((_special(dtype, (3, 4), rng), 1), {}),
            ((_special(dtype, (3, 4), rng),), {}), ((a, 2), {}), ((NC(values(dtype, (4, 3), rng)), 0), {})]


def aminmaxes(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [((a,), {}), ((a,), {"dim": 1}), ((a,), {"dim": 0, "keepdim": True}), ((values(dtype, (0, 3), rng),), {}),
            ((values(dtype, (0, 3), rng),), {"dim": 1}), ((values(dtype, (), rng),), {}),
            ((values(dtype, (), rng),), {"dim": 0}), ((_special(dtype, (3, 4), rng),), {"dim": 1}),
            ((a,), {"dim": (0, 1)})]


def with_dim(dtype, rng):
    """Ops with a required ``dim`` (logsumexp, cumsum...)."""
    a = values(dtype, (3, 4, 2), rng)
    return [((a, 1), {}), ((a, -1), {}), ((a, 0), {}), ((values(dtype, (0, 3), rng), 1), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((values(dtype, (), rng), 0), {}), ((a, 3), {}),
            ((NC(values(dtype, (4, 3), rng)), 0), {}), ((_special(dtype, (3, 4), rng), 1), {})]


def logsumexps(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    inf = np.full((2, 3), -np.inf)
    return with_dim(dtype, rng) + [((a, (0, 2)), {}), ((a, 1, True), {})] + (
        [((inf, 1), {}), ((a * 100, 1), {})] if dtype != "int64" and dtype != "bool" else [])


def cumprods(dtype, rng):
    z = values(dtype, (3, 5), rng)
    z[0, 1] = z[1, 1] = z[1, 3] = 0
    return with_dim(dtype, rng) + [((z, 1), {}), ((z, 0), {}),
                                   ((values(dtype, (3, 4), rng), 1), {"dtype": DT("float64")})]


def cum_extrema(dtype, rng):
    a = values(dtype, (3, 6), rng)  # ties: the last index reaching the extreme
    nonempty = [s for s in with_dim(dtype, rng) if not isinstance(s[0][0], np.ndarray) or s[0][0].size]
    return nonempty + [((a, 1), {}), ((a, 0), {})]


def nonempty_free(dtype, rng):
    """Empty inputs, where PyTorch's cummax backward returns its input (no gradient to compare)."""
    return [((values(dtype, (0, 3), rng), 1), {}), ((values(dtype, (0, 3), rng), 0), {})]


def truth(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    a.reshape(-1)[::3] = 0
    return [((a,), {}), ((a, 1), {}), ((a, (0, 2)), {"keepdim": True}), ((a, -1), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((values(dtype, (0, 3), rng),), {}), ((values(dtype, (), rng),), {}),
            ((a, 3), {}), ((_special(dtype, (3, 4), rng), 1), {}), ((NC(values(dtype, (4, 3), rng)), 0), {}),
            ((T(np.array([[0, 3], [2, 2]]), "uint8"), 1), {}), ((T(np.array([0, 3]), "uint8"),), {})]


def count_nonzeros(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    a.reshape(-1)[::3] = 0
    return [((a,), {}), ((a, 1), {}), ((a, (0, 2)), {}), ((values(dtype, (0, 3), rng), 0), {}),
            ((values(dtype, (), rng),), {}), ((a, 3), {}), ((_special(dtype, (3, 4), rng), 1), {})]


def norms(dtype, rng):
    a = values(dtype, (3, 4), rng)
    z = a.copy()
    z[1] = 0
    return [((a,), {}), ((a, 1), {}), ((a, 3), {}), ((a, float("inf")), {}), ((a, -float("inf"), 1), {}),
            ((a, 0), {}), ((a, 2, 1), {}), ((a, 2, (0, 1), True), {}), ((a, "fro", 1), {}), ((a, "fro", (0, 1)), {}),
            ((a, 1.5, 0), {}), ((z, 2, 1), {}), ((z, 1, 1), {}), ((a, "nuc"), {}), ((a, "bad"), {}),
            ((a, 2, None, False, DT("float64")), {}), ((values(dtype, (), rng),), {}),
            ((values(dtype, (0, 3), rng),), {}),
            ((values(dtype, (2, 3, 4), rng), "fro", (0, 1, 2)), {}), ((NC(values(dtype, (4, 3), rng)), 2, 0), {})]


def frobenius(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    return [((a, (0, 1)), {}), ((a, 1), {}), ((a, (0, 2), True), {}), ((values(dtype, (0, 3), rng), 1), {})]


def nuclears(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [((a,), {}), ((a, True), {}), ((values(dtype, (2, 3, 4), rng), (0, 2)), {}),
            ((values(dtype, (2, 3, 4), rng), (2, 1), True), {}), ((values(dtype, (2, 3, 4), rng),), {}),
            ((a, (0, 0)), {}), ((a, (0,)), {})]


def dists(dtype, rng):
    a, b = values(dtype, (3, 4), rng), values(dtype, (4,), rng)
    return [((a, b), {}), ((a, b, 1), {}), ((a, b, float("inf")), {}), ((a, b, 3.5), {}),
            ((a, values(dtype, (3, 4), rng)), {}), ((a, values(dtype, (5,), rng)), {}), ((a, a), {})]


def diffs(dtype, rng):
    a = values(dtype, (3, 5), rng)
    return [((a,), {}), ((a, 2), {}), ((a, 1, 0), {}), ((a, 1, -1, values(dtype, (3, 2), rng)), {}),
            ((a, 2, 1, values(dtype, (3, 1), rng), values(dtype, (3, 2), rng)), {}), ((a, 6), {}), ((a, 9), {}),
            ((a, 0), {}), ((values(dtype, (), rng),), {}), ((values(dtype, (0, 3), rng), 1, 0), {}),
            ((a, 1, -1, values(dtype, (5,), rng)), {}), ((NC(values(dtype, (4, 3), rng)),), {})]


def sorts(dtype, rng):
    a = values(dtype, (3, 5), rng)  # ties keep their order (stable)
    return [((a,), {}), ((a, 0), {}), ((a, 1, True), {}), ((a,), {"descending": True, "stable": True}),
            ((_special(dtype, (3, 4), rng),), {}), ((_special(dtype, (3, 4), rng), -1, True), {}),
            ((values(dtype, (), rng),), {}), ((values(dtype, (0, 3), rng), 0), {}), ((a, 2), {}),
            ((NC(values(dtype, (4, 3), rng)), 0), {})]


def topks(dtype, rng):
    a = distinct(dtype, (3, 6), rng)
    s = _special(dtype, (3, 4), rng)
    s[1:] = distinct(dtype, (2, 4), rng)
    return [((a, 2), {}), ((a, 3, 0), {}), ((a, 2, -1, False), {}), ((a, 0), {}), ((a, 6), {}), ((a, 7), {}),
            ((s, 1), {}), ((s, 2, -1, False), {}), ((distinct(dtype, (), rng), 1), {}), ((a, 1, 2), {}),
            ((NC(distinct(dtype, (4, 3), rng)), 2, 0), {})]


def kthvalues(dtype, rng):
    a = distinct(dtype, (3, 6), rng)
    return [((a, 2), {}), ((a, 3, 0), {}), ((a, 1, -1, True), {}), ((a, 6), {}), ((a, 7), {}), ((a, 0), {}),
            ((distinct(dtype, (), rng), 1), {}), ((values(dtype, (0, 3), rng), 1, 0), {}),
            ((NC(distinct(dtype, (4, 3), rng)), 2, 0), {})]


def uniques(dtype, rng):
    a = values(dtype, (4, 3), rng).round() if dtype not in ("bool", "int64") else values(dtype, (4, 3), rng)
    a[2] = a[0]
    return [((a,), {}), ((a,), {"return_inverse": True, "return_counts": True}), ((a,), {"return_counts": True}),
            ((a,), {"dim": 0, "return_inverse": True, "return_counts": True}), ((a,), {"dim": 1}),
            ((values(dtype, (0, 3), rng),), {}), ((values(dtype, (), rng),), {"return_inverse": True}),
            ((a,), {"dim": 2}), ((NC(a),), {"return_inverse": True})]


def consecutive(dtype, rng):
    a = values(dtype, (12,), rng).round() if dtype not in ("bool", "int64") else values(dtype, (12,), rng)
    a[3] = a[4] = a[5]
    m = values(dtype, (4, 3), rng)
    m[1] = m[0]
    return [((a,), {}), ((a,), {"return_inverse": True, "return_counts": True}), ((m,), {"return_counts": True}),
            ((m,), {"dim": 0, "return_inverse": True, "return_counts": True}), ((m,), {"dim": 1}),
            ((values(dtype, (0,), rng),), {"return_counts": True}),
            ((values(dtype, (), rng),), {"return_inverse": True})]


def searches(dtype, rng):
    s = np.sort(values(dtype, (6,), rng))
    rows = np.sort(values(dtype, (2, 6), rng), axis=-1)
    v, unsorted = values(dtype, (3, 4), rng), values(dtype, (6,), rng)
    return [((s, v), {}), ((s, v), {"right": True}), ((s, v), {"side": "right"}), ((s, v), {"out_int32": True}),
            ((rows, values(dtype, (2, 5), rng)), {}), ((rows, values(dtype, (2, 5), rng)), {"right": True}),
            ((s, 1), {}), ((rows, v), {}), ((s, v), {"side": "left", "right": True}), ((s, values(dtype, (), rng)), {}),
            ((unsorted, v), {"sorter": T(np.argsort(unsorted, kind="stable"), "int64")}),
            ((s, T(values("float64", (3,), rng), "float64")), {}), ((s, values(dtype, (0,), rng)), {})]


def buckets(dtype, rng):
    s = np.sort(values(dtype, (6,), rng))
    v = values(dtype, (3, 4), rng)
    return [((v, s), {}), ((v, s), {"right": True}), ((v, s), {"out_int32": True}), ((2, s), {}),
            ((v, np.sort(values(dtype, (2, 3), rng))), {}), ((values(dtype, (), rng), s), {})]


def isins(dtype, rng):
    a, b = values(dtype, (3, 4), rng).round(), values(dtype, (5,), rng).round()
    return [((a, b), {}), ((a, b), {"invert": True}), ((a, 1), {}), ((a, T(np.array([1.0, 2.5]), "float64")), {}),
            ((values(dtype, (0,), rng), b), {}), ((a, values(dtype, (2, 2), rng).round()), {})]


def variances(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    return [((a,), {}), ((a, 1), {}), ((a, (0, 2)), {"keepdim": True}), ((a, 1, False), {}), ((a, False), {}),
            ((a, 1, True, True), {}), ((a,), {"dim": 1, "correction": 0}), ((a,), {"dim": (0, 1), "correction": 2}),
            ((values(dtype, (1, 3), rng), 0), {}), ((values(dtype, (0, 3), rng), 1), {}),
            ((values(dtype, (), rng),), {}), ((a, 3), {}), ((_special(dtype, (3, 4), rng), 1), {}),
            ((NC(values(dtype, (4, 3), rng)), 0), {})]


def medians(dtype, rng):
    a = distinct(dtype, (3, 5), rng)
    s = _special(dtype, (3, 4), rng)
    s[1:] = distinct(dtype, (2, 4), rng)
    n = np.full((2, 3), np.nan)
    n[1, 1] = 1.0
    out = [((a,), {}), ((a, 1), {}), ((a, 0, True), {}), ((distinct(dtype, (3, 4), rng), -1), {}), ((s,), {}),
           ((s, 1), {}), ((distinct(dtype, (), rng),), {}), ((distinct(dtype, (), rng), 0), {}),
           ((values(dtype, (0, 3), rng), 1), {}), ((values(dtype, (0, 3), rng), 0), {}), ((a, 2), {}),
           ((NC(distinct(dtype, (4, 3), rng)), 0), {})]
    return out + ([((n, 1), {}), ((n,), {})] if dtype in FLOATS else [])


def modes(dtype, rng):
    a = values(dtype, (3, 8), rng).round()
    return [((a,), {}), ((a, 0), {}), ((a, 1, True), {}), ((values(dtype, (), rng),), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((a, 2), {}), ((NC(values(dtype, (8, 3), rng).round()), 0), {})]


def quantiles(dtype, rng):
    a = values(dtype, (3, 5), rng)
    s = _special(dtype, (3, 4), rng)
    q = T(np.array([0.0, 0.3, 0.5, 1.0]), dtype)
    out = [((a, 0.3), {}), ((a, q), {}), ((a, q, 1), {}), ((a, 0.75, 0, True), {}), ((a, q, None, True), {}),
           ((s, 0.5, 1), {}), ((values(dtype, (), rng), 0.5), {}), ((values(dtype, (), rng), q, 0, True), {}),
           ((values(dtype, (0, 3), rng), 0.5), {}), ((a, 1.5), {}), ((a, T(np.array([[0.5]]), dtype)), {}),
           ((a, T(np.array([0.5]), "float64" if dtype == "float32" else "float32")), {})]
    for mode in ("lower", "higher", "midpoint", "nearest", "bogus"):
        out.append(((a, q, 1), {"interpolation": mode}))
    return out


def covs(dtype, rng):
    a = values(dtype, (3, 5), rng)
    return [((a,), {}), ((a,), {"correction": 0}), ((values(dtype, (5,), rng),), {}),
            ((a,), {"fweights": T(np.array([1, 2, 1, 3, 1]), "int64")}), ((values(dtype, (3, 1), rng),), {}),
            ((values(dtype, (2, 3, 4), rng),), {}), ((a,), {"fweights": T(np.array([1.0, 2, 1, 3, 1]), "float32")})]


def weighted_covs(dtype, rng):
    a = values(dtype, (3, 5), rng)
    w = T(np.array([0.5, 1, 2, 1, 0.25]), "float64")
    return [((a,), {"aweights": w}), ((a,), {"aweights": w, "fweights": T(np.array([1, 2, 1, 3, 1]), "int64")})]


def bincounts(dtype, rng):
    i = T(np.array([0, 3, 1, 3, 3, 5]), "int64")
    return [((i,), {}), ((i, values(dtype, (6,), rng)), {}), ((i,), {"minlength": 9}),
            ((T(np.array([], np.int64), "int64"),), {}), ((T(np.array([[1]]), "int64"),), {}),
            ((T(np.array([-1]), "int64"),), {}), ((values(dtype, (3,), rng),), {})]


def histcs(dtype, rng):
    a = values(dtype, (4, 5), rng)
    return [((a,), {}), ((a, 4), {}), ((a, 5, -1, 1), {}), ((a,), {"bins": 3, "min": 2, "max": 2}),
            ((np.ones(3),), {"bins": 4}), ((_special(dtype, (3, 4), rng), 4), {}), ((a, 0), {}),
            ((values(dtype, (0,), rng), 3), {})]


def histograms(dtype, rng):
    a = values(dtype, (4, 5), rng)
    edges = T(np.array([-4.0, -1, 0, 2.5, 6]), dtype)
    return [((a, 4), {}), ((a, 5), {"range": (-1.0, 1.0)}), ((a, edges), {}), ((a, 3), {"density": True}),
            ((a, edges), {"weight": values(dtype, (4, 5), rng), "density": True}), ((np.ones(3), 4), {}),
            ((a, 0), {}), ((T(np.zeros(0), dtype), 2), {}), ((T(np.zeros(0), dtype), 2), {"range": (1.0, 1.0)})]


def trapezoids(dtype, rng):
    y = values(dtype, (3, 5), rng)
    return [((y,), {}), ((y,), {"dx": 0.5}), ((y, values(dtype, (5,), rng)), {}), ((y, values(dtype, (3, 5), rng)), {}),
            ((y,), {"dim": 0}), ((y, values(dtype, (3,), rng)), {"dim": 0}), ((values(dtype, (3, 1), rng),), {}),
            ((values(dtype, (), rng),), {}), ((y, values(dtype, (4,), rng)), {}),
            ((NC(values(dtype, (5, 3), rng)),), {})]


def _out(name, *out_dtypes):
    """``lib.name(*args, out=...)`` into fresh empty tensors of ``out_dtypes`` (a tuple out for several)."""
    def call(m, *a, **k):
        outs = tuple(m.empty(0, dtype=getattr(m, d)) for d in out_dtypes)
        return getattr(m, name)(*a, **k, out=outs if len(outs) > 1 else outs[0])
    return call


def _inplace(name):
    def call(m, a, *args, **k):
        return getattr(a.clone(), name + "_")(*args, **k)
    return call


LINES = [
    Line("sum", fn("sum"), reduction), Line("mean", fn("mean"), reduction),
    Line("sum", meth("sum"), lambda d, r: [((NC(values(d, (5, 4), r)), 1), {}), ((values(d, (6, 4), r), 1, True), {})]),
    Line("sum", _out("sum", "float32"), lambda d, r: reduction(d, r)[1:5], dtypes=("float32",)),
    Line("nansum", fn("nansum"), lambda d, r: reduction(d, r) + [((_special(d, (3, 4), r), 1), {})]),
    Line("nanmean", fn("nanmean"), lambda d, r: reduction(d, r) + [((_special(d, (3, 4), r), 1), {}),
                                                                   ((np.full((2, 3), np.nan), 1), {})]),
    Line("prod", fn("prod"), prods, dtypes=("float32", "float64", "float16", "int64", "bool")),
    # PyTorch rounds bfloat16 products as it goes: short rows only
    Line("prod", fn("prod"), lambda d, r: [((values(d, (4, 3), r), 1), {}), ((values(d, (3,), r),), {})],
         dtypes=("bfloat16",)),
    Line("amax", fn("amax"), extrema), Line("amin", fn("amin"), extrema),
    Line("aminmax", fn("aminmax"), aminmaxes),
    Line("max", fn("max"), max_min), Line("min", fn("min"), max_min),
    Line("max", meth("max"), max_min, dtypes=("float64",)),
    Line("max", _out("max", "float32", "int64"), lambda d, r: [((values(d, (3, 4), r), 1), {})], dtypes=("float32",)),
    Line("argmax", fn("argmax"), arg_extrema), Line("argmin", fn("argmin"), arg_extrema),
    Line("logsumexp", fn("logsumexp"), logsumexps),
    Line("all", fn("all"), truth), Line("any", fn("any"), truth),
    Line("count_nonzero", fn("count_nonzero"), count_nonzeros),
    Line("norm", fn("norm"), norms, dtypes=FLOATS + ("int64",)),
    Line("frobenius_norm", fn("frobenius_norm"), frobenius, dtypes=FLOATS),
    Line("nuclear_norm", fn("nuclear_norm"), nuclears, dtypes=FLOATS + ("int64",)),
    Line("dist", fn("dist"), dists, dtypes=FLOATS + ("int64",)),
    Line("cumsum", fn("cumsum"), lambda d, r: with_dim(d, r) + [((values(d, (3, 4), r), 1), {"dtype": DT("float64")})]),
    Line("cumsum", _inplace("cumsum"), with_dim, dtypes=NUMERIC),
    Line("cumprod", fn("cumprod"), cumprods),
    Line("cumprod", _inplace("cumprod"), with_dim, dtypes=NUMERIC),
    Line("cummax", fn("cummax"), cum_extrema), Line("cummin", fn("cummin"), cum_extrema),
    Line("cummax", fn("cummax"), nonempty_free, grad=False), Line("cummin", fn("cummin"), nonempty_free, grad=False),
    Line("dist", fn("dist"), lambda d, r: [((values(d, (3, 4), r), values(d, (4,), r), 0), {})], grad=False,
         dtypes=FLOATS),  # PyTorch has no p=0 gradient
    Line("logcumsumexp", fn("logcumsumexp"), logsumexps),
    Line("diff", fn("diff"), diffs),
    Line("sort", fn("sort"), sorts), Line("argsort", fn("argsort"), sorts),
    Line("sort", _out("sort", "float32", "int64"), lambda d, r: [((values(d, (3, 4), r),), {})], dtypes=("float32",)),
    Line("msort", fn("msort"), lambda d, r: [((values(d, (4, 3), r),), {}), ((_special(d, (4, 3), r),), {}),
                                             ((values(d, (), r),), {})]),
    Line("topk", fn("topk"), topks, dtypes=NUMERIC), Line("kthvalue", fn("kthvalue"), kthvalues, dtypes=NUMERIC),
    Line("unique", fn("unique"), uniques), Line("unique", meth("unique"), uniques, dtypes=("float64",)),
    Line("unique_consecutive", fn("unique_consecutive"), consecutive),
    Line("searchsorted", fn("searchsorted"), searches, dtypes=NUMERIC),
    Line("bucketize", fn("bucketize"), buckets, dtypes=NUMERIC),
    Line("isin", fn("isin"), isins, dtypes=NUMERIC),
    Line("var", fn("var"), variances, dtypes=FLOATS), Line("std", fn("std"), variances, dtypes=FLOATS),
    Line("var", fn("var"), lambda d, r: [((values(d, (3,), r),), {})], dtypes=("int64", "bool")),
    Line("var_mean", fn("var_mean"), variances, dtypes=FLOATS),
    Line("std_mean", fn("std_mean"), variances, dtypes=FLOATS),
    Line("median", fn("median"), medians, dtypes=NUMERIC), Line("nanmedian", fn("nanmedian"), medians, dtypes=NUMERIC),
    Line("mode", fn("mode"), modes, dtypes=NUMERIC),
    Line("quantile", fn("quantile"), quantiles, dtypes=FLOATS),
    Line("nanquantile", fn("nanquantile"), quantiles, dtypes=FLOATS),
    Line("cov", fn("cov"), covs, dtypes=FLOATS + ("int64",)),
    Line("cov", fn("cov"), weighted_covs, dtypes=F64, grad=False),  # PyTorch differentiates aweights too
    Line("corrcoef", fn("corrcoef"), lambda d, r: [((values(d, (3, 5), r),), {}), ((values(d, (5,), r),), {})],
         dtypes=FLOATS + ("int64",)),
    Line("bincount", fn("bincount"), bincounts, dtypes=FLOATS),
    Line("histc", fn("histc"), histcs, dtypes=FLOATS + ("int64",)),
    Line("histogram", fn("histogram"), histograms, dtypes=F64),
    Line("trapezoid", fn("trapezoid"), trapezoids, dtypes=NUMERIC + ("bool",)),
    Line("trapz", fn("trapz"), trapezoids, dtypes=F64),
    Line("cumulative_trapezoid", fn("cumulative_trapezoid"), trapezoids, dtypes=NUMERIC),
]
