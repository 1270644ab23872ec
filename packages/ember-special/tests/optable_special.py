"""ember-special's lines of the op table (machinery: ember-core's tests/optable.py): every function of
torch.special through ``ember.special``, the top-level spellings, methods, in-place forms and ``out=``."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "ember-core" / "tests"))

from optable import ALL, FLOATS, NC, Line, T, binary, fn, meth, unary, values  # noqa: E402

F32_64 = ("float32", "float64", "int64", "bool")  # the functions PyTorch's CPU has no half kernels for


def special(name):
    """Call ``lib.special.<name>(*args)``."""
    def call(m, *a, **k):
        return getattr(m.special, name)(*a, **k)
    call.direct = True
    return call


def out_call(name):
    """``lib.special.<name>(*args, out=<empty tensor of the first argument's dtype>)``."""
    def call(m, x, *a, **k):
        out = m.empty(0, dtype=x.dtype)
        r = getattr(m.special, name)(x, *a, out=out, **k)
        assert r is out
        return out
    return call


def inplace(name):
    def call(m, x, *a, **k):
        x = x.clone()
        getattr(x, name + "_")(*a, **k)
        return x
    return call


def _mixed(dtype, rng, lo, hi, edges, shape=(3, 4)):
    """Values of ``dtype`` uniform in [lo, hi) with ``edges`` placed first."""
    if dtype in ("int64", "bool"):
        return values(dtype, shape, rng)
    v = rng.uniform(lo, hi, int(np.prod(shape)))
    v[:len(edges)] = edges
    return v.reshape(shape)


_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0]


def loose(line, **tol):
    """The line with its own tolerance per dtype, ``float64=(rtol, atol)``."""
    line.tol = tol
    return line


def domain(lo, hi, edges=()):
    """Unary samples on [lo, hi) with NaN, infinities, signed zeros and ``edges``, plus zero-dim,
    empty and non-contiguous inputs."""
    def samples(dtype, rng):
        return [((_mixed(dtype, rng, lo, hi, _EDGES + list(edges), (4, 5)),), {}),
                ((_mixed(dtype, rng, lo, hi, [], ()),), {}),
                ((_mixed(dtype, rng, lo, hi, [], (0, 3)),), {}),
                ((NC(_mixed(dtype, rng, lo, hi, [], (4, 3))),), {})]
    return samples


def polynomial(dtype, rng):
    """x in [-1.5, 1.5] with the edges the polynomials treat apart (±1, 0); degrees -1..12 (also
    fractional), Python-number degrees and a Python-number x; bad broadcasting."""
    # no NaN x: PyTorch's polynomials return uninitialised memory or 0 there (ember returns NaN)
    x = _mixed(dtype, rng, -1.5, 1.5, [1.0, -1.0, 0.0, 0.5, 1.0, -1.0, 0.0, 0.75], (3, 8))
    n = np.array([0, 1, 2, 3, 7, 10, 12, -1]) if dtype != "bool" else np.array([0, 1] * 4)
    return [((x, n), {}), ((x, T(np.array([2.5, 9.7, -0.5, 4.0]).reshape(4, 1, 1), "float64")), {}),
            ((x, 5), {}), ((x, 9), {}), ((x, 0), {}), ((0.25, T(n, "int64")), {}),
            ((_mixed(dtype, rng, -1, 1, [], ()), 3), {}), ((_mixed(dtype, rng, -1, 1, [], (0,)), n[:1]), {}),
            ((NC(_mixed(dtype, rng, -1, 1, [], (4, 8))), n), {}), ((x, n[:3]), {})]


def positive_pairs(dtype, rng):
    a = _mixed(dtype, rng, 0, 6, [np.nan, 0.0, 0.0, np.inf, 1.0, -1.0, 2.0, np.inf], (2, 8))
    x = _mixed(dtype, rng, 0, 8, [1.0, 0.0, 1.0, 1.0, np.inf, 1.0, 0.0, np.nan], (2, 8))
    return [((a, x), {}), ((a, x[0]), {}), ((a, _mixed(dtype, rng, 0, 8, [], ())), {}),
            ((NC(_mixed(dtype, rng, 0.1, 5, [], (8, 2))), x), {}), ((a, x[:, :3]), {}),
            ((a, T(x, "float64")), {}), ((a, 2.0), {})]


def igamma_edges(dtype, rng):
    """Edges without an infinite ``input`` (float32 then runs ember's own kernels: an infinite or large ``input``
    sends the call to SciPy), a ~ x where the series and continued fraction meet, and a large ``input``. (Not
    float64: PyTorch's is good to 1e-9 only at a ~ x ~ 30.)"""
    a = np.array([np.nan, 0.0, 0.0, 1.0, -1.0, 2.0, 1e-3, 500.0, 0.5, 30.0, 1e-6, 7.5])
    x = np.array([1.0, 0.0, 2.0, np.inf, 1.0, 0.0, np.nan, 480.0, 1e-6, 30.0, 0.9, 1e4])
    big = np.array([1e3, 2e3, 5.0]), np.array([990.0, 2e3, 5.0])
    return [((a, x), {}), ((a[:, None], x[None, :4]), {}), (big, {})]


def igamma_grads(dtype, rng):
    """``input`` float32 (so that only ``other`` asks for a gradient: PyTorch has none for ``input``)."""
    return [((T(a, "float32"), x), {}) for (a, x), _ in positive_pairs(dtype, rng)[:3]]


def zeta_pairs(dtype, rng):
    s = _mixed(dtype, rng, 1, 6, [1.0, 0.5, 2.0, 2.0, 2.0, -2.0, np.nan, 3.0], (2, 8))
    q = _mixed(dtype, rng, -3, 5, [1.0, 1.0, 0.0, -1.0, -1.5, 1.0, 1.0, np.inf], (2, 8))
    return [((s, q), {}), ((s, q[0]), {}), ((s, 2.5), {}), ((3.0, T(q, "float64")), {}), ((2, T(q, "float64")), {}),
            ((NC(_mixed(dtype, rng, 1.5, 5, [], (8, 2))), q), {}), ((s, q[:, :3]), {})]


def xlog_pairs(dtype, rng):
    x = _mixed(dtype, rng, -2, 3, [0.0, 0.0, 0.0, 1.0, np.nan, 2.0, -1.0, 0.0], (2, 8))
    y = _mixed(dtype, rng, -1.5, 4, [0.0, np.nan, -1.0, 0.0, 0.0, np.inf, -1.0, -2.0], (2, 8))
    return binary(dtype, rng) + [((x, y), {}), ((x, -1.0), {}), ((2, T(y, "float64")), {}), ((0, T(y, "float64")), {})]


def polygammas(dtype, rng):
    # no negative integers: at those poles PyTorch's trigamma returns pi^2 / sin(pi x)^2 of the rounded
    # pi (6.6e32 in float64, 1.3e15 in float32); ember returns inf, the limit, as both do at 0
    x = _mixed(dtype, rng, -4, 12, [np.nan, np.inf, -np.inf, 0.0, -0.0, -0.5, -1.5, 1e-8], (3, 8))
    x = np.abs(x) if dtype == "int64" else x
    return [((n, x), {}) for n in (0, 1, 2, 3, 5)] + [((1, NC(x.T.copy())), {}), ((-1, x), {}), ((1.5, x), {})]


def mvlgammas(dtype, rng):
    x = _mixed(dtype, rng, 1.6, 9, [np.nan, np.inf, 2.0, 3.5], (3, 4))
    return [((x, 1), {}), ((x, 3), {}), ((x, 4), {}), ((x, 0), {}), ((NC(x.T.copy()), 2), {})]


def logits(dtype, rng):
    x = _mixed(dtype, rng, -0.2, 1.2, [np.nan, 0.0, 1.0, 0.5, 1e-7, -0.1, 1.1], (3, 4))
    return [((x,), {}), ((x, 1e-6), {}), ((x,), {"eps": 0.2}), ((NC(x.T.copy()),), {}), ((x, -0.1), {})]


def finite_logits(dtype, rng):
    """``logits`` without NaN and a negative eps: there PyTorch's logit gradient differs with and without
    create_graph (NaN / 0 at NaN; NaN / finite outside [0, 1]); ember's is always the former."""
    out = []
    for args, kwargs in logits(dtype, rng)[:4]:
        x = args[0]
        x = NC(np.nan_to_num(x.arr, nan=0.3)) if isinstance(x, NC) else np.nan_to_num(x, nan=0.3)
        out.append(((x,) + args[1:], kwargs))
    return out


def rounds(dtype, rng):
    x = _mixed(dtype, rng, -50, 50, _EDGES, (3, 4))
    return [((x,), {}), ((x,), {"decimals": 2}), ((x,), {"decimals": -1})]


def dims(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x, 1), {}), ((x, -1), {}), ((x, 2), {})]


def softmax_rows(dtype, rng):
    """Ties of the maximum, non-finite maxima and rows without one; along both dims and non-contiguous; and large
    enough to be split over threads, with those rows and rows whose maximum is negative or above 60."""
    x = np.array([[3.0, 3.0, 1.0, -2.0], [np.inf, 1.0, 2.0, 0.0], [-np.inf] * 4, [np.nan, 1.0, 2.0, 3.0],
                  [3e4, -3e4, 0.0, 5.0], [0.0] * 4, [-1.0, 40.0, 2.0, 40.0]])
    big = rng.standard_normal((520, 512)) * 3
    big[:7, :4] = x
    big[10] -= 30
    big[-3, 5] = 70.0
    return dims(dtype, rng) + [((x, 1), {}), ((x, 0), {}), ((NC(x.T.copy()), 0), {}), ((big, 1), {}), ((big, 0), {})]


UNARY_REAL = unary  # normal * 3 with NaN, ±inf and -0.0 (ember-core's builder)
POSITIVE = domain(0.0, 30.0, [1e-30, 1.0, 2.0, 700.0])
BESSEL = domain(-30.0, 30.0, [1e-30, -1e-30, 400.0, -400.0])
UNIT = domain(-0.2, 1.2, [1.0, 0.5, 1e-30, 1 - 1e-7])
SYMMETRIC_UNIT = domain(-1.2, 1.2, [1.0, -1.0, 0.5, 1e-30])
GAMMA = domain(-6.0, 12.0, [1.0, 2.0, 1e-30, 171.5, -0.5])
# the poles: values only (PyTorch's gradient there is trigamma's artefact, see polygammas)
POLES = domain(-6.0, 0.0, [-1.0, -2.0, -3.0, 1.0])

# PyTorch's float64 Airy and Bessel functions of the first and second kind are accurate to about
# 1e-8..1e-5 only (test_accuracy.py measures both against mpmath), and its trigamma to about 1e-11
TORCH_F64 = {"float64": (2e-5, 1e-6)}

LINES = [
    # Airy and Bessel functions
    loose(Line("special_airy_ai", special("airy_ai"), domain(-20, 20, [100.0, -100.0, 1e-30]), dtypes=F32_64),
          **TORCH_F64),
    loose(Line("special_bessel_j0", special("bessel_j0"), BESSEL, dtypes=F32_64), **TORCH_F64),
    loose(Line("special_bessel_j1", special("bessel_j1"), BESSEL, dtypes=F32_64), **TORCH_F64),
    loose(Line("special_bessel_y0", special("bessel_y0"), BESSEL, dtypes=F32_64), **TORCH_F64),
    loose(Line("special_bessel_y1", special("bessel_y1"), BESSEL, dtypes=F32_64), **TORCH_F64),
    Line("special_modified_bessel_i0", special("modified_bessel_i0"), BESSEL, dtypes=F32_64),
    Line("special_modified_bessel_i1", special("modified_bessel_i1"), BESSEL, dtypes=F32_64),
    Line("special_modified_bessel_k0", special("modified_bessel_k0"), BESSEL, dtypes=F32_64),
    Line("special_modified_bessel_k1", special("modified_bessel_k1"), BESSEL, dtypes=F32_64),
    Line("special_scaled_modified_bessel_k0", special("scaled_modified_bessel_k0"), BESSEL, dtypes=F32_64),
    Line("special_scaled_modified_bessel_k1", special("scaled_modified_bessel_k1"), BESSEL, dtypes=F32_64),
    Line("special_spherical_bessel_j0", special("spherical_bessel_j0"), BESSEL, dtypes=F32_64),
    Line("i0", fn("i0"), BESSEL), Line("i0", special("i0"), BESSEL), Line("i0", meth("i0"), UNARY_REAL),
    Line("i0", inplace("i0"), UNARY_REAL, dtypes=FLOATS),
    Line("special_i0e", special("i0e"), BESSEL), Line("special_i1", special("i1"), BESSEL),
    Line("special_i1e", special("i1e"), BESSEL), Line("special_i1e", out_call("i1e"), BESSEL, dtypes=FLOATS),
    # orthogonal polynomials
    *[Line(f"special_{name}", special(name), polynomial, dtypes=F32_64) for name in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
        "legendre_polynomial_p")],
    # gamma family
    Line("digamma", special("digamma"), GAMMA), Line("digamma", special("psi"), UNARY_REAL),
    Line("digamma", special("digamma"), POLES, grad=False), Line("lgamma", special("gammaln"), POLES, grad=False),
    Line("digamma", fn("digamma"), GAMMA), Line("digamma", meth("digamma"), UNARY_REAL),
    Line("digamma", inplace("digamma"), UNARY_REAL, dtypes=FLOATS),
    loose(Line("polygamma", special("polygamma"), polygammas), float64=(1e-9, 1e-12)),
    loose(Line("polygamma", fn("polygamma"), polygammas), float64=(1e-9, 1e-12)),
    loose(Line("polygamma", lambda m, n, x: x.polygamma(n), polygammas), float64=(1e-9, 1e-12)),
    loose(Line("polygamma", lambda m, n, x: inplace("polygamma")(m, x, n), polygammas, dtypes=FLOATS),
          float64=(1e-9, 1e-12)),
    Line("lgamma", special("gammaln"), GAMMA), Line("lgamma", fn("lgamma"), GAMMA),
    Line("lgamma", meth("lgamma"), UNARY_REAL), Line("lgamma", out_call("gammaln"), GAMMA, dtypes=FLOATS),
    Line("mvlgamma", special("multigammaln"), mvlgammas), Line("mvlgamma", fn("mvlgamma"), mvlgammas),
    Line("mvlgamma", meth("mvlgamma"), mvlgammas), Line("mvlgamma", inplace("mvlgamma"), mvlgammas, dtypes=FLOATS),
    Line("igamma", fn("igamma"), igamma_grads, dtypes=FLOATS),
    Line("igammac", fn("igammac"), igamma_grads, dtypes=FLOATS),
    Line("igamma", special("gammainc"), positive_pairs, dtypes=FLOATS),
    Line("igamma", fn("igamma"), positive_pairs, dtypes=FLOATS),
    Line("igamma", meth("igamma"), positive_pairs, dtypes=FLOATS),
    Line("igamma", inplace("igamma"), positive_pairs, dtypes=FLOATS),
    Line("igamma", fn("igamma"), lambda dtype, rng: positive_pairs(dtype, rng)[:3], dtypes=("int64", "bool")),
    Line("igammac", special("gammaincc"), positive_pairs, dtypes=FLOATS),
    Line("igammac", fn("igammac"), positive_pairs, dtypes=FLOATS), Line("igammac", meth("igammac"), positive_pairs),
    Line("igamma", special("gammainc"), igamma_edges, dtypes=("float32", "bfloat16", "float16")),
    Line("igammac", special("gammaincc"), igamma_edges, dtypes=("float32", "bfloat16", "float16")),
    Line("special_zeta", special("zeta"), zeta_pairs, dtypes=F32_64),
    # error functions and the normal distribution
    Line("erf", special("erf"), UNARY_REAL), Line("erf", fn("erf"), UNARY_REAL), Line("erf", meth("erf"), UNARY_REAL),
    Line("erf", inplace("erf"), UNARY_REAL, dtypes=FLOATS), Line("erf", out_call("erf"), UNARY_REAL, dtypes=FLOATS),
    Line("erfc", special("erfc"), UNARY_REAL), Line("erfc", fn("erfc"), UNARY_REAL),
    Line("erfc", meth("erfc"), UNARY_REAL), Line("erfc", inplace("erfc"), UNARY_REAL, dtypes=FLOATS),
    Line("special_erfcx", special("erfcx"), domain(-30, 30, [1e5, -1e5, 1e-30]), dtypes=F32_64),
    Line("erfinv", special("erfinv"), SYMMETRIC_UNIT), Line("erfinv", fn("erfinv"), SYMMETRIC_UNIT),
    Line("erfinv", meth("erfinv"), SYMMETRIC_UNIT), Line("erfinv", inplace("erfinv"), SYMMETRIC_UNIT, dtypes=FLOATS),
    Line("special_ndtr", special("ndtr"), UNARY_REAL),
    Line("special_log_ndtr", special("log_ndtr"), domain(-40, 10, [-1e5, 1e-30]), dtypes=F32_64),
    Line("special_ndtri", special("ndtri"), UNIT, dtypes=F32_64),
    # logarithms, entropy, logit, sinc
    Line("special_entr", special("entr"), domain(-1, 5, [1e-30, 1.0])),
    Line("xlogy", special("xlogy"), xlog_pairs), Line("xlogy", fn("xlogy"), xlog_pairs),
    Line("xlogy", meth("xlogy"), binary), Line("xlogy", inplace("xlogy"), binary, dtypes=FLOATS),
    Line("special_xlog1py", special("xlog1py"), xlog_pairs),
    Line("logit", special("logit"), finite_logits), Line("logit", special("logit"), logits, grad=False),
    Line("logit", fn("logit"), logits), Line("logit", meth("logit"), logits),
    Line("logit", inplace("logit"), logits, dtypes=FLOATS),
    Line("sinc", special("sinc"), UNARY_REAL), Line("sinc", fn("sinc"), domain(-5, 5, [1.0, 2.0, 1e-30])),
    Line("sinc", meth("sinc"), UNARY_REAL), Line("sinc", inplace("sinc"), UNARY_REAL, dtypes=FLOATS),
    # ember-core's ops under their torch.special names
    Line("sigmoid", special("expit"), UNARY_REAL), Line("exp2", special("exp2"), UNARY_REAL),
    Line("expm1", special("expm1"), UNARY_REAL), Line("log1p", special("log1p"), UNARY_REAL),
    Line("round", special("round"), rounds, dtypes=ALL),
    Line("softmax", special("softmax"), softmax_rows, dtypes=FLOATS),
    Line("log_softmax", special("log_softmax"), softmax_rows, dtypes=FLOATS),
    Line("logsumexp", special("logsumexp"), dims, dtypes=("float32", "float64")),
]

# the ctx an engine gives the VJP of ops whose public call form differs from the registry call
CTX = {"polygamma": lambda args, kwargs: ((args[1],), {"n": args[0]}),
       "mvlgamma": lambda args, kwargs: ((args[0],), {"p": args[1]}),
       "logit": lambda args, kwargs: ((args[0],), {"eps": args[1] if len(args) > 1 else kwargs.get("eps")})}
