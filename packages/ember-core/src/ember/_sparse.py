"""Sparse COO and CSR tensors.

A sparse tensor is a ``Tensor`` subclass holding its index arrays and a dense values tensor. Its ``_data`` is a
stand-in (``_Meta``) that knows the dense shape and dtype but is no NumPy/CuPy array, so the dense fast paths
never see one: the registry meets it only in its device check, raises ``StandInOperands`` there, and hands the
call to ``dispatch`` below, which runs the few ops sparse tensors support (or names the op it cannot run).

Gradients flow through the values tensor: every op computes its result's values with ember ops (plus
``_sparse_mm``, the product's kernel, which has its own VJP), so autograd records them like any dense graph. A
sparse leaf that requires grad owns a values leaf; its ``.grad`` is the sparse tensor of that leaf's gradient,
except after the ops for which PyTorch gives such a leaf a dense gradient (``mm``/``matmul``, ``sum()``): those
reach it through a dense stand-in whose gradient sink writes ``.grad`` (``_dense_proxy``).
"""
import copy
import functools
import math
import weakref

import numpy as np

from . import _backend
from . import _dtype as D
from ._layout import sparse_coo, sparse_csr, strided
from ._ops.arithmetic import wanted
from ._registry import REGISTRY, STAND_INS, TORCH_NAME, op
from ._size import Size
from ._tensor import Tensor, _wrap_dim

_wrap = Tensor._wrap


class _Meta:
    """The stand-in array of a sparse tensor: the dense shape and dtype, no elements."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __array__(self, *args, **kwargs):
        raise TypeError("a sparse tensor has no dense array: use Tensor.to_dense() first")


class _SparseTensor(Tensor):
    """What COO and CSR tensors share: values, autograd through them, metadata, printing, pickling."""

    __slots__ = ("_val", "_leaf", "_dgrad", "_acc", "_gcache")
    is_sparse = False

    def _init_sparse(self, shape, values, leaf):
        self._data = _Meta(shape, values._data.dtype)
        self._val, self._leaf = values, leaf
        self._vc, self._base, self._ext = [0], None, None
        self._rg = values._rg
        self._dgrad = self._acc = self._gcache = None
        return self

    # ---- metadata ------------------------------------------------------------------------------------
    @property
    def device(self):
        return self._val.device

    @property
    def is_cuda(self):
        return self._val.is_cuda

    @property
    def is_cpu(self):
        return self._val.is_cpu

    def get_device(self):
        return self._val.get_device()

    def _nnz(self):
        return self._val._data.shape[0]

    def dense_dim(self):
        return self._val._data.ndim - 1

    def sparse_dim(self):
        return self._data.ndim - self.dense_dim()

    def values(self):
        # (a view: the values tensor itself would be a leaf to the caller)
        return self._val.view(self._val.shape) if self._val._rg else self._val

    def _values(self):
        return _wrap(self._val._data)._view_of(self._val)

    def is_contiguous(self, memory_format=None):
        return False

    def contiguous(self, memory_format=None):
        return self

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    tolist = data_ptr

    def numpy(self, *, force=False):
        raise TypeError(f"can't convert {_NAME[self.layout]} layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        self.numpy()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self.to_dense().item()

    def __repr__(self, *, tensor_contents=None):
        return sparse_repr(self)

    def __reduce_ex__(self, protocol):
        return rebuild_sparse_tensor, (self.layout, self._parts())

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            new = memo[id(self)] = self.detach().clone()
            if self.requires_grad:
                new.requires_grad_()
            if self.grad is not None:
                new.grad = copy.deepcopy(self.grad, memo)
        return memo[id(self)]

    @property
    def data(self):
        return self.detach()

    def detach(self):
        return self._rebuilt(_wrap(self._val._data)._view_of(self._val))

    def detach_(self):
        self._val, self._leaf, self._rg = self._val.detach(), True, False
        return self

    def to_dense(self, dtype=None, *, masked_grad=None):
        r = _coo_dense(self if self.layout is sparse_coo else self.to_sparse_coo())
        return r if dtype is None else r.to(dtype)

    # ---- autograd ------------------------------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._val._rg

    @requires_grad.setter
    def requires_grad(self, value):
        if bool(value) == self._val._rg:
            return
        if not self._leaf:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        values = _wrap(self._val._data)._view_of(self._val)  # this tensor's own leaf, not its maker's values
        values.requires_grad = value
        self._val, self._rg = values, values._rg

    @property
    def is_leaf(self):
        return self._leaf or not self._val._rg

    @property
    def grad_fn(self):
        return None if self._leaf else self._val.grad_fn

    @grad_fn.setter
    def grad_fn(self, value):
        if value is not None:
            raise RuntimeError("a sparse tensor's grad_fn is that of its values")

    @property
    def grad(self):
        values_grad = self._val.grad if self._leaf and self._val._rg else None
        if values_grad is None:
            return self._dgrad
        cached = self._gcache
        if cached is None or cached[0] is not values_grad:
            cached = self._gcache = (values_grad, self._grad_of_values(values_grad))
        if self._dgrad is None:
            return cached[1]
        # both kinds arrived: fold them into the dense one, which the engine adds later gradients into
        self._dgrad = self._dgrad + cached[1].to_dense()
        self._val.grad = self._gcache = None
        return self._dgrad

    @grad.setter
    def grad(self, value):
        self._gcache = None
        if self._leaf and self._val._rg:
            self._val.grad = None
        if value is None or value.layout is strided:
            self._dgrad = value
        elif value.layout is self.layout and self._same_pattern(value):
            self._val.grad, self._dgrad = value._values(), None
        else:
            self._dgrad = value.to_dense()

    def _dense_proxy(self):
        """A dense stand-in for this leaf (zero-strided zeros of its shape) whose gradient sink writes ``.grad``;
        None unless this is a leaf that requires grad."""
        if not (self._leaf and self._val._rg):
            return None
        arr = self._val._data
        xp = _backend.xp_of(arr)
        proxy = _wrap(xp.broadcast_to(xp.zeros((), arr.dtype), self.shape))
        proxy._rg = True
        if self._acc is None:
            from ember.autograd._engine import AccumulateGrad
            self._acc = AccumulateGrad(proxy)
            self._acc._variable = weakref.ref(self)
        proxy._ext = {"acc": self._acc}
        return proxy


class SparseCooTensor(_SparseTensor):
    """A tensor in coordinate format: ``indices`` (sparse_dim x nnz, int64) and ``values`` (nnz x dense dims)."""

    __slots__ = ("_idx", "_coal")
    layout = sparse_coo
    is_sparse = True

    def is_coalesced(self):
        return self._coal

    def coalesce(self):
        if self._coal:
            return self
        idx, val = self._idx._data, self._val
        order, first, inverse, groups = _coalesce_plan(_backend.xp_of(idx), idx, self.shape[:len(idx)])
        if groups == len(order):
            values = val.index_select(0, _wrap(order))
        else:
            values = val.new_zeros((groups,) + tuple(val.shape[1:])).index_add(0, _wrap(inverse), val)
        return _coo(_wrap(idx[:, first]), values, self.shape, True)

    def indices(self):
        if not self._coal:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices()

    def values(self):
        if not self._coal:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return _SparseTensor.values(self)

    def _indices(self):
        return _wrap(self._idx._data)._view_of(self._idx)

    def stride(self, dim=None):
        return 0 if dim is not None else (0,) * self._data.ndim

    def storage_offset(self):
        return 0

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is sparse_csr:
            return self.to_sparse_csr()
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from Sparse to Sparse with sparse_dim argument != "
                               f"self.sparse_dim() is not supported (got {sparse_dim}, {self.sparse_dim()})")
        return self

    def to_sparse_coo(self):
        return self

    def to_sparse_csr(self, dense_dim=None):
        if self._data.ndim != 2 or self.dense_dim():
            raise RuntimeError(f"to_sparse_csr: expected a 2-D tensor with no dense dims, got sparse_dim "
                               f"{self.sparse_dim()} and dense_dim {self.dense_dim()}")
        c = self.coalesce()
        idx = c._idx._data
        xp = _backend.xp_of(idx)
        crow = xp.zeros(self.shape[0] + 1, np.int64)
        xp.cumsum(xp.bincount(idx[0], minlength=self.shape[0]), out=crow[1:])
        return _csr(_wrap(crow), _wrap(idx[1].copy()), c._val, self.shape)

    def _rebuilt(self, values):
        return _coo(self._idx, values, self.shape, self._coal)

    def _parts(self):
        return self._indices(), self._values(), self.shape, self._coal

    def _grad_of_values(self, g):
        """The sparse gradient of this leaf from its values' gradient: PyTorch's keeps one entry per position (a
        duplicate's gradient is its position's)."""
        if self._coal:
            return _coo(self._indices(), g, self.shape, False)
        idx = self._idx._data
        _, first, _, _ = _coalesce_plan(_backend.xp_of(idx), idx, self.shape[:len(idx)])
        return _coo(_wrap(idx[:, first]), g.index_select(0, _wrap(first)), self.shape, False)

    def _same_pattern(self, other):
        a, b = self._idx._data, other._idx._data
        return a.shape == b.shape and bool((a == b).all())


class SparseCsrTensor(_SparseTensor):
    """A matrix in compressed sparse row format: ``crow_indices`` (rows + 1), ``col_indices`` and ``values``."""

    __slots__ = ("_crow", "_col")
    layout = sparse_csr
    is_sparse_csr = True

    def crow_indices(self):
        return _wrap(self._crow._data)._view_of(self._crow)

    def col_indices(self):
        return _wrap(self._col._data)._view_of(self._col)

    def stride(self, dim=None):
        raise RuntimeError("Sparse CSR tensors do not have strides")

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        return self if layout is sparse_csr else self.to_sparse_coo()

    def to_sparse_csr(self, dense_dim=None):
        return self

    def to_sparse_coo(self):
        crow = self._crow._data
        xp = _backend.xp_of(crow)
        idx = xp.stack([_expanded(xp, crow), self._col._data.astype(np.int64)])
        return _coo(_wrap(idx), self._val, self.shape, True)

    def _rebuilt(self, values):
        return _csr(self._crow, self._col, values, self.shape)

    def _parts(self):
        return self.crow_indices(), self.col_indices(), self._values(), self.shape

    def _grad_of_values(self, g):
        return _csr(self.crow_indices(), self.col_indices(), g, self.shape)

    def _same_pattern(self, other):
        return all(a.shape == b.shape and bool((a == b).all())
                   for a, b in ((self._crow._data, other._crow._data), (self._col._data, other._col._data)))


# the methods of layouts a tensor is not of (ccol_indices/row_indices: of the column compressed layouts, which ember
# has none of) raise PyTorch's error
_WANT = {"crow_indices": "sparse row compressed", "col_indices": "sparse row compressed",
         "ccol_indices": "sparse column compressed", "row_indices": "sparse column compressed", "values": "sparse"}
for _name in ("indices", "_indices", "is_coalesced", "coalesce", "crow_indices", "col_indices", "ccol_indices",
              "row_indices", "values"):
    for _cls, _other in ((Tensor, "Strided"), (SparseCooTensor, "Sparse"), (SparseCsrTensor, "SparseCsr")):
        if not hasattr(_cls, _name) or (_cls is not Tensor and getattr(_cls, _name) is getattr(Tensor, _name)):
            def _refuse(self, *args, _name=_name, _other=_other, **kwargs):
                want = _WANT.get(_name, "sparse coordinate")
                raise RuntimeError(f"{_name.lstrip('_')} expected {want} tensor layout but got {_other}")
            setattr(_cls, _name, _refuse)

_NAME = {sparse_coo: "Sparse", sparse_csr: "SparseCsr"}


def _coo(idx, values, shape, coalesced):
    t = object.__new__(SparseCooTensor)
    t._idx, t._coal = idx, coalesced
    return t._init_sparse(shape, values, not values._rg)


def _csr(crow, col, values, shape):
    t = object.__new__(SparseCsrTensor)
    t._crow, t._col = crow, col
    return t._init_sparse(shape, values, not values._rg)


# ---- construction -------------------------------------------------------------------------------------
class check_sparse_tensor_invariants:
    """Whether sparse constructors check their indices (``check_invariants=None`` follows it): a context
    manager and decorator that turns the checks on (or off) inside it; ``enable()``/``disable()`` globally."""

    _on = [False]

    def __init__(self, enable=True):
        self.state = enable

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._on[0]

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._on[0] = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._on[0] = False

    def __enter__(self):
        self.saved, self._on[0] = self._on[0], self.state

    def __exit__(self, *exc):
        self._on[0] = self.saved

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)
        return wrapped


def _as_tensor(x, dtype=None, device=None):
    from . import _factory
    if isinstance(x, Tensor):
        return x.to(dtype=dtype, device=device) if dtype is not None or device is not None else x
    return _factory.tensor(x, dtype=dtype, device=device)


def _index_tensor(x, device, name, dtype=np.int64):
    t = _as_tensor(x, device=device)
    if t.layout is not strided:
        raise RuntimeError(f"{name} must be a strided tensor, got layout {t.layout}")
    return t if t._data.dtype == dtype else _wrap(t._data.astype(dtype))


def _own_values(values, dtype, device, requires_grad, op_name):
    """The values tensor of a new sparse tensor: an alias recorded as the constructor (so that a sparse tensor
    built from values that require grad has PyTorch's grad_fn), or a leaf of its own for ``requires_grad``."""
    if values.layout is not strided:
        raise RuntimeError(f"values must be a strided tensor, got layout {values.layout}")
    v = values.to(dtype=dtype, device=device) if dtype is not None or device is not None else values
    if v._rg:
        if requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        return REGISTRY[op_name].fn(v)
    if requires_grad:
        v = _wrap(v._data)._view_of(v)
        v.requires_grad = True
    return v


def _check_size(size, inferred, sparse_dim, dense_shape, what):
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise RuntimeError(f"{what}: size has negative entries: {list(size)}")
    if len(size) != sparse_dim + len(dense_shape):
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
                           f"sparse_dim = {sparse_dim}, dense_dim = {len(dense_shape)}")
    if size[sparse_dim:] != tuple(dense_shape):
        raise RuntimeError(f"values has incorrect size, expected {list(size[:1]) + list(size[sparse_dim:])}, got "
                           f"{[inferred] + list(dense_shape)}")
    return size


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with the given ``indices`` (sparse_dim x nnz) and ``values`` (nnz x dense dims);
    ``size`` defaults to the smallest one holding every index. Entries at one position add up."""
    values = _as_tensor(values, dtype=dtype, device=device)
    idx = _index_tensor(indices, values.device, "indices")
    if idx._data.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    sparse_dim, nnz = idx._data.shape
    if values._data.ndim == 0 or values._data.shape[0] != nnz:
        got = values._data.shape[0] if values._data.ndim else 1
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                           f"values: {got}")
    arr, dense_shape = idx._data, tuple(values._data.shape[1:])
    if size is None:
        size = tuple(int(m) + 1 for m in arr.max(axis=1).tolist()) if nnz else (0,) * sparse_dim
        size += dense_shape
    else:
        size = _check_size(size, nnz, sparse_dim, dense_shape, "sparse_coo_tensor")
    if check_invariants or (check_invariants is None and check_sparse_tensor_invariants.is_enabled()):
        _check_coo_bounds(arr, size[:sparse_dim])
    values = _own_values(values, None, None, requires_grad, "sparse_coo_tensor_with_dims_and_tensors")
    return _coo(idx, values, Size(size), bool(is_coalesced) or nnz < 2)


def _check_coo_bounds(idx, sizes):
    if not idx.size:
        return
    low, high = idx.min(axis=1).tolist(), idx.max(axis=1).tolist()
    for d, (lo, hi, n) in enumerate(zip(low, high, sizes)):
        if lo < 0:
            raise RuntimeError(f"found negative index {lo} for dim {d}")
        if hi >= n:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {n} but found index {hi}")


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None):
    """A sparse CSR matrix: row ``i`` holds the entries ``crow_indices[i]:crow_indices[i + 1]`` of
    ``col_indices`` and ``values``."""
    values = _as_tensor(values, dtype=dtype, device=device)
    crow = _as_tensor(crow_indices, device=values.device)
    col = _as_tensor(col_indices, device=values.device)
    dtype_idx = np.int32 if crow._data.dtype == np.int32 and col._data.dtype == np.int32 else np.int64
    crow = _index_tensor(crow, values.device, "crow_indices", dtype_idx)
    col = _index_tensor(col, values.device, "col_indices", dtype_idx)
    if crow._data.ndim != 1 or col._data.ndim != 1:
        raise RuntimeError(f"crow_indices and col_indices must be 1-D for a CSR matrix, got {crow._data.ndim}-D and "
                           f"{col._data.ndim}-D")
    if values._data.ndim == 0 or values._data.shape[0] != col._data.shape[0]:
        raise RuntimeError(f"col_indices and values must have the same number of elements, but got "
                           f"{col._data.shape[0]} and {values._data.shape[0] if values._data.ndim else 1}")
    dense_shape, nnz = tuple(values._data.shape[1:]), col._data.shape[0]
    if size is None:
        size = (len(crow._data) - 1, int(col._data.max()) + 1 if nnz else 0) + dense_shape
    else:
        size = _check_size(size, nnz, 2, dense_shape, "sparse_csr_tensor")
        if len(crow._data) != size[0] + 1:
            raise RuntimeError(f"crow_indices must have size nrows + 1 = {size[0] + 1}, but got {len(crow._data)}")
    if check_invariants or (check_invariants is None and check_sparse_tensor_invariants.is_enabled()):
        _check_csr(crow._data, col._data, size[1])
    values = _own_values(values, None, None, requires_grad, "sparse_compressed_tensor")
    return _csr(crow, col, values, Size(size))


def _check_csr(crow, col, ncols):
    xp = _backend.xp_of(crow)
    nnz = len(col)
    if len(crow) and int(crow[0]) != 0:
        raise RuntimeError("`crow_indices[..., 0] == 0` is not satisfied.")
    if len(crow) and int(crow[-1]) != nnz:
        raise RuntimeError("`crow_indices[..., -1] == nnz` is not satisfied.")
    if bool((xp.diff(crow) < 0).any()):
        raise RuntimeError("`0 <= crow_indices[..., 1:] - crow_indices[..., :-1] <= ncols` is not satisfied.")
    if nnz and (int(col.min()) < 0 or int(col.max()) >= ncols):
        raise RuntimeError("`0 <= col_indices < ncols` is not satisfied.")
    starts = xp.zeros(nnz, bool)
    starts[crow[:-1][crow[:-1] < nnz]] = True
    if nnz > 1 and bool(((col[1:] <= col[:-1]) & ~starts[1:]).any()):
        raise RuntimeError("`col_indices[..., crow_indices[..., i - 1]:crow_indices[..., i]] for all i = 1, ..., "
                           "nrows are sorted and distinct along the last dimension values` is not satisfied.")


@op("sparse_coo_tensor_with_dims_and_tensors", function=False, method=False)
def _coo_values(xp, values):
    """The values of a new COO tensor (an alias: it carries the constructor in the graph)."""
    return values


@op("sparse_compressed_tensor", function=False, method=False)
def _csr_values(xp, values):
    """The values of a new CSR tensor (an alias: it carries the constructor in the graph)."""
    return values


@_coo_values.vjp
def _(ctx, g):
    return (g,)


_csr_values.vjp(_coo_values.vjp_fn)


def rebuild_sparse_tensor(layout, data):
    """A sparse tensor from its pickled parts (PyTorch's ``torch._utils._rebuild_sparse_tensor``)."""
    if layout is sparse_coo:
        indices, values, size = data[:3]
        return sparse_coo_tensor(indices, values, size, check_invariants=False,
                                 is_coalesced=data[3] if len(data) > 3 else None)
    if layout is sparse_csr:
        return sparse_csr_tensor(*data, check_invariants=False)
    raise NotImplementedError(f"rebuilding a sparse tensor of layout {layout}")


# ---- coalescing and conversions ------------------------------------------------------------------------
def _keys(xp, idx, sizes):
    """Row-major positions of the index columns ``idx`` within ``sizes``."""
    key = xp.zeros(idx.shape[1], np.int64)
    for row, n in zip(idx, sizes):
        key *= n
        key += row
    return key


def _coalesce_plan(xp, idx, sizes):
    """(order, first, inverse, groups): the index columns sorted by position, the column of each distinct
    position's first entry (in position order), each column's group, the number of distinct positions."""
    key = _keys(xp, idx, sizes)
    order = xp.argsort(key, kind="stable") if xp is np else xp.argsort(key)
    ordered = key[order]
    new = xp.ones(len(key), bool)
    new[1:] = ordered[1:] != ordered[:-1]
    group = xp.cumsum(new) - 1
    inverse = xp.empty_like(group)
    inverse[order] = group
    return order, order[new], inverse, int(group[-1]) + 1 if len(key) else 0


def _coo_dense(s):
    """The dense tensor of COO ``s`` (entries at one position add up), differentiable in its values."""
    sd = s.sparse_dim()
    shape = tuple(s.shape)
    xp = _backend.xp_of(s._idx._data)
    keys = _wrap(_keys(xp, s._idx._data, shape[:sd]))
    val = s._val
    flat = val.new_zeros((math.prod(shape[:sd]),) + shape[sd:])
    return flat.index_add(0, keys, val).reshape(shape)  # (adds: a tensor flagged coalesced may hold duplicates)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """This dense tensor as a COO tensor of its nonzero entries (the first ``sparse_dim`` dims sparse), or in
    ``layout``."""
    if layout is sparse_csr:
        return to_sparse_csr(self)
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise NotImplementedError(f"to_sparse: ember has no conversion to layout {layout}")
    ndim = self._data.ndim
    sd = ndim - (dense_dim or 0) if sparse_dim is None else sparse_dim
    if not 0 <= sd <= ndim:
        raise RuntimeError(f"sparse_dim must be in [0, {ndim}], got {sd}")
    arr = self._data
    xp = _backend.xp_of(arr)
    nonzero = arr != 0
    if sd < ndim:
        nonzero = nonzero.any(axis=tuple(range(sd, ndim)))
    idx = xp.stack(xp.nonzero(nonzero)).astype(np.int64) if sd else xp.zeros((0, int(bool(nonzero))), np.int64)
    shape = tuple(self.shape)
    keys = _keys(xp, idx, shape[:sd])
    values = self.reshape((math.prod(shape[:sd]),) + shape[sd:]).index_select(0, _wrap(keys))
    return _coo(_wrap(idx), values, self.shape, True)


def to_sparse_coo(self):
    return to_sparse(self)


def to_sparse_csr(self, dense_dim=None):
    if self._data.ndim != 2:
        raise RuntimeError(f"to_sparse_csr: ember converts 2-D tensors only, got a {self._data.ndim}-D one")
    return to_sparse(self).to_sparse_csr()


def _dense_to_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


def _dense_sparse_dim(self):
    return 0


def _dense_dense_dim(self):
    return self._data.ndim


Tensor.to_sparse, Tensor.to_sparse_coo, Tensor.to_sparse_csr = to_sparse, to_sparse_coo, to_sparse_csr
Tensor.to_dense, Tensor.sparse_dim, Tensor.dense_dim = _dense_to_dense, _dense_sparse_dim, _dense_dense_dim


# ---- products -----------------------------------------------------------------------------------------
_scipy_sparse = []


def _scipy():
    """scipy.sparse when installed (imported on first use: ``import ember`` never imports SciPy), else None."""
    if not _scipy_sparse:
        try:
            import scipy.sparse as sps
        except ImportError:
            sps = None
        _scipy_sparse.append(sps)
    return _scipy_sparse[0]


def _expanded(xp, crow):
    """The row of each entry of a CSR matrix with row starts ``crow``."""
    return xp.repeat(xp.arange(len(crow) - 1), xp.diff(crow).astype(np.int64))


def _product(xp, rows, cols, vals, dense, n, order):
    """``A @ dense`` for the n-row matrix A with entries ``vals`` at (``rows``, ``cols``), ``dense`` 2-D. ``order``:
    "csr" (``rows`` are then the row starts), "sorted" (rows ascending) or None."""
    k = dense.shape[1]
    if xp is np and vals.dtype.kind in "fciu" and _scipy() is not None:
        if order == "csr":
            indptr = rows
        else:
            if order is None:
                perm = np.argsort(rows, kind="stable")
                rows, cols, vals = rows[perm], cols[perm], vals[perm]
            indptr = np.zeros(n + 1, np.int64)
            np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        a = _scipy().csr_matrix((vals, cols, indptr), shape=(n, dense.shape[0]))
        return np.asarray(a @ dense)
    if order == "csr":
        rows = _expanded(xp, rows)
    if xp is not np and vals.dtype.kind in "fc":
        import cupyx.scipy.sparse as cps
        a = cps.coo_matrix((vals, (rows, cols)), shape=(n, dense.shape[0])).tocsr()
        return a @ xp.ascontiguousarray(dense)
    # gather the rows each entry multiplies, then add each product into its output row (flat positions: one
    # scatter-add call over all of them)
    prod = dense[cols] * vals[:, None]
    out = xp.zeros(n * k, prod.dtype)
    pos = (rows[:, None] * k + xp.arange(k)).ravel()
    if xp is np:
        np.add.at(out, pos, prod.ravel())
    else:
        xp.add.at(out, pos, prod.ravel())
    return out.reshape(n, k)


@op("_sparse_mm", function=False, method=False)
def _sparse_mm(xp, values, dense, rows, cols, n, order=None):
    """``A @ dense`` for the n-row sparse matrix A with entries ``values`` at (``rows``, ``cols``) (``order``: see
    ``_product``)."""
    half = values.dtype if values.dtype in (np.float16, D.bfloat16.np) else None
    v, d = (values.astype(np.float32), dense.astype(np.float32)) if half else (values, dense)
    r = _product(xp, rows, cols, v, d[:, None] if d.ndim == 1 else d, n, order)
    r = r[:, 0] if dense.ndim == 1 else r
    return r.astype(half or values.dtype, copy=False)


@_sparse_mm.vjp
def _(ctx, g):
    values, dense, rows, cols, n = ctx.args[:5]
    want_v, want_d = wanted(ctx)[:2]
    if ctx.kwargs.get("order") == "csr":
        rows = _wrap(_expanded(_backend.xp_of(rows._data), rows._data))
    gv = gd = None
    if want_v:
        d = dense.index_select(0, cols)
        p = g.index_select(0, rows) * (d.conj() if d.is_complex() else d)
        gv = p if dense.dim() == 1 else p.sum(1)
    if want_d:
        gd = _sparse_mm.fn(values.conj() if values.is_complex() else values, g, cols, rows, dense.shape[0])
    return gv, gd, None, None, None


@op("_sparse_leaf_grad", function=False, method=False)
def _leaf_grad(xp, input, proxy, *, vjp):
    """``input`` itself; its gradient also reaches ``proxy`` (a sparse leaf's dense stand-in) as ``vjp(g)``."""
    return input


@_leaf_grad.vjp
def _(ctx, g):
    return g, ctx.kwargs["vjp"](g)


def _rows_cols(s):
    """(rows, cols, order) of a sparse matrix for ``_sparse_mm``."""
    if s.layout is sparse_csr:
        return s._crow._data, s._col._data, "csr"
    return s._idx._data[0], s._idx._data[1], "sorted" if s._coal else None


def _check_product(s, d, name):
    if s._data.ndim != 2 or s.dense_dim():
        raise RuntimeError(f"{name}: expected a 2-D sparse matrix without dense dims, got sparse_dim {s.sparse_dim()} "
                           f"and dense_dim {s.dense_dim()}")
    if not isinstance(d, Tensor):
        raise TypeError(f"{name}(): argument 'mat2' must be Tensor, not {type(d).__name__}")
    if d._data.ndim not in (1, 2):
        raise RuntimeError(f"{name}: expected a 1-D or 2-D dense operand, got {d._data.ndim}-D")
    if d.dtype is not s.dtype:
        raise RuntimeError(f"expected scalar type {TORCH_NAME[s.dtype]} but found {TORCH_NAME[d.dtype]}")
    if d._data.shape[0] != s.shape[1]:
        if s.layout is sparse_csr:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({s.shape[0]}x{s.shape[1]} and "
                               f"{'x'.join(map(str, d.shape))})")
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, got {d._data.shape[0]}")


def _spmm(s, d, name, dense_grad):
    """``s @ d`` for sparse ``s`` and dense ``d`` (1-D or 2-D). A leaf ``s`` that requires grad gets a dense
    gradient when ``dense_grad`` (``mm``'s), else a sparse one (``ember.sparse.mm``'s)."""
    if d.layout is not strided:
        return _sparse_sparse(s, d)
    _check_product(s, d, name)
    rows, cols, order = _rows_cols(s)
    proxy = s._dense_proxy() if dense_grad else None
    values = s._val if proxy is None else _wrap(s._val._data)
    r = _sparse_mm.fn(values, d, _wrap(rows), _wrap(cols), s.shape[0], order=order)
    if proxy is None:
        return r
    return _leaf_grad.fn(r, proxy, vjp=lambda g: g.outer(d) if d.dim() == 1 else g.mm(d.t()))


def _dense_sparse(d, s, name):
    """``d @ s`` for dense ``d`` and sparse ``s``, as ``(s.t() @ d.t()).t()``."""
    if s.layout is not sparse_coo:
        raise NotImplementedError(f"{name}: ember multiplies a dense tensor by a sparse_coo one only, not "
                                  f"{s.layout}")
    if d._data.ndim == 1:
        return _spmm(_transpose(s, 0, 1), d, name, True)
    if d._data.ndim != 2 or d._data.shape[1] != s.shape[0]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s.shape[0]}, got "
                           f"{d._data.shape[-1] if d._data.ndim else 0}")
    return _spmm(_transpose(s, 0, 1), d.t(), name, True).t()


def _sparse_sparse(a, b):
    """The sparse product of two sparse matrices: every pair of entries with a's column equal to b's row, summed
    per output position (differentiable in both values)."""
    if a.layout is not b.layout:
        raise RuntimeError(f"mm: expected sparse operands of one layout, got {a.layout} and {b.layout}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {TORCH_NAME[a.dtype]} but found {TORCH_NAME[b.dtype]}")
    csr = a.layout is sparse_csr
    a, b = a.to_sparse_coo().coalesce(), b.to_sparse_coo().coalesce()
    ai, bi = a._idx._data, b._idx._data
    xp = _backend.xp_of(ai)
    bstart = xp.zeros(b.shape[0] + 1, np.int64)
    xp.cumsum(xp.bincount(bi[0], minlength=b.shape[0]), out=bstart[1:])
    first, count = bstart[ai[1]], xp.diff(bstart)[ai[1]]
    pairs_a = xp.repeat(xp.arange(ai.shape[1]), count)
    offset = xp.arange(len(pairs_a)) - xp.repeat(xp.cumsum(count) - count, count)
    pairs_b = first[pairs_a] + offset
    values = a._val.index_select(0, _wrap(pairs_a)) * b._val.index_select(0, _wrap(pairs_b))
    idx = xp.stack([ai[0][pairs_a], bi[1][pairs_b]])
    r = _coo(_wrap(idx), values, Size((a.shape[0], b.shape[1])), False).coalesce()
    return r.to_sparse_csr() if csr else r


def _mm(input, mat2):
    if input.layout is strided:
        return _dense_sparse(input, mat2, "mm")
    if mat2.layout is strided and mat2._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _spmm(input, mat2, "mm", True)


def _matmul(input, other):
    if input.layout is strided:
        return _dense_sparse(input, other, "matmul")
    return _spmm(input, other, "matmul", True)


def _mv(input, vec):
    if input.layout is strided or vec._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.dim()}, {vec.dim()}")
    return _spmm(input, vec, "mv", True)


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    if input.layout is not strided:
        raise NotImplementedError(f"addmm: ember adds the product to a strided input only, not {input.layout}")
    prod = _mm(mat1, mat2)
    return _scaled_sum(input, prod, beta, alpha)


def _scaled_sum(input, prod, beta, alpha):
    prod = prod * alpha if alpha != 1 else prod
    if beta == 0:  # (input is ignored, NaN included, as PyTorch's)
        return prod.expand(input.shape) if prod.shape != input.shape else prod
    return prod + (input * beta if beta != 1 else input)


def sparse_mm(mat1, mat2, reduce=None):
    """``mat1 @ mat2`` where ``mat1`` (sparse COO or CSR, or dense) is a matrix; a sparse ``mat1`` that is a leaf
    requiring grad gets a sparse gradient (of its own pattern)."""
    if reduce not in (None, "sum"):
        raise NotImplementedError(f"ember.sparse.mm: reduce={reduce!r} is not supported (only sum)")
    if mat1.layout is strided:
        from . import _ops
        return _ops.linalg.mm.fn(mat1, mat2) if mat2.layout is strided else _dense_sparse(mat1, mat2, "mm")
    if mat2.layout is strided and mat2._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _spmm(mat1, mat2, "mm", False)


def sparse_addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``beta * mat + alpha * (mat1 @ mat2)`` for sparse ``mat1`` (sparse gradient, as ``sparse.mm``)."""
    return _scaled_sum(mat, sparse_mm(mat1, mat2), beta, alpha)


def spmm(input, mat2):
    """``ember.mm`` (a sparse ``input`` that is a leaf requiring grad gets a dense gradient, as from ``mm``)."""
    return REGISTRY["mm"].fn(input, mat2)


def smm(input, mat):
    """``input @ mat`` for sparse ``input`` and dense ``mat``, as a sparse COO tensor."""
    return _spmm(_need_sparse(input, "smm"), mat, "smm", True).to_sparse()


def hspmm(mat1, mat2):
    """``mat1 @ mat2`` as a hybrid COO tensor: one entry per row of ``mat1`` that holds entries, whose values are
    that row of the product."""
    s = _need_sparse(mat1, "hspmm").to_sparse_coo().coalesce()
    prod = _spmm(s, mat2, "hspmm", True)
    xp = _backend.xp_of(s._idx._data)
    rows = xp.unique(s._idx._data[0])
    return _coo(_wrap(rows[None]), prod.index_select(0, _wrap(rows)), Size(prod.shape), False)


def _need_sparse(x, name):
    if not isinstance(x, _SparseTensor):
        raise RuntimeError(f"{name}: expected a sparse tensor as the first argument, got layout "
                           f"{getattr(x, 'layout', type(x).__name__)}")
    return x


# ---- elementwise ---------------------------------------------------------------------------------------
def _is_scalar(x):
    return isinstance(x, (bool, int, float, complex, np.generic)) or (
        isinstance(x, Tensor) and x.layout is strided and x._data.ndim == 0)


def _mul(input, other):
    if _is_scalar(other):
        return input._rebuilt(input._val * other)
    if _is_scalar(input):
        return other._rebuilt(input * other._val)
    if input.layout is strided or other.layout is strided:
        s, d = (input, other) if other.layout is strided else (other, input)
        return _mul_dense(s, d)
    return _mul_sparse(input, other)


def _mul_dense(s, d):
    """Sparse times a dense tensor of its shape: sparse, the dense entries gathered at its positions."""
    if tuple(d.shape) != tuple(s.shape):
        raise RuntimeError(f"mul: ember multiplies a sparse tensor by a dense one of the same shape only, got "
                           f"{list(s.shape)} and {list(d.shape)}")
    if s.layout is sparse_csr:
        return _mul_dense(s.to_sparse_coo(), d).to_sparse_csr()
    sd = s.sparse_dim()
    xp = _backend.xp_of(s._idx._data)
    keys = _wrap(_keys(xp, s._idx._data, tuple(s.shape[:sd])))
    gathered = d.reshape((-1,) + tuple(d.shape[sd:])).index_select(0, keys)
    return s._rebuilt(s._val * gathered)


def _mul_sparse(a, b):
    """Elementwise product of two sparse tensors: the positions both hold."""
    if a.layout is not b.layout:
        raise RuntimeError(f"mul: expected sparse operands of one layout, got {a.layout} and {b.layout}")
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"mul operands have incompatible sizes: {list(a.shape)} and {list(b.shape)}")
    if a.layout is sparse_csr:
        return _mul_sparse(a.to_sparse_coo(), b.to_sparse_coo()).to_sparse_csr()
    a, b = a.coalesce(), b.coalesce()
    xp = _backend.xp_of(a._idx._data)
    sizes = tuple(a.shape[:a.sparse_dim()])
    ka, kb = _keys(xp, a._idx._data, sizes), _keys(xp, b._idx._data, sizes)
    common = xp.intersect1d(ka, kb)
    ia, ib = xp.searchsorted(ka, common), xp.searchsorted(kb, common)
    values = a._val.index_select(0, _wrap(ia)) * b._val.index_select(0, _wrap(ib))
    return _coo(_wrap(a._idx._data[:, ia]), values, a.shape, True)


def _div(input, other, *, rounding_mode=None):
    if not isinstance(input, _SparseTensor) or not _is_scalar(other):
        raise RuntimeError("div: ember divides a sparse tensor by a scalar only")
    return input._rebuilt(input._val.div(other, rounding_mode=rounding_mode))


def _add(input, other, *, alpha=1):
    if input.layout is strided and isinstance(other, _SparseTensor):
        return input.add(other.to_dense(), alpha=alpha)
    if not isinstance(other, _SparseTensor):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if input.layout is not other.layout:
        raise RuntimeError(f"add: expected sparse operands of one layout, got {input.layout} and {other.layout}")
    if tuple(input.shape) != tuple(other.shape):
        raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but {list(input.shape)} != "
                           f"{list(other.shape)}")
    if input.layout is sparse_csr:
        return _add(input.to_sparse_coo(), other.to_sparse_coo(), alpha=alpha).to_sparse_csr()
    from . import _ops
    ov = other._val * alpha if alpha != 1 else other._val
    if input._same_pattern(other):  # the same indices (s + s): the values add, as PyTorch's
        return input._rebuilt(input._val + ov)
    values = _ops.shape.cat.fn([input._val, ov])
    idx = _backend.xp_of(input._idx._data).concatenate([input._idx._data, other._idx._data], axis=1)
    r = _coo(_wrap(idx), values, input.shape, False)
    return r.coalesce() if input._coal and other._coal else r


def _sub(input, other, *, alpha=1):
    if input.layout is strided and isinstance(other, _SparseTensor):
        return input.sub(other.to_dense(), alpha=alpha)
    return _add(input, other, alpha=-alpha)


def _unary(op, input, *args, **kwargs):
    """A zero-preserving elementwise op: applied to the values (after coalescing, unless it is linear)."""
    s = input if op.name == "neg" or input.layout is not sparse_coo else input.coalesce()
    return s._rebuilt(op.fn(s._val, *args, **kwargs))


# ---- reductions, shape ---------------------------------------------------------------------------------
def _sum(input, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        proxy = input._dense_proxy()
        values = input._val if proxy is None else _wrap(input._val._data)
        total = values.sum(dtype=dtype)
        if proxy is None:
            return total
        shape = tuple(input.shape)
        return _leaf_grad.fn(total, proxy, vjp=lambda g: g.expand(shape))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return _reduce(input, dims, keepdim, dtype, dense_when_all=False)


def sparse_sum(input, dim=None, dtype=None):
    """Sum of a sparse tensor: over everything (a dense 0-d tensor), or over ``dim`` (sparse, unless every sparse
    dim is summed: then dense)."""
    _need_sparse(input, "sparse.sum")
    if dim is None:
        return _sum(input, dtype=dtype)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return _reduce(input, dims, False, dtype, dense_when_all=True)


def _reduce(s, dims, keepdim, dtype, dense_when_all):
    if s.layout is sparse_csr:
        raise NotImplementedError("sum over dims of a sparse_csr tensor: ember sums sparse_coo tensors only (use "
                                  "to_sparse_coo())")
    ndim, sd = s._data.ndim, s.sparse_dim()
    dims = sorted({_wrap_dim(d, ndim) for d in dims})
    values = s._val
    dense = [d - sd + 1 for d in dims if d >= sd]
    if dense:
        values = values.sum(dense, keepdim=keepdim)
    if dtype is not None:
        values = values.to(dtype)
    reduced = [d for d in dims if d < sd]
    keep = [d for d in range(sd) if d not in reduced]
    if not keep and (dense_when_all or not keepdim):  # every sparse dim summed: dense
        return values.sum(0)
    idx = s._idx._data
    if keepdim:
        idx = idx.copy()
        idx[reduced] = 0
        shape = [1 if d in dims else n for d, n in enumerate(s.shape)]
    else:
        idx = idx[keep]
        shape = [n for d, n in enumerate(s.shape) if d not in dims]
    r = _coo(_wrap(idx), values, Size(shape), False).coalesce()
    r._coal = not keepdim  # (PyTorch flags a keepdim sum uncoalesced, though it is)
    return r


def _transpose(input, dim0, dim1):
    if input.layout is not sparse_coo:
        raise NotImplementedError(f"transpose: ember transposes sparse_coo tensors only, not {input.layout}")
    ndim, sd = input._data.ndim, input.sparse_dim()
    d0, d1 = _wrap_dim(dim0, ndim), _wrap_dim(dim1, ndim)
    if d0 >= sd or d1 >= sd:
        raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got sparse_dim: {sd}, d0: {d0}, "
                           f"d1: {d1}")
    order = list(range(ndim))
    order[d0], order[d1] = d1, d0
    return _permute(input, order)


def _t(input):
    sd, dd = input.sparse_dim(), input.dense_dim()
    if input.layout is sparse_coo and (sd > 2 or dd):
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got {sd} sparse and "
                           f"{dd} dense dimensions")
    return input if input._data.ndim < 2 else _transpose(input, 0, 1)


def _permute(input, *dims):
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
    if input.layout is not sparse_coo:
        raise NotImplementedError(f"permute: ember permutes sparse_coo tensors only, not {input.layout}")
    ndim, sd = input._data.ndim, input.sparse_dim()
    order = [_wrap_dim(d, ndim) for d in dims]
    if sorted(order) != list(range(ndim)):
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           "of the desired ordering of dimensions i.e. input.dim() = "
                           f"{ndim} is not equal to len(dims) = {len(dims)}")
    if order[sd:] != list(range(sd, ndim)):
        raise NotImplementedError("permute(sparse_coo): transpose of dense dimensions is not supported")
    idx = input._idx._data[order[:sd]]
    same = order[:sd] == list(range(sd))
    return _coo(_wrap(idx), input._val, Size(input.shape[d] for d in order), input._coal and same)


def _softmax(input, dim, dtype=None, log=False):
    if not isinstance(input, SparseCooTensor):
        layout = getattr(input, "layout", None)
        raise NotImplementedError(f"Could not run 'aten::_sparse_{'log_' if log else ''}softmax' with arguments from "
                                  f"the '{_backend_name(input) if layout is not None else 'CPU'}' backend: ember's "
                                  "sparse softmax takes sparse_coo tensors")
    s = input.coalesce()
    values = s._val if dtype is None else s._val.to(dtype)
    ndim, sd = s._data.ndim, s.sparse_dim()
    d = _wrap_dim(dim, ndim)
    if d >= sd:  # along a dense dim: each entry's values on their own
        vd = d - sd + 1
        return s._rebuilt(values.log_softmax(vd) if log else values.softmax(vd))
    # along a sparse dim: a group is the entries that agree on every other sparse dim
    idx = s._idx._data
    xp = _backend.xp_of(idx)
    others = [j for j in range(sd) if j != d]
    _, _, inverse, groups = _coalesce_plan(xp, idx[others], [s.shape[j] for j in others])
    group = _wrap(inverse)
    arr = values._data.astype(np.float32) if values._data.dtype in (np.float16, D.bfloat16.np) else values._data
    peak = xp.full((groups,) + arr.shape[1:], -np.inf, arr.dtype)
    np.maximum.at(peak, inverse, arr) if xp is np else xp.maximum.at(peak, inverse, arr)
    shifted = values - _wrap(peak.astype(values._data.dtype)).index_select(0, group)
    e = shifted.exp()
    total = e.new_zeros((groups,) + tuple(e.shape[1:])).index_add(0, group, e)
    out = shifted - total.log().index_select(0, group) if log else e / total.index_select(0, group)
    return s._rebuilt(out)


def sparse_softmax(input, dim, dtype=None):
    """Softmax of a COO tensor along ``dim`` over its stored entries (missing ones count as minus infinity)."""
    return _softmax(input, dim, dtype)


def sparse_log_softmax(input, dim, dtype=None):
    """Log of ``sparse_softmax``."""
    return _softmax(input, dim, dtype, log=True)


# ---- copies --------------------------------------------------------------------------------------------
def _clone(input, *, memory_format=None):
    return _with_indices(input, lambda t: _wrap(t._data.copy()), input._val.clone())


def _with_indices(s, fn, values):
    if s.layout is sparse_coo:
        return _coo(fn(s._idx), values, s.shape, s._coal)
    return _csr(fn(s._crow), fn(s._col), values, s.shape)


def _to_copy(input, *, dtype=None, device=None):
    values = REGISTRY["_to_copy"].fn(input._val, dtype=dtype, device=device)
    if device is None:
        return input._rebuilt(values)
    return _with_indices(input, lambda t: _wrap(_backend.to_device(t._data, device)), values)


# ---- dispatch ------------------------------------------------------------------------------------------
_HANDLERS = {
    "mm": _mm, "matmul": _matmul, "mv": _mv, "addmm": _addmm, "mul": _mul, "div": _div, "add": _add, "sub": _sub,
    "sum": _sum, "t": _t, "transpose": _transpose, "permute": _permute, "clone": _clone, "_to_copy": _to_copy,
}
# zero-preserving elementwise ops, which PyTorch runs on sparse values (ember.special's among them when installed)
_UNARY = {"neg", "abs", "sin", "sinh", "tan", "tanh", "asin", "asinh", "atan", "atanh", "sqrt", "relu", "expm1",
          "log1p", "ceil", "floor", "round", "trunc", "frac", "sign", "sgn", "square", "erf", "erfinv", "deg2rad",
          "rad2deg", "signbit", "isnan", "isinf", "isposinf", "isneginf", "nan_to_num"}
_INPLACE = {"mul", "div", "add", "sub", "neg"}


def _backend_name(t):
    kind = "SparseCsr" if t.layout is sparse_csr else "Sparse" if t.layout is sparse_coo else ""
    return kind + ("CUDA" if t.is_cuda else "CPU")


def dispatch(op, args, kwargs, out, mode):
    """Run a registry op that met a sparse operand (``_registry.StandInOperands``)."""
    handler = _HANDLERS.get(op.name) or (functools.partial(_unary, op) if op.name in _UNARY else None)
    if handler is None or out is not None or (mode == "inplace" and op.name not in _INPLACE):
        name = op.name + ("_" if mode == "inplace" else ".out" if out is not None else "")
        sparse = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, _SparseTensor))
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the '{_backend_name(sparse)}' "
                                  f"backend: ember has no {sparse.layout} implementation of {name}")
    r = handler(*args, **kwargs)
    if mode != "inplace":
        return r
    target = args[0]
    if target.layout is not r.layout:
        raise RuntimeError(f"{op.name}_: the result's layout {r.layout} can't be written into a {target.layout} "
                           "tensor")
    if target._leaf and target._val._rg:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    for name in _SLOTS[type(target)]:
        setattr(target, name, getattr(r, name))
    target._vc[0] += 1
    return target


_SLOTS = {cls: ("_data", "_val", "_leaf", "_rg") + cls.__slots__ for cls in (SparseCooTensor, SparseCsrTensor)}
STAND_INS[_Meta] = dispatch


# ---- printing ------------------------------------------------------------------------------------------
def sparse_repr(t):
    """``repr`` of a sparse tensor, laid out as PyTorch's: its index and value tensors, then size and nnz."""
    from ._factory import get_default_device
    from ._printing import _host_values, _opts, _Printer, _with_suffixes
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != get_default_device().type:
        suffixes.append(f"device='{t.device}'")
    suffixes += [f"size={tuple(t.shape)}", f"nnz={t._nnz()}"]
    default = D.get_default_dtype()
    if t.dtype not in (default, D.complex128 if default is D.float64 else D.complex64, D.int64, D.bool):
        suffixes.append(f"dtype={t.dtype}")
    parts = ([("indices", t._idx)] if t.layout is sparse_coo else [("crow_indices", t._crow), ("col_indices", t._col)])
    texts = []
    for name, part in parts + [("values", t._val)]:
        head = f"{name}=tensor("
        if part._data.size:
            arr = _host_values(part)
            body = _Printer(arr, arr.size > _opts["threshold"]).block(arr, indent + len(head))
        else:
            body = f"[], size={tuple(part.shape)}"
        texts.append(head + body + ")")
    suffixes.append(f"layout={t.layout}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + (",\n" + " " * indent).join(texts), suffixes, indent,
                          force_newline=t.layout is sparse_coo)
