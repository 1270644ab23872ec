"""Layout ops: splitting and joining, dim moves, repeats, rolls, triangles and diagonals, strided views,
padding, and the in-place view methods (``squeeze_``, ``t_``, ``resize_``...)."""
import itertools
import math
import warnings

import numpy as np

from .. import _dtype as D
from .. import _promotion as P
from .._factory import _place, size_args
from .._registry import _device_arrays, factory, op
from .._tensor import Tensor, _wrap_dim
from .shape import cat, flip, join_out_refusal, narrow, squeeze, t, transpose, unsqueeze


def _wrap_strict(dim, ndim, what):
    """A dim of a tensor with at least one dim (zero-dim tensors have none to pick)."""
    if ndim == 0:
        raise RuntimeError(f"{what} expects at least a 1-dimensional tensor")
    return _wrap_dim(dim, ndim)


def _arg(ctx, i, name, default):
    return ctx.args[i] if len(ctx.args) > i else ctx.kwargs.get(name, default)


# ---- splitting ------------------------------------------------------------------------------------
def _pieces(input, d, bounds):
    """Views of ``input`` along ``d`` between consecutive (start, stop) ``bounds``."""
    lead = (slice(None),) * d
    return tuple(input[lead + (slice(a, b),)] for a, b in bounds)


def _sizes_bounds(sizes):
    ends = np.cumsum([0] + list(sizes)).tolist()
    return list(zip(ends[:-1], ends[1:]))


def _split_sizes(n, size):
    if size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
    if size == 0 and n:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
    k = max(-(-n // size), 1) if size else 1
    return [size] * (k - 1) + [n - size * (k - 1)]


def _check_sizes(n, d, sizes):
    if any(s < 0 for s in sizes) or sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                           f"dimension {d}), but got split_sizes={list(sizes)}")
    return sizes


def _pieces_grad(x, d, outs, grads, bounds):
    """The gradient of pieces of ``x`` cut along ``d`` at ``bounds``: each piece's gradient (zero where
    None) put back in place; pieces that tile the dim are concatenated, overlapping ones are summed."""
    parts = [g if g is not None else o.new_zeros(o.shape) for o, g in zip(outs, grads)]
    n = x.shape[d]
    clipped = [(min(a, n), min(max(a, b), n)) for a, b in bounds]
    if [a for a, _ in clipped[1:]] == [b for _, b in clipped[:-1]] and clipped[0][0] == 0 and clipped[-1][1] == n:
        return cat.fn(parts, d)
    total = x.new_zeros(x.shape, dtype=parts[0].dtype)
    tail = [0, 0] * (x.dim() - 1 - d)
    for p, (a, b) in zip(parts, clipped):
        total = total + constant_pad_nd.fn(p, tail + [a, n - b])
    return total


def _split_vjp(bounds_of):
    def vjp(ctx, *grads):
        x = ctx.args[0]
        d, bounds = bounds_of(ctx)
        return (_pieces_grad(x, d, ctx.out, grads, bounds),) + (None,) * (len(ctx.args) - 1)
    return vjp


def _split_args(ctx):
    x, arg, dim = ctx.args[0], _arg(ctx, 1, "split_size_or_sections", None), _arg(ctx, 2, "dim", 0)
    d = _wrap_dim(dim, x.dim())
    sizes = _split_sizes(x.shape[d], arg) if isinstance(arg, int) else list(arg)
    return d, _sizes_bounds(sizes)


@op("split", view=True)
def split(xp, input, split_size_or_sections, dim=0):
    """Pieces along ``dim``: of ``split_size`` each (the last may be smaller), or of the listed sizes."""
    d = _wrap_strict(dim, input.ndim, "split")
    n = input.shape[d]
    if isinstance(split_size_or_sections, int):
        sizes = _split_sizes(n, split_size_or_sections)
    else:
        sizes = _check_sizes(n, d, size_args((split_size_or_sections,), "split_size"))
    return _pieces(input, d, _sizes_bounds(sizes))


split.vjp(_split_vjp(_split_args))


def _with_sizes_args(ctx):
    x = ctx.args[0]
    return _wrap_dim(_arg(ctx, 2, "dim", 0), x.dim()), _sizes_bounds(_arg(ctx, 1, "split_sizes", None))


@op("split_with_sizes", view=True)
def split_with_sizes(xp, input, split_sizes, dim=0):
    """Pieces along ``dim`` of the listed sizes (they must add up to the dim's size)."""
    d = _wrap_strict(dim, input.ndim, "split_with_sizes")
    return _pieces(input, d, _sizes_bounds(_check_sizes(input.shape[d], d, size_args((split_sizes,), "split_sizes"))))


split_with_sizes.vjp(_split_vjp(_with_sizes_args))


def _chunk_sizes(n, chunks):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = -(-n // chunks)
    return [0] * chunks if n == 0 else _split_sizes(n, size)


def _chunk_args(ctx):
    x = ctx.args[0]
    d = _wrap_dim(_arg(ctx, 2, "dim", 0), x.dim())
    return d, _sizes_bounds(_chunk_sizes(x.shape[d], _arg(ctx, 1, "chunks", None)))


@op("chunk", view=True)
def chunk(xp, input, chunks, dim=0):
    """At most ``chunks`` pieces of equal size along ``dim`` (the last may be smaller)."""
    d = _wrap_strict(dim, input.ndim, "chunk")
    return _pieces(input, d, _sizes_bounds(_chunk_sizes(input.shape[d], chunks)))


chunk.vjp(_split_vjp(_chunk_args))


def _tensor_split_bounds(n, spec):
    """(start, stop) pairs of tensor_split: ``spec`` is a number of sections or a list of indices."""
    if hasattr(spec, "ndim"):
        if spec.dtype.kind not in "iu":
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{D.from_np(spec.dtype)}")
        if spec.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {spec.ndim} dims")
        spec = int(spec) if spec.ndim == 0 else [int(i) for i in spec.tolist()]
    if isinstance(spec, int):
        if spec <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {spec}")
        q, r = divmod(n, spec)
        return _sizes_bounds([q + 1] * r + [q] * (spec - r))
    cuts = [0] + list(size_args((spec,), "indices")) + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def _tensor_split_args(ctx):
    x = ctx.args[0]
    spec = _arg(ctx, 1, "indices_or_sections", None)
    spec = ctx.kwargs.get("sections", ctx.kwargs.get("indices")) if spec is None else spec
    spec = spec.numpy() if isinstance(spec, Tensor) else spec
    d = _wrap_dim(_arg(ctx, 2, "dim", 0), x.dim())
    return d, _tensor_split_bounds(x.shape[d], spec)


@op("tensor_split", view=True)
def tensor_split(xp, input, indices_or_sections=None, dim=0, *, sections=None, indices=None):
    """Pieces along ``dim``: ``sections`` near-equal ones, or cut before each of ``indices``."""
    spec = indices_or_sections if indices_or_sections is not None else sections if sections is not None else indices
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = _wrap_dim(dim, input.ndim)
    if hasattr(spec, "ndim") and type(spec) is not np.ndarray:
        spec = spec.get()
    return _pieces(input, d, _tensor_split_bounds(input.shape[d], spec))


tensor_split.vjp(_split_vjp(_tensor_split_args))

_SPLIT_DIM = {"hsplit": (1, 1), "vsplit": (0, 2), "dsplit": (2, 3)}  # dim and least number of dims


def _directional_split(name, xp, input, spec):
    dim, least = _SPLIT_DIM[name]
    if input.ndim < least:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {least} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    d = 0 if name == "hsplit" and input.ndim == 1 else dim
    if isinstance(spec, int) and spec and input.shape[d] % spec:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                           f"{input.shape[d]} is not divisible by the split_size {spec}!")
    return tensor_split.impl(xp, input, spec, d)


def _directional_args(name):
    def args(ctx):
        x, spec = ctx.args[0], _arg(ctx, 1, "indices_or_sections", None)
        d = 0 if name == "hsplit" and x.dim() == 1 else _SPLIT_DIM[name][0]
        return d, _tensor_split_bounds(x.shape[d], spec)
    return args


@op("hsplit", view=True)
def hsplit(xp, input, indices_or_sections):
    """tensor_split along dim 1 (dim 0 of a 1-D tensor); sections must divide the dim evenly."""
    return _directional_split("hsplit", xp, input, indices_or_sections)


@op("vsplit", view=True)
def vsplit(xp, input, indices_or_sections):
    """tensor_split along dim 0 of a tensor of at least 2 dims; sections must divide it evenly."""
    return _directional_split("vsplit", xp, input, indices_or_sections)


@op("dsplit", view=True)
def dsplit(xp, input, indices_or_sections):
    """tensor_split along dim 2 of a tensor of at least 3 dims; sections must divide it evenly."""
    return _directional_split("dsplit", xp, input, indices_or_sections)


for _o in (hsplit, vsplit, dsplit):
    _o.vjp(_split_vjp(_directional_args(_o.name)))


@op("unsafe_split")
def unsafe_split(xp, input, split_size, dim=0):
    """``split`` whose pieces are not tracked as views."""
    if not isinstance(split_size, int):
        raise TypeError(f"unsafe_split(): argument 'split_size' (position 2) must be int, not "
                        f"{type(split_size).__name__}")
    return split.impl(xp, input, split_size, dim)


@op("unsafe_chunk")
def unsafe_chunk(xp, input, chunks, dim=0):
    """``chunk`` whose pieces are not tracked as views."""
    return chunk.impl(xp, input, chunks, dim)


@op("unsafe_split_with_sizes")
def unsafe_split_with_sizes(xp, input, split_sizes, dim=0):
    """``split_with_sizes`` whose pieces are not tracked as views."""
    return split_with_sizes.impl(xp, input, split_sizes, dim)


unsafe_split.vjp(split.vjp_fn)
unsafe_chunk.vjp(chunk.vjp_fn)
unsafe_split_with_sizes.vjp(split_with_sizes.vjp_fn)


# ---- moving and reshaping dims ---------------------------------------------------------------------
def _dims_list(dims, ndim, what):
    dims = [dims] if isinstance(dims, int) else list(dims)
    wrapped = [_wrap_dim(d, ndim) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"movedim: repeated dim in `{what}` ({dims})")
    return wrapped


@op("movedim", view=True)
def movedim(xp, input, source, destination):
    """A view with the dims ``source`` moved to the positions ``destination``."""
    src, dst = _dims_list(source, input.ndim, "source"), _dims_list(destination, input.ndim, "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the "
                           f"same number of dims as destination ({dst} dims)")
    return xp.moveaxis(input, src, dst) if input.ndim else input[()]


@movedim.vjp
def _(ctx, g):
    return g.movedim(_arg(ctx, 2, "destination", None), _arg(ctx, 1, "source", None)), None, None


@op("moveaxis", view=True)
def moveaxis(xp, input, source, destination):
    """Alias of movedim."""
    return movedim.impl(xp, input, source, destination)


moveaxis.vjp(movedim.vjp_fn)


def _reshape_vjp(ctx, g):
    return (g.reshape(ctx.args[0].shape),) + (None,) * (len(ctx.args) - 1)


@op("unflatten", view=True)
def unflatten(xp, input, dim, sizes):
    """Split dim ``dim`` into dims of ``sizes`` (one of them may be -1)."""
    d = _wrap_strict(dim, input.ndim, "unflatten")
    sizes = list(size_args((sizes,), "sizes"))
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n, known = input.shape[d], math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in sizes and known and n % known == 0:
        sizes[sizes.index(-1)] = n // known
    if -1 in sizes or math.prod(sizes) != n:
        raise RuntimeError(f"unflatten: Provided sizes {list(size_args((sizes,)))} don't multiply up to the size of "
                           f"dim {dim} ({n}) in the input tensor")
    return input.reshape(input.shape[:d] + tuple(sizes) + input.shape[d + 1:])


unflatten.vjp(_reshape_vjp)


@op("ravel", view=lambda call: call.args[0]._data.flags.c_contiguous)
def ravel(xp, input):
    """The elements as a 1-D tensor (a view when the tensor is contiguous)."""
    return input.reshape(-1)


ravel.vjp(_reshape_vjp)


# ---- stacking ------------------------------------------------------------------------------------
def _atleast_shape(shape, n):
    if len(shape) >= n:
        return shape
    if n == 3 and len(shape) == 2:
        return shape + (1,)
    if n == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (n - len(shape)) + shape


def _stack_layout(name, shapes):
    """(dim to concatenate along, each input's shape before joining) for hstack and its kin."""
    if name == "column_stack":
        return 1, [s if len(s) > 1 else (math.prod(s), 1) for s in shapes]
    if name == "hstack":
        full = [_atleast_shape(s, 1) for s in shapes]
        return (0 if len(full[0]) == 1 else 1), full
    n = {"vstack": 2, "row_stack": 2, "dstack": 3}[name]
    return n - 2 if name != "dstack" else 2, [_atleast_shape(s, n) for s in shapes]


def _stacker(name):
    def impl(xp, tensors):
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        d, shapes = _stack_layout(name, [a.shape for a in tensors])
        return cat.impl(xp, [a.reshape(s) for a, s in zip(tensors, shapes)], d)
    impl.__doc__ = {"hstack": "Join tensors along dim 1 (dim 0 for 1-D ones).",
                    "vstack": "Join tensors, seen as at least 2-D, along dim 0.",
                    "row_stack": "Alias of vstack.",
                    "dstack": "Join tensors, seen as at least 3-D, along dim 2.",
                    "column_stack": "Join tensors as columns: 0-D and 1-D ones become (n, 1)."}[name]
    return impl


def _stack_vjp(name):
    def vjp(ctx, g):
        tensors = ctx.args[0]
        d, shapes = _stack_layout(name, [tuple(t.shape) for t in tensors])
        grads, start = [], 0
        for t_, s in zip(tensors, shapes):
            skipped = len(s) == 1 and s[0] == 0 and g.dim() != 1  # cat skips empty 1-D pieces
            grads.append(g.new_zeros(t_.shape) if skipped else g.narrow(d, start, s[d]).reshape(t_.shape))
            start += 0 if skipped else s[d]
        return (grads,)
    return vjp


for _name in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
    op(_name, out_refusal=join_out_refusal, result_layout="suggested")(_stacker(_name)).vjp(_stack_vjp(_name))


def _atleast(n):
    def impl(xp, *tensors):
        single = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
        arrays = tensors[0] if len(tensors) == 1 and not single else tensors
        out = tuple(a.reshape(_atleast_shape(a.shape, n)) for a in arrays)
        return out[0] if single else out
    impl.__doc__ = f"Each tensor viewed with at least {n} dims (leading, then trailing, dims of size 1 added)."
    return impl


def _atleast_vjp(ctx, *grads):
    grads = [g.reshape(t_.shape) if g is not None else None for t_, g in zip(_grid_inputs(ctx.args), grads)]
    return (grads,) if len(ctx.args) == 1 and isinstance(ctx.args[0], (list, tuple)) else tuple(grads)


def _grid_inputs(tensors):
    return tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors


def _outputs_of_constant_inputs(args, kwargs):
    """For ops whose i-th output is made from the i-th input alone: the outputs of inputs that do not require grad
    carry none (PyTorch records a node per output)."""
    return tuple(i for i, t in enumerate(_grid_inputs(args)) if not t.requires_grad)


for _n in (1, 2, 3):
    _op = op(f"atleast_{_n}d", view=lambda call: len(call.tensors()) == 1)(_atleast(_n))
    _op.vjp(_atleast_vjp)
    _op.constant_outputs = _outputs_of_constant_inputs


@op("broadcast_tensors", view=lambda call: len(call.tensors()) == 1)
def broadcast_tensors(xp, *tensors):
    """Views of the tensors broadcast to their common shape."""
    shape = P.broadcast_shapes(*[a.shape for a in tensors])
    return tuple(xp.broadcast_to(a, shape) for a in tensors)


@broadcast_tensors.vjp
def _(ctx, *grads):
    return tuple(g.sum_to_size(t_.shape) if g is not None else None for t_, g in zip(ctx.args, grads))


broadcast_tensors.constant_outputs = _outputs_of_constant_inputs


@op("meshgrid", view=lambda call: len(call.tensors()) == 1)
def meshgrid(xp, *tensors, indexing=None):
    """Coordinate grids of 0-D/1-D tensors: ``indexing="ij"`` (matrix, the default) or ``"xy"`` (Cartesian)."""
    tensors = _grid_inputs(tensors)
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing not in (None, "ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for a in tensors:
        if a.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {a.ndim}D")
        if a.dtype != tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return tuple(xp.meshgrid(*[a.reshape(-1) for a in tensors], indexing=indexing or "ij", copy=False))


@meshgrid.vjp
def _(ctx, *grads):
    tensors = _grid_inputs(ctx.args)
    n = len(tensors)
    axes = list(range(n))
    if ctx.kwargs.get("indexing") == "xy" and n > 1:
        axes[0], axes[1] = 1, 0
    out = []
    for t_, g, a in zip(tensors, grads, axes):
        others = tuple(k for k in range(n) if k != a)
        out.append(None if g is None else (g.sum(others) if others else g).reshape(t_.shape))
    return (out,) if tensors is not ctx.args else tuple(out)


meshgrid.constant_outputs = _outputs_of_constant_inputs


@op("cartesian_prod")
def cartesian_prod(xp, *tensors):
    """Every combination of one element from each 1-D tensor, as rows (a single tensor comes back as is)."""
    for a in tensors:
        if a.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(a.shape)}")
    grids = meshgrid.impl(xp, *tensors, indexing="ij")
    return grids[0].copy() if len(tensors) == 1 else xp.stack([g.reshape(-1) for g in grids], axis=1)


@cartesian_prod.vjp
def _(ctx, g):
    if len(ctx.args) == 1:
        return (g,)
    sizes = [t_.shape[0] for t_ in ctx.args]
    n = len(sizes)
    return tuple(g[:, i].reshape(sizes).sum(tuple(k for k in range(n) if k != i)) for i in range(n))


def _combination_index(n, r, with_replacement):
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    count = math.comb(n + r - 1, r) if with_replacement else math.comb(n, r)
    flat = np.fromiter(itertools.chain.from_iterable(pick(range(n), r)), np.int64, count * r)
    return flat.reshape(count, r)


@op("combinations")
def combinations(xp, input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, as rows, in lexicographic order of positions."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return xp.empty((0,), input.dtype)
    return input[xp.asarray(_combination_index(input.shape[0], r, with_replacement))]


@combinations.vjp
def _(ctx, g):
    x = ctx.args[0]
    r, rep = _arg(ctx, 1, "r", 2), _arg(ctx, 2, "with_replacement", False)
    if r == 0:
        return (g.new_zeros(x.shape),) + (None,) * (len(ctx.args) - 1)
    idx = g.new_tensor(_combination_index(x.shape[0], r, rep), dtype=D.int64)
    return (g.new_zeros(x.shape).index_add(0, idx.reshape(-1), g.reshape(-1)),) + (None,) * (len(ctx.args) - 1)


def _block_shape(shape):
    return (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else shape


@op("block_diag")
def block_diag(xp, *tensors):
    """A block-diagonal matrix of the given 0-D, 1-D (rows) and 2-D tensors."""
    for i, a in enumerate(tensors):
        if a.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{a.ndim} dimensions")
    if not tensors:
        return xp.empty((1, 0), D.storage(D.get_default_dtype()))
    dtype = D.storage(P.array_result_type(*tensors))
    shapes = [_block_shape(a.shape) for a in tensors]
    out = xp.zeros((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dtype)
    r = c = 0
    for a, (h, w) in zip(tensors, shapes):  # one block per tensor
        out[r:r + h, c:c + w] = a.reshape(h, w)
        r, c = r + h, c + w
    return out


@block_diag.vjp
def _(ctx, g):
    grads, r, c = [], 0, 0
    for t_ in ctx.args:
        h, w = _block_shape(tuple(t_.shape))
        grads.append(g[r:r + h, c:c + w].reshape(t_.shape).to(t_.dtype) if t_.dtype.is_floating_point else None)
        r, c = r + h, c + w
    return tuple(grads)


# ---- flips, rolls, repeats -----------------------------------------------------------------------
@op("flipud")
def flipud(xp, input):
    """A copy with the order of rows (dim 0) reversed."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip.impl(xp, input, 0)


@op("fliplr")
def fliplr(xp, input):
    """A copy with the order of columns (dim 1) reversed."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip.impl(xp, input, 1)


flipud.vjp(lambda ctx, g: (g.flipud(),))
fliplr.vjp(lambda ctx, g: (g.fliplr(),))


def _as_tuple(v):
    return (v,) if isinstance(v, int) else tuple(v)


@op("roll", result_layout="row_major")
def roll(xp, input, shifts, dims=()):
    """A copy with the entries shifted cyclically by ``shifts`` along ``dims`` (all of them, flattened, if
    no dims are given)."""
    shifts, dims = _as_tuple(shifts), _as_tuple(() if dims is None else dims)
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return xp.roll(input.reshape(-1), shifts[0]).reshape(input.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return xp.roll(input, shifts, tuple(_wrap_dim(d, input.ndim) for d in dims))


@roll.vjp
def _(ctx, g):
    shifts, dims = _as_tuple(_arg(ctx, 1, "shifts", 0)), _arg(ctx, 2, "dims", ())
    return g.roll(tuple(-s for s in shifts), dims), None, None


@op("rot90")
def rot90(xp, input, k=1, dims=(0, 1)):
    """A copy rotated by ``k`` quarter turns in the plane of ``dims`` (from the first dim towards the second)."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = _wrap_dim(dims[0], input.ndim), _wrap_dim(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    return xp.ascontiguousarray(xp.rot90(input, k, axes=(a, b)))


@rot90.vjp
def _(ctx, g):
    return g.rot90(-_arg(ctx, 1, "k", 1), _arg(ctx, 2, "dims", (0, 1))), None, None


def _repeat_grad(g, shape, reps):
    """Sum of a repeated tensor's gradient over the copies (``reps`` one count per dim, leading ones new)."""
    reps, shape = list(reps), list(shape)
    reps = [1] * (len(shape) - len(reps)) + reps
    padded = [1] * (len(reps) - len(shape)) + shape
    if not reps:
        return g
    split = [v for r, s in zip(reps, padded) for v in (r, s)]
    return g.reshape(split).sum(tuple(range(0, 2 * len(reps), 2))).reshape(shape)


def _check_reps(reps):
    for r in reps:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {r}: {list(reps)}")


@op("repeat", function=False)
def repeat(xp, input, *sizes):
    """The tensor copied ``sizes[i]`` times along each dim (extra leading ``sizes`` add dims)."""
    reps = size_args(sizes, "repeats")
    if len(reps) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    _check_reps(reps)
    return xp.tile(input, reps)


@repeat.vjp
def _(ctx, g):
    reps = size_args(ctx.args[1:], "repeats")
    return (_repeat_grad(g, ctx.args[0].shape, reps),) + (None,) * (len(ctx.args) - 1)


@op("tile")
def tile(xp, input, dims):
    """The tensor copied ``dims[i]`` times along each dim (missing counts are 1, extra ones add dims)."""
    reps = size_args((dims,), "dims")
    _check_reps(reps)
    return xp.tile(input, reps) if reps else input.copy()


@tile.vjp
def _(ctx, g):
    return _repeat_grad(g, ctx.args[0].shape, size_args((_arg(ctx, 1, "dims", ()),))), None


def _check_repeats(repeats, n):
    if repeats.dtype.kind not in "iu":
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for '{_torch_name(repeats)}'")
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats.size not in (1, n):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{repeats.size} and input.size(0) = {n}")
    if repeats.size and int(repeats.min()) < 0:
        raise RuntimeError("repeats can not be negative")


def _torch_name(a):
    from .._registry import TORCH_NAME
    return TORCH_NAME[D.from_np(a.dtype)]


def _repeat_along(xp, x, d, repeats):
    if xp is np or isinstance(repeats, int):
        return xp.repeat(x, repeats, axis=d)
    ends = xp.cumsum(xp.broadcast_to(repeats.reshape(-1), (x.shape[d],)))  # CuPy: positions from the counts
    total = int(ends[-1]) if ends.size else 0
    return xp.take(x, xp.searchsorted(ends, xp.arange(total), side="right"), axis=d)


@op("repeat_interleave")
def repeat_interleave(xp, input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along ``dim``) repeated ``repeats`` times in place; given only a tensor of
    counts, the positions 0, 1, ... each repeated that many times."""
    if repeats is None:
        if input.ndim > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        _check_repeats(input.reshape(-1), input.size)
        return _repeat_along(xp, xp.arange(input.size), 0, input.reshape(-1)).astype(input.dtype)
    x, d = (input.reshape(-1), 0) if dim is None else (input, _wrap_dim(dim, input.ndim))
    if hasattr(repeats, "ndim"):
        _check_repeats(repeats, x.shape[d])
        repeats = repeats.reshape(-1) if repeats.size != 1 else int(repeats.reshape(-1)[0])
    elif repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    r = _repeat_along(xp, x, d, repeats)
    if output_size is not None and output_size != r.shape[d]:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {r.shape[d]} but got {output_size}")
    return r


@repeat_interleave.vjp
def _(ctx, g):
    x, repeats, dim = ctx.args[0], _arg(ctx, 1, "repeats", None), _arg(ctx, 2, "dim", None)
    xs = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim % x.dim()
    positions = Tensor.repeat_interleave(g.new_tensor(np.arange(xs.shape[d]), dtype=D.int64), repeats)
    return g.new_zeros(xs.shape).index_add(d, positions, g).reshape(x.shape), None, None


# ---- triangles and diagonals ---------------------------------------------------------------------
def _check_matrix(name, input):
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


@op("tril", inplace=True)
def tril(xp, input, diagonal=0):
    """The lower triangle (on and below the ``diagonal``-th diagonal), zeros above."""
    _check_matrix("tril", input)
    return xp.tril(input, diagonal)


@op("triu", inplace=True)
def triu(xp, input, diagonal=0):
    """The upper triangle (on and above the ``diagonal``-th diagonal), zeros below."""
    _check_matrix("triu", input)
    return xp.triu(input, diagonal)


tril.vjp(lambda ctx, g: (g.tril(_arg(ctx, 1, "diagonal", 0)), None))
triu.vjp(lambda ctx, g: (g.triu(_arg(ctx, 1, "diagonal", 0)), None))


def _triangle_indices(which):
    def fn(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
        if row < 0 or col < 0:
            raise RuntimeError(f"row must be non-negative, got{row}" if row < 0 else f"col must be non-negative, "
                               f"got{col}")
        r, c = (np.tril_indices if which == "tril" else np.triu_indices)(row, offset, col)
        return _place(np.stack([r, c]).astype(D.storage(dtype or D.int64)), device)
    fn.__doc__ = f"The (row, column) positions of the {'lower' if which == 'tril' else 'upper'} triangle of a " \
                 "row x col matrix, as a 2 x N tensor."
    return fn


factory("tril_indices")(_triangle_indices("tril"))
factory("triu_indices")(_triangle_indices("triu"))


def _diag_view(xp, a, offset, d1, d2):
    """``xp.diagonal`` as a writable view (NumPy hands back a read-only one)."""
    r = xp.diagonal(a, offset, d1, d2)
    if xp is np and not r.flags.writeable and a.flags.writeable:
        r.flags.writeable = True
    return r


def _diag_dims(ndim, dim1, dim2):
    d1, d2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


@op("diagonal", view=True)
def diagonal(xp, input, offset=0, dim1=0, dim2=1):
    """A view of the ``offset``-th diagonal of the planes (``dim1``, ``dim2``), as the last dim."""
    d1, d2 = _diag_dims(input.ndim, dim1, dim2)
    return _diag_view(xp, input, offset, d1, d2)


@diagonal.vjp
def _(ctx, g):
    x = ctx.args[0]
    o, d1, d2 = _arg(ctx, 1, "offset", 0), _arg(ctx, 2, "dim1", 0), _arg(ctx, 3, "dim2", 1)
    return diagonal_scatter.fn(g.new_zeros(x.shape), g, o, d1, d2), None, None, None


def _scatter_into(input, src, view_of):
    """A copy of ``input`` whose view ``view_of(copy)`` is overwritten by ``src`` (of exactly the view's shape)."""
    out = input.copy()
    view = view_of(out)
    if view.shape != src.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")
    view[...] = src
    return out


@op("diagonal_scatter")
def diagonal_scatter(xp, input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` with its ``offset``-th diagonal over (``dim1``, ``dim2``) replaced by ``src``."""
    d1, d2 = _diag_dims(input.ndim, dim1, dim2)
    return _scatter_into(input, src, lambda out: _diag_view(xp, out, offset, d1, d2))


@diagonal_scatter.vjp
def _(ctx, g):
    src = ctx.args[1]
    rest = [_arg(ctx, 2, "offset", 0), _arg(ctx, 3, "dim1", 0), _arg(ctx, 4, "dim2", 1)]
    return (diagonal_scatter.fn(g, g.new_zeros(src.shape), *rest), g.diagonal(*rest)) + (None,) * 3


@op("diag")
def diag(xp, input, diagonal=0):
    """For a vector, a square matrix with it on the ``diagonal``-th diagonal; for a matrix, that diagonal."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    return xp.diag(input, diagonal) if input.ndim == 1 else xp.diagonal(input, diagonal).copy()


@diag.vjp
def _(ctx, g):
    x, k = ctx.args[0], _arg(ctx, 1, "diagonal", 0)
    return (g.diagonal(k) if x.dim() == 1 else diagonal_scatter.fn(g.new_zeros(x.shape), g, k)), None


@op("diag_embed")
def diag_embed(xp, input, offset=0, dim1=-2, dim2=-1):
    """Matrices over (``dim1``, ``dim2``) with the last dim of ``input`` on their ``offset``-th diagonal."""
    nd = input.ndim + 1
    d1, d2 = _diag_dims(nd, dim1, dim2)
    m = input.shape[-1] + abs(offset) if input.ndim else 1 + abs(offset)
    shape = list(input.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, m)
    out = xp.zeros(shape, input.dtype)
    _diag_view(xp, out, offset, d1, d2)[...] = input
    return out


@diag_embed.vjp
def _(ctx, g):
    return g.diagonal(_arg(ctx, 1, "offset", 0), _arg(ctx, 2, "dim1", -2), _arg(ctx, 3, "dim2", -1)), None, None, None


@op("diagflat")
def diagflat(xp, input, offset=0):
    """A square matrix with the flattened ``input`` on its ``offset``-th diagonal."""
    return xp.diagflat(input.reshape(-1), offset)


@diagflat.vjp
def _(ctx, g):
    return g.diagonal(_arg(ctx, 1, "offset", 0)).reshape(ctx.args[0].shape), None


@op("fill_diagonal_", function=False, mutates=True)
def fill_diagonal_(xp, input, fill_value, wrap=False):
    """Set the main diagonal (all indices equal) to ``fill_value``; ``wrap`` restarts it below tall matrices."""
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) > 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    xp.fill_diagonal(input, fill_value, wrap=wrap)


@fill_diagonal_.vjp
def _(ctx, g):
    return g.clone().fill_diagonal_(0, *ctx.args[2:3], **ctx.kwargs), None, None


@op("select_scatter")
def select_scatter(xp, input, src, dim, index):
    """A copy of ``input`` with the slice at ``index`` of ``dim`` replaced by ``src``."""
    from .shape import select
    return _scatter_into(input, src, lambda out: select.impl(xp, out, dim, index))


@select_scatter.vjp
def _(ctx, g):
    src, dim, index = ctx.args[1], _arg(ctx, 2, "dim", 0), _arg(ctx, 3, "index", 0)
    return select_scatter.fn(g, g.new_zeros(src.shape), dim, index), g.select(dim, index), None, None


@op("slice_scatter")
def slice_scatter(xp, input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` with the slice ``start:end:step`` of ``dim`` replaced by ``src``."""
    d = _wrap_dim(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    return _scatter_into(input, src, lambda out: out[(slice(None),) * d + (slice(start, end, step),)])


@slice_scatter.vjp
def _(ctx, g):
    src = ctx.args[1]
    dim, start, end, step = (_arg(ctx, i, n, v) for i, n, v in ((2, "dim", 0), (3, "start", None),
                                                                (4, "end", None), (5, "step", 1)))
    d = dim % g.dim()
    part = g[(slice(None),) * d + (slice(start, end, step),)]
    return slice_scatter.fn(g, g.new_zeros(src.shape), d, start, end, step), part, None, None, None, None


@op("narrow_copy")
def narrow_copy(xp, input, dim, start, length):
    """``narrow`` as a new tensor."""
    return narrow.impl(xp, input, dim, start, length).copy()


narrow_copy.vjp(narrow.vjp_fn)


# ---- strided views -------------------------------------------------------------------------------
def _storage(xp, a):
    """(root array owning ``a``'s memory, ``a``'s byte offset in it, its size in bytes)."""
    if xp is np:
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        return root, a.__array_interface__["data"][0] - root.__array_interface__["data"][0], root.nbytes
    mem = a.data.mem
    return mem, a.data.ptr - mem.ptr, mem.size


def _strided(xp, a, size, stride, storage_offset=None):
    """A view over ``a``'s storage with ``size``, element ``stride`` and ``storage_offset``, PyTorch's checks."""
    size, stride = size_args((size,), "size"), size_args((stride,), "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    root, byte_offset, nbytes = _storage(xp, a)
    item = a.itemsize
    offset = byte_offset // item if storage_offset is None else storage_offset
    need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if need * item > nbytes:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {item} requiring a storage size of {need * item} are out of bounds for storage "
                           f"of size {nbytes}")
    strides = tuple(s * item for s in stride)
    if xp is np:
        start = root.reshape(-1).view(np.uint8)[offset * item:]
        return np.lib.stride_tricks.as_strided(start.view(a.dtype) if start.size else a[:0].reshape(-1), size, strides)
    return xp.ndarray(size, a.dtype, memptr=xp.cuda.MemoryPointer(root, offset * item), strides=strides)


@op("as_strided", view=True)
def as_strided(xp, input, size, stride, storage_offset=None):
    """A view over the tensor's storage with the given size, strides (in elements) and storage offset."""
    return _strided(xp, input, size, stride, storage_offset)


def _storage_positions(g, shape, stride, offset, n):
    base = g.new_tensor(np.arange(n), dtype=D.int64)
    return base.as_strided(shape, stride, offset)


@as_strided.vjp
def _(ctx, g):
    x, size, stride = ctx.args[:3]
    offset = _arg(ctx, 3, "storage_offset", None)
    offset = x.storage_offset() if offset is None else offset
    extent = lambda sh, st, o: o + sum((a - 1) * b for a, b in zip(sh, st)) + 1  # noqa: E731
    n = max(extent(x.shape, x.stride(), x.storage_offset()), extent(size, stride, offset))
    picked = _storage_positions(g, size, stride, offset, n).reshape(-1)
    storage = g.new_zeros(n).index_add(0, picked, g.reshape(-1))
    return storage[_storage_positions(g, x.shape, x.stride(), x.storage_offset(), n)], None, None, None


@op("as_strided_scatter")
def as_strided_scatter(xp, input, src, size, stride, storage_offset=None):
    """A contiguous copy of ``input`` with the strided view (size, stride, offset) of it replaced by ``src``."""
    return _scatter_into(input, src, lambda out: _strided(xp, out, size, stride, storage_offset or 0))


@as_strided_scatter.vjp
def _(ctx, g):
    src, size, stride = ctx.args[1:4]
    offset = _arg(ctx, 4, "storage_offset", None) or 0
    g = g.contiguous()
    return (as_strided_scatter.fn(g, g.new_zeros(src.shape), size, stride, offset),
            g.as_strided(size, stride, offset), None, None, None)


@op("unfold", function=False, view=True)
def unfold(xp, input, dimension, size, step):
    """A view of the windows of ``size`` entries, ``step`` apart, along ``dimension`` (a new last dim)."""
    x = input.reshape(1) if input.ndim == 0 else input
    d = _wrap_dim(dimension, input.ndim)
    n = x.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape = x.shape[:d] + ((n - size) // step + 1,) + x.shape[d + 1:] + (size,)
    strides = x.strides[:d] + (x.strides[d] * step,) + x.strides[d + 1:] + (x.strides[d],)
    r = xp.lib.stride_tricks.as_strided(x, shape, strides)
    return r.reshape(size) if input.ndim == 0 else r


@unfold.vjp
def _(ctx, g):
    x, dimension, size, step = ctx.args[:4]
    if x.dim() == 0:
        return g.sum().reshape(()), None, None, None
    d = dimension % x.dim()
    windows = g.shape[d]
    positions = (g.new_tensor(np.arange(windows), dtype=D.int64) * step).unsqueeze(1) + \
        g.new_tensor(np.arange(size), dtype=D.int64)
    flat = g.movedim(-1, d + 1).flatten(d, d + 1)
    return g.new_zeros(x.shape).index_add(d, positions.reshape(-1), flat), None, None, None


# ---- padding -------------------------------------------------------------------------------------
@op("constant_pad_nd", method=False)
def constant_pad_nd(xp, input, pad, value=0):
    """``input`` padded with ``value``: ``pad`` gives (before, after) counts from the last dim backwards;
    negative counts crop."""
    pad = size_args((pad,), "pad")
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(f"Length of pad should be no more than twice the number of dimensions of the input. Pad "
                           f"length is {len(pad)}while the input has {input.ndim}dimensions.")
    shape, src, dst = list(input.shape), [slice(None)] * input.ndim, [slice(None)] * input.ndim
    for i in range(len(pad) // 2):
        d, before, after = input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = shape[d] + before + after
        if n < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        src[d] = slice(max(-before, 0), shape[d] - max(-after, 0))
        dst[d] = slice(max(before, 0), n - max(after, 0))
        shape[d] = n
    out = xp.full(shape, value, input.dtype)
    out[tuple(dst)] = input[tuple(src)]
    return out


@constant_pad_nd.vjp
def _(ctx, g):
    pad = _arg(ctx, 1, "pad", ())
    return constant_pad_nd.fn(g, [-p for p in pad]), None, None


# ---- in-place view methods: the tensor itself takes the new shape -----------------------------
def _inplace_view(view_op, name):
    def method(self, *args, **kwargs):
        self._data = view_op.impl(_device_arrays([self]), self._data, *args, **kwargs)
        self._vc[0] += 1
        return self
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place ``{view_op.name}``: this tensor takes the new shape."
    return method


for _op, _names in ((squeeze, ("squeeze_",)), (unsqueeze, ("unsqueeze_",)), (t, ("t_",)),
                    (transpose, ("transpose_", "swapaxes_", "swapdims_")), (as_strided, ("as_strided_",))):
    for _n in _names:
        setattr(Tensor, _n, _inplace_view(_op, _n))


def resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape ``sizes`` in place, keeping its leading elements (new ones are uninitialised)."""
    shape = size_args(sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    xp = _device_arrays([self])
    n, flat = math.prod(shape), xp.ascontiguousarray(self._data).reshape(-1)
    if n <= flat.size:
        self._data = flat[:n].reshape(shape)
    else:
        grown = xp.empty(n, flat.dtype)
        grown[:flat.size] = flat
        self._data = grown.reshape(shape)
    self._vc[0] += 1
    return self


def resize_as_(self, other, memory_format=None):
    """``resize_`` to ``other``'s shape."""
    return resize_(self, other.shape)


def resize(self, *sizes):
    """Deprecated out-of-place resize: a reshape to ``sizes`` (the number of elements must not change)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return self.reshape(size_args(sizes))


def resize_as(self, other):
    """Deprecated out-of-place ``resize`` to ``other``'s shape."""
    return resize(self, other.shape)


Tensor.resize_, Tensor.resize_as_, Tensor.resize, Tensor.resize_as = resize_, resize_as_, resize, resize_as
# PyTorch also has these two as functions (torch.as_strided_(x, ...)): exported, outside dispatch like the methods
factory("as_strided_")(Tensor.as_strided_)
factory("resize_as_")(resize_as_)


# ---- index arithmetic and creation -----------------------------------------------------------------
@op("unravel_index", differentiable=False, method=False)
def unravel_index(xp, indices, shape):
    """The coordinates in ``shape`` of flat (C-order) positions ``indices``, one tensor per dim."""
    if not hasattr(indices, "dtype") or indices.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got "
                        f"{D.from_np(indices.dtype) if hasattr(indices, 'dtype') else type(indices).__name__}")
    shape = size_args((shape,), "shape")
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(tuple(shape)))
    flat = indices.astype(np.int64) % max(math.prod(shape), 1)  # out-of-range positions wrap, as in PyTorch
    return tuple(xp.asarray(c, dtype=np.int64) for c in xp.unravel_index(flat, shape)) if shape else ()


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor with the given size and strides (in elements)."""
    size, stride = size_args((size,), "size"), size_args((stride,), "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    dt = D.storage(dtype or D.get_default_dtype())
    need = sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    storage = np.empty(need, dt)
    return _place(_strided(np, storage, size, stride, 0) if need else np.empty(size, dt), device, requires_grad)


def _scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A zero-dim tensor holding the number ``s`` (default float dtype unless ``dtype`` is given)."""
    return _place(np.asarray(s, D.storage(dtype or D.get_default_dtype())), device, requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, layout=None,
                      pin_memory=False):
    """``empty_strided`` with this tensor's dtype and device unless given."""
    return _empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)


Tensor.new_empty_strided = new_empty_strided
factory("empty_strided")(_empty_strided)
factory("scalar_tensor")(_scalar_tensor)
