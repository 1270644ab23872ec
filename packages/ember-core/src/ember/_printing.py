"""``repr(tensor)`` laid out character for character as PyTorch lays it out, and the print options.

All values are formatted on the host: float16/bfloat16 through float32, then Python floats, so the
digits are those PyTorch prints. One formatter (or one per real/imaginary part) sees every value that
will be shown and fixes the notation and a common width for all of them.
"""
import contextlib
import math

import numpy as np

from . import _dtype as D

_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}
_opts = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """Set how tensors print. A profile sets the first four options; explicit ones override it.
    ``sci_mode`` is set on every call (None: chosen per tensor), as PyTorch does; an unknown profile
    is ignored, as PyTorch does."""
    new = dict(_PROFILES.get(profile, {}))
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    new.update({k: v for k, v in given.items() if v is not None})
    _opts.update(new, sci_mode=sci_mode)


def get_printoptions():
    return dict(_opts)


@contextlib.contextmanager
def printoptions(**kwargs):
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Formats the values of one real array with a common notation and width."""

    def __init__(self, arr):
        self.is_float = arr.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        p = _opts["precision"]
        if not self.is_float:
            self.width = max([self.width] + [len(str(v)) for v in arr.ravel().tolist()])
            return
        vals = arr[np.isfinite(arr) & (arr != 0)].astype(np.float64)
        if vals.size == 0:  # only zeros, nan and inf: printed like integers ("0.", "nan")
            return
        lo, hi = np.abs(vals).min(), np.abs(vals).max()
        self.int_mode = bool((vals == np.ceil(vals)).all())
        self.sci_mode = _opts["sci_mode"]
        if self.sci_mode is None:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or (not self.int_mode and lo < 1.0e-4)
        if self.sci_mode:
            fmt = f"{{:.{p}e}}"
        else:
            fmt = "{:.0f}." if self.int_mode else f"{{:.{p}f}}"
        self.width = max(len(fmt.format(v)) for v in vals.tolist())

    def format(self, v):
        if not self.is_float:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{_opts['precision']}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{_opts['precision']}f}"
        return s.rjust(self.width)


def _summarized(arr):
    """The values shown when summarizing: the first and last ``edgeitems`` along each long dim."""
    e = _opts["edgeitems"]
    if arr.ndim == 0:
        return arr
    if arr.ndim > 1 and not e:
        return arr[(slice(0, 0),) * arr.ndim]
    for ax, n in enumerate(arr.shape):
        if n > 2 * e:
            # a[-0:] is the whole dim, so 1-D with edgeitems=0 keeps everything, as PyTorch does
            arr = np.concatenate([arr.take(range(e), ax), arr[(slice(None),) * ax + (slice(-e, None),)]], ax)
    return arr


class _Printer:
    def __init__(self, arr, summarize):
        self.summarize = summarize
        self.e = _opts["edgeitems"]
        src = _summarized(arr) if summarize else arr
        if arr.dtype.kind == "c":
            self.fmts = (_Formatter(src.real), _Formatter(src.imag))
        else:
            self.fmts = (_Formatter(src),)

    def value(self, v):
        if len(self.fmts) == 1:
            return self.fmts[0].format(v)
        re, im = self.fmts[0].format(v.real), (self.fmts[1].format(v.imag) + "j").lstrip()
        return re + im if im[0] in "+-" else re + "+" + im

    def vector(self, arr, indent):
        fmt = self.fmts
        # each element takes its width plus ", "; a complex one also its imaginary part and "j"
        elem_len = fmt[0].width + 2 + (fmt[1].width + 1 if len(fmt) == 2 else 0)
        per_line = max(1, int((_opts["linewidth"] - indent) // elem_len))
        if self.summarize and not self.e:
            items = ["..."]
        elif self.summarize and arr.shape[0] > 2 * self.e:
            items = ([self.value(v) for v in arr[:self.e].tolist()] + [" ..."]
                     + [self.value(v) for v in arr[-self.e:].tolist()])
        else:
            items = [self.value(v) for v in arr.tolist()]
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"

    def block(self, arr, indent):
        if arr.ndim == 0:
            return self.value(arr.item())
        if arr.ndim == 1:
            return self.vector(arr, indent)
        n = arr.shape[0]
        if self.summarize and n > 2 * self.e:
            rows = list(range(self.e)) + [None] + list(range(n - self.e, n))
        else:
            rows = range(n)
        parts = ["..." if i is None else self.block(arr[i], indent + 1) for i in rows]
        return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _host_values(t):
    arr = t._host()
    return arr.astype(np.float32) if t.dtype in (D.float16, D.bfloat16) else arr


def _with_suffixes(text, suffixes, indent, force_newline=False):
    # PyTorch's running line length counts two more than the last line holds; kept for identical wrapping
    line_len = len(text) - text.rfind("\n") + 1
    out = [text]
    for s in suffixes:
        if force_newline or line_len + len(s) + 2 > _opts["linewidth"]:  # (sparse tensors: the first on a new line)
            out.append(",\n" + " " * indent + s)
            line_len = indent + len(s)
            force_newline = False
        else:
            out.append(", " + s)
            line_len += len(s) + 2
    return "".join(out) + ")"


def tensor_repr(t, tensor_contents=None):
    """``repr(t)``; ``tensor_contents`` replaces the formatted values (as in PyTorch's ``__repr__``)."""
    from ._factory import get_default_device

    # subclasses print under their own name, except Parameter (which adds its own header)
    name = type(t).__name__
    prefix = "tensor(" if name in ("Tensor", "Parameter") or getattr(t, "_prints_as_tensor", False) else name + "("
    indent = len(prefix)
    suffixes, text = [], tensor_contents
    dev = t.device
    if dev.type == "meta" or dev.type != get_default_device().type or (
            dev.type == "cuda" and dev.index != _current_cuda()):
        suffixes.append(f"device='{dev}'")
    dtype, default = t.dtype, D.get_default_dtype()
    numel = t._data.size
    if dev.type == "meta":  # no values: the size and any dtype but the default, whatever the size
        suffixes.append(f"size={t._data.shape}")
        if dtype != default:
            suffixes.append(f"dtype={dtype}")
        text = "..." if text is None else text
    elif numel == 0:
        if t._data.ndim != 1:
            suffixes.append(f"size={t._data.shape}")
        if dtype != default:
            suffixes.append(f"dtype={dtype}")
        text = "[]" if text is None else text
    else:
        if not _opts["edgeitems"]:
            suffixes.append(f"size={t._data.shape}")
        default_complex = D.complex128 if default is D.float64 else D.complex64
        if dtype not in (default, default_complex, D.int64, D.bool):
            suffixes.append(f"dtype={dtype}")
        if text is None:
            arr = _host_values(t)
            text = _Printer(arr, numel > _opts["threshold"]).block(arr, indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + text, suffixes, indent)


def _current_cuda():
    from . import _backend
    return _backend.cupy().cuda.runtime.getDevice()
