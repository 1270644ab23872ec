"""Batching rules: how one op call on batched tensors becomes one call on their physical arrays.

A rule gets the dispatcher's call (its arguments still the batched tensors) and ``call_next``; it rewrites the
arguments for the physical arrays (batch dims in front: dims shifted past them, operands aligned so that they
broadcast, batch dims merged into an op's own batch dim), runs the op once through the layers below
(``_vmap.run``), and marks the result batched. Some rules are decompositions into other ops, run logically (each
of those meets its own rule). Ops with no rule here fall back to a loop over the examples (``_vmap.fallback``).
"""
import inspect
import math

import numpy as np

import ember
from ember._registry import REGISTRY
from ember._tensor import Tensor, _wrap_dim

from . import _vmap
from ._vmap import BatchedTensor, align, as_batched, fallback, levels_of, lrank, lshape, physical, run

RANDOM_ERROR, STATE, _inplace_error = _vmap.RANDOM_ERROR, _vmap.STATE, _vmap._inplace_error

RULES = {}


def rule_for(op):
    r = RULES.get(op.name)
    if r is None and op.kind == "elementwise":
        return broadcast
    return r


def _register(names, rule):
    for n in names.split():
        RULES[n] = rule


def _union(tensors):
    return tuple(sorted({lv for t in tensors for lv in levels_of(t)}))


def _sizes(levels):
    return [STATE.sizes[lv] for lv in levels]


def _batched(x):
    return isinstance(x, BatchedTensor)


def _mark(result, levels):
    if isinstance(result, Tensor):
        return as_batched(result, levels)
    if isinstance(result, (tuple, list)):
        parts = [_mark(r, levels) for r in result]
        return type(result)(*parts) if hasattr(result, "_fields") else type(result)(parts)
    return result


_sigs = {}


class _Bound:
    """An op call's arguments by parameter name (what ``inspect`` binding gives, made for the rules' few needs at a
    fraction of its cost): ``arguments`` in parameter order; ``args``/``kwargs`` to call the op with."""

    __slots__ = ("arguments", "_positional", "defaults")

    def __init__(self, arguments, positional, defaults):
        self.arguments, self._positional, self.defaults = arguments, positional, defaults

    @property
    def args(self):
        names = self._positional
        last = max((i for i, n in enumerate(names) if n in self.arguments), default=-1)
        return tuple(self.arguments[n] if n in self.arguments else self.defaults[n] for n in names[:last + 1])

    @property
    def kwargs(self):
        return {n: v for n, v in self.arguments.items() if n not in self._positional}


def _bind(op, args, kwargs):
    sig = _sigs.get(op)
    if sig is None:
        params = list(inspect.signature(op.impl).parameters.values())[1:]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            raise TypeError(f"no batching binder for {op.name}'s signature")
        positional = tuple(p.name for p in params if p.kind != p.KEYWORD_ONLY)
        order = tuple(p.name for p in params)
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        sig = _sigs[op] = (positional, order, defaults)
    positional, order, defaults = sig
    given = dict(zip(positional, args))
    given.update(kwargs)
    return _Bound({n: given[n] for n in order if n in given}, positional, defaults)


def _arg(bound, name):
    arguments = bound.arguments
    return arguments[name] if name in arguments else bound.defaults.get(name)


def _shift(d, rank, k):
    if isinstance(d, (tuple, list)):
        return type(d)(_shift(v, rank, k) for v in d)
    return _wrap_dim(d, rank) + k


def _only_first(call):
    """Whether the call's only batched tensor is its first argument."""
    first = call.args[0] if call.args else None
    return _batched(first) and all(t is first for t in call.tensors() if _batched(t))


# ---- elementwise and broadcasting ops ----
def broadcast(call, call_next):
    """Operands broadcast against each other: batched ones get every batch dim (size 1 where not batched) and their
    logical dims padded to the widest operand; unbatched ones broadcast from the right as they are."""
    tensors = call.tensors()
    levels = _union(tensors)
    rank = max(lrank(t) for t in tensors)
    if call.mode == "inplace" and levels_of(call.args[0]) != levels:
        target = call.args[0]
        if not _batched(target):  # (PyTorch's words: the batch dims make the result larger than the target)
            shape = np.broadcast_shapes(*[lshape(t) for t in tensors])
            raise RuntimeError(f"output with shape {list(lshape(target))} doesn't match the broadcast shape "
                               f"{[*_sizes(levels), *shape]}")
        raise RuntimeError(_inplace_error(call.op))
    with physical():
        def fix(a):
            if _batched(a):
                return align(a, levels, rank)
            if type(a) in (list, tuple) and any(_batched(x) for x in a):
                return type(a)(fix(x) for x in a)
            return a
        args = [fix(a) for a in call.args]
        kwargs = {k: fix(v) for k, v in call.kwargs.items()}
    r = run(call, call_next, args, kwargs)
    return call.args[0] if call.mode == "inplace" else _mark(r, levels)


_register("broadcast_tensors where clamp clip clamp_min clamp_max complex polar masked_fill isclose copy_ "
          "_gelu_backward _silu_backward _softplus_backward", broadcast)


def transparent(call, call_next):
    """Ops that act on each element, or on the last dims only, of their one batched tensor."""
    if not _only_first(call):
        return fallback(call, call_next)
    x = call.args[0]
    r = run(call, call_next, call.args)
    return r if call.mode == "inplace" else _mark(r, x._levels)


_register("positive nan_to_num hardshrink threshold selu celu conj conj_physical resolve_conj resolve_neg real imag "
          "angle gelu silu mish hardtanh hardsigmoid hardswish elu leaky_relu softplus softsign tanhshrink softshrink "
          "log_sigmoid _to_copy clone tril triu zero_ fill_ matrix_exp linalg_matrix_exp linalg_inv inverse det "
          "linalg_det slogdet linalg_slogdet logdet linalg_cholesky cholesky linalg_eigh linalg_eigvalsh "
          "linalg_svdvals linalg_qr matrix_power linalg_matrix_power frexp", transparent)


# ---- ops with dim arguments ----
def dims(*names, none=None, plus=0, empty_is_none=False):
    """A rule for ops on one batched tensor whose ``names`` arguments are dims (ints or tuples) of a tensor of the
    input's logical rank + ``plus``. ``none``: what a dim of None means: "all" (a tuple of every logical dim) or
    "flat" (the logical dims flattened into one, reduced along it)."""
    def rule(call, call_next):
        op = call.op
        bound = _bind(op, call.args, call.kwargs)
        if any(isinstance(_arg(bound, name), Tensor) for name in names):  # max(input, other): elementwise
            return broadcast(call, call_next)
        if not _only_first(call):
            return fallback(call, call_next)
        x = call.args[0]
        levels = x._levels
        k, rank = len(levels), lrank(x)
        flat = False
        for name in names:
            d = _arg(bound, name)
            if empty_is_none and d == ():
                d = None
            if d is None:
                if none == "all":
                    d = tuple(range(rank))
                elif none == "flat":
                    flat = True
                    d = 0
                else:
                    continue
            bound.arguments[name] = _shift(d, max(rank + plus, 1), k)
        if flat:
            with physical():
                bound.arguments[next(iter(bound.arguments))] = x.reshape(*x._data.shape[:k], -1)
        r = run(call, call_next, bound.args, bound.kwargs)
        if flat and isinstance(r, tuple) and op.name in _VALUE_ONLY:
            r = r[0]
        if flat and bound.arguments.get("keepdim"):
            with physical():
                r = _mark_keepdim(r, k, rank)
        return r if call.mode == "inplace" else _mark(r, levels)
    return rule


_VALUE_ONLY = {"max", "min", "median", "nanmedian"}  # without a dim these return the value alone


def _mark_keepdim(r, k, rank):
    if isinstance(r, Tensor):
        return r.reshape(*r._data.shape[:k], *([1] * rank))
    return type(r)(*[_mark_keepdim(v, k, rank) for v in r]) if hasattr(r, "_fields") else \
        type(r)(_mark_keepdim(v, k, rank) for v in r)


_register("sum nansum mean nanmean", dims("dim", none="all", empty_is_none=True))
_register("amax amin", dims("dim", none="all", empty_is_none=True))
_register("prod max min argmax argmin all any count_nonzero median nanmedian norm", dims("dim", none="flat"))
_register("var std var_mean std_mean linalg_vector_norm", dims("dim", none="all"))
_register("logsumexp softmax log_softmax glu cumsum cumprod cummax cummin logcumsumexp sort argsort topk kthvalue "
          "mode unbind narrow select split split_with_sizes chunk tensor_split unsafe_split unsafe_chunk "
          "unsafe_split_with_sizes unflatten fft_fft "
          "fft_ifft fft_rfft fft_irfft fft_hfft fft_ihfft diff", dims("dim"))
_register("fft_fft2 fft_ifft2 fft_rfft2 fft_irfft2 fft_fftn fft_ifftn fft_rfftn fft_irfftn fft_fftshift "
          "fft_ifftshift", dims("dim", none="all"))
_register("transpose swapdims", dims("dim0", "dim1"))
_register("swapaxes", dims("axis0", "axis1"))
_register("movedim", dims("source", "destination"))
_register("moveaxis", dims("source", "destination"))
_register("diagonal", dims("dim1", "dim2"))
_register("linalg_diagonal", dims("dim1", "dim2"))
_register("diag_embed", dims("dim1", "dim2", plus=1))
_register("unsqueeze", dims("dim", plus=1))
_roll_dims = dims("dims")


def _roll(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    if _arg(bound, "dims") in ((), None):  # (a roll of the flattened tensor)
        return fallback(call, call_next)
    return _roll_dims(call, call_next)


RULES["roll"] = _roll


def _squeeze(call, call_next):
    if not _only_first(call):
        return fallback(call, call_next)
    x = call.args[0]
    k, shape = len(x._levels), lshape(x)
    bound = _bind(call.op, call.args, call.kwargs)
    d = _arg(bound, "dim")
    if d is None:
        d = tuple(i for i, n in enumerate(shape) if n == 1)
    elif not shape:  # (a 0-d tensor: dim 0 or -1 leaves it as it is)
        _wrap_dim(d if isinstance(d, int) else 0, 1)
        d = ()
    d = _shift(d, max(len(shape), 1), k)
    with physical():
        r = x.squeeze(d) if d != () else x.view_as(x)
    return _mark(r, x._levels)


RULES["squeeze"] = _squeeze


def _indexed(*names, whole=()):
    """Ops that pick or place along ``dim`` by index tensors of the input's rank (gather, scatter, take_along_dim):
    the tensors ``names`` all get every batch dim at full size (the index of each example addresses its own
    input); ``whole`` names 1-d index tensors, which must not be batched (index_add, index_copy, index_fill)."""
    def rule(call, call_next):
        bound = _bind(call.op, call.args, call.kwargs)
        if any(_batched(_arg(bound, n)) for n in whole) or _arg(bound, "dim") is None:
            return fallback(call, call_next)
        x = _arg(bound, names[0])
        levels = _union([_arg(bound, n) for n in names if isinstance(_arg(bound, n), Tensor)])
        if call.mode == "inplace" and levels_of(x) != levels:
            raise RuntimeError(_inplace_error(call.op))
        with physical():
            for n in names:
                if isinstance(_arg(bound, n), Tensor):
                    bound.arguments[n] = align(_arg(bound, n), levels, expand=True)
        bound.arguments["dim"] = _shift(_arg(bound, "dim"), max(lrank(x), 1), len(levels))
        r = run(call, call_next, bound.args, bound.kwargs)
        return x if call.mode == "inplace" else _mark(r, levels)
    return rule


RULES["gather"] = _indexed("input", "index")
_register("scatter scatter_add scatter_reduce", _indexed("input", "index", "src"))
RULES["take_along_dim"] = _indexed("input", "indices")
_register("index_add index_copy", _indexed("input", "source", whole=("index",)))
RULES["index_fill"] = _indexed("input", whole=("index",))


def _index_select(call, call_next):
    if not _only_first(call):
        return fallback(call, call_next)
    return dims("dim")(call, call_next)


RULES["index_select"] = _index_select


# ---- shapes ----
def _sizes_arg(sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


def _reshape(call, call_next):
    if not _only_first(call):
        return fallback(call, call_next)
    x = call.args[0]
    k = len(x._levels)
    shape = _sizes_arg(call.args[1:])
    args = (x, *x._data.shape[:k], *shape)
    if call.op.name == "view":
        try:
            return _mark(run(call, call_next, args), x._levels)
        except RuntimeError:  # (the batch dims do not merge with the rest in memory: a copy)
            with physical():
                return _mark(x.reshape(*args[1:]), x._levels)
    return _mark(run(call, call_next, args), x._levels)


_register("reshape view", _reshape)


def _as_other(method):
    def rule(call, call_next):
        x, other = call.args[0], call.args[1]
        shape = lshape(other)
        if method == "expand":
            return ember.Tensor.expand(x, *shape)
        return ember.Tensor.reshape(x, *shape)
    return rule


RULES["view_as"] = RULES["reshape_as"] = _as_other("reshape")
RULES["expand_as"] = _as_other("expand")


def _expand(call, call_next):
    if not _only_first(call):
        return fallback(call, call_next)
    x = call.args[0]
    k = len(x._levels)
    sizes = _sizes_arg(call.args[1:])
    with physical():
        px = align(x, x._levels, len(sizes))
    return _mark(run(call, call_next, (px, *([-1] * k), *sizes)), x._levels)


def _broadcast_to(call, call_next):
    return ember.Tensor.expand(call.args[0], *_sizes_arg(call.args[1:]))


RULES["expand"] = _expand
RULES["broadcast_to"] = _broadcast_to


def _permute(call, call_next):
    x = call.args[0]
    k, rank = len(x._levels), lrank(x)
    order = _sizes_arg(call.args[1:])
    return _mark(run(call, call_next, (x, *range(k), *_shift(tuple(order), max(rank, 1), k))), x._levels)


RULES["permute"] = _permute


def _flip(call, call_next):
    x = call.args[0]
    k, rank = len(x._levels), lrank(x)
    return _mark(run(call, call_next, (x, *_shift(_sizes_arg(call.args[1:]), max(rank, 1), k))), x._levels)


RULES["flip"] = _flip


def _flatten(call, call_next):
    x = call.args[0]
    k, rank = len(x._levels), lrank(x)
    bound = _bind(call.op, call.args, call.kwargs)
    if rank == 0:
        with physical():
            return _mark(x.reshape(*x._data.shape, 1), x._levels)
    for name in ("start_dim", "end_dim"):
        bound.arguments[name] = _shift(_arg(bound, name), rank, k)
    return _mark(run(call, call_next, bound.args, bound.kwargs), x._levels)


RULES["flatten"] = _flatten


def _t(call, call_next):
    x = call.args[0]
    k, rank = len(x._levels), lrank(x)
    with physical():
        r = x.transpose(k, k + 1) if rank == 2 else x.view_as(x)
    return _mark(r, x._levels)


RULES["t"] = _t


def _repeat(call, call_next):
    x = call.args[0]
    k = len(x._levels)
    sizes = _sizes_arg(call.args[1:])
    with physical():
        px = align(x, x._levels, len(sizes))
    return _mark(run(call, call_next, (px, *([1] * k), *sizes)), x._levels)


RULES["repeat"] = _repeat


def _sum_to_size(call, call_next):
    x = call.args[0]
    k, rank = len(x._levels), lrank(x)
    size = _sizes_arg(call.args[1:])
    size = (1,) * (rank - len(size)) + tuple(size)
    return _mark(run(call, call_next, (x, *x._data.shape[:k], *size)), x._levels)


RULES["sum_to_size"] = _sum_to_size


def _cat(stack):
    def rule(call, call_next):
        bound = _bind(call.op, call.args, call.kwargs)
        tensors = list(bound.args[0])
        name = "axis" if call.op.name == "concatenate" else "dim"
        levels = _union(tensors)
        rank = max(lrank(t) for t in tensors)
        with physical():
            parts = [align(t, levels, expand=True) for t in tensors]
        bound.arguments[next(iter(bound.arguments))] = parts
        bound.arguments[name] = _shift(_arg(bound, name), max(rank + stack, 1), len(levels))
        return _mark(run(call, call_next, bound.args, bound.kwargs), levels)
    return rule


_register("cat concat concatenate", _cat(0))
RULES["stack"] = _cat(1)


def _advanced(index):
    return [i for i in index if isinstance(i, (Tensor, list)) or (hasattr(i, "ndim") and not isinstance(i, Tensor))]


def _getitem(call, call_next):
    x, index = call.args[0], call.args[1]
    idx = index if isinstance(index, tuple) else (index,)
    if idx and _batched(idx[0]) and not idx[0].dtype.is_floating_point and idx[0].dtype is not ember.bool and \
            not any(isinstance(i, Tensor) or i is None or i is Ellipsis for i in idx[1:]):
        return _batched_index(call, call_next, x, idx)
    if not _batched(x) or any(_batched(i) for i in idx) or not _in_place_advanced(idx):
        return fallback(call, call_next)
    k = len(x._levels)
    return _mark(run(call, call_next, (x, (slice(None),) * k + idx)), x._levels)


def _in_place_advanced(idx):
    """Whether an index's advanced part leaves its dims where they are once slices of the batch dims go in front: at
    most one index array, and no integers with it (an integer and an array apart from each other send the result's
    indexed dims to the front, in front of the batch dims)."""
    adv = _advanced(idx)
    return len(adv) <= 1 and not (adv and any(isinstance(i, int) and not isinstance(i, bool) for i in idx))


def _batched_index(call, call_next, x, idx):
    """``x[i, ...]`` with a batched integer tensor ``i``: every example picks from its own ``x`` (index tensors
    of the batch positions join ``i``)."""
    first = idx[0]
    levels = _union([x, first])
    k = len(levels)
    with physical():
        px = align(x, levels, expand=True)
        pi = align(first, levels)
        rank = pi._data.ndim - k
        picks = []
        for j, n in enumerate(_sizes(levels)):
            shape = [1] * (k + rank)
            shape[j] = n
            picks.append(ember.arange(n, device=x.device).reshape(shape))
    return _mark(run(call, call_next, (px, (*picks, pi, *idx[1:]))), levels)


RULES["__getitem__"] = _getitem


def _setitem(call, call_next):
    x, index, value = call.args
    idx = index if isinstance(index, tuple) else (index,)
    if any(_batched(i) for i in idx) or not _in_place_advanced(idx):
        return fallback(call, call_next)
    levels = levels_of(x)
    if not set(levels).issuperset(levels_of(value)):
        raise RuntimeError(_inplace_error(call.op))
    k = len(levels)
    pidx = (slice(None),) * k + idx
    if _batched(value):
        with physical():
            region = x[pidx]
            value = align(value, levels, region._data.ndim - k)
    return run(call, call_next, (x, pidx, value))


RULES["__setitem__"] = _setitem


# ---- products ----
def _matmul(call, call_next):
    a, b = call.args[0], call.args[1]
    name = call.op.name
    ra, rb = lrank(a), lrank(b)
    need = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1)}.get(name)
    if need is not None and (ra, rb) != need:
        raise RuntimeError(f"{name}: expected operands of {need[0]} and {need[1]} dims, got {ra} and {rb}")
    levels = _union([a, b])
    with physical():
        pa, pb = a, b
        if ra == 1:
            pa = a.unsqueeze(len(levels_of(a)))
        if rb == 1:
            pb = b.unsqueeze(-1)
        rank = max(ra, rb, 2)
        if _batched(a):
            pa = align(pa, levels, rank, own=levels_of(a))
        if _batched(b):
            pb = align(pb, levels, rank, own=levels_of(b))
        r = REGISTRY["matmul"].fn(pa, pb)
        if rb == 1:
            r = r.squeeze(-1)
        if ra == 1:
            r = r.squeeze(-1 if rb == 1 else -2)
    return _mark(r, levels)


_register("matmul mm bmm mv dot", _matmul)


def _outer(call, call_next):
    a, b = call.args[0], call.args[1]
    return a.unsqueeze(-1) * b


_register("outer ger", _outer)


def _addmm(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    x, m1, m2 = bound.args[:3]
    beta, alpha = _arg(bound, "beta"), _arg(bound, "alpha")
    prod = ember.matmul(m1, m2)
    prod = prod if alpha == 1 else prod * alpha
    if call.mode == "inplace":
        return x.mul_(beta).add_(prod) if beta != 1 else x.add_(prod)
    return (x if beta == 1 else x * beta) + prod


_register("addmm addmv addbmm baddbmm", _addmm)


def _linear(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    x, w, b = _arg(bound, "input"), _arg(bound, "weight"), _arg(bound, "bias")
    if not _batched(w) and not _batched(b):
        return _mark(run(call, call_next, (x, w, b)), x._levels)
    out = ember.matmul(x, w.transpose(-1, -2))
    return out if b is None else out + b


RULES["linear"] = _linear


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum(call, call_next):
    equation, *operands = call.args
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    if not isinstance(equation, str) or "->" not in equation:
        return fallback(call, call_next)
    levels = _union(operands)
    free = [c for c in _LETTERS if c not in equation][:len(levels)]
    lhs, rhs = equation.replace(" ", "").split("->")
    subs = lhs.split(",")
    batch = "".join(free)
    with physical():
        parts = [align(t, levels, expand=True) if _batched(t) else t for t in operands]
    subs = [batch + s if _batched(t) else s for s, t in zip(subs, operands)]
    r = run(call, call_next, (",".join(subs) + "->" + batch + rhs, *parts))
    return _mark(r, levels)


RULES["einsum"] = _einsum


# ---- neural-network ops ----
def _merge_batch(x, levels, n_spatial, expand=False):
    """(physical input with the batch dims merged into its own batch dim, batch sizes, whether it had none)."""
    with physical():
        px = align(x, levels, expand=True) if expand or levels_of(x) != levels else x
        k = len(levels)
        sizes = list(px._data.shape[:k])
        unbatched = px._data.ndim - k == n_spatial + 1
        if unbatched:
            px = px.unsqueeze(k)
        return px.reshape(-1, *px._data.shape[k + 1:]), sizes, unbatched, px._data.shape[k]


def _conv(n_spatial):
    def rule(call, call_next):
        bound = _bind(call.op, call.args, call.kwargs)
        x, w, b = _arg(bound, "input"), _arg(bound, "weight"), _arg(bound, "bias")
        if call.op.name.startswith("conv_transpose"):
            if _batched(w) or _batched(b):
                return fallback(call, call_next)
        levels = _union([x, w, b] if b is not None else [x, w])
        k = len(levels)
        if not _batched(w) and not _batched(b):
            px, sizes, unbatched, n = _merge_batch(x, levels, n_spatial)
            bound.arguments["input"] = px
            r = run(call, call_next, bound.args, bound.kwargs)
            with physical():
                r = r.reshape(*sizes, n, *r._data.shape[1:])
                if unbatched:
                    r = r.squeeze(k)
            return _mark(r, levels)
        # a batched weight: one grouped convolution, the examples' channels side by side
        with physical():
            px = align(x, levels, expand=True)
            sizes = list(px._data.shape[:k])
            nb = math.prod(sizes)
            unbatched = px._data.ndim - k == n_spatial + 1
            if unbatched:
                px = px.unsqueeze(k)
            px = px.reshape(nb, *px._data.shape[k:])  # (nb, N, C, *spatial)
            n, c = px._data.shape[1], px._data.shape[2]
            px = px.transpose(0, 1).reshape(n, nb * c, *px._data.shape[3:])
            pw = align(w, levels, expand=True)
            o = pw._data.shape[k]
            pw = pw.reshape(nb * o, *pw._data.shape[k + 1:])
            if b is not None:
                pb = align(b, levels, expand=True).reshape(nb * o)
            else:
                pb = None
            groups = _arg(bound, "groups")
            bound.arguments.update(input=px, weight=pw, bias=pb, groups=groups * nb)
        r = run(call, call_next, bound.args, bound.kwargs)
        with physical():
            r = r.reshape(n, nb, o, *r._data.shape[2:]).transpose(0, 1).reshape(*sizes, n, o, *r._data.shape[2:])
            if unbatched:
                r = r.squeeze(k)
        return _mark(r, levels)
    return rule


_register("conv1d conv_transpose1d", _conv(1))
_register("conv2d conv_transpose2d", _conv(2))
_register("conv3d conv_transpose3d", _conv(3))


def _pool(n_spatial):
    def rule(call, call_next):
        if not _only_first(call):
            return fallback(call, call_next)
        x = call.args[0]
        levels = x._levels
        k = len(levels)
        px, sizes, unbatched, n = _merge_batch(x, levels, n_spatial)
        r = run(call, call_next, (px,) + tuple(call.args[1:]))

        def back(t):
            t = t.reshape(*sizes, n, *t._data.shape[1:])
            return t.squeeze(k) if unbatched else t
        with physical():
            r = back(r) if isinstance(r, Tensor) else type(r)(back(t) for t in r)
        return _mark(r, levels)
    return rule


_register("max_pool1d max_pool1d_with_indices avg_pool1d adaptive_avg_pool1d adaptive_max_pool1d", _pool(1))
_register("max_pool2d max_pool2d_with_indices avg_pool2d adaptive_avg_pool2d adaptive_max_pool2d pixel_shuffle "
          "pixel_unshuffle", _pool(2))
_register("max_pool3d max_pool3d_with_indices avg_pool3d adaptive_avg_pool3d adaptive_max_pool3d", _pool(3))


def _layer_norm(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    x, w, b = _arg(bound, "input"), _arg(bound, "weight"), _arg(bound, "bias")
    if _batched(x) and not _batched(w) and not _batched(b):
        return _mark(run(call, call_next, bound.args, bound.kwargs), x._levels)
    shape = _arg(bound, "normalized_shape")
    if call.op.name == "rms_norm":
        y = call.op.fn(x, shape, None, _arg(bound, "eps"))
    else:
        y = call.op.fn(x, shape, None, None, _arg(bound, "eps"))
    if w is not None:
        y = y * w
    return y + b if b is not None else y


_register("layer_norm rms_norm", _layer_norm)


def _embedding(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    weight, indices, padding = _arg(bound, "weight"), _arg(bound, "indices"), _arg(bound, "padding_idx")
    if not _batched(weight):
        return _mark(run(call, call_next, call.args, call.kwargs), _union(call.tensors()))
    if _arg(bound, "scale_grad_by_freq") or _arg(bound, "sparse"):
        return fallback(call, call_next)
    rows = weight[indices]  # (per-example weights, as per-sample gradients make them: indexing, batched)
    if padding is None or padding < 0:
        return rows
    keep = (indices != padding).unsqueeze(-1)  # the padding row takes no gradient
    return ember.where(keep, rows, rows.detach())


RULES["embedding"] = _embedding


def _reduce(r, reduction, k):
    if reduction == 0:
        return r
    dims_ = tuple(range(k, r._data.ndim))
    if not dims_:
        return r
    return r.mean(dims_) if reduction == 1 else r.sum(dims_)


def _softmax_nll(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    x, t, w = _arg(bound, "input"), _arg(bound, "target"), _arg(bound, "weight")
    if _batched(w):
        return fallback(call, call_next)
    levels = _union([x, t])
    k = len(levels)
    reduction, ignore = _arg(bound, "reduction"), _arg(bound, "ignore_index")
    with physical():
        px, pt = align(x, levels, expand=True), align(t, levels, expand=True)
        sizes = list(px._data.shape[:k])
        bound.arguments.update(input=px.reshape(-1, px._data.shape[-1]), target=pt.reshape(-1), reduction=0)
    r = run(call, call_next, bound.args, bound.kwargs)
    with physical():
        r = r.reshape(*sizes, -1)
        if reduction == 2:
            r = r.sum(k)
        elif reduction == 1:
            keep = (pt != ignore).to(r.dtype)
            if w is not None:
                keep = keep * w[pt.clamp(min=0)]
            r = r.sum(k) / keep.sum(k)
    return _mark(r, levels)


RULES["_softmax_nll"] = _softmax_nll


def _pointwise_loss(call, call_next):
    """Losses that are elementwise before their reduction: computed unreduced, reduced over the logical dims."""
    bound = _bind(call.op, call.args, call.kwargs)
    reduction = _arg(bound, "reduction")
    tensors = call.tensors()
    levels = _union(tensors)
    rank = max(lrank(t) for t in tensors)
    with physical():
        for name, v in list(bound.arguments.items()):
            if _batched(v):
                bound.arguments[name] = align(v, levels, rank)
        bound.arguments["reduction"] = 0
    r = run(call, call_next, bound.args, bound.kwargs)
    with physical():
        r = _reduce(r, reduction, len(levels))
    return _mark(r, levels)


_register("binary_cross_entropy binary_cross_entropy_with_logits kl_div", _pointwise_loss)


# ---- random ops ----
def _randomness():
    return STATE.randomness[STATE.levels[-1]]


def _draws_nothing(call):
    """Whether a dropout-like call (``p``, ``train``) is deterministic: not training, or nothing to drop."""
    bound = _bind(call.op, call.args, call.kwargs)
    return "train" in bound.arguments and (not _arg(bound, "train") or _arg(bound, "p") == 0)


def _dropout(call, call_next, batched):
    op = call.op
    if _draws_nothing(call):
        return transparent(call, call_next) if batched else call_next(call)
    mode = _randomness()
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    x = call.args[0]
    if mode == "different":
        levels = tuple(STATE.levels)
        with physical():
            px = align(x, levels, expand=True)
            if call.mode == "inplace":
                if levels_of(x) != levels:
                    raise RuntimeError("vmap: Cannot ask for different inplace randomness on an unbatched tensor. "
                                       "This will appear like same randomness. If this is necessary for your "
                                       "usage, please file an issue with functorch.")
                px = x
        return _mark(run(call, call_next, (px,) + tuple(call.args[1:]), call.kwargs), levels) \
            if call.mode != "inplace" else run(call, call_next, (px,) + tuple(call.args[1:]), call.kwargs)
    # "same": one mask, drawn for the logical shape, for every example
    with physical():
        mask = op.fn(ember.ones(lshape(x), dtype=x.dtype, device=x.device), *call.args[1:], **call.kwargs)
    if isinstance(mask, tuple):
        return fallback(call, call_next)
    return x.mul_(mask) if call.mode == "inplace" else x * mask


def _inplace_random(call, call_next, batched):
    mode = _randomness()
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    target = call.args[0]
    levels = tuple(STATE.levels)
    if mode == "different":
        if levels_of(target) != levels:
            raise RuntimeError("vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will "
                               "appear like same randomness. If this is necessary for your usage, please file an "
                               "issue with functorch.")
        return run(call, call_next, call.args)
    with physical():
        draw = ember.empty(lshape(target), dtype=target.dtype, device=target.device)
        call.op.fn(draw, *call.args[1:], **call.kwargs)
    return target.copy_(draw)


def _random_op(call, call_next, batched):
    if _draws_nothing(call):  # (the mask of a dropout that drops nothing: ones)
        return transparent(call, call_next) if batched else call_next(call)
    mode = _randomness()
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    if mode == "same":
        if batched:
            raise RuntimeError(f"vmap: randomness='same' is not supported for {call.op.name} on batched inputs; "
                               "use randomness='different'")
        return call_next(call)
    levels = tuple(STATE.levels)
    tensors = call.tensors()
    rank = max(lrank(t) for t in tensors) if tensors else 0
    with physical():
        def fix(a):
            return align(a, levels, rank, expand=True) if isinstance(a, Tensor) else a
        args = [fix(a) for a in call.args]
        kwargs = {k: fix(v) for k, v in call.kwargs.items()}
    return _mark(run(call, call_next, args, kwargs), levels)


RANDOM = {}
for _n in "dropout alpha_dropout feature_dropout feature_alpha_dropout".split():
    RANDOM[_n] = _dropout
for _n in "uniform_ normal_ bernoulli_ random_ exponential_ geometric_ log_normal_ cauchy_".split():
    RANDOM[_n] = _inplace_random
for _n in ("bernoulli multinomial poisson _normal_tensors binomial native_dropout _dropout_with_mask "
           "_alpha_dropout_with_mask _feature_dropout_with_mask _feature_alpha_dropout_with_mask").split():
    RANDOM[_n] = _random_op


# ---- more shapes, products and norms ----
RULES["constant_pad_nd"] = transparent  # (pads trailing dims only)
_register("rot90", dims("dims"))


def _decomposed(fn):
    """A rule that is ``fn(*args, **kwargs)`` in other ops, run logically (each meets its own rule)."""
    def rule(call, call_next):
        return fn(*call.args, **call.kwargs)
    return rule


RULES["trace"] = _decomposed(lambda x: x.diagonal(0, -2, -1).sum(-1))
RULES["vdot"] = _decomposed(lambda a, b: (a.conj() * b).sum())
RULES["inner"] = _decomposed(lambda a, b: (a * b).sum(-1) if a.dim() and b.dim() else a * b)
RULES["flipud"] = _decomposed(lambda x: x.flip(0))
RULES["fliplr"] = _decomposed(lambda x: x.flip(1))
RULES["ravel"] = _decomposed(lambda x: x.reshape(-1))
RULES["tile"] = _decomposed(lambda x, dims: x.repeat(*((1,) * (x.dim() - len(dims)) + tuple(dims))))
RULES["adjoint"] = _decomposed(lambda x: x.transpose(-2, -1).conj())


def _broadcast_dim(*names):
    """Ops on operands that broadcast, along ``names`` dims of the broadcast shape (cross, vecdot, cosine
    similarity)."""
    def rule(call, call_next):
        tensors = call.tensors()
        levels = _union(tensors)
        rank = max(lrank(t) for t in tensors)
        bound = _bind(call.op, call.args, call.kwargs)
        with physical():
            for name, v in list(bound.arguments.items()):
                if _batched(v):
                    bound.arguments[name] = align(v, levels, rank)
        for name in names:
            d = _arg(bound, name)
            if d is None:
                return fallback(call, call_next)
            bound.arguments[name] = _shift(d, max(rank, 1), len(levels))
        return _mark(run(call, call_next, bound.args, bound.kwargs), levels)
    return rule


_register("linalg_cross linalg_vecdot cosine_similarity", _broadcast_dim("dim"))
RULES["pairwise_distance"] = broadcast  # (along the last dim)


def _merge_first(call, call_next):
    """Ops whose input has its own batch dim first (upsampling, group norm, instance norm): the batch dims of
    vmap merge into it."""
    if not _only_first(call):
        return fallback(call, call_next)
    x = call.args[0]
    levels = x._levels
    k = len(levels)
    with physical():
        sizes, n = list(x._data.shape[:k]), x._data.shape[k]
        px = x.reshape(-1, *x._data.shape[k + 1:])
    r = run(call, call_next, (px,) + tuple(call.args[1:]), call.kwargs)
    with physical():
        r = r.reshape(*sizes, n, *r._data.shape[1:])
    return _mark(r, levels)


_register("_upsample group_norm instance_norm channel_shuffle", _merge_first)

_BN_ERROR = ("Batch norm got a batched tensor as input while the running_mean or running_var, which will be updated "
             "in place, were not batched. If you are using functorch and are using the batch norm module, please use "
             "replace_all_batch_norm_modules_ (ember.func) to stop batch norm from tracking running statistics.")


def _batch_norm(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    x, w, b = _arg(bound, "input"), _arg(bound, "weight"), _arg(bound, "bias")
    rm, rv, training, eps = _arg(bound, "running_mean"), _arg(bound, "running_var"), _arg(bound, "training"), \
        _arg(bound, "eps")
    shape = (-1,) + (1,) * (x.dim() - 2)  # a per-channel tensor against the input's dims after the batch dim
    if not training:  # running statistics: elementwise
        if rm is None or rv is None:
            return fallback(call, call_next)
        y = (x - rm.reshape(shape)) / (rv.reshape(shape) + eps).sqrt()
    else:
        if (rm is not None and not _batched(rm)) or (rv is not None and not _batched(rv)):
            if _batched(x):
                raise RuntimeError(_BN_ERROR)
        if rm is not None or rv is not None or not _batched(x):
            return fallback(call, call_next)
        # batch statistics of each example: the examples' channels side by side in one normalisation
        levels = x._levels
        k = len(levels)
        with physical():
            sizes = list(x._data.shape[:k])
            n, c = x._data.shape[k], x._data.shape[k + 1]
            px = x.reshape(-1, n, *x._data.shape[k + 1:]).transpose(0, 1).reshape(n, -1, *x._data.shape[k + 2:])
            bound.arguments.update(input=px, weight=None, bias=None)
        r = run(call, call_next, bound.args, bound.kwargs)
        with physical():
            r = r.reshape(n, -1, c, *r._data.shape[2:]).transpose(0, 1).reshape(*sizes, n, c, *r._data.shape[2:])
        y = _mark(r, levels)
    if w is not None:
        y = y * w.reshape(shape)
    return y + b.reshape(shape) if b is not None else y


RULES["batch_norm"] = _batch_norm


# ---- recurrent cells and layers ----
def _weights_unbatched(call, start):
    return not any(_batched(a) for a in call.args[start:]) and not any(_batched(v) for v in call.kwargs.values())


def _cell(call, call_next):
    """RNN/LSTM/GRU cells work row by row: the batch dims merge into the rows."""
    if not _weights_unbatched(call, 2):
        return fallback(call, call_next)
    x, hx = call.args[0], call.args[1]
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    levels = _union([x, *states])
    with physical():
        px = align(x, levels, expand=True)
        lead = px._data.shape[:-1]
        flat = [align(h, levels, expand=True).reshape(-1, h._data.shape[-1]) for h in states]
        args = (px.reshape(-1, px._data.shape[-1]), type(hx)(flat) if isinstance(hx, (list, tuple)) else flat[0])
    r = run(call, call_next, args + tuple(call.args[2:]))
    with physical():
        r = r.reshape(*lead, -1) if isinstance(r, Tensor) else type(r)(t.reshape(*lead, -1) for t in r)
    return _mark(r, levels)


_register("rnn_tanh_cell rnn_relu_cell lstm_cell gru_cell", _cell)


def _lstm_layer(call, call_next):
    """A time-major LSTM layer (T, B, F): the batch dims merge into B."""
    if not _weights_unbatched(call, 3):
        return fallback(call, call_next)
    x, h0, c0 = call.args[:3]
    levels = _union([x, h0, c0])
    k = len(levels)
    with physical():
        px = align(x, levels, expand=True)  # (*sizes, T, B, F)
        sizes, (steps, rows) = list(px._data.shape[:k]), px._data.shape[k:k + 2]
        px = px.movedim(k, 0).reshape(steps, -1, px._data.shape[-1])
        states = [align(h, levels, expand=True).reshape(-1, h._data.shape[-1]) for h in (h0, c0)]
    r = run(call, call_next, (px, *states) + tuple(call.args[3:]))
    with physical():
        out = []
        for t in r:  # (per step outputs (T, B', X); final states (B', H))
            if t._data.ndim == 3:
                out.append(t.reshape(steps, *sizes, rows, -1).movedim(0, k))
            else:
                out.append(t.reshape(*sizes, rows, -1))
    return _mark(tuple(out), levels)


RULES["_lstm_layer"] = _lstm_layer


# ---- linear algebra on the last two dims, and the rest of the easy cases ----
_register("linalg_svd svd linalg_eig linalg_eigvals linalg_pinv pinverse linalg_matrix_rank linalg_lu_factor "
          "linalg_lu_factor_ex linalg_lu lu qr geqrf linalg_cholesky_ex linalg_inv_ex fill bucketize isin", transparent)
_register("linalg_matrix_norm", dims("dim"))
_register("aminmax", dims("dim", none="flat"))
_register("unfold", dims("dimension"))
RULES["dist"] = _decomposed(lambda a, b, p=2: (a - b).norm(p))
RULES["msort"] = _decomposed(lambda x: x.sort(0)[0])
RULES["diag"] = _decomposed(lambda x, diagonal=0: ember.diag_embed(x, diagonal) if x.dim() == 1
                            else x.diagonal(diagonal).clone())


def _repeat_interleave(call, call_next):
    bound = _bind(call.op, call.args, call.kwargs)
    if isinstance(_arg(bound, "repeats"), Tensor) or _arg(bound, "dim") is None:
        return fallback(call, call_next)
    return dims("dim")(call, call_next)


RULES["repeat_interleave"] = _repeat_interleave
