"""``ember.backends.cuda``: the cuBLAS switches of PyTorch (``matmul.allow_tf32`` and the reduced-precision flags).

The float32 matmul precision is set for CuPy's GEMMs with ``cupy._core.set_compute_type`` (TF32
compute type on GPUs of compute capability 8.0+), and the cuBLAS handle's math mode is set before a
GEMM by ``_prepare_matmul(dtype)``: TF32 tensor-op math for float32, and
``CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION`` for float16/bfloat16 GEMMs whose flag is off.
Nothing touches CUDA until ember.cuda is initialised.
"""
import importlib.util
import warnings

# cublasMath_t values of cublas_api.h (fixed by the cuBLAS ABI); importing CuPy's cublas module
# needs libcublas, which a machine without the CUDA libraries lacks
CUBLAS_DEFAULT_MATH = 0
CUBLAS_TF32_TENSOR_OP_MATH = 3
CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16

_PRECISIONS = ("highest", "high", "medium")
_state = {"precision": "highest", "float16": True, "bfloat16": True}


def is_built():
    """True when CuPy is installed, i.e. ember can run on CUDA."""
    return importlib.util.find_spec("cupy") is not None


def get_float32_matmul_precision():
    """'highest' (full float32), 'high' or 'medium' (TF32 tensor cores allowed) for float32 matmuls."""
    return _state["precision"]


def set_float32_matmul_precision(precision):
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _state["precision"] = precision
    _apply()


class _CuBLASFlags:
    """``ember.backends.cuda.matmul``: attribute access to the cuBLAS flags."""

    _FLAGS = {"allow_fp16_reduced_precision_reduction": "float16",
              "allow_bf16_reduced_precision_reduction": "bfloat16"}

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _state["precision"] != "highest"
        if name in self._FLAGS:
            return _state[self._FLAGS[name]]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            _state["precision"] = "high" if value else "highest"
        elif name in self._FLAGS:
            _state[self._FLAGS[name]] = bool(value)
        else:
            raise AttributeError(f"Unknown attribute {name}")
        _apply()

    def __repr__(self):
        return (f"<ember.backends.cuda.matmul allow_tf32={self.allow_tf32} allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction} allow_bf16_reduced_precision_reduction="
                f"{self.allow_bf16_reduced_precision_reduction}>")


matmul = _CuBLASFlags()


def _math_mode(dtype_name):
    """The cuBLAS math mode for a GEMM in ``dtype_name`` ('float32', 'float16', 'bfloat16'; None: float32)."""
    mode = CUBLAS_TF32_TENSOR_OP_MATH if matmul.allow_tf32 else CUBLAS_DEFAULT_MATH
    if not _state.get(dtype_name, True):
        mode |= CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
    return mode


def _prepare_matmul(dtype_name):
    """Set the math mode of the current cuBLAS handle for a GEMM in ``dtype_name``; returns the handle."""
    from ... import _backend, cuda
    cuda._lazy_init()
    cp = _backend.cupy()
    from cupy_backends.cuda.libs import cublas
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setMathMode(handle, _math_mode(dtype_name))  # a host-side store; CuPy makes a handle per thread
    return handle


def _apply():
    """Push the float32 precision to CuPy's GEMM compute type (once CUDA is initialised)."""
    from ... import cuda
    if not cuda.is_initialized():
        return
    import numpy
    from cupy import _core
    tf32 = matmul.allow_tf32 and cuda.get_device_capability()[0] >= 8
    _core.set_compute_type(numpy.float32, _core._routines_linalg.COMPUTE_TYPE_TF32 if tf32
                           else _core._routines_linalg.COMPUTE_TYPE_DEFAULT)


# ---- scaled dot-product attention: which kernels torch.nn.functional.scaled_dot_product_attention may use --------
# ember has one implementation (the math one, on both devices); on the CPU PyTorch also runs its flash kernel, so a
# call refuses only when neither math nor flash is enabled (nn.functional checks)
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True, "fp16_bf16_reduction_math": False}


def _sdp_switch(kind):
    def enable(enabled):
        _sdp[kind] = bool(enabled)

    def enabled():
        return _sdp[kind]
    return enable, enabled


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _sdp_switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("cudnn")
allow_fp16_bf16_reduction_math_sdp, fp16_bf16_reduction_math_sdp_allowed = _sdp_switch("fp16_bf16_reduction_math")


def is_flash_attention_available():
    """False: ember has no fused attention kernels."""
    return False


def can_use_flash_attention(params, debug=False):
    return False


can_use_efficient_attention = can_use_cudnn_attention = can_use_flash_attention


class sdp_kernel:
    """Deprecated in PyTorch for ``torch.nn.attention.sdpa_kernel``: enable exactly the given kernels inside the
    block, restoring the flags after it."""

    def __init__(self, enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
        warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                      "removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with "
                      "updated signature.", FutureWarning, stacklevel=2)
        self.wanted = {"flash": enable_flash, "math": enable_math, "mem_efficient": enable_mem_efficient,
                       "cudnn": enable_cudnn}

    def __enter__(self):
        self.saved = dict(_sdp)
        _sdp.update((k, bool(v)) for k, v in self.wanted.items())

    def __exit__(self, *exc):
        _sdp.update(self.saved)
