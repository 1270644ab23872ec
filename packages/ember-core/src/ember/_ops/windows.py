"""Window functions (Hann, Hamming, Blackman, Bartlett, Kaiser) and the other creation functions of the torch
namespace that arange/empty do not cover: the deprecated end-inclusive ``range`` and ``empty_permuted``.
Windows are computed in float64 and rounded to the requested dtype."""
import builtins
import math
import warnings

import numpy as np

from .. import _dtype as D
from .. import _factory
from .._registry import TORCH_NAME, factory


def _window(name, window_length, periodic, dtype, device, requires_grad, values):
    """A window of ``window_length`` points from ``values(n)`` (the symmetric window of ``n`` points);
    ``periodic`` computes one point more and drops it, as spectral analysis wants."""
    if isinstance(window_length, bool) or not isinstance(window_length, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = dtype or D.get_default_dtype()
    if dtype.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{TORCH_NAME[dtype]}'")
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length <= 1:
        arr = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        arr = values(n)[:window_length]
    return _factory._place(arr.astype(D.storage(dtype)), device, requires_grad)


def _cosine_sum(n, *coefficients):
    """``sum_k (-1)^k a_k cos(2 pi k i / (n - 1))``: the generalized cosine windows."""
    phase = 2 * np.pi * np.arange(n) / (n - 1)
    return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))


@factory("hann_window")
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                pin_memory=False):
    """The Hann window: ``0.5 - 0.5 cos(2 pi i / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, 0.5, 0.5))


@factory("hamming_window")
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """The Hamming window: ``alpha - beta cos(2 pi i / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, alpha, beta))


@factory("blackman_window")
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """The Blackman window: ``0.42 - 0.5 cos(2 pi i / (N - 1)) + 0.08 cos(4 pi i / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, 0.42, 0.5, 0.08))


@factory("bartlett_window")
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """The Bartlett (triangular) window: ``1 - |2 i / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: 1 - np.abs(2 * np.arange(n) / (n - 1) - 1))


@factory("kaiser_window")
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """The Kaiser window: ``I0(beta sqrt(1 - (2 i / (N - 1) - 1)^2)) / I0(beta)``."""
    def values(n):
        r = 2 * np.arange(n) / (n - 1) - 1
        return np.i0(beta * np.sqrt(np.maximum(1 - r * r, 0))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, values)


@factory("range")
def range(start, end, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """Deprecated: values from ``start`` to ``end`` INCLUSIVE spaced by ``step``, in the default dtype unless
    ``dtype`` is given (use ``arange``)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    start, end, step = (v.item() if hasattr(v, "item") else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    dtype = dtype or D.get_default_dtype()
    if dtype is D.bool:
        raise NotImplementedError("\"range_cpu\" not implemented for 'Bool'")
    n = math.floor((end - start) / step) + 1
    kind = np.float64 if dtype.category >= 2 else np.int64
    arr = start + np.arange(n, dtype=kind) * step
    return _factory._make((n,), dtype, device, requires_grad, out, lambda s, t: arr.astype(t))


@factory("empty_permuted")
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialised tensor of logical shape ``size`` whose memory is laid out in the dimension order
    ``physical_layout`` (outermost first): a permuted view of a contiguous array."""
    size, order = _factory.size_args((size,)), tuple(int(d) for d in physical_layout)
    if len(order) != len(size):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; i.e. "
                           f"len(size) = {len(size)} is not equal to len(physical_layout) = {len(order)}")
    if sorted(order) != list(builtins.range(len(size))):
        raise RuntimeError("Duplicate dim not allowed")
    t = _factory.empty(tuple(size[d] for d in order), dtype=dtype, device=device)
    t = t.permute(tuple(int(i) for i in np.argsort(order)))
    return t.requires_grad_() if requires_grad else t
