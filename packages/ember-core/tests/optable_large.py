"""Op table lines with inputs large enough to take the NumPy fast paths that small samples skip: einsum row
sums (sum, mean, nansum), take-based indexing (``x[idx]``, take, index_select), gathers split over threads,
transforms split over threads (fft)."""
import numpy as np
from optable import ALL, DT, FLOATS, NC, Line, T, fn, meth, values
from optable_linalg import ff

F32_64 = ("float32", "float64")  # (integer samples are too large for float32 transforms of this length)
ROWS = 2100  # rows of several einsum blocks (512), with a tail


def eighths(dtype, shape, rng, special=False):
    """Sample values on a grid of 1/8 (exact in every float dtype, and so are their sums here): long sums
    then agree whatever the order of the additions (their accuracy is test_fast_paths.py's business)."""
    v = values(dtype, shape, rng, special)
    return v if dtype in ("int64", "bool") else np.round(v * 2) / 8


def row_sums(dtype, rng):
    """Trailing dims of C-contiguous inputs of at least 4096 elements, and layouts that must not take the path."""
    v = lambda *shape: eighths(dtype, shape, rng)  # noqa: E731
    a = v(3, ROWS)
    return [((a, 1), {}), ((a, -1, True), {}), ((v(2, 3, 1500), (1, 2)), {}), ((v(70, 64),), {}),
            ((v(70, 64), (0, 1), True), {}), ((v(2, 4096), 1), {}), ((v(5000,), 0), {}), ((v(4, 900), 1), {}),
            ((eighths(dtype, (4, ROWS), rng, special=True), 1), {}), ((a, 1), {"dtype": DT("float64")}),
            ((a, 0), {}), ((NC(v(ROWS, 3)), 1), {}), ((v(2, 3, 1500), (0, 2)), {})]


def _ix(arr, dtype="int64"):
    return T(np.asarray(arr), dtype)


def large_indices(dtype, rng):
    """One integer index tensor of at least 16384 entries: negative entries, 2-D, int32, rows, out of bounds."""
    a = values(dtype, (20000,), rng)
    bad = rng.integers(0, 20000, 20000)
    bad[7] = 20000
    return [((a, _ix(rng.integers(-20000, 20000, 20000))), {}),
            ((a, _ix(rng.integers(0, 20000, (150, 120)), "int32")), {}),
            ((values(dtype, (20000, 3), rng), _ix(rng.integers(-20000, 20000, 17000))), {}),
            ((a, _ix(bad)), {}), ((a, _ix(-bad - 1)), {})]


def large_gathers(dtype, rng):
    """At least 2**18 picks (split by rows over threads) along each kind of dim; bad indices; int32."""
    x = values(dtype, (600, 500), rng)
    low, high = rng.integers(0, 500, (600, 450)), rng.integers(0, 500, (600, 450))
    low[300, 7], high[590, 3] = -1, 500
    return [((x, 1, _ix(rng.integers(0, 500, (600, 450)))), {}), ((x, -1, _ix(low)), {}), ((x, 1, _ix(high)), {}),
            ((values(dtype, (500, 600), rng), 0, _ix(rng.integers(0, 500, (450, 600)))), {}),
            ((values(dtype, (40, 30, 250), rng), 2, _ix(rng.integers(0, 250, (40, 29, 240)), "int32")), {}),
            ((values(dtype, (70, 40, 100), rng), 1, _ix(rng.integers(0, 40, (70, 40, 99)))), {}),
            ((NC(values(dtype, (500, 600), rng)), 0, _ix(rng.integers(0, 500, (599, 450)))), {}),
            ((values(dtype, (3, 100000), rng), 1, _ix(rng.integers(0, 100000, (3, 90000)))), {})]


def large_takes(dtype, rng):
    x = values(dtype, (200, 150), rng)
    return [((x, _ix(rng.integers(-30000, 30000, 20000))), {}), ((x, _ix(np.array([5, 30000]))), {})]


def large_index_selects(dtype, rng):
    x = values(dtype, (200, 150), rng)
    return [((x, 0, _ix(rng.integers(0, 200, 20000))), {}), ((x, 1, _ix(rng.integers(0, 150, 20000), "int32")), {}),
            ((x, 0, _ix(np.r_[rng.integers(0, 200, 20000), 200])), {})]


def _small(dtype, shape, rng):
    """Values whose transforms of a few hundred points stay within the table's absolute tolerance."""
    return values(dtype, shape, rng) * 0.02


def _cplx(rng, *shape):
    return T((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * 0.02, "complex128")


def large_ffts(dtype, rng):
    """At least 2**17 elements with a batch dim (split over threads): first, middle or last dim."""
    x = _small(dtype, (260, 512), rng)
    return [((x,), {}), ((x, 600, -1, "ortho"), {}), ((x, None, 0), {}), ((NC(_small(dtype, (512, 260), rng)),), {}),
            ((_small(dtype, (260, 4, 128), rng),), {"dim": 1}), ((_cplx(rng, 260, 512),), {})]


def large_nd_ffts(dtype, rng):
    x = _small(dtype, (260, 4, 128), rng)
    return [((x,), {"dim": (0, 2)}), ((x, (4, 100), (1, 2)), {}),
            ((_small(dtype, (4, 260, 128), rng),), {"dim": (1, 2)}), ((_cplx(rng, 260, 4, 130),), {"dim": (-2, -1)})]


LINES = [
    Line("sum", fn("sum"), row_sums), Line("sum", meth("sum"), row_sums, dtypes=("float32",)),
    Line("mean", fn("mean"), row_sums, dtypes=FLOATS), Line("nansum", fn("nansum"), row_sums, dtypes=FLOATS),
    Line("__getitem__", lambda m, a, i: a[i], large_indices, dtypes=ALL, grad=True),
    Line("take", fn("take"), large_takes, dtypes=ALL), Line("index_select", fn("index_select"), large_index_selects),
    Line("gather", fn("gather"), large_gathers, dtypes=ALL),
]
LINES += [Line("fft_" + n, ff(n), large_ffts, dtypes=F32_64) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")]
LINES += [Line("fft_" + n, ff(n), large_nd_ffts, dtypes=F32_64) for n in ("fft2", "rfftn", "irfftn", "ifftn")]
