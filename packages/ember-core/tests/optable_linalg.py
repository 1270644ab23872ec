"""Op table lines of linear algebra (torch namespace, ``linalg``) and ``fft``."""
import numpy as np
import torch
from optable import ALL, DT, FLOATS, NC, NUMERIC, Line, T, matmuls, values

import ember

F64 = ("float32", "float64")
PRODUCTS = FLOATS + ("int64", "bool")


class LinAlgFailure(Exception):
    """Either library's LinAlgError, so that the table compares them as one type."""


def _mapped(get):
    def call(m, *a, **k):
        try:
            return get(m)(*a, **k)
        except (torch.linalg.LinAlgError, ember.linalg.LinAlgError) as e:
            raise LinAlgFailure(str(e)) from None
    call.direct = True
    return call


def fn(name):
    """``lib.<name>(*args)``, a LinAlgError of either library raised as ``LinAlgFailure``."""
    return _mapped(lambda m: getattr(m, name))


def nograd(call):
    """The same call, left out of the VJP check (samples whose gradient PyTorch leaves undefined)."""
    def wrapped(m, *a, **k):
        return call(m, *a, **k)
    return wrapped


def info_of(call):
    """Only the ``info`` of an ``*_ex`` call (the factor of a failed matrix is unspecified)."""
    def wrapped(m, *a, **k):
        return call(m, *a, **k)[-1]
    return wrapped


def _signs(x):
    """Sign of the largest-magnitude entry of each column of x (a NumPy array), 1 for zero columns."""
    if x.size == 0:
        return np.ones(x.shape[:-2] + x.shape[-1:])
    idx = np.abs(x).argmax(-2)
    sg = np.sign(np.take_along_axis(x, idx[..., None, :], -2))[..., 0, :]
    return np.where(sg == 0, 1, sg)


def _np(x):
    return x.detach().double().numpy()


def gauge(call, vectors_right="Vh"):
    """The call's singular or eigen vectors with fixed signs, so that two LAPACKs' choices compare: each U (or
    eigenvector) column gets its largest entry positive, the paired V column the same flip."""
    def wrapped(m, *a, **k):
        out = call(m, *a, **k)
        if len(out) == 2:  # eigh: (eigenvalues, eigenvectors)
            w, v = out
            return w, v * m.tensor(_signs(_np(v)), dtype=v.dtype).unsqueeze(-2)
        u, sv, v = out
        su = _signs(_np(u))
        vn = _np(v)
        vcols = np.swapaxes(vn, -1, -2) if vectors_right == "Vh" else vn
        k_ = sv.shape[-1]
        s_v = _signs(vcols)
        s_v[..., :k_] = su[..., :k_]
        su_t, sv_t = m.tensor(su, dtype=u.dtype).unsqueeze(-2), m.tensor(s_v, dtype=v.dtype)
        return u * su_t, sv, (v * sv_t.unsqueeze(-1) if vectors_right == "Vh" else v * sv_t.unsqueeze(-2))
    wrapped.direct = True
    return wrapped


def la(name):
    """``lib.linalg.<name>(*args)``."""
    return _mapped(lambda m: getattr(m.linalg, name))


def ff(name):
    """``lib.fft.<name>(*args)``."""
    return _mapped(lambda m: getattr(m.fft, name))


def meth(name):
    def call(m, x, *a, **k):
        return getattr(x, name)(*a, **k)
    call.direct = True
    return call


def s(*shapes_args):
    """Samples of random values: each entry is (shapes, kwargs) or (shapes, extra args, kwargs)."""
    def samples(dtype, rng):
        out = []
        for entry in shapes_args:
            shapes, extra, kwargs = entry if len(entry) == 3 else (entry[0], (), entry[1])
            out.append((tuple(_build(x, dtype, rng) for x in shapes) + extra, kwargs))
        return out
    return samples


def _build(x, dtype, rng):
    if isinstance(x, tuple):
        return values(dtype, x, rng)
    if isinstance(x, NC):
        return NC(values(dtype, x.arr, rng))
    return x  # an explicit sample (T, ndarray)


def spd(n, *batch, rng=None):
    """Well-conditioned symmetric positive definite matrices."""
    rng = rng or np.random.default_rng(0)
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def wellcond(n, *batch, seed=0):
    """Well-conditioned square matrices (diagonally dominant)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(batch + (n, n)) + 2 * n * np.eye(n)


def scaled(kind):
    def samples(dtype, rng):
        base = kind(dtype, rng)
        return base + [(base[0][0], {"beta": 0.5, "alpha": 2}), (base[0][0], {"beta": 0})]
    return samples


def _v(dtype, rng):
    return lambda *shape: values(dtype, shape, rng)  # noqa: E731


def addmms(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3), v(2, 4), v(4, 3)), {}), ((v(2, 3), v(2, 4), v(4, 3)), {}), ((v(2, 1), NC(v(4, 2)), v(4, 3)), {}),
            ((v(4), v(2, 4), v(4, 3)), {}), ((T(v(3), "float64"), v(2, 4), v(4, 3)), {}),
            ((v(3), v(2, 4), v(3, 3)), {}), ((v(3), v(0, 4), v(4, 3)), {})]


def bmms(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3, 4), v(2, 4, 5)), {}), ((v(2, 3, 4), v(3, 4, 5)), {}), ((v(3, 4), v(4, 5)), {}),
            ((v(2, 3, 4), v(2, 5, 5)), {}), ((v(0, 3, 4), v(0, 4, 2)), {}),
            ((v(2, 3, 4), T(v(2, 4, 5), "float64")), {})]



def grouped_mms(dtype, rng):
    """Offsets that end at the ragged dim's length (PyTorch leaves what lies past the last one unset); strides that
    PyTorch's CPU kernel takes (multiples of 16 bytes). It has no float64 kernel: one sample checks that error."""
    v = _v(dtype, rng)
    o = lambda *ends: T(np.array(ends), "int32")  # noqa: E731
    return [((v(6, 16), v(2, 16, 8), o(2, 6)), {}), ((v(2, 6, 16), v(16, 16), o(8, 16)), {}),
            ((v(6, 32), v(32, 8), o(16, 32)), {}), ((v(2, 6, 16), v(2, 16, 8)), {}),
            ((v(6, 16), v(3, 16, 8), o(4, 2, 6)), {}), ((v(6, 16), v(2, 16, 8), o(-3, 6)), {}),  # sliced as Python's
            ((v(0, 16), v(2, 16, 8), o(0, 0)), {}), ((NC(v(8, 16)), NC(v(2, 16, 8)), o(3, 8)), {}),
            ((v(6, 16), v(2, 16, 8)), {}), ((v(2, 6, 16), v(2, 16, 8), o(1, 2)), {}),
            ((v(6, 16), v(2, 16, 8), T(np.array([2, 6]), "int64")), {}),
            ((v(6, 16), v(2, 16, 8), T(np.array([[2, 6]]), "int32")), {}), ((v(6, 16), v(2, 8, 8), o(2, 6)), {}),
            ((v(6, 16), v(3, 16, 8), o(2, 6)), {}), ((v(2, 6, 16), v(3, 16, 8)), {}),
            ((v(16), v(2, 16, 8), o(2, 6)), {}), ((v(6, 16), v(1, 2, 16, 8), o(2, 6)), {}),
            ((v(6, 16), v(2, 16, 8), o(2, 6)), {"bias": v(2, 8)}),
            ((v(6, 16), v(2, 16, 8), o(2, 6)), {"out_dtype": DT("float64")}),
            ((v(6, 16), v(2, 16, 8), o(2, 6)), {"out_dtype": DT(dtype)}),
            ((v(6, 16), T(v(2, 16, 8), "float16" if dtype == "float32" else "float32"), o(2, 6)), {}),
            ((T(v(6, 16), "float64"), T(v(2, 16, 8), "float64"), o(2, 6)), {})]

def baddbmms(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3, 5), v(2, 3, 4), v(2, 4, 5)), {}), ((v(5), v(2, 3, 4), v(2, 4, 5)), {}),
            ((v(3, 5), v(2, 3, 4), v(2, 4, 5)), {}), ((v(4), v(2, 3, 4), v(2, 4, 5)), {})]


def mvs(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(4)), {}), ((NC(v(4, 3)), v(4)), {}), ((v(3, 4), v(5)), {}), ((v(3,), v(3)), {}),
            ((v(0, 4), v(4)), {})]


def addmvs(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3), v(3, 4), v(4)), {}), ((v(1), v(3, 4), v(4)), {}), ((v(), v(3, 4), v(4)), {}),
            ((v(3), v(3, 4), v(5)), {})]


def dots(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4), v(4)), {}), ((v(4), v(5)), {}), ((v(2, 2), v(4)), {}), ((v(0), v(0)), {}),
            ((v(3), T(v(3), "float64")), {})]


def outers(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3), v(4)), {}), ((v(3), T(values("int64", (2,), rng), "int64")), {}), ((v(2, 2), v(3)), {}),
            ((v(0), v(2)), {})]


def addrs(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(3), v(4)), {}), ((v(4), v(3), v(4)), {}), ((v(3, 4), v(3), v(5)), {})]


def inners(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3), v(3)), {}), ((v(2, 3), v(4, 3)), {}), ((v(), v(2, 3)), {}), ((v(3), v(2, 4)), {}),
            ((v(2, 1, 3), NC(v(3, 2))), {})]


def einsums(dtype, rng):
    v = _v(dtype, rng)
    a, b = v(3, 4), v(4, 5)
    return [(("ij,jk->ik", a, b), {}), (("ij,jk", a, b), {}), (("ij,jk", [a, b]), {}), (("ii->i", v(3, 3)), {}),
            (("ii", v(3, 3)), {}), (("ij->", a), {}), (("bij,bjk->bik", v(2, 3, 4), v(2, 4, 5)), {}),
            (("...ij,...jk", v(2, 1, 3, 4), v(5, 4, 2)), {}), (("i,j->ij", v(3), v(4)), {}),
            (("ij,jk,kl->il", np.abs(a), np.abs(b), np.abs(v(5, 2))), {}), (("ij->ji", NC(v(4, 3))), {}),
            (("i,i", v(0), v(0)), {}),
            (("bi,bj", v(3, 4), v(3, 5)), {}), (("iij->ij", v(2, 2, 3)), {}), (("ij,ij->i", a, v(1, 4)), {}),
            ((a, [0, 1], b, [1, 2], [0, 2]), {}), ((a, [Ellipsis, 1], b, [1, 2]), {}),
            (("ij,jk", a, v(5, 5)), {}), (("ij", v(3, 4, 5)), {}), (("ij,jk", a), {}), (("i", v(3), v(3)), {}),
            (("ij->k", a), {}), (("ii", a), {}), (("ij,jk", a, T(v(4, 5), "float64")), {})]


def tensordots(dtype, rng):
    v = _v(dtype, rng)
    a = v(3, 4, 5)
    return [((a, v(4, 5, 2)), {}), ((a, v(5, 2), 1), {}), ((a, v(5, 4)), {"dims": ([1, 2], [1, 0])}),
            ((a, v(3, 2)), {"dims": ([0], [0])}), ((a, v(2, 2), 0), {}), ((a, v(3, 2), -1), {}),
            ((a, v(4, 5), 4), {}), ((a, v(6, 2), 1), {}), ((a, T(v(5, 2), "float64"), 1), {}),
            ((a, v(5, 2)), {"dims": ([-1], [0])})]


def krons(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3), v(3, 2)), {}), ((v(3), v(2, 2)), {}), ((v(), v(2, 2)), {}), ((v(2, 1, 2), v(3)), {}),
            ((v(2, 2), T(values("int64", (2,), rng), "int64")), {}), ((v(0, 2), v(2, 2)), {})]


def traces(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 3),), {}), ((v(3, 4),), {}), ((NC(v(4, 3)),), {}), ((v(0, 0),), {}), ((v(2, 2, 2),), {}),
            ((v(3),), {})]


def crosses(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4, 3), v(4, 3)), {"dim": 1}), ((v(3, 4), v(3, 4)), {"dim": 0}), ((v(2, 3), v(1, 3)), {"dim": -1}),
            ((v(4, 3), v(4, 3)), {}), ((v(4, 2), v(4, 2)), {}), ((v(4, 3), v(4, 3)), {"dim": 2}),
            ((v(3, 4), v(3, 4)), {"dim": 1}), ((v(4, 3), T(v(4, 3), "float64")), {"dim": 1})]


def linalg_crosses(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4, 3), v(4, 3)), {}), ((v(2, 3), v(1, 3)), {}), ((v(3, 4), v(3, 4)), {"dim": 0}),
            ((v(4, 2), v(4, 2)), {}), ((v(3), v(2, 3)), {}), ((NC(v(3, 2)), v(2, 3)), {})]


def vecdots(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(3, 4)), {}), ((v(3, 4), v(4)), {}), ((v(3, 4), v(3, 1)), {"dim": 0}),
            ((v(3, 4), v(3, 5)), {}), ((v(3, 4), v(3, 4)), {"dim": 2})]


LINES = [
    Line("matmul", fn("matmul"), matmuls, dtypes=FLOATS + ("int64",)),
    Line("mm", fn("mm"), lambda d, r: matmuls(d, r)[:1] + bmms(d, r)[2:3] + matmuls(d, r)[6:7] + matmuls(d, r)[-3:],
         dtypes=PRODUCTS, exempt={"out_dtype": "PyTorch 2.13 has no CPU kernel for it"}),
    Line("bmm", fn("bmm"), bmms, dtypes=PRODUCTS, exempt={"out_dtype": "PyTorch 2.13 has no CPU kernel for it"}),
    # the gradients: ember-autograd's test_grouped_mm.py (PyTorch has no float64 kernel for the table's check)
    Line("_grouped_mm", fn("_grouped_mm"), grouped_mms, dtypes=("float32", "bfloat16", "float16", "int64"),
         grad=False, exempt={"bias": "PyTorch 2.13 refuses any bias (the line compares that error)"}),
    Line("mv", fn("mv"), mvs, dtypes=PRODUCTS),
    Line("dot", fn("dot"), dots, dtypes=PRODUCTS),
    Line("vdot", fn("vdot"), dots, dtypes=PRODUCTS),
    Line("inner", fn("inner"), inners, dtypes=NUMERIC),
    Line("outer", fn("outer"), outers, dtypes=PRODUCTS),
    Line("ger", fn("ger"), outers, dtypes=PRODUCTS),
    Line("addmm", fn("addmm"), scaled(addmms), dtypes=NUMERIC,
         exempt={"out_dtype": "PyTorch 2.13 has no CPU kernel for it"}),
    # positive values: PyTorch rounds after each batch item in half precision, ember once
    Line("addbmm", fn("addbmm"), scaled(lambda d, r: [((values(d, (3, 5), r),) + tuple(map(np.abs, a[1:])), k)
                                                      for a, k in baddbmms(d, r)]), dtypes=NUMERIC),
    Line("baddbmm", fn("baddbmm"), scaled(baddbmms), dtypes=NUMERIC,
         exempt={"out_dtype": "PyTorch 2.13 has no CPU kernel for it"}),
    Line("addmv", fn("addmv"), scaled(addmvs), dtypes=NUMERIC),
    Line("addr", fn("addr"), scaled(addrs), dtypes=NUMERIC + ("bool",)),
    Line("einsum", fn("einsum"), einsums, dtypes=NUMERIC),
    Line("tensordot", fn("tensordot"), tensordots, dtypes=NUMERIC),
    Line("kron", fn("kron"), krons, dtypes=ALL),
    Line("trace", fn("trace"), traces, dtypes=ALL),
    Line("cross", fn("cross"), crosses, dtypes=NUMERIC),
    Line("linalg_cross", la("cross"), linalg_crosses, dtypes=NUMERIC),
    Line("linalg_vecdot", la("vecdot"), vecdots, dtypes=NUMERIC),
]


# ---- decompositions and solvers ---------------------------------------------------------------
LA = FLOATS + ("int64",)
# rank 2 through a zero row: every LU leaves an exactly zero pivot (with a repeated row instead, MKL's LU on an
# AVX-512 CPU leaves a rounding-sized one, and PyTorch then reports a nonzero determinant and sign)
SINGULAR = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])


def squares(dtype, rng):
    return [((wellcond(3),), {}), ((wellcond(3, 2, seed=1),), {}), ((NC(wellcond(3, seed=2)),), {}),
            ((np.zeros((0, 0)),), {}), ((values(dtype, (2, 3), rng),), {}), ((values(dtype, (3,), rng),), {})]


def singulars(dtype, rng):
    return [((SINGULAR,), {}), ((np.stack([wellcond(3), SINGULAR]),), {})]


def squares_and_singular(dtype, rng):
    return squares(dtype, rng) + singulars(dtype, rng)


def spds(dtype, rng):
    return [((spd(3),), {}), ((spd(3, 2, rng=rng),), {}), ((NC(spd(4, rng=rng)),), {}), ((np.zeros((0, 0)),), {}),
            ((values(dtype, (2, 3), rng),), {})]


def not_pds(dtype, rng):
    return [((-np.eye(3),), {}), ((np.stack([spd(2), -np.eye(2)]),), {}), ((spd(3),), {})]


def rects(dtype, rng):
    return [((values(dtype, (4, 3), rng),), {}), ((values(dtype, (3, 4), rng),), {}),
            ((values(dtype, (2, 3, 3), rng),), {}), ((NC(values(dtype, (3, 4), rng)),), {}),
            ((values(dtype, (3,), rng),), {})]


def solves(dtype, rng):
    a, v = wellcond(3), lambda *sh: values(dtype, sh, rng)  # noqa: E731
    return [((a, v(3, 2)), {}), ((a, v(3)), {}), ((wellcond(3, 2), v(3)), {}), ((wellcond(3, 2), v(2, 3)), {}),
            ((wellcond(3, 2), v(4, 1, 3, 2)), {}), ((a, v(2, 3)), {"left": False}), ((a, v(4)), {}),
            ((a, v(3)), {"left": False}), ((SINGULAR, v(3)), {}), ((values(dtype, (2, 3), rng), v(2)), {}),
            ((a, T(v(3), "float64" if dtype != "float64" else "float32")), {})]


def triangular(dtype, rng):
    a, v = wellcond(3), lambda *sh: values(dtype, sh, rng)  # noqa: E731
    return [((a, v(3, 2)), {"upper": True}), ((a, v(3, 2)), {"upper": False}), ((a, v(2, 3)), {"upper": True,
                                                                                               "left": False}),
            ((a, v(3, 2)), {"upper": False, "unitriangular": True}), ((wellcond(3, 2), v(3, 1)), {"upper": True}),
            ((a, v(3)), {"upper": True}), ((a, v(4, 2)), {"upper": True})]


def tri_solves(dtype, rng):
    a, v = wellcond(3), lambda *sh: values(dtype, sh, rng)  # noqa: E731
    return [((v(3, 2), a), {}), ((v(3, 2), a, False), {}), ((v(3, 2), a, True, True), {}),
            ((v(3, 2), a, False, False, True), {}), ((v(2, 3, 2), wellcond(3, 2)), {}), ((v(3), a), {})]


def chol_solves(dtype, rng):
    low = np.linalg.cholesky(spd(3))
    v = lambda *sh: values(dtype, sh, rng)  # noqa: E731
    return [((v(3, 2), low), {}), ((v(3, 2), low.T, True), {}), ((v(2, 3, 1), low), {}), ((v(3), low), {})]


def chol_factors(dtype, rng):
    low = np.linalg.cholesky(spd(3))
    return [((low,), {}), ((low.T, True), {}), ((np.linalg.cholesky(spd(3, 2, rng=rng)),), {}),
            ((values(dtype, (3,), rng),), {})]


def lstsqs(dtype, rng):
    v = lambda *sh: values(dtype, sh, rng)  # noqa: E731
    a = v(5, 3)
    return [((a, v(5, 2)), {}), ((a, v(5)), {}), ((a, v(5, 2)), {"driver": "gelsd"}),
            ((a, v(5, 2)), {"driver": "gelss"}), ((v(2, 5, 3), v(2, 5, 2)), {}), ((a, v(4, 2)), {}),
            ((a, v(5, 2)), {"driver": "bad"})]


def pinvs(dtype, rng):
    return rects(dtype, rng) + [((SINGULAR,), {}), ((spd(3),), {"hermitian": True}),
                                ((SINGULAR,), {"rtol": 0.5}), ((SINGULAR,), {"atol": 1.0})]


def ranks(dtype, rng):
    return rects(dtype, rng)[:4] + [((SINGULAR,), {}), ((SINGULAR,), {"atol": 10.0}), ((spd(3),), {"hermitian": True}),
                                    ((SINGULAR,), {"tol": 0.1})]


def lu_factors(dtype, rng):
    return rects(dtype, rng) + [((SINGULAR,), {}), ((np.zeros((3, 3)),), {})]


def _factored(dtype, rng, a=None):
    a = wellcond(3) if a is None else a
    lu, piv = torch.linalg.lu_factor(torch.from_numpy(a))
    return lu.numpy(), T(piv.numpy(), "int32")


def lu_solves(dtype, rng):
    lu_, piv = _factored(dtype, rng)
    v = lambda *sh: values(dtype, sh, rng)  # noqa: E731
    return [((lu_, piv, v(3, 2)), {}), ((lu_, piv, v(2, 3)), {"left": False}), ((lu_, piv, v(3, 2)), {"adjoint": True}),
            ((lu_, piv, v(3)), {})]


def lu_unpacks(dtype, rng):
    lu_, piv = torch.linalg.lu_factor(torch.from_numpy(values("float64", (4, 3), rng)))
    lu2, piv2 = torch.linalg.lu_factor(torch.from_numpy(values("float64", (2, 3, 4), rng)))
    return [((lu_.numpy(), T(piv.numpy(), "int32")), {}), ((lu2.numpy(), T(piv2.numpy(), "int32")), {}),
            ((lu_.numpy(), T(piv.numpy(), "int32"), False), {}), ((lu_.numpy(), T(piv.numpy(), "int64")), {})]


def householders(dtype, rng):
    h, tau = torch.geqrf(torch.from_numpy(values("float64", (5, 3), rng)))
    return [((h.numpy(), tau.numpy()), {}), ((h.numpy(), tau.numpy()[:2]), {}),
            ((values(dtype, (2, 4, 3), rng), values(dtype, (2, 3), rng)), {}), ((values(dtype, (3, 4), rng),
                                                                                  values(dtype, (2,), rng)), {})]


def ormqrs(dtype, rng):
    h, tau = (x.numpy() for x in torch.geqrf(torch.from_numpy(values("float64", (4, 3), rng))))
    c = values(dtype, (4, 2), rng)
    return [((h, tau, c), {}), ((h, tau, c, True, True), {}), ((h, tau, values(dtype, (2, 4), rng), False), {})]


def tensorinvs(dtype, rng):
    a = wellcond(6).reshape(6, 2, 3)
    return [((a,), {"ind": 1}), ((wellcond(6).reshape(2, 3, 6),), {"ind": 2}), ((values(dtype, (4, 6, 8, 3), rng),),
                                                                              {"ind": 2}),
            ((values(dtype, (2, 3), rng),), {"ind": 1}), ((a,), {"ind": 0})]


def tensorsolves(dtype, rng):
    a = wellcond(6).reshape(2, 3, 6)
    return [((a, values(dtype, (2, 3), rng)), {}), ((wellcond(6).reshape(6, 2, 3), values(dtype, (6,), rng)), {}),
            ((np.moveaxis(a, 0, 2).copy(), values(dtype, (3, 6), rng)), {"dims": (0,)}),
            ((a, values(dtype, (3, 2), rng)), {})]


def qrs(dtype, rng):
    base = rects(dtype, rng)
    return base + [(base[1][0], {"mode": "complete"}), (base[0][0], {"mode": "bad"}), ((np.zeros((0, 3)),), {})]


def qrs_undifferentiable(dtype, rng):
    a = values(dtype, (4, 3), rng)
    return [((a,), {"mode": "complete"}), ((a,), {"mode": "r"})]


def svds(dtype, rng):
    base = rects(dtype, rng)
    return base + [(base[0][0], {"full_matrices": False}), (base[1][0], {"full_matrices": False}),
                   ((np.zeros((0, 3)),), {"full_matrices": False})]


def old_svds(dtype, rng):
    base = rects(dtype, rng)
    return base + [(base[0][0] + (False,), {}), (base[1][0], {"compute_uv": False})]


def eighs(dtype, rng):
    sym = spd(3) - 4 * np.eye(3)
    return [((sym,), {}), ((spd(3, 2, rng=rng),), {}), ((sym,), {"UPLO": "U"}), ((np.triu(sym),), {"UPLO": "U"}),
            ((values(dtype, (2, 3), rng),), {}), ((sym,), {"UPLO": "X"}), ((np.zeros((0, 0)),), {})]


def eigs(dtype, rng):
    return [((values(dtype, (3, 3), rng),), {}), ((values(dtype, (2, 4, 4), rng),), {}),
            ((values(dtype, (2, 3), rng),), {})]


def conds(dtype, rng):
    a = wellcond(3)
    return [((a,), {}), ((values(dtype, (4, 3), rng),), {}), ((a, "fro"), {}), ((a, "nuc"), {}), ((a, 1), {}),
            ((a, -1), {}), ((a, float("inf")), {}), ((a, -2), {}), ((values(dtype, (4, 3), rng), "fro"), {})]


def _unitri(lib, b, a, *rest):
    return lib.triangular_solve(b, a, *rest)


LINES += [
    Line("linalg_inv", la("inv"), squares_and_singular, dtypes=LA),
    Line("inverse", fn("inverse"), squares_and_singular, dtypes=LA),
    Line("linalg_inv_ex", la("inv_ex"), squares, dtypes=LA),
    Line("linalg_inv_ex", info_of(la("inv_ex")), singulars, dtypes=F64),
    Line("det", fn("det"), squares_and_singular, dtypes=LA),
    Line("linalg_det", la("det"), squares_and_singular, dtypes=LA),
    Line("slogdet", fn("slogdet"), squares, dtypes=LA),
    Line("slogdet", nograd(fn("slogdet")), singulars, dtypes=F64),
    Line("linalg_slogdet", la("slogdet"), squares, dtypes=LA),
    Line("linalg_slogdet", nograd(la("slogdet")), singulars, dtypes=F64),
    Line("logdet", fn("logdet"), lambda d, r: squares(d, r)[:4] + [((-wellcond(3),), {})], dtypes=LA),
    Line("logdet", nograd(fn("logdet")), singulars, dtypes=F64),
    Line("linalg_solve", la("solve"), solves, dtypes=LA),
    Line("linalg_solve_ex", la("solve_ex"), lambda d, r: [x for i, x in enumerate(solves(d, r)) if i != 8], dtypes=LA),
    Line("linalg_solve_ex", info_of(la("solve_ex")), lambda d, r: solves(d, r)[8:9], dtypes=F64),
    Line("linalg_solve_triangular", la("solve_triangular"), triangular, dtypes=LA),
    Line("triangular_solve", fn("triangular_solve"), tri_solves, dtypes=LA),
    Line("linalg_cholesky", la("cholesky"), lambda d, r: spds(d, r) + not_pds(d, r) + [((spd(3),), {"upper": True})],
         dtypes=LA),
    Line("linalg_cholesky_ex", la("cholesky_ex"), spds, dtypes=LA),
    Line("linalg_cholesky_ex", info_of(la("cholesky_ex")), not_pds, dtypes=F64),
    Line("cholesky", fn("cholesky"), lambda d, r: spds(d, r) + not_pds(d, r) + [((spd(3), True), {})], dtypes=LA),
    Line("cholesky_solve", fn("cholesky_solve"), chol_solves, dtypes=LA),
    Line("cholesky_inverse", fn("cholesky_inverse"), chol_factors, dtypes=LA),
    Line("linalg_qr", la("qr"), qrs, dtypes=LA),
    Line("linalg_qr", nograd(la("qr")), qrs_undifferentiable, dtypes=F64),
    Line("qr", fn("qr"), lambda d, r: rects(d, r) + [(rects(d, r)[1][0] + (False,), {})], dtypes=LA),
    Line("geqrf", fn("geqrf"), rects, dtypes=LA),
    Line("linalg_householder_product", la("householder_product"), householders, dtypes=LA),
    Line("orgqr", fn("orgqr"), householders, dtypes=LA),
    Line("ormqr", fn("ormqr"), ormqrs, dtypes=F64),
    Line("linalg_svd", gauge(la("svd")), svds, dtypes=LA),
    Line("svd", gauge(fn("svd"), "V"), old_svds, dtypes=LA),
    Line("linalg_svdvals", la("svdvals"), rects, dtypes=LA),
    Line("linalg_eigh", gauge(la("eigh")), eighs, dtypes=LA),
    Line("linalg_eigvalsh", la("eigvalsh"), eighs, dtypes=LA),
    Line("linalg_eig", la("eig"), eigs, dtypes=LA, values=False),
    Line("linalg_eigvals", la("eigvals"), lambda d, r: [((spd(3),), {})] + eigs(d, r)[2:], dtypes=LA),
    Line("linalg_pinv", la("pinv"), pinvs, dtypes=LA),
    Line("pinverse", fn("pinverse"), lambda d, r: rects(d, r) + [((SINGULAR, 0.5), {})], dtypes=LA),
    Line("linalg_lstsq", la("lstsq"), lstsqs, dtypes=LA),
    Line("linalg_matrix_rank", la("matrix_rank"), ranks, dtypes=LA),
    Line("linalg_lu_factor", la("lu_factor"), lu_factors, dtypes=LA),
    Line("linalg_lu_factor_ex", la("lu_factor_ex"), lu_factors, dtypes=LA),
    Line("linalg_lu", la("lu"), lu_factors, dtypes=LA),
    Line("lu", meth("lu"), lambda d, r: lu_factors(d, r)[:3] + [(lu_factors(d, r)[0][0] + (True, True), {})],
         dtypes=F64),
    Line("lu_unpack", fn("lu_unpack"), lu_unpacks, dtypes=F64),
    Line("linalg_lu_solve", la("lu_solve"), lu_solves, dtypes=F64),
    Line("lu_solve", fn("lu_solve"), lambda d, r: [((a[2],) + a[:2], k) for a, k in lu_solves(d, r)[:1]], dtypes=F64),
    Line("linalg_tensorinv", la("tensorinv"), tensorinvs, dtypes=LA),
    Line("linalg_tensorsolve", la("tensorsolve"), tensorsolves, dtypes=F64),
]


# ---- norms, matrix functions, chains ------------------------------------------------------------
def vector_norms(dtype, rng):
    a = values(dtype, (3, 4), rng, special=False)
    return [((a,), {}), ((a, 1), {}), ((a, float("inf")), {}), ((a, -float("inf")), {}), ((a, 0), {}),
            ((a, 3.5), {}), ((a, 2, 1), {}), ((a, 2, (0, 1), True), {}), ((a,), {"dtype": DT("float64")}),
            ((values(dtype, (0, 3), rng), 2, 1), {}), ((NC(values(dtype, (4, 3), rng)), 1, 0), {}),
            ((values(dtype, (), rng),), {}), ((a, 2, 2), {})]


def matrix_norms(dtype, rng):
    a = values(dtype, (2, 3, 4), rng)
    return [((a,), {}), ((a, "nuc"), {}), ((a, 1), {}), ((a, -1), {}), ((a, 2), {}), ((a, -2), {}),
            ((a, float("inf")), {}), ((a, -float("inf")), {}), ((a, "fro", (0, 2)), {}), ((a, 1, (2, 0), True), {}),
            ((a, 3), {}), ((values(dtype, (3,), rng),), {}), ((a, "fro", (1, 1)), {}), ((NC(values(dtype, (4, 3), rng)),
                                                                                       2), {})]


def norms(dtype, rng):
    a, v = values(dtype, (3, 4), rng), values(dtype, (5,), rng)
    return [((a,), {}), ((v,), {}), ((a, "fro"), {}), ((a, "nuc"), {}), ((a, 2), {}), ((v, 3), {}), ((a, 1), {}),
            ((a, None, 1), {}), ((a, None, (0, 1)), {}), ((a, float("inf"), 0), {}),
            ((values(dtype, (2, 3, 4), rng), 2), {}), ((values(dtype, (2, 3, 4), rng), "fro"), {}),
            ((values(dtype, (2, 3, 4), rng), None, (0, 1, 2)), {})]


def diagonals(dtype, rng):
    a = values(dtype, (2, 3, 4), rng)
    return [((a,), {}), ((a,), {"offset": 1}), ((a,), {"offset": -1, "dim1": 0, "dim2": 2}), ((a,), {"dim1": 1,
                                                                                                     "dim2": 1})]


def powers(dtype, rng):
    a = wellcond(3) / 6
    return [((a, 3), {}), ((a, 0), {}), ((a, 1), {}), ((a, -2), {}), ((wellcond(3, 2) / 6, 2), {}),
            ((np.zeros((0, 0)), 2), {}), ((values(dtype, (2, 3), rng), 2), {}), ((NC(a), 5), {})]


def exps(dtype, rng):
    # moderate norms: PyTorch's float32 algorithm (Taylor, its own degrees) and ember's Padé differ by more than
    # the table's tolerance once many squarings amplify rounding
    return [((values(dtype, (3, 3), rng) / 4,), {}), ((values(dtype, (2, 3, 3), rng) / 3,), {}),
            ((np.zeros((3, 3)),), {}), ((values(dtype, (2, 3), rng),), {}), ((np.zeros((0, 0)),), {}),
            ((NC(values(dtype, (4, 4), rng) / 10),), {}), ((values(dtype, (2, 2), rng) * 1e-3,), {})]


def multi_dots(dtype, rng):
    v = _v(dtype, rng)
    return [(([v(3, 4), v(4, 5), v(5, 2)],), {}), (([v(4), v(4, 5), v(5)],), {}), (([v(3, 4), v(4)],), {}),
            (([v(4), v(4, 5)],), {}), (([v(3, 4), v(5, 2)],), {}), (([v(3, 4)],), {}),
            (([v(2, 3, 4), v(4, 5)],), {}), (([v(10, 2), v(2, 10), v(10, 3), v(3, 1)],), {})]


def chains(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(4, 5), v(5, 2)), {}), ((v(3, 4),), {}), ((v(3, 4), v(5, 2)), {}), ((v(3),), {}),
            ((v(10, 2), v(2, 10), v(10, 3)), {})]


def cdists(dtype, rng):
    v = _v(dtype, rng)
    a, b = v(4, 3), v(5, 3)
    return [((a, b), {}), ((a, b, 1.0), {}), ((a, b, 0.0), {}), ((a, b, float("inf")), {}), ((a, b, 3.0), {}),
            ((v(2, 4, 3), v(1, 5, 3)), {}), ((v(30, 3) + 10, v(27, 3) - 10), {}),  # far apart: the product path cancels
 ((a, b), {"compute_mode": "use_mm_for_euclid_dist"}),
            ((a, v(5, 2)), {}), ((v(3), b), {}), ((a, b, -1.0), {}), ((a, a), {"p": 1.5})]


def vanders(dtype, rng):
    x = values(dtype, (4,), rng)
    return [((x,), {}), ((x, 3), {}), ((x, 5, True), {}), ((x,), {"increasing": True}), ((values(dtype, (2, 3), rng),),
                                                                                      {}),
            ((values(dtype, (0,), rng),), {})]


def linalg_vanders(dtype, rng):
    x = values(dtype, (2, 4), rng)
    return [((x,), {}), ((x,), {"N": 3}), ((values(dtype, (5,), rng),), {}), ((values(dtype, (), rng),), {}),
            ((x,), {"N": 1})]


LINES += [
    Line("linalg_vector_norm", la("vector_norm"), vector_norms, dtypes=LA),
    Line("linalg_matrix_norm", la("matrix_norm"), matrix_norms, dtypes=LA),
    Line("linalg_norm", la("norm"), norms, dtypes=LA),
    Line("linalg_diagonal", la("diagonal"), diagonals),
    Line("matrix_power", fn("matrix_power"), powers, dtypes=LA),
    Line("linalg_matrix_power", la("matrix_power"), powers, dtypes=LA),
    Line("matrix_exp", fn("matrix_exp"), exps, dtypes=F64 + ("int64",)),
    Line("linalg_matrix_exp", la("matrix_exp"), exps, dtypes=F64 + ("int64",)),
    # PyTorch's half-precision matrix_exp overflows to inf/NaN on ordinary inputs: compare dtype and shape only
    Line("matrix_exp", fn("matrix_exp"), exps, dtypes=("bfloat16", "float16"), values=False),
    Line("linalg_multi_dot", la("multi_dot"), multi_dots, dtypes=PRODUCTS),
    Line("chain_matmul", fn("chain_matmul"), chains, dtypes=NUMERIC,
         exempt={"out": "torch's chain_matmul leaves out= behind when a TorchFunctionMode records it; test_ops' out= "
                        "test passes it"}),
    Line("cdist", fn("cdist"), cdists, dtypes=LA),
    # PyTorch's own vander backward fails (an in-place op on a saved tensor); linalg_vander checks the VJP
    Line("vander", nograd(fn("vander")), vanders, dtypes=ALL),
    Line("linalg_vander", la("vander"), linalg_vanders, dtypes=ALL),
    Line("matmul", la("matmul"), matmuls, dtypes=F64, grad=False),
    Line("cond", nograd(la("cond")), conds, dtypes=LA),
]


# ---- fft --------------------------------------------------------------------------------------
def _cplx(rng, *shape):
    return T(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), "complex128")


def ffts(real_only=False):
    def samples(dtype, rng):
        x = values(dtype, (3, 8), rng)
        out = [((x,), {}), ((x, 5), {}), ((x, 12), {}), ((x, None, 0), {}), ((x,), {"norm": "ortho"}),
               ((x,), {"norm": "forward"}), ((x, 7, 0, "ortho"), {}), ((NC(values(dtype, (8, 3), rng)),), {}),
               ((values(dtype, (0,), rng),), {}), ((values(dtype, (), rng),), {}), ((x,), {"norm": "bad"}),
               ((x, 0), {}), ((x, None, 2), {}), ((_cplx(rng, 2, 6),), {}), ((_cplx(rng, 2, 6), 9, 0), {})]
        return out
    return samples


def fft2s(dtype, rng):
    x = values(dtype, (2, 4, 6), rng)
    return [((x,), {}), ((x, (3, 5)), {}), ((x, (6, 8)), {"norm": "ortho"}), ((x, None, (0, 2)), {}),
            ((x,), {"dim": (0, 1), "norm": "forward"}), ((x, (4,)), {}), ((x, (4,), (0, 1)), {}),
            ((values(dtype, (5,), rng),), {}), ((_cplx(rng, 3, 4),), {}), ((x, None, (1, 1)), {})]


def fftns(dtype, rng):
    x = values(dtype, (2, 4, 6), rng)
    return [((x,), {}), ((x, (3, 5)), {}), ((x, None, (0, 2)), {}), ((x, (2, 4, 8)), {"norm": "ortho"}),
            ((x,), {"dim": 1}), ((x, (3, 3), (2, 0)), {}), ((_cplx(rng, 3, 4),), {}), ((values(dtype, (), rng),), {})]


def shifts(dtype, rng):
    x = values(dtype, (3, 4, 5), rng)
    return [((x,), {}), ((x, 1), {}), ((x, (0, 2)), {}), ((x, -1), {}), ((values(dtype, (0, 3), rng),), {}),
            ((x, 3), {})]


def freqs(dtype, rng):
    return [((5,), {}), ((6, 0.5), {}), ((1,), {}), ((8,), {"dtype": DT("float64")}), ((0,), {})]


FFT_DTYPES = LA + ("bool",)
LINES += [Line("fft_" + n, ff(n), ffts(n in ("rfft", "ihfft")), dtypes=FFT_DTYPES)
          for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")]
LINES += [Line("fft_" + n, ff(n), fft2s if n.endswith("2") else fftns, dtypes=FFT_DTYPES)
          for n in ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn")]
LINES += [Line("fft_fftshift", ff("fftshift"), shifts), Line("fft_ifftshift", ff("ifftshift"), shifts),
          Line("fftfreq", nograd(ff("fftfreq")), freqs, dtypes=("float32",)),
          Line("rfftfreq", nograd(ff("rfftfreq")), freqs, dtypes=("float32",))]
