"""``vmap``: runs a function written for one example on a batch, with batched ops.

A batched tensor is an ember tensor whose array holds the batch dims in front of the logical ones, one per vmap
level it is batched at, in the order the levels were entered (outermost first). Its class says which levels those
are (one ``BatchedTensor`` subclass per tuple of levels, made on demand), so a batched tensor is an ordinary tensor
object in every other respect: autograd records its history on it as on any tensor, and the graph is the physical
computation. Its ``shape``, ``dim()`` and ``size()`` hide the batch dims.

While a vmap is active the "vmap" dispatcher layer (order 120: after autocast, in front of forward AD and autograd)
turns each op call with a batched argument into one call on the physical arrays, by the op's batching rule
(``_batching_rules``), and marks the result batched. Ops without a rule fall back to a loop over the examples with
a warning. Everything the rules do themselves runs with the layer passed through (``physical()``), so the layers
below see, and record, physical calls only.
"""
import functools
import itertools
import math
import warnings

from ember import _dispatch, _random
from ember._tensor import Tensor, _size, _wrap_dim

from ._pytree import leaves as _flatten
from ._pytree import unflatten as _unflatten

__all__ = ["vmap"]


class _State:
    # active levels, outermost first: a level is its depth (1, 2, ...), so that the classes of batched tensors, one
    # per tuple of levels, stay few however many vmaps run
    levels = []
    sizes = {}  # level -> batch size
    randomness = {}  # level -> 'error' | 'different' | 'same'
    physical = 0  # > 0: the layer passes calls through and batched tensors show their physical shape


STATE = _State()


class physical:
    """Context: ops run on the physical arrays (the vmap layer passes them through)."""

    def __enter__(self):
        STATE.physical += 1

    def __exit__(self, *exc):
        STATE.physical -= 1


def _logical_only(name):
    def refuse(self, *args, **kwargs):
        raise RuntimeError(f"vmap: It looks like you're calling .{name}() on a Tensor. We don't support vmap over "
                           f"calling .{name}() on a Tensor, please try to rewrite what you're doing with other "
                           "operations.")
    return refuse


class BatchedTensor(Tensor):
    """A tensor batched at the vmap levels ``_levels`` (its leading physical dims, in that order)."""

    __slots__ = ()
    _levels = ()

    @property
    def shape(self):
        d = self._data.shape
        return _size(d if STATE.physical else d[len(self._levels):])

    def size(self, dim=None):
        shape = self.shape
        return shape if dim is None else shape[_wrap_dim(dim, len(shape))]

    def dim(self):
        return self._data.ndim - (0 if STATE.physical else len(self._levels))

    ndimension = dim

    @property
    def ndim(self):
        return self.dim()

    def numel(self):
        return math.prod(self.shape)

    nelement = numel

    def __len__(self):
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    @property
    def T(self):
        return self.permute(*range(self.dim() - 1, -1, -1))

    def detach(self):
        return as_batched(Tensor.detach(self), self._levels)

    @property
    def data(self):
        return as_batched(Tensor._wrap(self._data)._view_of(self), self._levels)

    def _batched_like(self, fn, *args, random=False, **kwargs):
        """``fn`` (a ``*_like`` factory) for this tensor: batched like it (ember-core's factories call this)."""
        if random:
            mode = STATE.randomness[STATE.levels[-1]] if STATE.levels else "different"
            if mode == "error":
                raise RuntimeError(RANDOM_ERROR)
            if mode == "same":
                import ember
                return fn(ember.empty(self.shape, dtype=self.dtype, device=self.device), *args, **kwargs)
        with physical():
            r = fn(Tensor._wrap(self._data), *args, **kwargs)
        return as_batched(r, self._levels)

    def backward(self, *args, **kwargs):
        raise RuntimeError("backward() called inside a functorch transform. This is not supported, please use "
                           "functorch.grad or functorch.vjp instead or call backward() outside of functorch "
                           "transforms.")

    item = _logical_only("item")
    tolist = _logical_only("tolist")
    numpy = _logical_only("numpy")
    __float__ = __int__ = __index__ = __complex__ = __bool__ = item

    def __repr__(self, *, tensor_contents=None):
        inner = Tensor.__repr__(Tensor.detach(self))
        return f"BatchedTensor(levels={list(self._levels)}, bdims={list(range(len(self._levels)))}, value={inner})"


_classes = {(): Tensor}


def _class_of(levels):
    cls = _classes.get(levels)
    if cls is None:
        cls = _classes[levels] = type("BatchedTensor", (BatchedTensor,), {"__slots__": (), "_levels": levels})
    return cls


def levels_of(t):
    return t._levels if isinstance(t, BatchedTensor) else ()


def as_batched(t, levels):
    """Mark ``t`` (a tensor the rules just made, not one the caller holds) batched at ``levels``."""
    cls = _class_of(tuple(levels))
    if type(t) is not cls:
        if type(t) is not Tensor and not isinstance(t, BatchedTensor):  # (e.g. a subclass: give it a plain alias)
            with physical():
                t = Tensor.view_as(t, t) if not isinstance(t, BatchedTensor) else t
        t.__class__ = cls
    return t


def lshape(t):
    """The logical shape of tensor ``t``."""
    return t._data.shape[len(levels_of(t)):]


def lrank(t):
    return t._data.ndim - len(levels_of(t))


def align(t, levels, rank=None, expand=False, own=None):
    """``t``'s physical tensor with a batch dim for each of ``levels`` (a superset of its own, ``own`` when given, in
    order) in front, size 1 where ``t`` is not batched (or expanded with ``expand``), and its logical dims padded with
    leading ones to ``rank``. Run under ``physical()``; ``t`` itself when nothing changes."""
    if own is None:
        own = levels_of(t)
    levels = tuple(levels)
    x = t
    if own != levels:
        for i, lv in enumerate(levels):
            if lv not in own:
                x = x.unsqueeze(i)
    if rank is not None:
        for _ in range(rank - (t._data.ndim - len(own))):
            x = x.unsqueeze(len(levels))
    if expand and own != levels:
        x = x.expand(*[STATE.sizes[lv] for lv in levels], *([-1] * (x._data.ndim - len(levels))))
    return x


# ---- the dispatcher layer ----
_warned = set()


def _fallback_warning(op):
    if op.name not in _warned:
        _warned.add(op.name)
        warnings.warn(f"There is a performance drop because we have not yet implemented the batching rule for "
                      f"{op.name}. vmap runs it once per example instead.", UserWarning, stacklevel=4)


def _batched_tensors(call):
    return [t for t in call.tensors() if isinstance(t, BatchedTensor)]


RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                "'different' randomness flags on vmap or perform the randomness operation out of vmap")


def _layer(call, call_next):
    if STATE.physical:
        return call_next(call)
    from ._batching_rules import RANDOM, rule_for  # (a cycle: the rules build on this module)
    batched = _batched_tensors(call)
    op = call.op
    if op.name in RANDOM:
        return RANDOM[op.name](call, call_next, batched)
    if not batched:
        return call_next(call)
    sizes = STATE.sizes
    for t in batched:  # (a tensor kept from a vmap that has exited: its level is gone, or is another vmap's now)
        if any(sizes.get(lv) != n for lv, n in zip(t._levels, t._data.shape)):
            raise RuntimeError("vmap: a tensor batched at a vmap level that has already exited was used; return it "
                               "from the vmapped function instead of keeping it")
    if call.mode == "out":
        raise RuntimeError(f"vmap: {op.name}(..., out=...) is not supported inside vmap; assign the result instead")
    rule = rule_for(op)
    if rule is None:
        _fallback_warning(op)
        return fallback(call, call_next)
    return rule(call, call_next)


def run(call, call_next, args, kwargs=None):
    """The call's op on physical ``args`` through the layers below (in physical mode)."""
    call.args = tuple(args)
    if kwargs is not None:
        call.kwargs = kwargs
    with physical():
        return call_next(call)


def fallback(call, call_next):
    """The op once per example (views of the batched arguments), results stacked: for ops without a rule."""
    tensors = _batched_tensors(call)
    levels = tuple(sorted({lv for t in tensors for lv in t._levels}))
    sizes = [STATE.sizes[lv] for lv in levels]
    op, mode = call.op, call.mode
    if mode == "inplace" and levels_of(call.args[0]) != levels:
        raise RuntimeError(_inplace_error(op))
    with physical():
        full = {id(t): align(t, levels, expand=True) for t in tensors}

        def pick(a, index):
            if isinstance(a, BatchedTensor):
                x = full[id(a)]
                for i in index:
                    x = x.select(0, i)
                return x
            if type(a) in (list, tuple):
                return type(a)(pick(v, index) for v in a)
            return a

        results = []
        for index in itertools.product(*[range(n) for n in sizes]):
            args = tuple(pick(a, index) for a in call.args)
            kwargs = {k: pick(v, index) for k, v in call.kwargs.items()}
            results.append(call_next(_dispatch.Call(op, args, kwargs, mode, None)))
        if mode == "inplace":
            return call.args[0]
        return _stack_results(results, sizes, levels, op)


def _stack_results(results, sizes, levels, op):
    first = results[0]
    if isinstance(first, Tensor):
        stacked = _stack(results)
        return as_batched(stacked.reshape(*sizes, *stacked._data.shape[1:]), levels)
    if isinstance(first, (tuple, list)):
        parts = [_stack_results([r[i] for r in results], sizes, levels, op) for i in range(len(first))]
        return type(first)(parts) if type(first) in (tuple, list) else type(first)(*parts)
    if all(r == first for r in results):
        return first
    raise RuntimeError(f"vmap: {op.name} returned a Python value that differs between examples, which vmap cannot "
                       "batch")


def _stack(tensors):
    import ember
    return ember.stack(tensors)


def _inplace_error(op):
    return (f"vmap: {op.name}_(self, *extra_args) is not possible because there exists a Tensor `other` in "
            "extra_args that has more elements than `self`. This happened due to `other` being vmapped over but "
            "`self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
            f"{op.name}_.")


# ---- entering and leaving a level ----
def _enter(size, randomness):
    level = len(STATE.levels) + 1
    if not STATE.levels:
        _dispatch.register_layer("vmap", 120, _layer)
        _dispatch.force_slow(True)
        _random.VMAP_DRAW[0] = _draw
    STATE.levels.append(level)
    STATE.sizes[level] = size
    STATE.randomness[level] = randomness
    return level


def _exit(level):
    STATE.levels.remove(level)
    del STATE.sizes[level], STATE.randomness[level]
    if not STATE.levels:
        _dispatch.unregister_layer("vmap")
        _dispatch.force_slow(False)
        _random.VMAP_DRAW[0] = None


def _draw(shape):
    """What a random factory (``ember.rand(3)``) draws inside vmap: refused, one value per example (batched at every
    level) or one value for all, by the innermost level's randomness."""
    if STATE.physical:
        return shape, None
    mode = STATE.randomness[STATE.levels[-1]]
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    if mode == "same":
        return shape, None
    levels = tuple(STATE.levels)
    return (*[STATE.sizes[lv] for lv in levels], *shape), lambda t: as_batched(t, levels)


def _alias(t):
    """A new tensor object over ``t``'s array: without an op call when no graph or tangent has to follow it."""
    if not t._rg and not (t._ext and "tangent" in t._ext):
        return Tensor._wrap(t._data)._view_of(t)
    with physical():
        return t.view_as(t)


def _move_in(t, dim, level):
    """``t`` batched at ``level`` along its logical dim ``dim``."""
    own = levels_of(t)
    if dim == 0:  # (already in place)
        return as_batched(_alias(t), own + (level,))
    with physical():
        x = t.movedim(len(own) + dim, len(own))
    return as_batched(x, own + (level,))


def _move_out(t, dim, level):
    """A result leaving ``level``: its batch dim of that level becomes logical dim ``dim`` (expanded when the
    result is not batched there)."""
    own = levels_of(t)
    with physical():
        if level in own:
            k = own.index(level)
            rest = own[:k] + own[k + 1:]
            out_dim = _wrap_dim(dim, t._data.ndim - len(own) + 1)
            if k == len(rest) + out_dim:  # (already in place)
                return as_batched(_alias(t), rest)
            x = t.movedim(k, len(rest) + out_dim)
        else:
            rest = own
            out_dim = _wrap_dim(dim, t._data.ndim - len(own) + 1)
            x = t.unsqueeze(len(own) + out_dim)
            shape = list(x._data.shape)
            shape[len(own) + out_dim] = STATE.sizes[level]
            x = x.expand(*shape)
        if x is t:
            x = x.view_as(x)
    return as_batched(x, rest)


# ---- the public transform ----
def _fname(func):
    return getattr(func, "__name__", repr(func))


def _is_leaf(x):
    return not isinstance(x, (tuple, list, dict))


def _spec(tree):
    if isinstance(tree, (tuple, list)):
        return f"{type(tree).__name__}({', '.join(_spec(v) for v in tree)})"
    if isinstance(tree, dict):
        return "dict(" + ", ".join(f"{k}: {_spec(v)}" for k, v in tree.items()) + ")"
    return "*"


def _broadcast_prefix(prefix, tree, error):
    """One entry of ``prefix`` (a pytree prefix of ``tree``) per leaf of ``tree``."""
    if _is_leaf(prefix):
        return [prefix] * len(_flatten(tree))
    if type(prefix) is not type(tree) and not (isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list))
                                               and type(prefix) is type(tree)):
        raise error()
    if isinstance(prefix, dict):
        if set(prefix) != set(tree):
            raise error()
        return [d for k in tree for d in _broadcast_prefix(prefix[k], tree[k], error)]
    if len(prefix) != len(tree):
        raise error()
    return [d for p, t in zip(prefix, tree) for d in _broadcast_prefix(p, t, error)]


def _check_dims(dims, what, name):
    def ok(d):
        if isinstance(d, (tuple, list)):
            return all(ok(v) for v in d)
        if isinstance(d, dict):
            return all(ok(v) for v in d.values())
        return d is None or (isinstance(d, int) and not isinstance(d, bool))
    if not ok(dims):
        raise ValueError(f"vmap({name}, {what}={dims}, ...)(<inputs>): expected `{what}` to be int or a (potentially "
                         f"nested) tuple matching the structure of inputs, got: {type(dims)}.")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs: ``in_dims`` says which (an int, None for inputs used whole,
    or a pytree prefix of the inputs), ``out_dims`` where the mapped dimension goes in the outputs."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = _fname(func)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                             "trying to vmap over a function with no inputs. The latter is unsupported.")
        _check_dims(in_dims, "in_dims", name)
        if isinstance(in_dims, (tuple, list)) and not isinstance(in_dims, dict):
            if len(in_dims) != len(args):
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
                                 f"the structure of `inputs`. in_dims has structure {_spec(tuple(in_dims))} but "
                                 f"inputs has structure {_spec(args)}.")
        elif not (in_dims is None or isinstance(in_dims, int)):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                             f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")

        def in_error():
            return ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                              f"structure of `inputs`. in_dims has structure {_spec(in_dims)} but inputs has "
                              f"structure {_spec(args)}.")

        leaves = _flatten(args)
        dims = _broadcast_prefix(tuple(in_dims) if isinstance(in_dims, list) else in_dims, args, in_error)
        sizes = []
        for x, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                                 f"the input is of type {type(x)}. We cannot vmap over non-Tensor arguments, please "
                                 "use None as the respective in_dim")
            n = x.dim()
            if not -n <= d < max(n, 0) or n == 0:
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                                 f"that input is a Tensor of dimensionality {n} so expected in_dim to satisfy "
                                 f"-{n} <= in_dim < {n}.")
            sizes.append(x.shape[d])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        size = sizes[0]
        dims = [None if d is None else d % x.dim() for x, d in zip(leaves, dims)]
        if chunk_size is None or chunk_size >= size:
            return _run(func, name, args, kwargs, leaves, dims, size, out_dims, randomness)
        chunks = []
        for start in range(0, size, chunk_size):  # (chunks of the batch, each one batched call)
            n = min(chunk_size, size - start)
            part = [x if d is None else x.narrow(d, start, n) for x, d in zip(leaves, dims)]
            chunks.append(_run(func, name, _unflatten(args, part), kwargs, part, dims, n, out_dims, randomness))
        return _concat_chunks(chunks, out_dims)

    return wrapped


def _concat_chunks(chunks, out_dims):
    import ember
    flat = [_flatten(c) for c in chunks]
    dims = _broadcast_prefix(out_dims, chunks[0], lambda: ValueError("out_dims"))
    joined = [flat[0][i] if d is None else ember.cat([f[i] for f in flat], d) for i, d in enumerate(dims)]
    return _unflatten(chunks[0], joined)


def _run(func, name, args, kwargs, leaves, dims, size, out_dims, randomness):
    level = _enter(size, randomness)
    try:
        batched = [x if d is None else _move_in(x, d, level) for x, d in zip(leaves, dims)]
        result = func(*_unflatten(args, batched), **kwargs)
        return _outputs(result, out_dims, level, name)
    finally:
        _exit(level)


def _outputs(result, out_dims, level, name):
    _check_dims(out_dims, "out_dims", name)

    def out_error():
        return ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                          f"structure of `outputs`. out_dims has structure {_spec(out_dims)} but outputs has "
                          f"structure {_spec(result)}.")

    leaves = _flatten(result)
    dims = _broadcast_prefix(tuple(out_dims) if isinstance(out_dims, list) else out_dims, result, out_error)
    out = []
    for x, d in zip(leaves, dims):
        if d is None:
            if isinstance(x, BatchedTensor) and level in x._levels:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            out.append(x)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(x)}. Did you "
                             "mean to set out_dims= to None for output?")
        out.append(_move_out(x, d, level))
    return _unflatten(result, out)
