"""Unscale gradients and check them for inf/NaN: one pass per device and dtype.

CPU: each gradient array is multiplied in place by the inverse scale, and a dot product with zeros
detects non-finite values (0 * inf and 0 * NaN are NaN; any finite values give 0), so no boolean
temporaries are made. CUDA: one launch of a raw kernel over every gradient of a dtype, addressed
through a table of device pointers and cumulative lengths.
"""
import numpy as np

from ember._kernels import raw_kernel

_CODE = r"""
extern "C" __global__ void ember_amp_unscale_{T}(const unsigned long long* ptrs, const long long* ends,
                                               int n_tensors, long long total, const float* inv_scale,
                                               float* found_inf) {
  const {T} inv = ({T})(*inv_scale);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)blockDim.x * gridDim.x) {
    int lo = 0, hi = n_tensors - 1;  // the tensor holding element i: the first whose end is past i
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (ends[mid] <= i) lo = mid + 1; else hi = mid;
    }
    {T}* g = ({T}*)ptrs[lo];
    long long j = i - (lo > 0 ? ends[lo - 1] : 0);
    {T} v = g[j];
    if (!isfinite(v)) *found_inf = 1.0f;
    g[j] = v * inv;
  }
}
"""
KERNELS = {t: raw_kernel(f"ember_amp_unscale_{t}", _CODE.replace("{T}", t)) for t in ("float", "double")}
_CTYPE = {"float32": "float", "float64": "double"}


_zeros = {}  # dtype -> a zeros buffer, grown as needed, for the dot-product check


def _zeros_for(dtype, size):
    buf = _zeros.get(dtype)
    if buf is None or buf.size < size:
        buf = _zeros[dtype] = np.zeros(max(size, 1 << 16), dtype)
    return buf


def unscale_numpy(arrays, inv_scale):
    """Multiply every array (all of one dtype) by ``inv_scale`` in place; True if any held an inf or NaN.

    Each array is checked right before it is scaled, while it is in cache: each check is 0 when every value is
    finite and NaN otherwise (a finite scaled value may still overflow, as in PyTorch's kernel).
    """
    dtype = arrays[0].dtype
    inv = np.array(inv_scale, dtype)  # a 0-d array operand costs a ufunc call less than a scalar
    mul = np.multiply
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is the point of the check
        if dtype.char not in "fd":  # dtypes without BLAS: a boolean pass
            found = False
            for a in arrays:
                found = found or not np.isfinite(a).all()
                mul(a, inv, a)
            return found
        checks, n = [], -1
        check = checks.append
        for a in arrays:
            if a.size != n:  # a new view of the zeros only when the size changes
                n = a.size
                z = _zeros_for(dtype, n)[:n]
            # ravel copies a strided array: the check then reads the copy, the scaling the original
            check((a if a.ndim == 1 else a.ravel()).dot(z))
            mul(a, inv, a)
    return any(checks)  # NaN is true, 0 false


def unscale_cupy(arrays, inv_scale, found_inf):
    """The same on CuPy arrays of one dtype, in one kernel launch; ``inv_scale`` and ``found_inf`` are float32
    device scalars, and ``found_inf`` is set to 1 if any element is not finite."""
    import cupy
    kernel = KERNELS.get(_CTYPE.get(arrays[0].dtype.name))
    dense = [a for a in arrays if a.size and a.flags.c_contiguous] if kernel is not None else []
    for a in arrays:
        if a.size and not any(a is d for d in dense):  # half precision or strided: CuPy's own passes
            cupy.maximum(found_inf, (~cupy.isfinite(a)).any().astype(cupy.float32), out=found_inf)
            a *= inv_scale.astype(a.dtype)
    if dense:
        ptrs = cupy.asarray(np.array([a.data.ptr for a in dense], dtype=np.uint64))
        ends = np.cumsum([a.size for a in dense], dtype=np.int64)
        total = int(ends[-1])
        kernel((min((total + 255) // 256, 4096),), (256,),
               (ptrs, cupy.asarray(ends), np.int32(len(dense)), np.int64(total), inv_scale, found_inf))
