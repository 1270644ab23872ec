"""The fast paths of convolution, max pooling and float16 casting against their references: the fused max
pooling kernel compiled for the host with g++ (and run on a GPU when there is one) against the NumPy path,
the bit-level float16 casts against NumPy's, and the convolution layouts and col2im against PyTorch."""
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember._halfcast import narrow, widen
from ember._kernels import KERNELS

HOST_PRELUDE = """#include <cstdio>
#include <cstdlib>
#define __global__
#define __device__
struct ember_dim3 { unsigned int x, y, z; };
static const ember_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
"""

# (input shape, kernel, stride, padding, dilation, ceil_mode)
POOLS = [((2, 3, 7), (3,), (2,), (1,), (1,), False),
         ((2, 3, 6, 7), (2, 3), (2, 1), (1, 1), (1, 2), True),
         ((1, 2, 5, 6), (2, 2), (2, 2), (0, 0), (1, 1), False),
         ((2, 1, 4, 5, 6), (2, 3, 2), (1, 2, 2), (1, 1, 0), (2, 1, 1), True)]


def _host_run(tmp_path, kernel, main, *files):
    """Compile kernel ``kernel``'s body with ``main`` for the host and run it on ``files`` (in ``tmp_path``)."""
    src, exe = tmp_path / f"{kernel}.cpp", tmp_path / kernel
    src.write_text(HOST_PRELUDE + KERNELS[kernel].spec["code"] + main)
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-o", str(exe), str(src)], capture_output=True,
                           text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe), *(str(tmp_path / f) for f in files)], capture_output=True)
    assert run.returncode == 0, run.stderr


def _pool_input(shape, dtype):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = flat[1::7][:len(flat[::7])]  # ties
    flat[3::11] = np.nan
    flat[5::13] = -np.inf
    return x


def _numpy_pool(x, kernel, stride, padding, dilation, ceil_mode):
    fn = ember.max_pool1d_with_indices if len(kernel) == 1 else ember._registry.REGISTRY[
        f"max_pool{len(kernel)}d_with_indices"].fn
    v, i = fn(ember.tensor(x), list(kernel), list(stride), list(padding), list(dilation), ceil_mode)
    return v.numpy(), i.numpy()


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def _pad3(v, fill=1):
    return list(v) + [fill] * (3 - len(v))


def _c_params(params):
    """(the names p0, p1, ... as call arguments, their C declarations): per-dimension parameters padded to 3."""
    padded = [_pad3(v) for v in params]
    decl = "".join(f"  static const long long p{k}[3] = {{{', '.join(map(str, v))}}};\n" for k, v in enumerate(padded))
    return ", ".join(f"p{k}" for k in range(len(padded))), decl


@pytest.mark.parametrize("ctype, dtype", [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("case", POOLS)
def test_max_pool_kernel_on_host_matches_numpy_path(ctype, dtype, case, tmp_path):
    shape, kernel, stride, padding, dilation, ceil_mode = case
    x = _pool_input(shape, dtype)
    want_v, want_i = _numpy_pool(x, *case[1:])
    arrays, decl = _c_params([shape[2:], want_v.shape[2:], kernel, stride, _pad3(padding, 0), dilation])
    main = f"""
int main(int argc, char** argv) {{
  long long nx = {x.size}, ny = {want_v.size};
{decl}  {ctype}* x = ({ctype}*)malloc(nx * sizeof({ctype}));
  {ctype}* y = ({ctype}*)malloc(ny * sizeof({ctype}));
  long long* idx = (long long*)malloc(ny * sizeof(long long));
  FILE* f = fopen(argv[1], "rb");
  if (fread(x, sizeof({ctype}), nx, f) != (size_t)nx) return 1;
  fclose(f);
  ember_max_pool_{ctype}(x, y, idx, ny, {arrays});
  f = fopen(argv[2], "wb"); fwrite(y, sizeof({ctype}), ny, f); fclose(f);
  f = fopen(argv[3], "wb"); fwrite(idx, sizeof(long long), ny, f); fclose(f);
  return 0;
}}
"""
    x.tofile(tmp_path / "x.bin")
    _host_run(tmp_path, f"ember_max_pool_{ctype}", main, "x.bin", "y.bin", "i.bin")
    got_v = np.fromfile(tmp_path / "y.bin", dtype).reshape(want_v.shape)
    got_i = np.fromfile(tmp_path / "i.bin", np.int64).reshape(want_i.shape)
    np.testing.assert_array_equal(got_v, want_v)
    np.testing.assert_array_equal(got_i, want_i)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", POOLS)
def test_max_pool_kernel_on_gpu_matches_numpy_path(dtype, case):
    x = ember.tensor(_pool_input(case[0], np.float64)).to(getattr(ember, dtype))
    args = [list(v) for v in case[1:5]] + [case[5]]
    fn = ember._registry.REGISTRY[f"max_pool{len(case[1])}d_with_indices"].fn
    want_v, want_i = fn(x, *args)
    got_v, got_i = fn(x.cuda(), *args)
    assert got_v.dtype == want_v.dtype and got_i.dtype == ember.int64
    np.testing.assert_array_equal(got_v.cpu().float().numpy(), want_v.float().numpy())
    np.testing.assert_array_equal(got_i.cpu().numpy(), want_i.numpy())


# ---- float16 casts -------------------------------------------------------------------------------
def test_widen_is_numpys_cast_on_every_half():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(widen(h).view(np.uint32), h.astype(np.float32).view(np.uint32))


def test_narrow_is_numpys_cast_bitwise():
    rng = np.random.default_rng(0)
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    ties = np.concatenate([halves + d for d in (0x0FFF, 0x1000, 0x1001, 0x2000, 0x3000)] + [halves - 1])
    k = np.arange(1 << 12, dtype=np.float64)
    subnormal = np.concatenate([k * 2.0 ** -25, k * 2.0 ** -25 + 2.0 ** -30]).astype(np.float32).view(np.uint32)
    edges = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7F802000, 0x7F801FFF, 0,
                      0x80000000, 1, 0x477FF000, 0x477FEFFF, 0x477FF001, 0x47800000, 0x33000000, 0x33000001,
                      0x32FFFFFF, 0x387FE000, 0x387FF000], np.uint32)
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32), ties, subnormal,
                           edges])
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(narrow(x, np.float16).view(np.uint16), x.astype(np.float16).view(np.uint16))
        for a in (x[::3], x[:60].reshape(3, 4, 5).transpose(2, 0, 1), x[7:8].reshape(()), x[:0]):  # strided, 0-d
            np.testing.assert_array_equal(narrow(a, np.float16).view(np.uint16), a.astype(np.float16).view(np.uint16))
            h = a.astype(np.float16)
            np.testing.assert_array_equal(widen(h).view(np.uint32), h.astype(np.float32).view(np.uint32))


def test_other_casts_pass_through():
    x = np.array([1.5, np.nan], np.float32)
    assert narrow(x, ml_dtypes.bfloat16).dtype == ml_dtypes.bfloat16 and narrow(x, np.float64).dtype == np.float64
    assert widen(np.array([3], np.int64)).dtype == np.float32


def test_half_elementwise_ops_round_through_the_fast_casts():
    x = np.array([1.0, 65504.0, 65520.0, -2.0 ** -24, np.nan, np.inf, 1 + 2.0 ** -11], np.float32)
    for name in ("float16", "bfloat16"):
        e, t = ember.tensor(x).to(getattr(ember, name)), torch.tensor(x).to(getattr(torch, name))
        for f in (lambda m, a: a + a * 0.5, lambda m, a: m.exp(a), lambda m, a: a * 3):
            got, want = f(ember, e), f(torch, t)
            assert got.dtype == e.dtype
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


# ---- convolution layouts -------------------------------------------------------------------------
@pytest.mark.parametrize("n, stride, padding, dilation, groups, output_padding", [
    (2, 1, 1, 1, 1, 0), (2, 1, 0, 2, 2, 1), (1, 1, 2, 1, 1, 0), (3, 1, 1, (1, 2, 1), 1, 0),
    (2, 2, 1, 1, 2, 1), (3, (2, 1, 1), 0, 1, 1, 0)])
@needs_autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_conv_transpose_and_gradients_match_torch(n, stride, padding, dilation, groups, output_padding):
    """col2im's stride-1 runs (with dilation, output padding and groups), its strided path, and the weight
    gradient's positions-as-rows product, against torch.autograd."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, 4) + (5, 6, 4)[:n])
    w = rng.standard_normal((4, 6 // groups) + (3, 2, 3)[:n])
    g_out = None
    got, want = [], []
    for lib, out in ((torch, want), (ember, got)):
        xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = getattr(lib.nn.functional, f"conv_transpose{n}d")(xs, ws, None, stride, padding, output_padding, groups,
                                                             dilation)
        if g_out is None:
            g_out = rng.standard_normal(tuple(y.shape))
        y.backward(lib.tensor(g_out))
        out += [y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@needs_autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_conv_gradient_only_for_what_requires_it():
    x, w = ember.randn(2, 3, 6, 6), ember.randn(4, 3, 3, 3, requires_grad=True)
    b = ember.randn(4, requires_grad=True)
    ember.nn.functional.conv2d(x, w, b, padding=1).sum().backward()
    assert x.grad is None and w.grad is not None and b.grad is not None
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    tb = torch.tensor(b.detach().numpy())
    torch.nn.functional.conv2d(torch.tensor(x.numpy()), tw, tb, padding=1).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


# (n, input shape, weight shape, keyword arguments); transposed when "output_padding" is given
CONVS = [
    (2, (3, 4, 5, 6), (6, 4, 3, 2), dict(stride=1, padding=1)),
    (2, (2, 4, 9, 10), (6, 2, 3, 3), dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2), groups=2)),
    (2, (2, 3, 6, 7), (4, 3, 2, 3), dict(padding="same")),                    # uneven padding of an even kernel
    (1, (4, 3, 11), (5, 3, 4), dict(stride=3, dilation=2)),
    (3, (2, 2, 4, 5, 6), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
    (2, (1, 2, 12, 12), (3, 2, 3, 3), dict(padding=1)),                       # batch of one
    (2, (3, 7, 8), (5, 3, 3, 3), dict(padding=2)),                            # unbatched
    (2, (0, 3, 5, 5), (4, 3, 3, 3), dict()),                                  # empty batch
    (2, (3, 4, 5, 4), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    (2, (2, 4, 3, 9), (4, 1, 2, 3), dict(stride=(1, 2), dilation=(2, 1), groups=4, output_padding=(1, 1))),
    (1, (3, 2, 10), (2, 3, 3), dict(stride=1, padding=1, output_padding=0)),
]


@pytest.mark.parametrize("last", [False, True], ids=["batch-first", "batch-last"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CONVS, ids=str)
@needs_autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_conv_layouts_and_array_gradients_match_torch(case, dtype, last, monkeypatch):
    """Both column layouts of the products (forced), forward and the gradients computed on the arrays (a backward
    without create_graph), against torch.autograd; the input gradient only when the input requires one."""
    from ember._ops import conv
    monkeypatch.setattr(conv, "_batch_last", lambda *args: last)
    n, xs, ws, kw = case
    transposed = "output_padding" in kw
    rng = np.random.default_rng(len(xs) + sum(ws))
    # small integers: products and sums are exact in every dtype and order
    x, w = rng.integers(-2, 3, xs).astype(np.float64), rng.integers(-2, 3, ws).astype(np.float64)
    b = rng.integers(-2, 3, ws[1] * kw.get("groups", 1) if transposed else ws[0]).astype(np.float64)
    name = f"conv_transpose{n}d" if transposed else f"conv{n}d"
    results = []
    for lib in (torch, ember):
        dt = getattr(lib, dtype)
        leaves = [lib.tensor(a, dtype=dt, requires_grad=a is not x or not transposed) for a in (x, w, b)]
        y = getattr(lib.nn.functional, name)(*leaves, **kw)
        y.backward(lib.tensor(np.resize(np.arange(-3.0, 4.0), tuple(y.shape)), dtype=dt))
        results.append([y.detach()] + [t.grad for t in leaves])
    for got, want in zip(results[1], results[0]):
        if want is None:
            assert got is None
            continue
        assert got.dtype == getattr(ember, dtype) and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("ctype, dtype", [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("case", [((2, 3, 5, 6), (2, 3), (1, 2), ((1, 1), (0, 0)), (2, 1)),
                                  ((3, 2, 7), (3,), (2,), ((2, 2),), (1,)),
                                  ((1, 2, 4, 3, 5), (2, 2, 3), (1, 1, 2), ((0, 0), (1, 1), (1, 1)), (1, 2, 1))])
def test_im2col_kernel_on_host_matches_numpy_path(ctype, dtype, case, tmp_path):
    """The CuPy im2col kernel compiled for the host: the batch-last columns of NumPy's strided copy."""
    from ember._ops import conv
    shape, kernel, stride, pads, dilation = case
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    out = [(s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), d, k, st in zip(shape[2:], pads, dilation,
                                                                                          kernel, stride)]
    want = conv._im2col(np, x, 1, kernel, out, stride, pads, dilation, True)
    arrays, decl = _c_params([shape[2:], out, kernel, stride, _pad3([p for p, _ in pads], 0), dilation])
    main = f"""
int main(int argc, char** argv) {{
  long long nx = {x.size}, ny = {want.size};
{decl}  {ctype}* x = ({ctype}*)malloc(nx * sizeof({ctype}));
  {ctype}* cols = ({ctype}*)malloc(ny * sizeof({ctype}));
  FILE* f = fopen(argv[1], "rb");
  if (fread(x, sizeof({ctype}), nx, f) != (size_t)nx) return 1;
  fclose(f);
  ember_im2col_{ctype}(x, cols, ny, {shape[0]}, {shape[1]}, {arrays});
  f = fopen(argv[2], "wb"); fwrite(cols, sizeof({ctype}), ny, f); fclose(f);
  return 0;
}}
"""
    x.tofile(tmp_path / "x.bin")
    _host_run(tmp_path, f"ember_im2col_{ctype}", main, "x.bin", "cols.bin")
    np.testing.assert_array_equal(np.fromfile(tmp_path / "cols.bin", dtype), want.reshape(-1))
