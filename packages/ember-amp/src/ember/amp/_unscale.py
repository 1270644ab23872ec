"""Unscale gradients and check them for inf/NaN: one pass per device and dtype.

CPU: each gradient array is multiplied in place by the inverse scale, and its dot product with itself
detects non-finite values (see ``unscale_numpy``), so no boolean temporaries are made. CUDA: one launch of
a raw kernel over every gradient of a dtype, addressed through a table of device pointers and cumulative lengths.
"""
import math

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
_BLOCK = 1 << 16  # elements (two 4M-element float32 arrays checked and scaled whole: 3.3 ms; in blocks: 2.5 ms)


def unscale_numpy(arrays, inv_scale):
    """Multiply every array (all of one dtype) by ``inv_scale`` in place; True if any held an inf or NaN.

    Each array (a large contiguous one: each block of ``_BLOCK`` elements) is checked right before it is scaled, while
    it is in cache, by its dot product with itself: a sum of squares, inf or NaN if any value is, finite otherwise
    unless large finite values overflow it. Only arrays whose check is not finite are checked exactly, after scaling:
    with ``|inv_scale| <= 1`` scaling keeps every value finite or not. A larger ``inv_scale`` may overflow finite
    values (unflagged, as in PyTorch's kernel), so then, and for dtypes without BLAS, each array takes a boolean pass
    before it is scaled.
    """
    dtype = arrays[0].dtype
    inv = np.array(inv_scale, dtype)  # a 0-d array operand costs a ufunc call less than a scalar
    mul = np.multiply
    with np.errstate(invalid="ignore", over="ignore"):  # squares may overflow; inf * 0 (a zero inv_scale) is NaN
        if dtype.char not in "fd" or not abs(inv_scale) <= 1:
            found = False
            for a in arrays:
                found = found or not np.isfinite(a).all()
                mul(a, inv, a)
            return found
        checks, work = [], list(arrays)  # (large arrays add their blocks to the work)
        check = checks.append
        for a in work:
            if a.size > _BLOCK and a.flags.c_contiguous:  # blocks stay in L2 from their check to their scaling
                flat = a.reshape(-1)
                work += [flat[i:i + _BLOCK] for i in range(_BLOCK, flat.size, _BLOCK)]
                a = flat[:_BLOCK]
            r = a if a.ndim == 1 else a.ravel()  # (a copy of a strided array: the check reads it, the scaling a)
            check(r.dot(r))
            mul(a, inv, a)
    isfinite = math.isfinite
    return not all(map(isfinite, checks)) and any(
        not np.isfinite(a).all() for a, c in zip(work, checks) if not isfinite(c))


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
