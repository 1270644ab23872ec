"""Ops on meta tensors: results with PyTorch's shapes, dtypes and strides, computed without data.

A meta tensor's array is a ``MetaArray`` (ember._meta_array), which no fast path takes for a NumPy array: a call
with a meta operand reaches the registry's device check, which hands it to ``dispatch`` here. Nothing is added
to the calls of CPU tensors. A result is found in one of three ways:

* Elementwise ops: the shape is the operands' broadcast shape; the dtype (and any dtype error) comes from running
  the op on one-element stand-ins of the operands' dtypes and ranks; the strides follow the first operand of the
  result's shape, as PyTorch's do.
* Ops with a shape rule (``RULES``): those whose work or result grows faster than their inputs (the matrix products,
  linear, convolutions, cat/stack, repeat, copies) and the reductions. A rule computes the shape from the input
  shapes and gets the dtype (and dtype errors) from a run on stand-ins whose dims are all 1 (for convolutions:
  one channel per group). Reshapes follow PyTorch's rule for when a reshape can be a view.
* Every other op runs its implementation on stand-ins (``_meta_array.stand_in``): zeros with the meta tensors'
  shapes, strides and offsets in a buffer as long as their storage, over zero pages when large (a read-only anonymous
  mapping without reserve: reading it maps the kernel's shared zero page, so it costs no memory whatever its size).
  A result that views a stand-in becomes the same view of the meta tensor; any other result gives its shape, dtype
  and (dense) strides, as ember's CPU implementation lays it out, and is dropped. An op that fails on zeros (a value
  check) runs again on ones with twos on the diagonals; random streams are restored. Views run so at any size; other
  ops only while every input has at most ``RUN_LIMIT`` elements (their work is proportional to their inputs), else
  they raise NotImplementedError naming the op.

Ops whose result's size depends on the values (nonzero, unique, masked_select, boolean-mask indexing, ...) raise
PyTorch's NotImplementedError; reading values raises as PyTorch does. A call with an input that requires grad is
recorded by autograd with a VJP that gives each input a meta gradient of its shape and dtype (``_MetaOp``).
"""
import math

import numpy as np

from . import _dtype as D
from . import _promotion as P
from ._dispatch import FORCED, RECORD, Call, run_layers
from ._meta_array import MetaArray, contiguous_byte_strides, extent, no_data, stand_in
from ._registry import STAND_INS, TORCH_NAME, _general, elementwise_impl
from ._tensor import Tensor, _wrap_dim

RUN_LIMIT = 1 << 24  # the most elements an input of an op without a shape rule may have (see the module doc)
_wrap = Tensor._wrap


def _meta(t):
    return isinstance(t, Tensor) and type(t._data) is MetaArray


def _new(shape, dtype, strides=None):
    return _wrap(MetaArray(shape, dtype, strides))


# ---- entry point ------------------------------------------------------------------------------------------
def dispatch(op, args, kwargs, out, mode):
    """Run a registry call that met a meta operand (``_registry.StandInOperands``), through the active layers."""
    call = Call(op, args, kwargs, mode, out)
    tensors = call.tensors()
    if not op.mutates:  # (copy_ and setitem take a source on another device)
        for t in tensors:
            if type(t._data) is not MetaArray and t._data.ndim:  # (a zero-dim CPU tensor joins, as in PyTorch)
                raise RuntimeError(f"Tensor on device {t.device} is not on the expected device meta!")
    if FORCED[0] or any(t._rg for t in tensors):
        call.op = _recorded(op)
        if mode is None and not FORCED[0]:
            return RECORD[0](call.op, args, kwargs, _run(call))
        return run_layers(call, _run)
    return _run(call)


class _MetaOp:
    """An op as autograd records it on meta tensors: its VJP gives each input a gradient of the input's shape and
    dtype, which is all a meta gradient is (the op's own VJP may work on arrays, which meta tensors do not have)."""

    def __init__(self, op):
        self.op = op

    def __getattr__(self, name):
        return getattr(self.op, name)

    @staticmethod
    def vjp_fn(ctx, *grads):
        return tuple(_gradient_like(a) for a in ctx.args)


def _gradient_like(a):
    if isinstance(a, Tensor):
        return _new(a._data.shape, a._data.dtype) if _meta(a) else _wrap(np.zeros(a._data.shape, a._data.dtype))
    if type(a) in (list, tuple) and any(isinstance(x, Tensor) for x in a):
        return [_gradient_like(x) for x in a]
    return None


_RECORDED = {}


def _recorded(op):
    proxy = _RECORDED.get(op)
    if proxy is None:
        proxy = _RECORDED[op] = _MetaOp(op)
    return proxy


def _run(call):
    op, args, kwargs, mode = call.op, call.args, call.kwargs, call.mode
    op = op.op if type(op) is _MetaOp else op
    if op.mutates:
        return _mutate(op, args)
    refuse = DATA_DEPENDENT.get(op.name)
    if refuse is not None:
        refuse(op, *args, **kwargs)
    if op.kind == "elementwise":
        r = _elementwise(op, args, kwargs)
    else:
        rule = RULES.get(op.name)
        r = rule(op, *args, **kwargs) if rule is not None else _by_stand_ins(op, args, kwargs)
    if mode == "inplace":
        return _into(args[0], r)
    if mode == "out":
        return tuple(map(_write_out, call.out, r)) if isinstance(r, tuple) else _write_out(call.out, r)
    return r


def _mutate(op, args):
    """In-place writes of values (fills, random fills, copy_, setitem): a meta target keeps nothing, so only the
    shapes are checked; a meta source has nothing to copy into a target on another device."""
    target = args[0]
    if not _meta(target):
        no_data()
    if op.name == "copy_":
        P.check_inplace_broadcast(target._data.shape, args[1]._data.shape)
    target._vc[0] += 1
    return target


def _into(target, r):
    if not _meta(target):
        raise RuntimeError(f"Tensor on device meta is not on the expected device {target.device}!")
    rd = r.dtype
    if not P.can_cast(rd, target.dtype):
        raise RuntimeError(f"result type {TORCH_NAME[rd]} can't be cast to the desired output type "
                           f"{TORCH_NAME[target.dtype]}")
    P.check_inplace_broadcast(target._data.shape, r._data.shape)
    target._vc[0] += 1
    return target


def _write_out(out, r):
    if not _meta(out):
        raise RuntimeError(f"Tensor on device meta is not on the expected device {out.device}!")
    if not P.can_cast(r.dtype, out.dtype):
        raise RuntimeError(f"result type {TORCH_NAME[r.dtype]} can't be cast to the desired output type "
                           f"{TORCH_NAME[out.dtype]}")
    if out._data.shape != r._data.shape:
        out._data = MetaArray(r._data.shape, out._data.dtype)
    out._vc[0] += 1
    return out


# ---- elementwise ops --------------------------------------------------------------------------------------
def _elementwise(op, args, kwargs):
    tensors = [x for x in args if isinstance(x, Tensor)]
    shapes = [t._data.shape for t in tensors]
    shape = shapes[0] if len(set(shapes)) == 1 else P.broadcast_shapes(*shapes)
    r = elementwise_impl(Call(op, tuple(_tiny(x) for x in args), kwargs))
    first = next((t._data for t in tensors if t._data.shape == shape), None)
    return _new(shape, r._data.dtype, None if first is None else _strides_like(first, r._data.itemsize))


def _strides_like(a, itemsize):
    """Contiguous strides in the order of ``a``'s dims by decreasing stride (PyTorch's results follow their
    inputs' layout); None (row-major) when ``a`` is row-major already."""
    if a.flags.c_contiguous:
        return None
    order = sorted(range(a.ndim), key=lambda i: -abs(a.strides[i]))
    strides, step = [0] * a.ndim, itemsize
    for i in reversed(order):
        strides[i] = step
        step *= max(a.shape[i], 1)
    return tuple(strides)


def _tiny(x):
    """A stand-in with every dim 1 (its rank and dtype kept): what dtype rules and dtype errors need. Its value is
    one, which no integer division refuses and every index dim of size 1 or more takes."""
    if _meta(x):
        return _wrap(np.ones((1,) * x._data.ndim, x._data.dtype))
    if type(x) in (list, tuple):
        return type(x)(_tiny(v) for v in x)
    return x


# ---- ops without a rule: run on stand-ins --------------------------------------------------------------
def _by_stand_ins(op, args, kwargs):
    big = [t for t in Call(op, args, kwargs).tensors() if _meta(t) and t._data.size > RUN_LIMIT]
    if big and not op.view:
        raise NotImplementedError(f"ember has no meta shape rule for '{op.name}' and runs such ops on stand-ins only "
                                  f"for inputs of at most {RUN_LIMIT} elements (got {big[0]._data.size})")
    parents = {}

    def swap(x):
        if _meta(x):
            s = stand_in(x._data, extent((x._base if x._base is not None else x)._data))
            parents[id(s)] = (x, s)
            return _wrap(s)
        if type(x) in (list, tuple):
            return type(x)(swap(v) for v in x)
        return x

    sargs = tuple(swap(a) for a in args)
    skw = {k: swap(v) for k, v in kwargs.items()}
    from ._random import Generator, default_generator
    generators = [default_generator] + [v for v in kwargs.values() if isinstance(v, Generator)]
    states = [g.get_state() for g in generators]  # (a random op on stand-ins draws nothing that counts)
    try:
        with np.errstate(all="ignore"):
            try:
                r = _general(op, sargs, skw, None, None)
            except Exception as first:  # noqa: BLE001  (maybe the values: a singular matrix, no positive weight)
                if not _refill([s for _, s in parents.values()]):
                    raise
                try:
                    r = _general(op, sargs, skw, None, None)
                except Exception:  # noqa: BLE001  (not the values: the first error is the op's own)
                    raise first from None
    finally:
        for g, state in zip(generators, states):
            g.set_state(state)
    return _from_result(r, parents, args, kwargs)


def _refill(stand_ins):
    """Give writable stand-ins values that pass the value checks zeros fail (an op that validates its input's values,
    which PyTorch's meta kernels do not): ones, and twos on the diagonals of the last two dims, so that matrices are
    positive definite and rows have positive sums. False when a stand-in is over zero pages (read-only)."""
    if not all(s.flags.writeable for s in stand_ins):
        return False
    for s in stand_ins:
        s[...] = 1
        if s.ndim >= 2:
            np.einsum("...ii->...i", s[..., :min(s.shape[-2:]), :min(s.shape[-2:])])[...] = 2
    return True


def _from_result(r, parents, args, kwargs):
    if isinstance(r, tuple):
        return type(r)(*(_from_result(x, parents, args, kwargs) for x in r)) if hasattr(r, "_fields") else \
            tuple(_from_result(x, parents, args, kwargs) for x in r)
    if isinstance(r, list):
        return [_from_result(x, parents, args, kwargs) for x in r]
    if not isinstance(r, Tensor):
        return r
    a = r._data
    view = r._ext.get("view") if r._ext is not None else None
    found = parents.get(id(r._base._data)) if view is not None and r._base is not None else None
    if found is not None:  # a view of a stand-in: the same view of its meta tensor
        parent, s = found
        p = parent._data
        offset = p.offset * p.itemsize + a.__array_interface__["data"][0] - s.__array_interface__["data"][0]
        if offset >= 0 and offset % a.itemsize == 0:
            m = _wrap(MetaArray(a.shape, a.dtype, a.strides, offset // a.itemsize, p.storage))._view_of(parent)
            m._ext = {"view": (parent,) + view[1:2] + (args[1:], kwargs) + view[4:]}
            return m
    return _new(a.shape, a.dtype, a.strides if _dense(a) else None)


def _dense(a):
    """Whether ``a``'s elements fill its memory without gaps or overlaps (some order of its dims is row-major)."""
    dims = sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n != 1)
    step = a.itemsize
    for s, n in dims:
        if s != step:
            return False
        step *= n
    return all(s >= 0 for s in a.strides)


# ---- shape rules ------------------------------------------------------------------------------------------
def _dtype_of(op, args, kwargs):
    """The NumPy result dtype of ``op`` on stand-ins whose dims are all 1 (raises the op's dtype errors)."""
    r = _general(op, tuple(_tiny(a) for a in args), {k: _tiny(v) for k, v in kwargs.items()}, None, None)
    return r._data.dtype


def _shape(t):
    return t._data.shape


def _matmul_shape(a, b):
    """The shape of ``a @ b`` from the shapes alone, with PyTorch's errors."""
    if not a or not b:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {len(a)}D and {len(b)}D")
    if len(a) == len(b) == 1:
        if a != b:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src [{b[0]}] to have the "
                               f"same number of elements, but got {a[0]} and {b[0]} elements respectively")
        return ()
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a2[-2]}x{a2[-1]} and {b2[-2]}x{b2[-1]})")
    batch = P.broadcast_shapes(a2[:-2], b2[:-2])
    return batch + a2[-2:-1] * (len(a) > 1) + b2[-1:] * (len(b) > 1)


def _need(t, ndim, name, what):
    if t._data.ndim != ndim:
        raise RuntimeError(f"{name} must be a {what}")


def _rule(fn):
    """A rule from ``fn(*args, **kwargs) -> shape``; the dtype is the op's on all-1 stand-ins."""
    def rule(op, *args, **kwargs):
        shape = fn(*args, **kwargs)
        return _new(shape, _dtype_of(op, args, kwargs))
    return rule


@_rule
def _matmul(input, other, **kwargs):
    return _matmul_shape(_shape(input), _shape(other))


@_rule
def _mm(input, mat2, **kwargs):
    _need(input, 2, "self", "matrix")
    _need(mat2, 2, "mat2", "matrix")
    return _matmul_shape(_shape(input), _shape(mat2))


def _bmm_shape(input, mat2, **kwargs):
    _need(input, 3, "batch1", "3D tensor")
    _need(mat2, 3, "batch2", "3D tensor")
    (b, n, m), (b2, m2, p) = _shape(input), _shape(mat2)
    if (b2, m2) != (b, m):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{b}, {m}] but got: "
                           f"[{b2}, {m2}].")
    return (b, n, p)


_bmm = _rule(_bmm_shape)


@_rule
def _mv(input, vec, **kwargs):
    _need(input, 2, "input", "matrix")
    _need(vec, 1, "vec", "vector")
    return _matmul_shape(_shape(input), _shape(vec))


@_rule
def _dot(input, other, **kwargs):
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input._data.ndim}D and {other._data.ndim}D tensors")
    return _matmul_shape(_shape(input), _shape(other))


@_rule
def _outer(input, vec2, **kwargs):
    return _shape(input) + _shape(vec2)


def _added(shape, input):
    P.broadcast_shapes(_shape(input), shape)  # (PyTorch's error when the added input does not broadcast)
    return shape


@_rule
def _addmm(input, mat1, mat2, **kwargs):
    return _added(_matmul_shape(_shape(mat1), _shape(mat2)), input)


@_rule
def _addmv(input, mat, vec, **kwargs):
    return _added(_matmul_shape(_shape(mat), _shape(vec)), input)


@_rule
def _baddbmm(input, batch1, batch2, **kwargs):
    return _added(_bmm_shape(batch1, batch2), input)


@_rule
def _addbmm(input, batch1, batch2, **kwargs):
    return _added(_bmm_shape(batch1, batch2)[1:], input)


@_rule
def _linear(input, weight, bias=None, **kwargs):
    x, w = _shape(input), _shape(weight)
    if not x or x[-1] != w[-1]:
        rows = math.prod(x[:-1]) if x else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x[-1] if x else 1} and "
                           f"{w[-1]}x{w[0] if len(w) > 1 else 1})")
    shape = x[:-1] + w[:-1]
    return _added(shape, bias) if bias is not None else shape


def _cat_shape(shapes, dim):
    shapes = [s for s in shapes if s != (0,)]  # (1-D empty tensors are left out, as PyTorch does)
    if not shapes:
        return (0,)
    ndim = len(shapes[0])
    d = dim % ndim if ndim else 0
    for i, s in enumerate(shapes):
        if len(s) != ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ndim} and {len(s)}")
        for k, (n, n0) in enumerate(zip(s, shapes[0])):
            if k != d and n != n0:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected {n0} in dimension "
                                   f"{k} but got {n} for tensor number {i} in the list")
    return shapes[0][:d] + (sum(s[d] for s in shapes),) + shapes[0][d + 1:]


@_rule
def _cat(tensors, dim=0, **kwargs):
    return _cat_shape([_shape(t) for t in tensors], dim)


@_rule
def _stack(tensors, dim=0, **kwargs):
    shapes = {_shape(t) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError("stack expects each tensor to be equal size")
    (shape,) = shapes
    d = dim % (len(shape) + 1)
    return shape[:d] + (len(tensors),) + shape[d:]


@_rule
def _repeat(input, *sizes):
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    shape = _shape(input)
    if len(sizes) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    shape = (1,) * (len(sizes) - len(shape)) + shape
    return tuple(n * r for n, r in zip(shape, sizes))


def _clone(op, input, *, memory_format=None):
    return _new(input._data.shape, input._data.dtype)  # (row-major, as ember's clone on the CPU)


def _to_copy(op, input, *, dtype=None, device=None):
    if device is not None and device.type != "meta":
        no_data()
    a = input._data
    dtype = a.dtype if dtype is None else np.dtype(D.storage(dtype))
    return _new(a.shape, dtype, _strides_like(a, dtype.itemsize))  # (the input's layout, as PyTorch's)


_RESHAPES = {"reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "ravel"}


def _reshape(op, input, *args, **kwargs):
    """A reshape: the shape from the implementation on zero-strided stand-ins (where NumPy always views), then
    PyTorch's rule for whether the real strides allow a view."""
    if op.name == "view" and len(args) == 1 and isinstance(args[0], D.dtype):
        return _by_stand_ins(op, (input,) + args, kwargs)
    zero = [_wrap(np.broadcast_to(np.zeros((), t._data.dtype), t._data.shape)) if _meta(t) else t
            for t in (input,) + args]
    a = input._data
    shape = _general(op, tuple(zero), kwargs, None, None)._data.shape
    steps = _view_strides(a.shape, [s // a.itemsize for s in a.strides], shape)
    if steps is None:
        if op.name in ("view", "view_as"):
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return _new(shape, a.dtype)
    m = _wrap(MetaArray(shape, a.dtype, [s * a.itemsize for s in steps], a.offset, a.storage))._view_of(input)
    m._ext = {"view": (input, op, args, kwargs, None)}
    return m


def _view_strides(old, steps, new):
    """The element strides of a view of shape ``new`` over a tensor of shape ``old`` and strides ``steps``, or
    None when no view can hold it: dims of ``new`` are laid over each run of ``old``'s dims that is contiguous in
    itself, and must use up exactly the elements of every run."""
    if not old or 0 in old:
        return [s // 1 for s in contiguous_byte_strides(new, 1)]
    out = [0] * len(new)
    v = len(new) - 1
    base, run, taken = steps[-1], 1, 1
    for d in range(len(old) - 1, -1, -1):
        run *= old[d]
        if d == 0 or (old[d - 1] != 1 and steps[d - 1] != run * base):  # the run of contiguous dims ends at d
            while v >= 0 and (taken < run or new[v] == 1):
                out[v] = taken * base
                taken *= new[v]
                v -= 1
            if taken != run:
                return None
            if d > 0:
                base, run, taken = steps[d - 1], 1, 1
    return out if v == -1 else None


def _ints(v, n):
    return tuple(v) * (n // len(v)) if isinstance(v, (tuple, list)) else (v,) * n


def _conv(op, input, weight, bias=None, stride=1, padding=0, *rest, **kwargs):
    """Convolutions: the spatial sizes by formula; arguments and dtypes checked by a run on stand-ins of one
    channel per group and kernel size 1."""
    names = ("dilation", "transposed", "output_padding", "groups") if op.name == "convolution" else \
        ("output_padding", "groups", "dilation") if "transpose" in op.name else ("dilation", "groups")
    given = dict(zip(names, rest), **kwargs)
    transposed = given.get("transposed", "transpose" in op.name)
    groups, dilation = given.get("groups", 1), given.get("dilation", 1)
    x, w = _shape(input), _shape(weight)
    n = len(w) - 2
    tiny_x = _wrap(np.zeros(x[:len(x) - n - 1] + (groups,) + (1,) * n, input._data.dtype))
    tiny_w = _wrap(np.zeros((groups, 1) + (1,) * n, weight._data.dtype))
    tiny_b = _wrap(np.zeros((groups,), bias._data.dtype)) if isinstance(bias, Tensor) else bias
    tiny_args = tuple(_tiny(v) for v in rest)
    tiny_pad = 0 if transposed and not isinstance(padding, str) else padding  # (kernel 1 on 1: no room to cut)
    dtype = _general(op, (tiny_x, tiny_w, tiny_b, stride, tiny_pad) + tiny_args, kwargs, None, None)._data.dtype
    channels = x[-n - 1]
    expected = w[0] if transposed else w[1] * groups
    if channels != expected:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w)}, expected input{list(x)} to have "
                           f"{expected} channels, but got {channels} channels instead")
    s, d, k = _ints(stride, n), _ints(dilation, n), w[2:]
    if isinstance(padding, str):
        pads = (0,) * n if padding == "valid" else None
    else:
        pads = _ints(padding, n)
    if transposed:
        extra = _ints(given.get("output_padding", 0), n)
        spatial = tuple((i - 1) * st - 2 * p + dl * (kk - 1) + e + 1
                        for i, st, p, dl, kk, e in zip(x[-n:], s, pads, d, k, extra))
        out_channels = w[1] * groups
    else:
        spatial = x[-n:] if pads is None else tuple((i + 2 * p - dl * (kk - 1) - 1) // st + 1
                                                    for i, st, p, dl, kk in zip(x[-n:], s, pads, d, k))
        out_channels = w[0]
    if any(o <= 0 for o in spatial):
        raise RuntimeError(f"Calculated output size: {list(spatial)}. Output size is too small")
    return _new(x[:len(x) - n - 1] + (out_channels,) + spatial, dtype)


def _reduction(op, input, *args, **kwargs):
    """Reductions over ``dim`` (all dims when None or empty): the kept dims by formula."""
    dtype = _dtype_of(op, (input,) + args, kwargs)
    dim = args[0] if args else kwargs.get("dim")
    keepdim = args[1] if len(args) > 1 else kwargs.get("keepdim", False)
    shape = _shape(input)
    dims = range(len(shape)) if dim is None or dim == () or dim == [] else \
        dim if isinstance(dim, (tuple, list)) else (dim,)
    gone = {_wrap_dim(d, len(shape)) for d in dims}
    return _new(tuple(1 if i in gone else n for i, n in enumerate(shape) if keepdim or i not in gone), dtype)


# ---- ops whose result depends on values -------------------------------------------------------------------
def _no_meta_kernel(op, *args, **kwargs):
    raise NotImplementedError(f"aten::{op.name}: its result (or its size) depends on the values, which meta tensors "
                              "do not have")


def _masked_index(op, input, index, *args, **kwargs):
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, Tensor) and i.dtype is D.bool or isinstance(i, list) and any(
            isinstance(v, bool) for v in i) for i in items):
        _no_meta_kernel(op)


def _repeat_interleave(op, input, repeats=None, dim=None, *, output_size=None):
    if (isinstance(repeats, Tensor) and repeats._data.ndim or repeats is None) and output_size is None:
        raise RuntimeError("cannot repeat_interleave a meta tensor without output_size")


def _where(op, condition, input=None, other=None):
    if input is None and other is None:
        _no_meta_kernel(op)


def _reads_values(op, *args, **kwargs):
    raise RuntimeError("Tensor.item() cannot be called on meta tensors")


DATA_DEPENDENT = {name: _no_meta_kernel for name in ("nonzero", "argwhere", "unique", "unique_consecutive",
                                                      "masked_select", "bincount", "equal")}
DATA_DEPENDENT.update({"__getitem__": _masked_index, "repeat_interleave": _repeat_interleave, "where": _where,
                       "allclose": _reads_values})

RULES = {"matmul": _matmul, "mm": _mm, "bmm": _bmm, "mv": _mv, "dot": _dot, "vdot": _dot, "outer": _outer,
         "addmm": _addmm, "addmv": _addmv, "baddbmm": _baddbmm, "addbmm": _addbmm, "linear": _linear,
         "cat": _cat, "concat": _cat, "concatenate": _cat, "stack": _stack, "repeat": _repeat, "clone": _clone,
         "_to_copy": _to_copy}
RULES.update({name: _reshape for name in _RESHAPES})
RULES.update({name: _conv for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                        "conv_transpose3d", "convolution")})
RULES.update({name: _reduction for name in ("sum", "mean", "nansum", "nanmean", "prod", "amax", "amin", "any",
                                             "all", "logsumexp", "count_nonzero")})

STAND_INS[MetaArray] = dispatch
