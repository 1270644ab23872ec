"""``make_tensor``: a tensor of random values in a range, for tests (PyTorch's ``torch.testing.make_tensor``)."""
import math
import warnings

from .. import _dtype as D

__all__ = ["make_tensor"]

_INTEGRAL = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64)


def _bounds(dtype, low, high, lowest, highest, default_low, default_high):
    """The sampling range [low, high): defaults filled in, checked, clamped to the dtype (integers: ceiled)."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype not in _INTEGRAL:
        warnings.warn("Passing `low==high` to `ember.testing.make_tensor` for floating or complex types is "
                      "deprecated since 2.1 and will be removed in 2.3. Use `ember.full(...)` instead.",
                      FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} only "
                         f"supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if dtype in _INTEGRAL:
        # ceil both: low so that no value falls below it, high because randint's bound is exclusive
        return math.ceil(low), math.ceil(high)
    return low, high


def _uniform(shape, dtype, low, high, device):
    import ember
    t = ember.empty(shape, dtype=dtype, device=device)
    if high - low > D.finfo(dtype).max:  # the span overflows: draw half the range and double it
        return t.uniform_(low / 2, high / 2).mul_(2)
    return t.uniform_(low, high)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` with values drawn uniformly from [low, high).

    Defaults: floating and complex [-9, 9) (complex: real and imaginary parts each), integers [-9, 10)
    clamped to the dtype (uint8: [0, 10)), bool both values. Bounds are clamped to the dtype's range.
    ``noncontiguous=True`` returns a non-contiguous view (every other element of a doubled last dim);
    ``exclude_zero=True`` replaces zeros by 1 (integers) or the dtype's smallest normal number.
    """
    import ember
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and dtype in _INTEGRAL:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:  # doubled last dim, so that the view skips values rather than repeating one
        shape = shape[:-1] + (2 * shape[-1],)
    if dtype is D.bool:
        low, high = _bounds(dtype, low, high, 0, 2, 0, 2)
        result = ember.randint(low, high, shape, dtype=dtype, device=device)
    elif dtype in _INTEGRAL:
        info = D.iinfo(dtype)
        # randint's exclusive bound is an int64 too, so int64's largest value cannot be drawn
        highest = info.max + (1 if dtype is not D.int64 else 0)
        low, high = _bounds(dtype, low, high, info.min, highest, -9, 10)
        result = ember.randint(low, high, shape, dtype=dtype, device=device)
    elif dtype.is_floating_point or dtype.is_complex:
        real = dtype.to_real()
        info = D.finfo(real)
        low, high = _bounds(dtype, low, high, info.min, info.max, -9, 9)
        if dtype.is_complex:
            result = ember.complex(_uniform(shape, real, low, high, device), _uniform(shape, real, low, high, device))
        else:
            result = _uniform(shape, dtype, low, high, device)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by ember.testing.make_tensor().")
    if noncontiguous:
        result = result[..., 1::2]  # offset by one, to catch offset bugs too
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype in _INTEGRAL else D.finfo(dtype).tiny
    if requires_grad:
        result.requires_grad_(True)
    return result
