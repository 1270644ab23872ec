"""PyTorch's type promotion and broadcasting rules (not NumPy's).

Operands are ranked in three priority classes: tensors with dimensions, zero-dim tensors, and Python
scalars. Within a class dtypes promote by the lattice of ``promote_types``; a lower class only
matters when its category (bool < integer < floating < complex) is higher than the class above it.
"""
import builtins

from . import _dtype as D

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3
_cache = {}


def promote_types(a, b):
    """The smallest dtype both ``a`` and ``b`` convert to without losing their category."""
    if a is b:
        return a
    key = (a, b)
    r = _cache.get(key)
    if r is None:
        r = _cache[key] = _promote(a, b)
    return r


def _promote(a, b):
    if a in D.FLOAT8 or b in D.FLOAT8:  # (a is not b here)
        from ._registry import TORCH_NAME
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote {TORCH_NAME[a]} and "
                           f"{TORCH_NAME[b]}")
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == _COMPLEX and lo.category == _FLOAT:
            return promote_types(hi.to_real(), lo).to_complex()
        return hi
    if {a, b} == {D.uint8, D.int8}:
        return D.int16
    if {a, b} == {D.float16, D.bfloat16}:
        return D.float32
    if {a, b} == {D.complex32, D.complex64}:
        return D.complex64
    return a if a.rank > b.rank else b


def can_cast(from_, to):
    """Whether casting ``from_`` to ``to`` is allowed by PyTorch's rules for in-place results and out=."""
    if from_.category == _COMPLEX and to.category != _COMPLEX:
        return False
    if from_.category == _FLOAT and to.category < _FLOAT:
        return False
    return not (from_ is not D.bool and to is D.bool)


def scalar_dtype(x):
    """The dtype a Python scalar takes part in promotion with."""
    t = type(x)
    if t is builtins.bool:
        return D.bool
    if t is builtins.int:
        return D.int64
    if t is builtins.float:
        return D.get_default_dtype()
    if t is builtins.complex:
        return D.default_complex()
    if isinstance(x, builtins.bool):
        return D.bool
    if isinstance(x, builtins.int):
        return D.int64
    if isinstance(x, builtins.float):
        return D.get_default_dtype()
    if isinstance(x, builtins.complex):
        return D.default_complex()
    raise TypeError(f"expected a Tensor or a Python number, got {type(x).__name__}")


def _combine(higher, lower):
    """Fold a lower-priority class's dtype into a higher one (None: the class is empty)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == _COMPLEX:
        return higher
    if lower.category == _COMPLEX:
        return higher.to_complex() if higher.category == _FLOAT else lower
    if higher.category == _FLOAT:
        return higher
    if higher is D.bool or lower.category == _FLOAT:
        return promote_types(higher, lower)
    return higher


def _class_result(dtypes):
    r = None
    for d in dtypes:
        r = d if r is None else promote_types(r, d)
    return r


def result_type_of(dims, zeros, scalars):
    """Promotion over dtypes of dimensioned tensors, zero-dim tensors and Python scalars."""
    return _combine(_class_result(dims), _combine(_class_result(zeros), _class_result(scalars)))


def result_type(tensor1, tensor2):
    """``ember.result_type``: the dtype an arithmetic op on the two operands returns."""
    dims, zeros, scalars = [], [], []
    for x in (tensor1, tensor2):
        if hasattr(x, "_data"):
            (dims if x._data.ndim else zeros).append(x.dtype)
        else:
            scalars.append(scalar_dtype(x))
    return result_type_of(dims, zeros, scalars)


def broadcast_shapes(*shapes):
    """The broadcast of several shapes, with PyTorch's error naming the first mismatch."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for j, s in enumerate(shapes):
        off = ndim - len(s)
        for i in range(len(s) - 1, -1, -1):  # trailing dims first, so errors name the last mismatch as PyTorch
            n = s[i]
            cur = out[off + i]
            if n == cur or n == 1:
                continue
            if cur == 1:
                out[off + i] = n
                continue
            if len(shapes) == 2:
                raise RuntimeError(f"The size of tensor a ({cur}) must match the size of tensor b ({n}) at "
                                   f"non-singleton dimension {off + i}")
            raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  Mismatch "
                               f"is between arg {_first_with(shapes, off + i, ndim, cur)} and arg {j}.")
    return tuple(out)


def _first_with(shapes, dim, ndim, size):
    for k, s in enumerate(shapes):
        i = dim - (ndim - len(s))
        if i >= 0 and s[i] == size:
            return k
    return 0


def check_inplace_broadcast(self_shape, result_shape):
    """In-place ops may not change their target's shape (seed page notes-broadcasting)."""
    if tuple(self_shape) != tuple(result_shape):
        raise RuntimeError(f"output with shape {list(self_shape)} doesn't match the broadcast shape "
                           f"{list(result_shape)}")


def array_result_type(*values):
    """Promotion over an implementation's unwrapped operands: arrays (dimensioned or zero-dim) and
    Python scalars; None operands are skipped."""
    dims, zeros, scalars = [], [], []
    for v in values:
        if v is None:
            continue
        if hasattr(v, "dtype") and hasattr(v, "ndim"):
            (dims if v.ndim else zeros).append(D.from_np(v.dtype))
        else:
            scalars.append(scalar_dtype(v))
    return result_type_of(dims, zeros, scalars)
