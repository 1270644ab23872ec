"""``ember.nn.attention``: choosing the kernels of ``scaled_dot_product_attention``.

ember has one implementation (the math one); ``sdpa_kernel`` sets the same flags as PyTorch's
(``ember.backends.cuda.*_sdp_enabled``), and a call refuses as PyTorch's CPU build does when neither the math nor
the flash kernel is allowed.
"""
import contextlib
import enum

from ember.backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The kernels of scaled dot-product attention (PyTorch's numbering)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    __str__ = enum.Enum.__str__  # "SDPBackend.MATH", as PyTorch's


_FLAGS = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
          SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Inside the block, only ``backends`` (one SDPBackend or a list) may run scaled dot-product attention."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not all(isinstance(b, SDPBackend) for b in backends):
        raise AssertionError("Backend must be an instance of SDPBackend")
    saved = dict(_cuda._sdp)
    _cuda._sdp.update({flag: backend in backends for backend, flag in _FLAGS.items()})
    try:
        yield
    finally:
        _cuda._sdp.update(saved)


def _check_kernels():
    """PyTorch's CPU refusal when the flags leave no kernel that runs on the CPU."""
    if not (_cuda._sdp["math"] or _cuda._sdp["flash"]):
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")
