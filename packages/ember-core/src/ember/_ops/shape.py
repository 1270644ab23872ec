"""Shape ops: view/reshape, permute/transpose, squeeze/unsqueeze, expand, flatten, clone, cat/stack,
unbind, flip."""
import math

import numpy as np

from .. import _dtype as D
from .. import _memory_format
from .. import _promotion as P
from .._factory import size_args
from .._registry import TORCH_NAME, op
from .._tensor import Tensor, _wrap_dim


def infer_shape(shape, numel):
    """Resolve one -1 in ``shape`` for a tensor of ``numel`` elements, with PyTorch's errors."""
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _reshape_vjp(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


@op("reshape", view=True)
def reshape(xp, input, *shape):
    """The same elements in a new shape; a view when the layout allows, else a copy."""
    return input.reshape(infer_shape(size_args(shape, "shape"), input.size))


reshape.vjp(_reshape_vjp)


@op("view", function=False, view=True)
def view(xp, input, *shape):
    """A view with a new shape (or, given a dtype of the same size, reinterpreting the bytes)."""
    if len(shape) == 1 and shape[0] in D.FLOAT8:
        from .._float8 import view_as_float8
        return view_as_float8(input, shape[0])
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        try:
            return input.view(D.storage(shape[0]))
        except ValueError:  # a larger or smaller element over a last dim that can't hold it: PyTorch's error
            raise RuntimeError(_view_dtype_error(input, shape[0])) from None
    target = infer_shape(size_args(shape, "shape"), input.size)
    try:
        return xp.reshape(input, target, copy=False)
    except ValueError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None


view.vjp(_reshape_vjp)


def _view_dtype_error(a, dtype):
    src, dst = D.FROM_NP[a.dtype], dtype
    big, small = (dst, src) if dst.itemsize > src.itemsize else (src, dst)
    names = f"to view {TORCH_NAME[src]} as {TORCH_NAME[dst]} (different element sizes)"
    if a.ndim == 0:
        return f"self.dim() cannot be 0 {names}"
    if a.strides[-1] != a.itemsize and a.shape[-1] != 1:
        return f"self.stride(-1) must be 1 {names}, but got {a.strides[-1] // a.itemsize}"
    return f"self.size(-1) must be divisible by {big.itemsize // small.itemsize} {names}, but got {a.shape[-1]}"


@op("view_as", function=False, view=True)
def view_as(xp, input, other):
    """``input.view(other.shape)``."""
    return view.impl(xp, input, other.shape)


view_as.vjp(_reshape_vjp)


@op("reshape_as", function=False, view=True)
def reshape_as(xp, input, other):
    """``input.reshape(other.shape)``."""
    return reshape.impl(xp, input, other.shape)


reshape_as.vjp(_reshape_vjp)


@op("flatten", view=True)
def flatten(xp, input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim``..``end_dim`` into one."""
    if input.ndim == 0:
        return input.reshape(1)
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape[:s] + (math.prod(input.shape[s:e + 1]),) + input.shape[e + 1:]
    return input.reshape(shape)


flatten.vjp(_reshape_vjp)


@op("permute", view=True)
def permute(xp, input, *dims):
    """A view with the dims reordered."""
    dims = size_args(dims, "dims")
    if len(dims) != input.ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           "length of the desired ordering of dimensions i.e. input.dim() = "
                           f"{input.ndim} is not equal to len(dims) = {len(dims)}")
    axes = [_wrap_dim(d, input.ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return input.transpose(axes)


@permute.vjp
def _(ctx, g):
    x = ctx.args[0]
    axes = [_wrap_dim(d, x.dim()) for d in size_args(ctx.args[1:], "dims")]
    return (g.permute(*np.argsort(axes).tolist()),)


@op("transpose", view=True)
def transpose(xp, input, dim0, dim1):
    """A view with ``dim0`` and ``dim1`` swapped."""
    return xp.swapaxes(input, _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim))


@transpose.vjp
def _(ctx, g):
    return (g.transpose(ctx.args[1], ctx.args[2]),)


@op("swapaxes", view=True)
def swapaxes(xp, input, axis0, axis1):
    """Alias of transpose."""
    return transpose.impl(xp, input, axis0, axis1)


@op("swapdims", view=True)
def swapdims(xp, input, dim0, dim1):
    """Alias of transpose."""
    return transpose.impl(xp, input, dim0, dim1)


swapaxes.vjp(transpose.vjp_fn)
swapdims.vjp(transpose.vjp_fn)


@op("t", view=True)
def t(xp, input):
    """Transpose of a tensor with at most two dims."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return input.T


@t.vjp
def _(ctx, g):
    return (g.t(),)


@op("squeeze", view=True)
def squeeze(xp, input, dim=None):
    """Remove dims of size 1 (all of them, or those named by ``dim`` that have size 1)."""
    if dim is None:
        return input.reshape(tuple(s for s in input.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    axes = {_wrap_dim(d, input.ndim) for d in dims} if input.ndim else set()
    return input.reshape(tuple(s for i, s in enumerate(input.shape) if not (i in axes and s == 1)))


squeeze.vjp(_reshape_vjp)


@op("unsqueeze", view=True)
def unsqueeze(xp, input, dim):
    """Insert a dim of size 1 at ``dim``."""
    n = input.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return xp.expand_dims(input, dim % n)


unsqueeze.vjp(_reshape_vjp)


def _legacy_name(arr):
    from .._tensor import _LEGACY_TYPE
    return "torch." + _LEGACY_TYPE[D.from_np(arr.dtype)]


@op("expand", function=False, view=True)
def expand(xp, input, *sizes):
    """A broadcast view to ``sizes`` (-1 keeps a dim); no memory is copied."""
    sizes = size_args(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError(f"expand({_legacy_name(input)}{{{list(input.shape)}}}, size={list(sizes)}): the number "
                           f"of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions "
                           f"in the tensor ({input.ndim})")
    lead = len(sizes) - input.ndim
    target = list(sizes)
    for i, s in enumerate(input.shape):
        want = sizes[lead + i]
        if want == -1:
            target[lead + i] = s
        elif s != want and s != 1:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({s}) at "
                               f"non-singleton dimension {lead + i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                               f"{list(input.shape)}")
    if any(s < 0 for s in target[:lead]):
        raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                           f"dimension {target.index(-1)}")
    return xp.broadcast_to(input, tuple(target))


@expand.vjp
def _(ctx, g):
    return (g.sum_to_size(ctx.args[0].shape),)


@op("expand_as", function=False, view=True)
def expand_as(xp, input, other):
    """``input.expand(other.shape)``."""
    return expand.impl(xp, input, other.shape)


expand_as.vjp(expand.vjp_fn)


@op("broadcast_to", view=True)
def broadcast_to(xp, input, size):
    """``input.expand(size)``."""
    return expand.impl(xp, input, size)


broadcast_to.vjp(expand.vjp_fn)


@op("sum_to_size", function=False)
def sum_to_size(xp, input, *size):
    """Sum broadcast dims away so that the result has shape ``size`` (the reverse of expand)."""
    size = size_args(size)
    lead = input.ndim - len(size)
    if lead < 0:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(input.shape)}}}.")
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size) if s == 1 and input.shape[lead + i] != 1)
    # (integers and bool sum to int64, as PyTorch's sum: NumPy's would give uint64 for unsigned ones)
    r = input.sum(axis=axes, keepdims=True, dtype=np.int64 if input.dtype.kind in "biu" else None) if axes else input
    return r.reshape(size)


@sum_to_size.vjp
def _(ctx, g):
    return (g.expand(ctx.args[0].shape),)


@op("clone")
def clone(xp, input, *, memory_format=None):
    """A copy with its own memory, laid out as ``memory_format`` says (by default as ``input`` is)."""
    fmt = _memory_format.checked(memory_format, "clone") or _memory_format.preserve_format
    return _memory_format.copy(xp, input, _memory_format.layout(input, fmt))


@clone.vjp
def _(ctx, g):
    return (g,)


def contiguous(self, memory_format=None):
    """This tensor if it is laid out densely in ``memory_format`` (row-major by default), else such a copy."""
    fmt = _memory_format.checked(memory_format, "contiguous")
    if fmt is None:
        return self if self._data.flags.c_contiguous else clone.fn(self, memory_format=_memory_format.contiguous_format)
    if self.is_contiguous(memory_format=fmt):
        return self
    if fmt is _memory_format.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return clone.fn(self, memory_format=fmt)


def detach(self):
    """A tensor over the same memory, cut from autograd history."""
    return Tensor._wrap(self._data)._view_of(self)


def detach_(self):
    """Cut this tensor from its autograd history, in place."""
    self.grad_fn = None
    self._rg = False
    return self


Tensor.contiguous = contiguous
Tensor.detach = detach
Tensor.detach_ = detach_


# ---- joining ------------------------------------------------------------------------------------
def _joined_dtype(xp, tensors):
    rd = P.array_result_type(*tensors)
    return [t.astype(D.storage(rd), copy=False) for t in tensors]


def join_out_refusal(rd, od):
    """PyTorch's TypeError (not the RuntimeError of other ops) for a join's ``out=`` its inputs can't be cast to."""
    return TypeError(f"torch.cat(): input types can't be cast to the desired output type {TORCH_NAME[od]}")


@op("cat", out_refusal=join_out_refusal, result_layout="suggested")
def cat(xp, tensors, dim=0):
    """Concatenate along an existing dim (1-D empty tensors are skipped, as in PyTorch)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"cat(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{'Tensor' if hasattr(tensors, 'shape') else type(tensors).__name__}")
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    arrays = _joined_dtype(xp, tensors)
    kept = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)] or arrays[:1]
    ref = kept[0]
    d = _wrap_dim(dim, ref.ndim)
    for i, a in enumerate(kept):
        if a.ndim != ref.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.ndim} and {a.ndim}")
        for k in range(ref.ndim):
            if k != d and a.shape[k] != ref.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref.shape[k]} but got size {a.shape[k]} for tensor number "
                                   f"{i} in the list.")
    return xp.concatenate(kept, axis=d)


@cat.vjp
def _(ctx, g):
    tensors = ctx.args[0]
    dim = ctx.kwargs.get("dim", ctx.args[1] if len(ctx.args) > 1 else 0)
    grads, start = [], 0
    d = dim % max(g.dim(), 1)
    for t in tensors:
        if t.dim() == 1 and t.shape[0] == 0 and g.dim() != 1:  # skipped by cat
            grads.append(g.new_zeros(t.shape))
            continue
        n = t.shape[d]
        grads.append(g.narrow(d, start, n))
        start += n
    return (grads,)


@op("concat", out_refusal=join_out_refusal, result_layout="suggested")
def concat(xp, tensors, dim=0):
    """Alias of cat."""
    return cat.impl(xp, tensors, dim)


@op("concatenate", out_refusal=join_out_refusal, result_layout="suggested")
def concatenate(xp, tensors, axis=0):
    """Alias of cat."""
    return cat.impl(xp, tensors, axis)


concat.vjp(cat.vjp_fn)
concatenate.vjp(cat.vjp_fn)


@op("stack", out_refusal=join_out_refusal, result_layout="suggested")
def stack(xp, tensors, dim=0):
    """Join tensors of equal shape along a new dim."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"stack(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{'Tensor' if hasattr(tensors, 'shape') else type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                               f"entry 0 and {list(t.shape)} at entry {i}")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return xp.stack(_joined_dtype(xp, tensors), axis=dim % n)


@stack.vjp
def _(ctx, g):
    dim = ctx.kwargs.get("dim", ctx.args[1] if len(ctx.args) > 1 else 0)
    return ([x for x in g.unbind(dim % g.dim())],)


@op("unbind", view=True)
def unbind(xp, input, dim=0):
    """The slices along ``dim``, as a tuple of views."""
    d = _wrap_dim(dim, input.ndim)
    return tuple(input[(slice(None),) * d + (i, Ellipsis)] for i in range(input.shape[d]))


@unbind.vjp
def _(ctx, *grads):
    x = ctx.args[0]
    dim = ctx.kwargs.get("dim", ctx.args[1] if len(ctx.args) > 1 else 0)
    parts = [g if g is not None else x.new_zeros(()).expand(x.select(dim, 0).shape) for g in grads]
    return (stack.fn(parts, dim),)


@op("narrow", view=True)
def narrow(xp, input, dim, start, length):
    """A view of ``length`` entries of ``dim`` from ``start``."""
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return input[(slice(None),) * d + (slice(start, start + length),)]


@narrow.vjp
def _(ctx, g):
    x, dim, start, length = ctx.args[:4]
    d = dim % x.dim()
    start = start % x.shape[d] if start < 0 else start
    pad_before = list(g.shape)
    pad_before[d] = start
    pad_after = list(g.shape)
    pad_after[d] = x.shape[d] - start - length
    return (cat.fn([g.new_zeros(pad_before), g, g.new_zeros(pad_after)], d),)


@op("select", view=True)
def select(xp, input, dim, index):
    """The slice at ``index`` of ``dim`` (that dim removed), as a view."""
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at "
                         f"dimension {d}")
    return input[(slice(None),) * d + (index, Ellipsis)]  # Ellipsis keeps a 0-d result a view


@select.vjp
def _(ctx, g):
    x, dim, index = ctx.args[:3]
    full = g.new_zeros(x.shape)
    d = dim % x.dim()
    full[(slice(None),) * d + (index,)] = g
    return (full,)


@op("flip")
def flip(xp, input, *dims):
    """A copy with the order of entries reversed along ``dims``."""
    dims = size_args(dims, "dims")
    axes = tuple(_wrap_dim(d, input.ndim) for d in dims)
    return xp.flip(input, axis=axes).copy()


@flip.vjp
def _(ctx, g):
    return (g.flip(*ctx.args[1:]),)
