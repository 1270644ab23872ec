"""``assert_close``: PyTorch's comparison of tensors, numbers and nested containers of them.

The comparison runs in two passes, as PyTorch's does: first the inputs are paired up (sequences item by item,
mappings key by key), which reports structural mismatches and unsupported types before any value is looked at;
then each pair is compared and the first failure is raised with the same message text as PyTorch's (meta data
mismatch, or the count of mismatched elements and the greatest absolute and relative differences).
"""
import cmath
import collections.abc
import math
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor

__all__ = ["assert_close", "assert_allclose"]

# default (rtol, atol) by dtype name, as PyTorch documents them; other dtypes compare exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7), "quint8": (1.3e-6, 1e-5), "quint2x4": (1.3e-6, 1e-5),
               "quint4x2": (1.3e-6, 1e-5), "qint8": (1.3e-6, 1e-5), "qint32": (1.3e-6, 1e-5)}
# the tolerances of Python numbers are those of the dtype PyTorch converts them to
_NUMBER_DTYPES = {int: "int64", float: "float64", complex: "complex128"}


class _Failure(Exception):
    """A failed comparison: the message and the exception type to raise it as."""

    def __init__(self, text, kind=AssertionError):
        super().__init__(text)
        self.text, self.kind = text, kind


def _tolerances(names, rtol, atol):
    if rtol is not None:
        return rtol, atol
    pairs = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _is_sequence(x):
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes, bytearray))


def _as_number(x):
    """A NumPy scalar as the Python number it holds; anything else unchanged."""
    return x.item() if isinstance(x, np.generic) else x


def _pair(actual, expected, path, pairs, opts):
    """Append ``(path, kind, actual, expected)`` for every leaf pair; raise a _Failure for structural mismatches."""
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Failure(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _descend(a, e, path, i, pairs, opts)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if actual.keys() != expected.keys():
            missing = _sorted(expected.keys() - actual.keys())
            extra = _sorted(actual.keys() - expected.keys())
            raise _Failure(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: {missing}\n"
                           f"Additional keys in the actual mapping: {extra}")
        for k in expected:  # the order in which PyTorch visits the keys
            _descend(actual[k], expected[k], path, k, pairs, opts)
        return
    actual, expected = _as_number(actual), _as_number(expected)
    if actual is None or expected is None:
        kind = "none"
    elif isinstance(actual, bool) and isinstance(expected, bool):
        kind = "bool"
    elif isinstance(actual, (int, float, complex)) and isinstance(expected, (int, float, complex)):
        kind = "number"
    elif isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        kind, actual, expected = "tensor", _from_numpy(actual), _from_numpy(expected)
    elif isinstance(actual, Tensor) and isinstance(expected, Tensor) and (
            type(actual) is type(expected) or opts["allow_subclasses"] and (
                isinstance(actual, type(expected)) or isinstance(expected, type(actual)))):
        kind = "tensor"
    else:
        raise _Failure(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.",
                       TypeError)
    pairs.append((path, kind, actual, expected))


def _descend(a, e, path, key, pairs, opts):
    try:
        _pair(a, e, path + (key,), pairs, opts)
    except _Failure as f:
        if not hasattr(f, "path"):
            f.path = path + (key,)
        raise


def _sorted(keys):
    try:
        return sorted(keys)
    except TypeError:
        return list(keys)


def _from_numpy(arr):
    from .._factory import tensor
    return tensor(arr)


# ---- leaf comparisons ------------------------------------------------------------------------------
def _compare_none(a, e, opts):
    if a is not e:
        raise _Failure(f"None mismatch: {a} is not {e}")


def _compare_bool(a, e, opts):
    if a is not e:
        raise _Failure(f"Booleans mismatch: {a} is not {e}")


def _compare_number(a, e, opts):
    if isinstance(a, bool) != isinstance(e, bool) or (opts["check_dtype"] and type(a) is not type(e)):
        raise _Failure(f"The (d)types do not match: {type(a)} != {type(e)}.")
    rtol, atol = _tolerances([_NUMBER_DTYPES.get(type(x), "bool") for x in (a, e)], opts["rtol"], opts["atol"])
    if a == e or (opts["equal_nan"] and cmath.isnan(a) and cmath.isnan(e)):
        return
    diff = abs(a - e)
    if math.isfinite(diff) and diff <= atol + rtol * abs(e):
        return
    raise _Failure(_scalar_message(a, e, rtol, atol))


def _scalar_message(a, e, rtol, atol):
    abs_diff = abs(a - e)
    rel_diff = abs_diff / abs(e) if e != 0 else math.inf
    equal = rtol == 0 and atol == 0
    return (f"Scalars are not {'equal' if equal else 'close'}!\n\nExpected {e} but got {a}.\n"
            f"Absolute difference: {abs_diff}{_allowed(atol, equal)}\n"
            f"Relative difference: {rel_diff}{_allowed(rtol, equal)}")


def _allowed(tol, equal):
    return "" if equal else f" (up to {tol} allowed)"


def _compare_tensor(a, e, opts):
    def mismatch(what, x, y):
        raise _Failure(f"The values for attribute '{what}' do not match: {x} != {y}.")

    if a.shape != e.shape:
        mismatch("shape", a.shape, e.shape)
    if a.is_quantized != e.is_quantized:
        mismatch("is_quantized", a.is_quantized, e.is_quantized)
    if a.layout != e.layout:
        if opts["check_layout"]:
            mismatch("layout", a.layout, e.layout)
    elif opts["check_stride"] and a.stride() != e.stride():
        mismatch("stride()", a.stride(), e.stride())
    if opts["check_device"] and a.device != e.device:
        mismatch("device", a.device, e.device)
    if opts["check_dtype"] and a.dtype != e.dtype:
        mismatch("dtype", a.dtype, e.dtype)
    rtol, atol = _tolerances([a.dtype.name, e.dtype.name], opts["rtol"], opts["atol"])
    a, e = _comparable(a), _comparable(e)
    if a.dtype != e.dtype:
        from .._promotion import promote_types
        common = promote_types(a.dtype, e.dtype)
        a, e = a.to(common), e.to(common)
    x, y = a._host(), e._host()
    close = _isclose(x, y, a.dtype, rtol, atol, opts["equal_nan"])
    if close.all():
        return
    if x.ndim == 0:
        raise _Failure(_scalar_message(a.item(), e.item(), rtol, atol))
    raise _Failure(_tensor_message(x, y, a.dtype, close, rtol, atol))


def _comparable(t):
    """``t`` without autograd, dense, dequantized, on the CPU."""
    t = t.detach()
    if t.is_quantized:
        t = t.dequantize()
    if t.layout != Tensor.layout:
        t = t.to_dense()
    return t.cpu()


def _wide(x, dtype):
    """Values of ``x`` in float64 (complex128 for complex dtypes, int64 for integers and bool)."""
    if dtype.is_complex:
        return x.astype(np.complex128)
    return x.astype(np.float64 if dtype.is_floating_point else np.int64)


def _isclose(x, y, dtype, rtol, atol, equal_nan):
    """|x - y| <= atol + rtol * |y| elementwise, equal values (same-signed infinities) always close."""
    xw, yw = _wide(x, dtype), _wide(y, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        close = xw == yw
        if dtype.is_floating_point or dtype.is_complex:
            if equal_nan:
                close |= np.isnan(xw) & np.isnan(yw)
            finite = np.isfinite(xw) & np.isfinite(yw)  # an infinity is close only to itself
            close |= finite & (np.abs(xw - yw) <= atol + rtol * np.abs(yw))
        elif rtol or atol:
            close |= np.abs(xw - yw).astype(np.float64) <= atol + rtol * np.abs(yw).astype(np.float64)
    return close


def _tensor_message(x, y, dtype, close, rtol, atol):
    """PyTorch's report: mismatched count, greatest absolute and relative difference among the mismatches (the
    differences computed in the tensors' dtype, integer ones relative in the default float dtype)."""
    with np.errstate(all="ignore"):
        if dtype.is_floating_point or dtype.is_complex:
            abs_diff = np.abs(x - y)
            rel_diff = abs_diff / np.abs(y)
        else:
            abs_diff = np.abs(x.astype(np.int64) - y.astype(np.int64))
            real = D.storage(D.get_default_dtype())
            rel_diff = abs_diff.astype(real) / np.abs(y.astype(np.int64)).astype(real)
    abs_diff[close] = 0
    rel_diff[close] = 0
    mismatched = int(close.size - np.count_nonzero(close))
    equal = rtol == 0 and atol == 0
    lines = [f"Tensor-likes are not {'equal' if equal else 'close'}!", "",
             f"Mismatched elements: {mismatched} / {close.size} ({100 * mismatched / close.size:.1f}%)"]
    for what, diff, tol in (("absolute", abs_diff, atol), ("relative", rel_diff, rtol)):
        value, index = _greatest(diff)
        lines.append(f"Greatest {what} difference: {value} at index {index}{_allowed(tol, equal)}")
    return "\n".join(lines)


def _greatest(diff):
    """(largest value as a Python number, its index): the first NaN if there is one, as torch.max gives."""
    flat = diff.reshape(-1)
    wide = flat.astype(np.float64)
    nans = np.isnan(wide)
    i = int(np.argmax(nans)) if nans.any() else int(np.argmax(wide))
    value = flat[i].item() if flat.dtype.kind in "iu" else float(wide[i])
    return value, tuple(int(k) for k in np.unravel_index(i, diff.shape))


_COMPARE = {"none": _compare_none, "bool": _compare_bool, "number": _compare_number, "tensor": _compare_tensor}


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Assert that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close`` does.

    Inputs are tensors, NumPy arrays, Python (or NumPy) numbers, None, or sequences and mappings of them,
    compared item by item. Values are close when ``|actual - expected| <= atol + rtol * |expected|``;
    ``rtol``/``atol`` default by dtype (float32: 1.3e-6 / 1e-5, float64: 1e-7 / 1e-7, float16: 1e-3 / 1e-5,
    bfloat16: 1.6e-2 / 1e-5, integers and bool: exact) and must be given together. Shapes, and unless disabled
    devices, dtypes and layouts (strides only with ``check_stride=True``) must match first. A failure raises
    AssertionError with PyTorch's message; ``msg`` replaces it (a string) or rewrites it (a callable).
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'atol' if atol is None else 'rtol'}.")
    opts = {"allow_subclasses": allow_subclasses, "rtol": rtol, "atol": atol, "equal_nan": equal_nan,
            "check_device": check_device, "check_dtype": check_dtype, "check_layout": check_layout,
            "check_stride": check_stride}
    pairs = []
    try:
        _pair(actual, expected, (), pairs, opts)
        for path, kind, a, e in pairs:
            try:
                _COMPARE[kind](a, e, opts)
            except _Failure as f:
                f.path = path
                raise
    except _Failure as f:
        text = f.text
        path = getattr(f, "path", ())
        if path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in path)
        if f.kind is AssertionError and msg is not None:
            text = msg(text) if callable(msg) else msg
        raise f.kind(text) from None


# the looser defaults of the deprecated assert_allclose
_ALLCLOSE_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated form of ``assert_close``: non-tensors are converted to tensors (``expected`` to the dtype of
    ``actual``), dtypes need not match, NaNs compare equal, and float tolerances are looser."""
    warnings.warn("`ember.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `ember.testing.assert_close()` instead.", FutureWarning, stacklevel=2)
    from .._factory import tensor
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype.name, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)
