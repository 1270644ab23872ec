"""``ember.fft``: PyTorch's discrete Fourier transform namespace. The transforms live in the registry
(``ember._ops.fft_ops``); this module gives them their ``torch.fft`` names."""
from . import _factory
from ._registry import REGISTRY, write_out
from ._tensor import Tensor  # noqa: F401 - torch.fft re-exports the tensor class too

for _name in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
              "hfft", "ihfft", "fftshift", "ifftshift"):
    globals()[_name] = REGISTRY["fft_" + _name].fn
del _name


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Sample frequencies of an ``n``-point transform with spacing ``d``: 0, 1, ..., then the negative ones."""
    k = _factory.arange(n, dtype=dtype, device=device)
    if n:
        k = (k + n // 2) % n - n // 2
    return _finish(k / (n * d), out, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """The non-negative sample frequencies of an ``n``-point real transform: 0, 1, ..., n // 2 over n * d."""
    r = _factory.arange(n // 2 + 1, dtype=dtype, device=device) / (n * d)
    return _finish(r, out, requires_grad)


def _finish(r, out, requires_grad):
    if out is not None:  # (as a registry op's out=: resized to the result, which must cast to it)
        return write_out(out, r._data)
    return r.requires_grad_() if requires_grad else r
