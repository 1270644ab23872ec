"""Matrix products (more linear algebra arrives with the op-coverage issue)."""
import numpy as np

from .. import _dtype as D
from .._registry import op

_HALF = (np.dtype(np.float16), D.bfloat16.np)
# the C++ type names PyTorch's matmul errors print
_CPP = {D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int", D.int32: "int",
        D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
        D.float64: "double", D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}


def _check_matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP[D.from_np(a.dtype)]} != "
                           f"{_CPP[D.from_np(b.dtype)]}")
    if a.dtype == np.bool_:
        raise NotImplementedError(f"\"{'dot' if a.ndim == b.ndim == 1 else 'addmm_impl_cpu_'}\" not implemented "
                                  "for 'Bool'")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k_a != k_b:
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                               f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                               "respectively")
        rows = a.shape[-2] if a.ndim > 1 else 1
        cols = b.shape[-1] if b.ndim > 1 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{cols})")


@op("matmul", operators=("__matmul__", "__rmatmul__"))
def matmul(xp, input, other):
    """Matrix product with NumPy's broadcasting of batch dims; half precision multiplies in float32 and
    rounds the result (there is no half-precision BLAS on the CPU)."""
    _check_matmul(input, other)
    if xp is np and input.dtype in _HALF:
        return np.matmul(input.astype(np.float32), other.astype(np.float32)).astype(input.dtype)
    return xp.matmul(input, other)


@matmul.vjp
def _(ctx, g):
    a, b = ctx.args
    if a.dim() == 1 and b.dim() == 1:
        return g * b, g * a
    if a.dim() == 1:
        ga = (g.unsqueeze(-2) @ b.mT).squeeze(-2)
        gb = a.unsqueeze(-1) @ g.unsqueeze(-2)
    elif b.dim() == 1:
        ga = g.unsqueeze(-1) @ b.unsqueeze(-2)
        gb = (a.mT @ g.unsqueeze(-1)).squeeze(-1)
    else:
        ga, gb = g @ b.mT, a.mT @ g
    return ga.sum_to_size(a.shape), gb.sum_to_size(b.shape)
