"""Op table lines of the random ops: their values cannot equal PyTorch's, so every line compares dtype,
shape and exception type only (``values=False``). Each call draws from a freshly seeded generator of its
own library, so a sample always takes the same path."""
import numpy as np
from optable import ALL, DT, FLOATS, NC, Line, T, values

RANDOM = ("float32", "float64", "int64", "bool")  # the halves follow float32's paths


def seeded(name, clone=False):
    """``lib.name(*args)`` (or, with ``clone``, the method ``name`` of a clone of the first argument, so the
    sample is not changed) with ``generator=`` a new generator seeded with 0."""
    def call(m, *a, **k):
        g = m.Generator().manual_seed(0)
        if clone:
            return getattr(a[0].clone(), name)(*a[1:], generator=g, **k)
        return getattr(m, name)(*a, generator=g, **k)
    call.direct = not clone  # the arguments reach the op unchanged: its VJP can be checked
    return call


def probabilities(dtype, shape, rng):
    """Values in [0, 1] of ``dtype`` (0/1 for integers and bool)."""
    p = rng.random(shape)
    return T(p > 0.5, dtype) if dtype in ("int64", "bool") else np.asarray(p)


# ---- creation functions ----------------------------------------------------------------------------
def sizes(dtype, rng):
    return [((2, 3), {}), (((2, 3),), {}), (([4],), {}), (((),), {}), ((0, 3), {}), ((2,), {"dtype": DT(dtype)}),
            ((2, 2), {"dtype": DT("float16")}), ((-1, 2), {}), ((2.5,), {})]


def likes(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x,), {}), ((values(dtype, (), rng),), {}), ((values(dtype, (0, 2), rng),), {}), ((NC(x.T),), {}),
            ((x,), {"dtype": DT("float64")}), ((x,), {"dtype": DT("int64")}), ((x,), {"dtype": DT("bool")})]


def randints(dtype, rng):
    return [((10, (3, 4)), {}), ((-5, 5, (6,)), {}), ((3, ()), {}), ((0, 2, (0, 3)), {}),
            ((0, 5, (4,)), {"dtype": DT(dtype)}), ((10, (2,)), {"dtype": DT("float16")}),
            ((5, 3, (2,)), {}), ((0, (2,)), {}), ((0, 300, (2,)), {"dtype": DT("uint8")}), ((1, (-1,)), {})]


def randint_likes(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x, 10), {}), ((x, -3, 3), {}), ((values(dtype, (), rng), 4), {}), ((NC(x.T), 2), {}),
            ((x, 5), {"dtype": DT("float64")}), ((x, 4, 2), {})]


def randperms(dtype, rng):
    return [((5,), {}), ((0,), {}), ((1,), {}), ((6,), {"dtype": DT(dtype)}), ((300,), {"dtype": DT("int8")}),
            ((-1,), {})]


def normals(dtype, rng):
    """``normal`` with numbers and a size (the tensor forms are ``_normal_tensors``'s)."""
    return [((0.0, 1.0, (3, 4)), {}), ((2.0, 0.5, ()), {}), ((0.0, 1.0, (0,)), {}),
            ((1.0, 2.0, (2,)), {"dtype": DT(dtype)}), ((0.0, -1.0, (2,)), {})]


def normal_tensors(dtype, rng):
    m, s = values(dtype, (3, 4), rng), np.abs(values(dtype, (4,), rng))
    return [((m, 1.0), {}), ((m, s), {}), ((0.5, s), {}), ((values(dtype, (), rng), s), {}), ((NC(m.T), 2.0), {}),
            ((values(dtype, (0, 4), rng), s), {}), ((m, -s), {}), ((m, values(dtype, (5,), rng)), {})]


# ---- ops on tensors ----------------------------------------------------------------------------------
def bernoullis(dtype, rng):
    p = probabilities(dtype, (3, 4), rng)
    return [((p,), {}), ((probabilities(dtype, (), rng),), {}), ((probabilities(dtype, (0, 2), rng),), {}),
            ((values(dtype, (3, 4), rng), 0.3), {}), ((values(dtype, (2,), rng), 1.5), {}),
            ((np.full((2, 2), 1.5),), {}), ((np.array([0.5, -0.1]),), {})]


def multinomials(dtype, rng):
    w = rng.random((3, 5)) + 0.1
    if dtype in ("int64", "bool"):
        return [((T(w > 0.5, dtype), 2), {})]
    negative = w.copy()
    negative[1, 2] = -0.5
    return [((w, 3), {}), ((w, 8, True), {}), ((w[0], 5), {}), ((w[0], 2), {"replacement": True}),
            ((np.zeros((0, 4)), 2), {}), ((w, 6), {}), ((w, 0), {}), ((negative, 2), {}),
            ((np.zeros((2, 3)), 1), {}), ((np.full((2, 3), np.nan), 1), {}), ((rng.random((2, 3, 4)), 1), {}),
            ((np.ones(()), 1), {})]


def poissons(dtype, rng):
    rate = np.abs(values(dtype, (3, 4), rng))
    return [((rate,), {}), ((np.array(2.5),), {}), ((np.zeros((0, 2)),), {}), ((NC(rate.T),), {}),
            ((-rate,), {})]


def fills(*extra):
    """A float tensor (and others of each dtype) for an in-place sampler, with ``extra`` argument sets."""
    def samples(dtype, rng):
        x = values(dtype, (3, 4), rng)
        return [((x,) + args, kwargs) for args, kwargs in extra] + [
            ((values(dtype, (), rng),), {}), ((values(dtype, (0, 3), rng),), {}), ((NC(x.T),), {})]
    return samples


def geometric_fills(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x, 0.3), {}), ((values(dtype, (), rng), 0.9), {}), ((x, 0.0), {}), ((x, 1.2), {}), ((NC(x.T), 0.5), {})]


def bernoulli_fills(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x,), {}), ((x, 0.2), {}), ((x, T(rng.random(4), "float64")), {}), ((x, 1.5), {}),
            ((x, T(np.array([0.5, -0.5, 0.1, 0.2]), "float64")), {}), ((x, T(rng.random(5), "float64")), {}),
            ((x, T(rng.random(4) > 0.5, "int64")), {}), ((NC(x.T), 0.5), {})]


def random_fills(dtype, rng):
    x = values(dtype, (3, 4), rng)
    return [((x,), {}), ((x, 10), {}), ((x, -3, 7), {}), ((x,), {"to": 4}), ((x, 5, 3), {}), ((NC(x.T), 2), {}),
            ((values(dtype, (0,), rng), 3), {})]


LINES = [
    Line("rand", seeded("rand"), sizes, dtypes=RANDOM, grad=False, values=False),
    Line("randn", seeded("randn"), sizes, dtypes=RANDOM, grad=False, values=False),
    Line("rand_like", seeded("rand_like"), likes, dtypes=ALL, grad=False, values=False),
    Line("randn_like", seeded("randn_like"), likes, dtypes=ALL, grad=False, values=False),
    Line("randint", seeded("randint"), randints, dtypes=RANDOM, grad=False, values=False),
    Line("randint_like", seeded("randint_like"), randint_likes, dtypes=RANDOM, grad=False, values=False),
    Line("randperm", seeded("randperm"), randperms, dtypes=RANDOM, grad=False, values=False),
    Line("normal", seeded("normal"), normals, dtypes=RANDOM, grad=False, values=False),
    # the tensor forms of normal: their gradients are zeros, as PyTorch's
    Line("_normal_tensors", seeded("normal"), normal_tensors, dtypes=FLOATS + ("int64",), values=False),
    # PyTorch has no derivative of bernoulli(input) (it raises in backward): no VJP check
    Line("bernoulli", seeded("bernoulli"), bernoullis, dtypes=ALL, grad=False, values=False),
    Line("multinomial", seeded("multinomial"), multinomials, dtypes=RANDOM, grad=False, values=False),
    Line("poisson", seeded("poisson"), poissons, dtypes=FLOATS + ("int64",), values=False),
    Line("uniform_", seeded("uniform_", clone=True), fills(((), {}), ((-2, 3), {}), ((), {"to": 5.0}), ((3, 1), {})),
         dtypes=ALL, values=False),
    Line("normal_", seeded("normal_", clone=True), fills(((), {}), ((1.0, 2.0), {}), ((0.0, -1.0), {})), dtypes=ALL,
         values=False),
    Line("exponential_", seeded("exponential_", clone=True), fills(((), {}), ((2.5,), {}), ((0.0,), {})),
         dtypes=ALL, values=False),
    Line("log_normal_", seeded("log_normal_", clone=True), fills(((), {}), ((0.0, 0.5), {}), ((1.0, -2.0), {})),
         dtypes=ALL, values=False),
    Line("cauchy_", seeded("cauchy_", clone=True), fills(((), {}), ((1.0, 3.0), {}), ((0.0, 0.0), {})),
         dtypes=ALL, values=False),
    Line("geometric_", seeded("geometric_", clone=True), geometric_fills, dtypes=ALL, values=False),
    Line("bernoulli_", seeded("bernoulli_", clone=True), bernoulli_fills, dtypes=ALL, values=False),
    Line("random_", seeded("random_", clone=True), random_fills, dtypes=ALL, values=False),
]
