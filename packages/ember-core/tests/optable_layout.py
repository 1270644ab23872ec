"""Op table lines of layout.py and selection.py: splitting/joining, repeats, diagonals, strided views,
gather/scatter, index_*, masks, take/put, nonzero."""

import numpy as np
from optable import DT, NC, Line, T, fn, meth, shape_of, values


def _i(*v):
    """An int64 index tensor."""
    return T(np.array(v, dtype=np.int64).reshape(np.shape(v)), "int64")


def _ix(arr):
    return T(np.asarray(arr, dtype=np.int64), "int64")


def _mask(rng, shape):
    return T(values("bool", shape, rng), "bool")


def _call(name, *, inplace=False):
    """``args[0].<name>_(...)`` on a clone (in-place forms), else the function."""
    if not inplace:
        return fn(name)

    def call(m, x, *a, **k):
        return getattr(x.clone(), name + "_")(*a, **k)

    return call


def _outs(name):
    """The function writing into ``out=`` (a tensor of a different shape is resized)."""

    def call(m, x, *a, **k):
        out = m.empty(0, dtype=x.dtype)
        getattr(m, name)(x, *a, out=out, **k)
        return out

    return call


def _viewed(name, *args):
    """``x.<name>(*args)`` and a write through the result: the base must see it (a real view)."""

    def call(m, x):
        x = x.clone()
        v = getattr(x, name)(*args)
        v.mul_(2) if not isinstance(v, tuple) else v[0].mul_(2)
        return x

    return call


# ---- samples --------------------------------------------------------------------------------------
def splits(dtype, rng):
    a = values(dtype, (5, 4), rng)
    return [
        ((a, 2), {}),
        ((a, 2, 1), {}),
        ((a, [1, 4]), {}),
        ((a, [1, 1, 2], -1), {}),
        ((a, 0), {}),
        ((a, -1), {}),
        ((a, [1, 1]), {}),
        ((values(dtype, (0, 2), rng), 0), {}),
        ((a, 3), {"dim": 0}),
        ((NC(values(dtype, (4, 5), rng)), 2), {}),
        ((values(dtype, (), rng), 1), {}),
        ((a, 2, 2), {}),
    ]


def split_sizes(dtype, rng):
    a = values(dtype, (5, 4), rng)
    return [((a, [2, 3]), {}), ((a, [1, 0, 3], 1), {}), ((a, [1, 1]), {}), ((a, [6, -1]), {})]


def chunks(dtype, rng):
    a = values(dtype, (5, 4), rng)
    return [
        ((a, 2), {}),
        ((a, 3, 1), {}),
        ((a, 7), {}),
        ((a, 0), {}),
        ((values(dtype, (0,), rng), 3), {}),
        ((values(dtype, (6,), rng), 4), {}),
        ((NC(values(dtype, (4, 5), rng)), 2, -1), {}),
    ]


def tensor_splits(dtype, rng):
    a = values(dtype, (7, 3), rng)
    return [
        ((a, 3), {}),
        ((a, [1, 5]), {}),
        ((a, [5, 2]), {}),
        ((a, [2, 9]), {}),
        ((a, 2, 1), {}),
        ((a, 0), {}),
        ((a, _i(1, 5)), {}),
        ((a, T(np.array(3), "int64")), {}),
        ((a, (3,), -1), {}),
        ((values(dtype, (), rng), 1), {}),
        ((a, T(np.array([1.0]), "float32")), {}),
    ]


def directional(dim):
    def samples(dtype, rng):
        shape = (6,) if dim == 1 else (4, 6) if dim == 0 else (2, 2, 6)
        a = values(dtype, {1: (4, 6), 0: (6, 4), 2: (2, 3, 6)}[dim], rng)
        return [
            ((a, 2), {}),
            ((a, [1, 3]), {}),
            ((a, 4), {}),
            ((values(dtype, shape[:1], rng), 2), {}),
            ((values(dtype, (), rng), 1), {}),
        ]

    return samples


def movedims(dtype, rng):
    a = values(dtype, (2, 3, 4), rng)
    return [
        ((a, 0, 2), {}),
        ((a, (0, 1), (2, 0)), {}),
        ((a, -1, 0), {}),
        ((a, (0, 0), (1, 2)), {}),
        ((a, (0, 1), (1,)), {}),
        ((a, 3, 0), {}),
        ((values(dtype, (), rng), 0, 0), {}),
        ((NC(values(dtype, (4, 3), rng)), 0, 1), {}),
    ]


def unflattens(dtype, rng):
    a = values(dtype, (2, 6), rng)
    return [
        ((a, 1, (2, 3)), {}),
        ((a, -1, (3, -1)), {}),
        ((a, 0, (2, 1)), {}),
        ((a, 1, ()), {}),
        ((a, 1, (4, -1)), {}),
        ((a, 1, (5, 2)), {}),
        ((NC(values(dtype, (6, 2), rng)), 0, (1, 2)), {}),
    ]


def stacks(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [
        (([v(2, 3), v(2, 3)],), {}),
        (([v(3), v(2)],), {}),
        (([v(), v(2)],), {}),
        (([v(2, 3), v(2, 1)],), {}),
        (([v(2, 3), T(values("int64", (2, 3), rng), "int64")],), {}),
        (([v(1, 3), v(2, 3)],), {}),
        (([v(2, 2, 2), v(2, 2, 2)],), {}),
        (([],), {}),
        (([NC(v(3, 2)), v(2, 3)],), {}),
        (([v(2, 3), v(3)],), {}),
    ]


def atleasts(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [
        ((v(),), {}),
        ((v(3),), {}),
        ((v(2, 3),), {}),
        ((v(2, 3, 4),), {}),
        ((v(3), v()), {}),
        (([v(2), v(2, 2)],), {}),
    ]


def broadcasts(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [((v(3, 1), v(4)), {}), ((v(2, 1, 3), v(4, 1), v()), {}), ((v(3), v(4)), {}), ((v(2, 3),), {})]


def grids(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [
        ((v(3), v(2)), {"indexing": "ij"}),
        ((v(3), v(2), v(4)), {"indexing": "xy"}),
        ((v(), v(2)), {"indexing": "ij"}),
        (([v(2), v(3)],), {"indexing": "xy"}),
        ((v(2, 2), v(2)), {"indexing": "ij"}),
        ((v(2), T(values("float64", (2,), rng), "float64")), {"indexing": "ij"}),
        ((v(3), v(2)), {"indexing": "zz"}),
    ]


def products(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [((v(3), v(2)), {}), ((v(3), v(2), v(2)), {}), ((v(3),), {}), ((v(0), v(2)), {}), ((v(2, 2), v(2)), {})]


def combination_samples(dtype, rng):
    a = values(dtype, (4,), rng)
    return [
        ((a,), {}),
        ((a, 3), {}),
        ((a, 2, True), {}),
        ((a, 0), {}),
        ((a, 5), {}),
        ((a, -1), {}),
        ((values(dtype, (2, 2), rng),), {}),
    ]


def blocks(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [
        ((v(2, 2), v(3), v()), {}),
        ((v(1, 3), v(2, 0)), {}),
        ((v(2, 2), T(values("int64", (1,), rng), "int64")), {}),
        ((v(2, 2, 2),), {}),
        ((), {}),
    ]


def rolls(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, 1), {}),
        ((a, -2, 1), {}),
        ((a, (1, 2), (0, 1)), {}),
        ((a, 5), {}),
        ((a, (1, 2)), {}),
        ((a, (1, 2), (0,)), {}),
        ((a, 1, 5), {}),
        ((values(dtype, (), rng), 1), {}),
        ((NC(values(dtype, (4, 3), rng)), 1, 0), {}),
        ((values(dtype, (0, 3), rng), 1, 1), {}),
    ]


def rotations(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    return [
        ((a,), {}),
        ((a, 2), {}),
        ((a, -1, (1, 2)), {}),
        ((a, 3, (2, 0)), {}),
        ((a, 1, (0, 0)), {}),
        ((a, 1, (0, 1, 2)), {}),
        ((values(dtype, (3,), rng),), {}),
        ((NC(values(dtype, (4, 3), rng)), 5), {}),
    ]


def repeats(dtype, rng):
    a = values(dtype, (2, 3), rng)
    return [
        ((a, 2, 1), {}),
        ((a, (1, 2)), {}),
        ((a, 2, 1, 3), {}),
        ((a, 2), {}),
        ((a, 0, 2), {}),
        ((a, -1, 2), {}),
        ((values(dtype, (), rng), 3), {}),
        ((NC(values(dtype, (3, 2), rng)), 2, 2), {}),
    ]


def tiles(dtype, rng):
    a = values(dtype, (2, 3), rng)
    return [
        ((a, (2, 1)), {}),
        ((a, (2,)), {}),
        ((a, (2, 1, 3)), {}),
        ((a, ()), {}),
        ((a, (0, 2)), {}),
        ((a, (-1, 2)), {}),
        ((values(dtype, (), rng), (3,)), {}),
        ((NC(values(dtype, (3, 2), rng)), (2, 2)), {}),
    ]


def interleaves(dtype, rng):
    a = values(dtype, (3, 2), rng)
    return [
        ((a, 2), {}),
        ((a, 2, 0), {}),
        ((a, _i(1, 0, 3), 0), {}),
        ((a, _i(2), 1), {}),
        ((a, _i(1, 2), 0), {}),
        ((a, -1), {}),
        ((a, _i(1, -2, 3), 0), {}),
        ((a, T(np.array([1.0, 2, 3]), "float32"), 0), {}),
        ((a, _i(2, 1), -1), {}),
        ((values(dtype, (), rng), 3), {}),
        ((a, 2, 1), {"output_size": 4}),
    ]


def triangles(dtype, rng):
    a = values(dtype, (4, 5), rng)
    return [
        ((a,), {}),
        ((a, 1), {}),
        ((a, -2), {}),
        ((values(dtype, (2, 3, 3), rng), 0), {}),
        ((a, 9), {}),
        ((values(dtype, (4,), rng),), {}),
        ((NC(values(dtype, (5, 4), rng)),), {}),
        ((values(dtype, (0, 3), rng),), {}),
    ]


def diagonals(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a,), {}),
        ((a, 1), {}),
        ((a, -2), {}),
        ((a, 9), {}),
        ((values(dtype, (2, 3, 4), rng), 0, 2, 1), {}),
        ((values(dtype, (2, 3, 4), rng), -1, -1, 0), {}),
        ((a, 0, 1, 1), {}),
        ((values(dtype, (3,), rng),), {}),
        ((NC(values(dtype, (4, 3), rng)), 1), {}),
    ]


def diags(dtype, rng):
    return [
        ((values(dtype, (3,), rng),), {}),
        ((values(dtype, (3,), rng), 1), {}),
        ((values(dtype, (3, 4), rng),), {}),
        ((values(dtype, (3, 4), rng), -1), {}),
        ((values(dtype, (2, 2, 2), rng),), {}),
        ((values(dtype, (), rng),), {}),
        ((NC(values(dtype, (4, 3), rng)), 2), {}),
    ]


def embeds(dtype, rng):
    return [
        ((values(dtype, (2, 3), rng),), {}),
        ((values(dtype, (2, 3), rng), 1), {}),
        ((values(dtype, (2, 3), rng), -1, 0, 2), {}),
        ((values(dtype, (3,), rng), 0, 0, 0), {}),
        ((NC(values(dtype, (3, 2), rng)), 0, 1, 0), {}),
    ]


def flats(dtype, rng):
    return [
        ((values(dtype, (2, 3), rng),), {}),
        ((values(dtype, (3,), rng), -1), {}),
        ((values(dtype, (), rng), 2), {}),
    ]


def diag_scatters(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, values(dtype, (3,), rng)), {}),
        ((a, values(dtype, (3,), rng), 1), {}),
        ((values(dtype, (2, 3, 4), rng), values(dtype, (4, 2), rng), 0, 0, 1), {}),
        ((a, values(dtype, (2,), rng)), {}),
        ((NC(values(dtype, (4, 3), rng)), values(dtype, (2,), rng), -1), {}),
    ]


def select_scatters(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, values(dtype, (4,), rng), 0, 1), {}),
        ((a, values(dtype, (3,), rng), 1, -1), {}),
        ((a, values(dtype, (3,), rng), 0, 0), {}),
        ((a, values(dtype, (4,), rng), 0, 5), {}),
    ]


def slice_scatters(dtype, rng):
    a = values(dtype, (6, 4), rng)
    return [
        ((a, values(dtype, (2, 4), rng)), {"start": 1, "end": 3}),
        ((a, values(dtype, (6, 2), rng), 1), {"step": 2}),
        ((a, values(dtype, (3, 4), rng)), {"start": 3}),
        ((a, values(dtype, (3, 4), rng)), {"start": 1, "end": 3}),
        ((a, values(dtype, (6, 4), rng)), {}),
    ]


def narrows(dtype, rng):
    a = values(dtype, (4, 5), rng)
    return [((a, 1, 1, 3), {}), ((a, 1, 3, 3), {}), ((NC(values(dtype, (5, 4), rng)), 0, 1, 2), {})]


def stridings(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, (2, 2), (1, 2)), {}),
        ((a, (3, 3), (4, 1), 1), {}),
        ((a, (4,), (3,)), {}),
        ((a, (4, 4), (4, 1)), {}),
        ((a, (2,), (-1,)), {}),
        ((a, (2, 2), (1, 1)), {}),
        ((a, (0, 3), (1, 1)), {}),
    ]


def strided_scatters(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, values(dtype, (2, 2), rng), (2, 2), (1, 2)), {}),
        ((a, values(dtype, (3,), rng), (3,), (5,), 1), {}),
        ((a, values(dtype, (4, 4), rng), (4, 4), (4, 1)), {}),
        ((a, values(dtype, (2,), rng), (3,), (1,)), {}),
    ]


def unfolds(dtype, rng):
    a = values(dtype, (3, 7), rng)
    return [
        ((a, 1, 3, 2), {}),
        ((a, 0, 2, 1), {}),
        ((a, -1, 7, 1), {}),
        ((a, 1, 8, 1), {}),
        ((a, 1, 2, 0), {}),
        ((values(dtype, (), rng), 0, 1, 1), {}),
        ((NC(values(dtype, (7, 3), rng)), 1, 2, 1), {}),
        ((a, 1, 2, 4), {}),
    ]


def pads(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, (1, 2)), {}),
        ((a, (1, -2)), {}),
        ((a, (1, 1, -1, 2)), {"value": 1}),
        ((a, (1, 2, 3)), {}),
        ((a, (1, 1, 1, 1, 1, 1)), {}),
        ((a, (1, -6)), {}),
        ((NC(values(dtype, (4, 3), rng)), (0, 1, 2, 0)), {}),
        ((values(dtype, (0, 2), rng), (1, 1, 1, 1)), {}),
        ((a, ()), {}),
    ]


def fill_diagonals(dtype, rng):
    return [
        ((values(dtype, (3, 3), rng), 1), {}),
        ((values(dtype, (7, 3), rng), 2, True), {}),
        ((values(dtype, (7, 3), rng), 2), {}),
        ((values(dtype, (2, 2, 2), rng), 0), {}),
        ((values(dtype, (2, 3, 2), rng), 0), {}),
        ((values(dtype, (3,), rng), 0), {}),
    ]


def gathers(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [
        ((a, 1, _ix([[0, 0], [3, 1], [2, 2]])), {}),
        ((a, 0, _ix([[2, 0, 1, 1]])), {}),
        ((a, -1, _ix([[0], [3], [1]])), {}),
        ((a, 1, _ix([[0], [4], [1]])), {}),
        ((a, 1, _ix([[0], [-1], [1]])), {}),
        ((a, 1, T(np.array([[0], [2], [1]]), "float32")), {}),
        ((a, 0, _ix([0])), {}),
        ((a, 1, _ix([[0, 1, 2, 3, 0]] * 4)), {}),
        ((values(dtype, (3,), rng), 0, _ix(1)), {}),
        ((values(dtype, (), rng), 0, _ix(0)), {}),
        ((NC(values(dtype, (4, 3), rng)), 0, _ix([[3, 0, 1, 2]])), {}),
        ((a, 1, _ix(np.zeros((3, 0)))), {}),
        ((a, 1, T(np.array([[0], [2], [1]]), "int32")), {}),
    ]


def scatters(kind, grad_safe=False):
    """Scatter samples; ``grad_safe`` leaves out a src larger than the index (torch.autograd refuses it)."""

    def samples(dtype, rng):
        a = values(dtype, (3, 4), rng)
        idx = _ix([[0, 1], [3, 3], [2, 0]])
        src = values(dtype, (3, 2), rng)
        out = [
            ((a, 1, idx, src), {}),
            ((a, 0, _ix([[2, 0, 1, 1]]), values(dtype, (1, 4), rng)), {}),
            ((a, 1, _ix([[4]]), values(dtype, (1, 1), rng)), {}),
            ((a, 1, idx, T(values("float64", (3, 2), rng), "float64")), {}),
            ((a, 1, T(np.array([[0], [1], [2]]), "int32"), values(dtype, (3, 1), rng)), {}),
            ((a, 1, idx, values(dtype, (2, 2), rng)), {}),
            ((a, 1, _ix(np.zeros((3, 0))), values(dtype, (3, 0), rng)), {}),
            ((values(dtype, (), rng), 0, _ix(0), values(dtype, (), rng)), {}),
            ((NC(values(dtype, (4, 3), rng)), 1, idx, src), {}),
            ((a, 2, idx, src), {}),
        ]
        if not grad_safe:
            out.append(((a, 1, idx, values(dtype, (4, 5), rng)), {}))
        if kind == "scatter" and not grad_safe:
            out += [
                ((a, 1, idx), {"value": 1.5}),
                ((a, 1, idx, 2), {}),
                ((a, 1, idx, src), {"reduce": "add"}),
                ((a, 1, idx, src), {"reduce": "multiply"}),
                ((a, 1, idx, 3), {"reduce": "add"}),
                ((a, 1, idx, src), {"reduce": "max"}),
            ]
        return out

    return samples


def scatter_reduces(dtype, rng, grad_safe=False):
    a = values(dtype, (3, 4), rng)
    a[0, 0] = 0
    idx = _ix([[0, 0, 1], [3, 3, 3], [2, 0, 2]])
    src = values(dtype, (3, 3), rng)
    src[1, 0] = src[1, 1] = 0 if dtype != "bool" else src[1, 0]
    out = []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        out += [
            ((a, 1, idx, src, reduce), {}),
            ((a, 1, idx, src, reduce), {"include_self": False}),
            ((a, 0, _ix([[2, 0, 1, 1], [2, 2, 0, 0]]), values(dtype, (2, 4), rng), reduce), {}),
        ]
    ties = np.ones((2, 3)) if dtype != "bool" else np.ones((2, 3), bool)
    out += [] if grad_safe else [((a, 1, idx, src, "max"), {})]
    out += [
        ((a, 1, idx, T(values("float64", (3, 3), rng), "float64"), "sum"), {}),
        ((ties, 1, _ix([[0, 0, 1], [2, 2, 2]]), ties.copy(), "amax"), {}),
        ((ties, 1, _ix([[0, 0, 1], [2, 2, 2]]), ties.copy(), "amin"), {"include_self": False}),
    ]
    return out


def index_selects(dtype, rng):
    a = values(dtype, (4, 3), rng, special=True)
    return [
        ((a, 0, _ix([3, 0, 0])), {}),
        ((a, 1, _ix([2])), {}),
        ((a, -1, _ix([])), {}),
        ((a, 0, _ix([0, 4])), {}),
        ((a, 0, _ix([-1])), {}),
        ((a, 0, _ix([[0, 1]])), {}),
        ((a, 0, T(np.array([1, 2]), "int32")), {}),
        ((a, 0, T(np.array([1.0]), "float32")), {}),
        ((values(dtype, (), rng), 0, _ix([0])), {}),
        ((NC(values(dtype, (3, 4), rng)), 1, _ix([1, 1])), {}),
        ((a, 0, _ix(2)), {}),
    ]


def index_sources(kind):
    def samples(dtype, rng):
        a = values(dtype, (4, 3), rng)
        a[0, 0] = 0
        s = values(dtype, (3, 3), rng)
        out = [
            ((a, 0, _ix([0, 2, 0]), s), {}),
            ((a, 1, _ix([2, 1]), values(dtype, (4, 2), rng)), {}),
            ((a, 0, _ix([0, 4, 0]), s), {}),
            ((a, 0, _ix([0, 1]), s), {}),
            ((a, 0, _ix([0, 1, 2]), values(dtype, (3, 2), rng)), {}),
            ((a, 0, _ix([0, 1, 2]), T(values("float64", (3, 3), rng), "float64")), {}),
            ((NC(values(dtype, (3, 4), rng)), 1, _ix([3, 0, 3]), s), {}),
            ((a, 0, _ix([]), values(dtype, (0, 3), rng)), {}),
        ]
        if kind == "index_add":
            out += [((a, 0, _ix([0, 2, 0]), s), {"alpha": 2})]
        if kind == "index_reduce":
            out = [(args + (r,), kw) for args, kw in out for r in ("prod", "mean", "amax", "amin")]
            out += [((a, 0, _ix([0, 2, 0]), s, r), {"include_self": False}) for r in ("prod", "mean", "amax", "amin")]
            out += [((a, 0, _ix([0]), values(dtype, (1, 3), rng), "sum"), {})]
        return out

    return samples


def index_fills(dtype, rng):
    a = values(dtype, (4, 3), rng)
    return [
        ((a, 0, _ix([0, 2]), 1.5), {}),
        ((a, 1, _ix([2, 2]), -1), {}),
        ((a, 0, _ix([5]), 0), {}),
        ((a, 0, _ix([1]), T(np.array(2.0), "float64")), {}),
        ((a, 0, _ix([1]), T(np.array([2.0]), "float64")), {}),
        ((NC(values(dtype, (3, 4), rng)), 0, _ix([0]), 3), {}),
    ]


def index_puts(dtype, rng):
    a = values(dtype, (4, 3), rng)
    m = _mask(rng, (4, 3))
    return [
        ((a, (_ix([0, 2]),), values(dtype, (2, 3), rng)), {}),
        ((a, (_ix([0, 0, 1]), _ix([1, 1, 2])), values(dtype, (3,), rng)), {}),
        ((a, (_ix([0, 0, 1]), _ix([1, 1, 2])), values(dtype, (3,), rng), True), {}),
        ((a, (_ix([3, 3]),), values(dtype, (3,), rng), True), {}),
        ((a, (_ix([0, 1]),), values(dtype, (), rng)), {}),
        ((a, (m,), values(dtype, (), rng)), {}),
        ((a, (_ix([5]),), values(dtype, (3,), rng)), {}),
        ((a, (_ix([0]),), T(values("float64", (3,), rng), "float64")), {}),
        ((a, (_ix([0, 1]),), values(dtype, (3, 3), rng)), {}),
        ((a, (_ix([-1, 0]), _ix([2, -3])), values(dtype, (2,), rng)), {"accumulate": True}),
        ((NC(values(dtype, (3, 4), rng)), (_ix([1]), _ix([1])), values(dtype, (1,), rng), True), {}),
    ]


def takes(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, _ix([0, 11, -1, 5])), {}),
        ((a, _ix([[1, 1], [2, 3]])), {}),
        ((a, _ix([12])), {}),
        ((a, _ix([-13])), {}),
        ((a, T(np.array([1]), "int32")), {}),
        ((values(dtype, (), rng), _ix([0, 0])), {}),
        ((NC(values(dtype, (4, 3), rng)), _ix([1, 5])), {}),
        ((a, _ix(3)), {}),
        ((values(dtype, (0,), rng), _ix([])), {}),
    ]


def puts(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, _ix([0, 11, -1]), values(dtype, (3,), rng)), {}),
        ((a, _ix([1, 1, 2]), values(dtype, (3,), rng), True), {}),
        ((a, _ix([[1, 1], [2, 3]]), values(dtype, (4,), rng)), {"accumulate": True}),
        ((a, _ix([12]), values(dtype, (1,), rng)), {}),
        ((a, _ix([1, 2]), values(dtype, (3,), rng)), {}),
        ((a, _ix([1]), T(values("float64", (1,), rng), "float64")), {}),
        ((NC(values(dtype, (4, 3), rng)), _ix([1, 5]), values(dtype, (2,), rng)), {}),
    ]


def takes_along(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, _ix([[0, 1], [3, 3], [2, 0]]), 1), {}),
        ((a, _ix([[0, 1, 2, 0]]), 0), {}),
        ((a, _ix([[1], [0], [2]]), -1), {}),
        ((a, _ix([5, 0, -1])), {}),
        ((a, _ix([[0], [1]]), 1), {}),
        ((a, _ix([[0, 1]]), 0), {}),
        ((a, _ix([0, 1]), 0), {}),
        ((a, T(np.array([[0]]), "int32"), 0), {}),
        ((NC(values(dtype, (4, 3), rng)), _ix([[2, 1, 0]]), 0), {}),
    ]


def mask_fills(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [
        ((a, _mask(rng, (3, 4)), 1.5), {}),
        ((a, _mask(rng, (4,)), -2), {}),
        ((a, _mask(rng, (2, 1, 4)), 0), {}),
        ((a, _mask(rng, (3, 4)), T(np.array(2.5), "float64")), {}),
        ((a, _mask(rng, (3, 4)), T(np.array([1.0]), "float64")), {}),
        ((a, T(values("int64", (3, 4), rng), "int64"), 1), {}),
        ((a, _mask(rng, (5,)), 1), {}),
        ((a, _mask(rng, (3, 4)), True), {}),
        ((NC(values(dtype, (4, 3), rng)), _mask(rng, (3,)), 7), {}),
        ((values(dtype, (), rng), _mask(rng, ()), 1), {}),
    ]


def mask_selects(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [
        ((a, _mask(rng, (3, 4))), {}),
        ((a, _mask(rng, (4,))), {}),
        ((a, _mask(rng, (2, 1, 4))), {}),
        ((values(dtype, (4,), rng), _mask(rng, (3, 4))), {}),
        ((a, T(values("int64", (3, 4), rng), "int64")), {}),
        ((a, _mask(rng, (5,))), {}),
        ((NC(values(dtype, (4, 3), rng)), _mask(rng, (3,))), {}),
        ((values(dtype, (), rng), _mask(rng, ())), {}),
    ]


def mask_scatters(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a, _mask(rng, (3, 4)), values(dtype, (12,), rng)), {}),
        ((a, _mask(rng, (4,)), values(dtype, (4, 4), rng)), {}),
        ((a, _mask(rng, (2, 1, 4)), values(dtype, (30,), rng)), {}),
        ((a, T(np.ones((3, 4), bool), "bool"), values(dtype, (5,), rng)), {}),
        ((a, _mask(rng, (3, 4)), T(values("float64", (12,), rng), "float64")), {}),
        ((a, T(values("int64", (3, 4), rng), "int64"), values(dtype, (12,), rng)), {}),
        ((NC(values(dtype, (4, 3), rng)), _mask(rng, (3,)), values(dtype, (12,), rng)), {}),
    ]


def nonzeros(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a,), {}),
        ((a,), {"as_tuple": True}),
        ((values(dtype, (), rng),), {}),
        ((values(dtype, (), rng),), {"as_tuple": True}),
        ((values(dtype, (0, 3), rng),), {}),
        ((NC(values(dtype, (4, 3), rng)),), {}),
        ((values(dtype, (2, 3, 2), rng),), {"as_tuple": True}),
    ]


def nonzero_statics(dtype, rng):
    a = values(dtype, (3, 4), rng)
    return [
        ((a,), {"size": 3}),
        ((a,), {"size": 20}),
        ((a,), {"size": 20, "fill_value": 7}),
        ((a,), {"size": 0}),
        ((values(dtype, (), rng),), {"size": 2}),
    ]


def unravels(dtype, rng):
    return [
        ((_ix([0, 5, 11]), (3, 4)), {}),
        ((_ix([[1, 7]]), (2, 2, 2)), {}),
        ((_ix([12]), (3, 4)), {}),
        ((_ix([-1]), (3, 4)), {}),
        ((_ix(4), (3, 4)), {}),
        ((T(np.array([1.0]), "float32"), (3, 4)), {}),
        ((_ix([0]), (3, -4)), {}),
    ]


def _inplace_views(name, *args):
    def call(m, x):
        x = x.clone()
        r = getattr(x, name)(*args)
        assert r is x
        return x

    return call


def _resized(*shape):
    def call(m, x):
        x = x.clone()
        x.resize_(*shape)
        return x[(slice(0, 2),) * x.dim()] if x.numel() <= 6 else x.reshape(-1)[:6]

    return call


def _factory(name, *args, **kwargs):
    def call(m, x):
        return getattr(m, name)(*args, **{k: getattr(m, v.name) if isinstance(v, DT) else v for k, v in kwargs.items()})

    call.direct = False
    return call


LINES = [
    # splitting
    Line("split", fn("split"), splits),
    Line("split_with_sizes", fn("split_with_sizes"), split_sizes),
    Line("chunk", fn("chunk"), chunks),
    Line("tensor_split", fn("tensor_split"), tensor_splits),
    Line("hsplit", fn("hsplit"), directional(1)),
    Line("vsplit", fn("vsplit"), directional(0)),
    Line("dsplit", fn("dsplit"), directional(2)),
    Line("unsafe_split", fn("unsafe_split"), splits),
    Line("unsafe_chunk", fn("unsafe_chunk"), chunks),
    Line("unsafe_split_with_sizes", fn("unsafe_split_with_sizes"), split_sizes),
    Line("split", _viewed("split", 2), shape_of(((4, 3), (), {})), grad=False),
    # dims
    Line("movedim", fn("movedim"), movedims),
    Line("moveaxis", fn("moveaxis"), movedims),
    Line("unflatten", fn("unflatten"), unflattens),
    Line(
        "ravel",
        fn("ravel"),
        lambda d, r: [((values(d, (2, 3), r),), {}), ((values(d, (), r),), {}), ((NC(values(d, (3, 2), r)),), {})],
    ),
    # joining
    Line("hstack", fn("hstack"), stacks),
    Line("vstack", fn("vstack"), stacks),
    Line("row_stack", fn("row_stack"), stacks),
    Line("dstack", fn("dstack"), stacks),
    Line("column_stack", fn("column_stack"), stacks),
    Line("atleast_1d", fn("atleast_1d"), atleasts),
    Line("atleast_2d", fn("atleast_2d"), atleasts),
    Line("atleast_3d", fn("atleast_3d"), atleasts),
    Line("broadcast_tensors", fn("broadcast_tensors"), broadcasts),
    Line("meshgrid", fn("meshgrid"), grids),
    Line("cartesian_prod", fn("cartesian_prod"), products),
    Line("combinations", fn("combinations"), combination_samples),
    Line("block_diag", fn("block_diag"), blocks),
    # flips, rolls, repeats
    Line(
        "flipud",
        fn("flipud"),
        lambda d, r: [((values(d, (3, 2), r),), {}), ((values(d, (), r),), {}), ((NC(values(d, (3, 2), r)),), {})],
    ),
    Line(
        "fliplr",
        fn("fliplr"),
        lambda d, r: [((values(d, (3, 2), r),), {}), ((values(d, (3,), r),), {}), ((NC(values(d, (3, 2), r)),), {})],
    ),
    Line("roll", fn("roll"), rolls),
    Line("rot90", fn("rot90"), rotations),
    Line("repeat", meth("repeat"), repeats),
    Line("tile", fn("tile"), tiles),
    Line("repeat_interleave", fn("repeat_interleave"), interleaves),
    Line(
        "repeat_interleave",
        fn("repeat_interleave"),
        lambda d, r: [((_ix([1, 0, 3]),), {}), ((_ix([[1]]),), {}), ((_ix([1, -1]),), {}), ((_ix([]),), {})],
        dtypes=("int64",),
        grad=False,
    ),
    # triangles and diagonals
    Line("tril", fn("tril"), triangles),
    Line("triu", fn("triu"), triangles),
    Line("tril", _call("tril", inplace=True), triangles, grad=False),
    Line("triu", _outs("triu"), triangles, grad=False),
    Line("tril_indices", _factory("tril_indices", 3, 4), shape_of(((), (), {})), dtypes=("int64",)),
    Line(
        "tril_indices", _factory("tril_indices", 4, 3, -1, dtype=DT("int32")), shape_of(((), (), {})), dtypes=("int64",)
    ),
    Line("triu_indices", _factory("triu_indices", 3, 4, 1), shape_of(((), (), {})), dtypes=("int64",)),
    Line("triu_indices", _factory("triu_indices", 0, 0), shape_of(((), (), {})), dtypes=("int64",)),
    Line("diagonal", fn("diagonal"), diagonals),
    Line("diagonal", _viewed("diagonal"), shape_of(((3, 3), (), {})), grad=False),
    Line("diag", fn("diag"), diags),
    Line("diag_embed", fn("diag_embed"), embeds),
    Line("diagflat", fn("diagflat"), flats),
    Line("diagonal_scatter", fn("diagonal_scatter"), diag_scatters),
    Line("select_scatter", fn("select_scatter"), select_scatters),
    Line("slice_scatter", fn("slice_scatter"), slice_scatters),
    Line("narrow_copy", fn("narrow_copy"), narrows),  # torch's backward fails for a negative start
    Line("narrow_copy", fn("narrow_copy"), shape_of(((4, 5), (0, -2, 2), {})), grad=False),
    Line("fill_diagonal_", lambda m, x, *a: x.clone().fill_diagonal_(*a), fill_diagonals),
    # strided views and padding
    Line("as_strided", fn("as_strided"), stridings),
    Line("as_strided_scatter", fn("as_strided_scatter"), strided_scatters, grad=False),
    Line("as_strided", _viewed("as_strided", (2,), (5,)), shape_of(((3, 4), (), {})), grad=False),
    Line("unfold", meth("unfold"), unfolds),
    Line("unfold", _viewed("unfold", 1, 2, 2), shape_of(((3, 4), (), {})), grad=False),
    Line("constant_pad_nd", fn("constant_pad_nd"), pads),
    Line("squeeze_", _inplace_views("squeeze_"), shape_of(((1, 3, 1), (), {})), grad=False),
    Line("squeeze_", _inplace_views("squeeze_", 0), shape_of(((1, 3, 1), (), {})), grad=False),
    Line("unsqueeze_", _inplace_views("unsqueeze_", -1), shape_of(((2, 3), (), {})), grad=False),
    Line("t_", _inplace_views("t_"), shape_of(((2, 3), (), {}), ((2, 3, 4), (), {})), grad=False),
    Line("transpose_", _inplace_views("transpose_", 0, 2), shape_of(((2, 3, 4), (), {})), grad=False),
    Line("swapaxes_", _inplace_views("swapaxes_", 0, 1), shape_of(((2, 3), (), {})), grad=False),
    Line("swapdims_", _inplace_views("swapdims_", 1, 0), shape_of(((2, 3), (), {})), grad=False),
    Line("resize_", _resized(2, 3), shape_of(((3, 4), (), {})), grad=False),
    Line("resize_", _resized(2, 2), shape_of(((2, 3), (), {}), ((3, 1), (), {})), grad=False, values=False),
    Line(
        "resize_as_",
        lambda m, x, o: x.clone().resize_as_(o),
        lambda d, r: [((values(d, (3, 4), r), values(d, (2, 6), r)), {})],
        grad=False,
    ),
    Line("as_strided_", _inplace_views("as_strided_", (2, 2), (1, 2)), shape_of(((3, 4), (), {})), grad=False),
    # the function forms, on a clone
    Line("as_strided_", lambda m, x, *a: m.as_strided_(x.clone(), *a),
         shape_of(((3, 4), ((2, 2), (1, 2)), {}), ((3, 4), ((3,), (4,), 1), {}), ((2, 3), ((2, 2), (1, 2), 9), {})),
         grad=False),
    Line("resize_as_", lambda m, x, o: m.resize_as_(x.clone(), o),
         shape_of(((3, 4), (np.zeros((2, 6)),), {}), ((3, 4), (np.zeros(2),), {})),
         grad=False),
    Line("resize", lambda m, x: x.resize(4, 3), shape_of(((3, 4), (), {}), ((2, 3), (), {})), grad=False),
    Line("resize_as", lambda m, x: x.resize_as(x.t()), shape_of(((3, 4), (), {})), grad=False),
    Line(
        "new_empty_strided",
        lambda m, x: x.new_empty_strided((2, 3), (1, 2)),
        shape_of(((3,), (), {})),
        grad=False,
        values=False,
        exempt={"dtype": "new_* methods' dtype= is the factories' (test_ops.py's FACTORIES)"},
    ),
    Line("unravel_index", fn("unravel_index"), unravels, dtypes=("int64",)),
    Line(
        "empty_strided",
        _factory("empty_strided", (2, 3), (1, 2)),
        shape_of(((), (), {})),
        dtypes=("int64",),
        values=False,
    ),
    Line(
        "empty_strided",
        _factory("empty_strided", (2, 0), (0, 1), dtype=DT("int64")),
        shape_of(((), (), {})),
        dtypes=("int64",),
        values=False,
    ),
    Line("scalar_tensor", _factory("scalar_tensor", 2), shape_of(((), (), {})), dtypes=("int64",)),
    Line(
        "scalar_tensor", _factory("scalar_tensor", 1.5, dtype=DT("float16")), shape_of(((), (), {})), dtypes=("int64",)
    ),
    # selection
    Line("gather", fn("gather"), gathers,
         exempt={"sparse_grad": "the layout of the gradient: autograd's, not the forward's"}),
    Line("scatter", fn("scatter"), scatters("scatter", True)),
    Line("scatter", fn("scatter"), scatters("scatter"), grad=False),
    Line("scatter_add", fn("scatter_add"), scatters("scatter_add"), grad=False),
    Line("scatter", _call("scatter", inplace=True), scatters("scatter"), grad=False),
    Line("scatter_add", fn("scatter_add"), scatters("scatter_add", True)),
    Line("scatter_add", _call("scatter_add", inplace=True), scatters("scatter_add"), grad=False),
    Line("scatter_reduce", fn("scatter_reduce"), lambda d, r: scatter_reduces(d, r, True)),
    Line("scatter_reduce", fn("scatter_reduce"), scatter_reduces, grad=False),
    Line("index_select", fn("index_select"), index_selects),
    Line("index_add", fn("index_add"), index_sources("index_add")),
    Line("index_add", _call("index_add", inplace=True), index_sources("index_add"), grad=False),
    Line("index_copy", fn("index_copy"), index_sources("index_copy")),
    Line("index_reduce", fn("index_reduce"), index_sources("index_reduce")),
    Line("index_fill", fn("index_fill"), index_fills),
    Line("index_fill", _call("index_fill", inplace=True), index_fills),
    Line("index_put", fn("index_put"), index_puts),
    Line("index_put", _call("index_put", inplace=True), index_puts),
    Line("take", fn("take"), takes),
    Line("put", fn("put"), puts),
    Line("put", _call("put", inplace=True), puts, grad=False),
    Line("take_along_dim", fn("take_along_dim"), takes_along),
    Line("masked_fill", fn("masked_fill"), mask_fills),
    Line("masked_fill", _call("masked_fill", inplace=True), mask_fills, grad=False),
    Line("masked_select", fn("masked_select"), mask_selects),
    Line("masked_scatter", fn("masked_scatter"), mask_scatters),
    Line("nonzero", fn("nonzero"), nonzeros),
    Line("argwhere", fn("argwhere"), nonzeros),
    Line("nonzero_static", fn("nonzero_static"), nonzero_statics),
]
