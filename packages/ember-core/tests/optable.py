"""The op test table: one line per op, run against PyTorch 2.13 on the CPU.

A line names the op, how to call it (``call(lib, *args)`` where ``lib`` is ``ember`` or ``torch``)
and which sample arguments to use. Samples are built from NumPy values per dtype and converted to
each library by ``convert``; markers wrap what needs more than a plain array (a dtype, a
non-contiguous tensor, a list of tensors).
"""
import numpy as np
import pytest
import torch

import ember

# tests that run backward through the engine: skipped where ember-autograd is absent (the root conftest); ember-core's
# nox session runs them after installing it
needs_autograd = pytest.mark.autograd
# lines whose ember side calls ember.nn.functional: run at the end of ember-core's session with ember-nn installed
needs_nn = pytest.mark.nn

FLOATS = ("float32", "float64", "bfloat16", "float16")
ALL = FLOATS + ("int64", "bool")
NUMERIC = FLOATS + ("int64",)


class DT:
    """A dtype argument, by name."""

    def __init__(self, name):
        self.name = name


class NC:
    """A non-contiguous tensor holding ``arr`` (made by transposing a contiguous one)."""

    def __init__(self, arr):
        self.arr = arr


class T:
    """A tensor of an explicit dtype (the sample's own dtype is the default)."""

    def __init__(self, arr, dtype):
        self.arr, self.dtype = arr, dtype


class Out:
    """An empty tensor of ``dtype`` to pass as ``out=`` (the op resizes it)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"Out({self.dtype})"


def values(dtype, shape, rng, special=False):
    """Sample values of ``dtype`` (as the float64/int64/bool NumPy array they are made from)."""
    n = int(np.prod(shape))
    if dtype == "bool":
        return np.asarray(rng.random(n).reshape(shape) > 0.5)
    if dtype == "int64":
        return np.asarray(rng.integers(-5, 6, n).reshape(shape))
    v = rng.standard_normal(n) * 3
    if special and n >= 4:
        v[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return np.asarray(v.reshape(shape))


def tensor(lib, arr, dtype):
    dt = getattr(lib, dtype)
    if lib is torch:
        # a copy (in-place torch ops must not touch the sample); empty ones with torch's strides, not NumPy's zeros
        a = np.array(arr, order="C")
        return torch.from_numpy(a).to(dt) if a.size else torch.empty(a.shape, dtype=dt)
    # ember builds bfloat16/float16 from the same float64 values, rounding as torch does
    return ember.tensor(np.array(arr, order="C")).to(dt)


def convert(lib, x, dtype):
    if isinstance(x, np.ndarray):
        return tensor(lib, x, dtype)
    if isinstance(x, T):
        return tensor(lib, x.arr, x.dtype)
    if isinstance(x, NC):
        t = tensor(lib, np.ascontiguousarray(np.swapaxes(x.arr, -1, -2)), dtype)
        return t.transpose(-1, -2)
    if isinstance(x, DT):
        return getattr(lib, x.name)
    if isinstance(x, Out):
        return lib.empty(0, dtype=getattr(lib, x.dtype))
    if isinstance(x, list):
        return [convert(lib, v, dtype) for v in x]
    if isinstance(x, tuple):
        return tuple(convert(lib, v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: convert(lib, v, dtype) for k, v in x.items()}
    return x


class Line:
    """One op's line: ``call(lib, *args, **kwargs)`` over ``samples(dtype, rng)`` for ``dtypes``.

    ``grad``: also check the op's VJP against torch.autograd on the float64 samples (only for
    lines whose ``call`` passes its arguments straight to the op, as ``fn``/``meth`` do).
    ``values=False``: compare dtype, shape and errors only (random ops, uninitialised memory).
    ``limits``: the op's mathematical values at +inf and -inf of its first argument (``{inf: .., -inf: ..}``),
    compared there instead of torch's, whose results at infinities depend on the CPU's kernel path or are NaN
    where the limit exists (``tools/edge_audit.py`` finds the former).
    ``exempt``: ``{parameter: reason}`` for optional parameters of the PyTorch function the line calls that no line
    exercises (``test_optable_coverage.py``; the reasons are listed in docs/ops.md). A dict literal, as the docs
    read it from the source. ``marks``: pytest marks of the line's cases (``needs_nn``). ``contiguous=False``: the
    results need not be contiguous where PyTorch's are (internal results in the layout their backward reads).
    """

    def __init__(self, name, call, samples, dtypes=ALL, grad=None, values=True, limits=None, exempt=None, marks=(),
                 contiguous=True):
        self.name, self.call, self.samples, self.dtypes, self.values = name, call, samples, dtypes, values
        self.limits, self.exempt, self.marks, self.contiguous = limits, exempt or {}, marks, contiguous
        self.grad = getattr(call, "direct", False) if grad is None else grad


# ---- sample sets -----------------------------------------------------------------------------
def unary(dtype, rng):
    return [((values(dtype, (3, 4), rng, special=True),), {}),
            ((values(dtype, (), rng),), {}),
            ((values(dtype, (0, 3), rng),), {}),
            ((NC(values(dtype, (4, 3), rng)),), {})]


def binary(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a, values(dtype, (3, 4), rng)), {}),
            ((a, values(dtype, (4,), rng)), {}),                     # broadcast
            ((values(dtype, (2, 1, 4), rng), values(dtype, (3, 1), rng)), {}),
            ((a, values(dtype, (), rng)), {}),                       # zero-dim operand
            ((values(dtype, (), rng), values(dtype, (), rng)), {}),
            ((values(dtype, (0, 4), rng), values(dtype, (4,), rng)), {}),
            ((NC(values(dtype, (4, 3), rng)), values(dtype, (3,), rng)), {}),
            ((a, 2), {}), ((a, 2.5), {}), ((a, True), {}),          # Python scalars
            ((a, T(values("int64", (4,), rng), "int64")), {}),       # mixed dtypes promote
            ((a, T(values("float64", (), rng), "float64")), {}),
            ((a, values(dtype, (3, 5), rng)), {})]                   # not broadcastable: error


def reduction(dtype, rng):
    a = values(dtype, (3, 4, 2), rng)
    return [((a,), {}), ((a, 1), {}), ((a, (0, 2)), {"keepdim": True}), ((a, -1), {}),
            ((values(dtype, (0, 3), rng), 0), {}), ((values(dtype, (), rng),), {}), ((a, 3), {}),
            ((a, (0, 0)), {}), ((a,), {"dtype": DT("float64")}), ((NC(values(dtype, (4, 3), rng)), 0), {})]


def shape_of(*shapes_and_args):
    def samples(dtype, rng):
        out = []
        for shape, args, kwargs in shapes_and_args:
            out.append(((values(dtype, shape, rng),) + args, kwargs))
        return out
    return samples


def joining(dtype, rng):
    a, b = values(dtype, (2, 3), rng), values(dtype, (2, 3), rng)
    return [(([a, b],), {}), (([a, b], 1), {}), (([a, b], -1), {}),
            (([a, T(values("int64", (2, 3), rng), "int64")],), {}),
            (([a, values(dtype, (3, 3), rng)], 0), {}), (([a, values(dtype, (3, 3), rng)], 1), {}),
            (([],), {}), (([a, values(dtype, (0,), rng)],), {}), (([values(dtype, (), rng)],), {})]


def matmuls(dtype, rng):
    v = lambda *s: values(dtype, s, rng)  # noqa: E731
    return [((v(3, 4), v(4, 5)), {}), ((v(4,), v(4,)), {}), ((v(4,), v(4, 2)), {}), ((v(3, 4), v(4,)), {}),
            ((v(2, 3, 4), v(4, 5)), {}), ((v(2, 1, 3, 4), v(5, 4, 2)), {}), ((v(3, 4), v(5, 6)), {}),
            ((v(4,), v(5,)), {}), ((v(), v(3)), {}), ((v(0, 4), v(4, 3)), {}), ((NC(v(4, 3)), v(4, 2)), {}),
            ((v(3, 4), T(values("float64", (4, 2), rng), "float64")), {})]


def indices(dtype, rng):
    a = values(dtype, (4, 5), rng)
    idx = T(np.array([0, 2, 3]), "int64")
    mask = T(values("bool", (4, 5), rng), "bool")
    return [((a, 1), {}), ((a, (slice(1, 3), 2)), {}), ((a, (Ellipsis, None, slice(None, None, 2))), {}),
            ((a, idx), {}), ((a, mask), {}), ((a, (idx, idx)), {}), ((a, (slice(None), [1, 1, 4])), {}),
            ((a, 7), {}), ((a, (0, 9)), {}), ((a, T(np.array([0.5]), "float32")), {}), ((a, -1), {}),
            ((a, True), {}), ((a, (idx, slice(None), None)), {})]


def setitems(dtype, rng):
    a = values(dtype, (4, 5), rng)
    idx = T(np.array([0, 2]), "int64")
    return [((a, 1, values(dtype, (5,), rng)), {}), ((a, (slice(None), 2), 1), {}),
            ((a, idx, values(dtype, (2, 5), rng)), {}), ((a, T(values("bool", (4, 5), rng), "bool"), 0), {}),
            ((a, 0, values(dtype, (3,), rng)), {}), ((a, 9, 0), {}), ((a, (0, 1), 2.5), {})]


def clamps(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a,), {"min": -1}), ((a,), {"max": 1}), ((a, -1, 1), {}), ((a,), {"min": 0.5}),
            ((a, values(dtype, (4,), rng)), {}), ((a,), {"min": 2, "max": 1}), ((a,), {}),
            ((a,), {"min": float("nan")})]


def wheres(dtype, rng):
    c = T(values("bool", (3, 4), rng), "bool")
    a, b = values(dtype, (3, 4), rng), values(dtype, (4,), rng)
    return [((c, a, b), {}), ((c, a, 0), {}), ((c, 1, 2.5), {}), ((c, a, T(values("float64", (), rng), "float64")), {}),
            ((a, a, b), {}), ((c, a, values(dtype, (5,), rng)), {})]


def fn(name):
    """Call ``lib.<name>(*args)``."""
    def call(m, *a, **k):
        return getattr(m, name)(*a, **k)
    call.direct = True
    return call


def meth(name):
    """Call ``args[0].<name>(*args[1:])``."""
    def call(m, x, *a, **k):
        return getattr(x, name)(*a, **k)
    call.direct = True
    return call


def _setitem(m, a, idx, v):
    a = a.clone()
    a[idx] = v
    return a


def _mutated(name):
    def call(m, a, *args):
        a = a.clone()
        getattr(a, name)(*args)
        return a
    return call


_SHAPES = shape_of(((2, 6), ((3, 4),), {}), ((2, 6), ((-1, 3),), {}), ((2, 6), ((5, -1),), {}),
                   ((2, 6), ((-1, -1),), {}), ((0, 3), ((3, 0),), {}), ((), ((1, 1),), {}))
_SAME = lambda dtype, rng: [((values(dtype, (2, 3), rng), values(dtype, (3, 2), rng)), {}),  # noqa: E731
                            ((values(dtype, (2, 3), rng), values(dtype, (3, 4), rng)), {})]

LINES = [
    # arithmetic
    Line("add", fn("add"), binary),
    Line("sub", fn("sub"), binary),
    Line("mul", fn("mul"), binary),
    Line("div", fn("div"), binary),
    Line("true_divide", fn("true_divide"), binary),
    Line("floor_divide", fn("floor_divide"), binary, dtypes=FLOATS),
    Line("remainder", fn("remainder"), binary, dtypes=FLOATS),
    Line("pow", fn("pow"), binary, dtypes=FLOATS),
    Line("neg", fn("neg"), unary),
    Line("abs", fn("abs"), unary, dtypes=NUMERIC),
    Line("bitwise_and", fn("bitwise_and"), binary),
    Line("bitwise_or", fn("bitwise_or"), binary),
    Line("bitwise_xor", fn("bitwise_xor"), binary),
    Line("bitwise_not", fn("bitwise_not"), unary),
    Line("logical_and", fn("logical_and"), binary),
    Line("logical_or", fn("logical_or"), binary),
    Line("logical_xor", fn("logical_xor"), binary),
    Line("logical_not", fn("logical_not"), unary),
    # comparison
    Line("eq", fn("eq"), binary), Line("ne", fn("ne"), binary), Line("lt", fn("lt"), binary),
    Line("le", fn("le"), binary), Line("gt", fn("gt"), binary), Line("ge", fn("ge"), binary),
    Line("maximum", fn("maximum"), binary), Line("minimum", fn("minimum"), binary),
    Line("where", fn("where"), wheres),
    Line("clamp", fn("clamp"), clamps, dtypes=NUMERIC), Line("clip", fn("clip"), clamps, dtypes=NUMERIC),
    Line("equal", fn("equal"), _SAME), Line("allclose", fn("allclose"), _SAME, dtypes=("float32", "float64")),
    Line("isclose", fn("isclose"), binary, dtypes=("float32", "float64")),
    # shapes
    Line("reshape", fn("reshape"), _SHAPES), Line("view", meth("view"), _SHAPES),
    Line("view_as", meth("view_as"), _SAME), Line("reshape_as", meth("reshape_as"), _SAME),
    Line("flatten", fn("flatten"), shape_of(((2, 3, 4), (), {}), ((2, 3, 4), (1,), {}), ((2, 3, 4), (1, 2), {}),
                                            ((), (), {}), ((2, 3, 4), (2, 1), {}))),
    Line("permute", fn("permute"), shape_of(((2, 3, 4), ((2, 0, 1),), {}), ((2, 3, 4), ((0, 1),), {}),
                                            ((2, 3, 4), ((0, 0, 1),), {}), ((2, 3, 4), ((-1, 0, 1),), {}))),
    Line("transpose", fn("transpose"), shape_of(((2, 3, 4), (0, 2), {}), ((2, 3), (-1, 0), {}), ((2, 3), (0, 3), {}))),
    Line("swapaxes", fn("swapaxes"), shape_of(((2, 3, 4), (0, 2), {}))),
    Line("swapdims", fn("swapdims"), shape_of(((2, 3, 4), (1, 2), {}))),
    Line("t", fn("t"), shape_of(((2, 3), (), {}), ((3,), (), {}), ((2, 3, 4), (), {}))),
    Line("squeeze", fn("squeeze"), shape_of(((1, 3, 1), (), {}), ((1, 3, 1), (0,), {}), ((1, 3, 1), (1,), {}),
                                            ((1, 3, 1), ((0, 2),), {}), ((), (), {}), ((1, 3), (5,), {}))),
    Line("unsqueeze", fn("unsqueeze"), shape_of(((2, 3), (0,), {}), ((2, 3), (-1,), {}), ((2, 3), (3,), {}),
                                                ((), (0,), {}))),
    Line("expand", meth("expand"), shape_of(((3, 1), (3, 4), {}), ((3, 1), (2, -1, 4), {}), ((3, 1), (4, 4), {}),
                                            ((3,), (2, 3), {}), ((2, 3), (3,), {})),
         exempt={"implicit": "a TorchScript tracing flag: no effect on the result"}),
    Line("expand_as", meth("expand_as"), lambda d, r: [((values(d, (3, 1), r), values(d, (2, 3, 4), r)), {})]),
    Line("broadcast_to", fn("broadcast_to"), shape_of(((3, 1), ((2, 3, 4),), {}))),
    Line("sum_to_size", meth("sum_to_size"), shape_of(((2, 3, 4), (3, 1), {}), ((2, 3, 4), (1, 3, 4), {}))),
    Line("clone", fn("clone"), unary),
    Line("cat", fn("cat"), joining), Line("concat", fn("concat"), joining),
    Line("concatenate", fn("concatenate"), joining),
    Line("stack", fn("stack"), joining),
    Line("unbind", fn("unbind"), shape_of(((2, 3), (), {}), ((2, 3), (1,), {}), ((2, 3), (2,), {}))),
    Line("narrow", fn("narrow"), shape_of(((4, 5), (1, 1, 3), {}), ((4, 5), (0, -2, 2), {}), ((4, 5), (1, 3, 3), {}))),
    Line("select", fn("select"), shape_of(((4, 5), (1, 2), {}), ((4, 5), (0, -1), {}), ((4, 5), (0, 4), {}))),
    Line("flip", fn("flip"), shape_of(((3, 4), ((0,),), {}), ((3, 4), ((0, 1),), {}), ((3, 4), ((-1,),), {}))),
    Line("__getitem__", lambda m, a, i: a[i], indices, grad=True),
    Line("__setitem__", _setitem, setitems),
    Line("_to_copy", lambda m, a, d: a.to(d), lambda d, r: [((values(d, (3,), r), DT(o)), {}) for o in ALL]),
    Line("fill_", _mutated("fill_"), shape_of(((2, 3), (1.5,), {}), ((2, 3), (2,), {}))),
    Line("zero_", _mutated("zero_"), shape_of(((2, 3), (), {}))),
    Line("copy_", _mutated("copy_"), lambda d, r: [((values(d, (2, 3), r), values("float64", (3,), r)), {}),
                                                   ((values(d, (2, 3), r), values(d, (4,), r)), {})],
         exempt={"non_blocking": "no asynchronous copies on the CPU",
                 "other": "TorchScript's overload copy_.Tensor, not reached from Python"}),
]


def all_lines():
    """Every line of the op table: this module's and those of each ``optable_<family>.py`` beside it."""
    import importlib
    import pathlib
    lines = list(LINES)
    for path in sorted(pathlib.Path(__file__).parent.glob("optable_*.py")):
        lines += importlib.import_module(path.stem).LINES
    return lines
