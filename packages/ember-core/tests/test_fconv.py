"""The compiled direct float32 convolution (ember._fconv, only where the CPU has AVX-512): values against torch
(float64 sums as the reference), odd channel counts, strides, dilation, asymmetric padding, channels-last inputs,
infinities and NaN, and the split over two threads."""
import numpy as np
import pytest
import torch

import ember
from ember import _fconv, _jit

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.:UserWarning")
avx512 = pytest.mark.skipif(not _jit.cpu_has("avx512f"), reason="the compiled direct convolution needs AVX-512")
rng = np.random.default_rng(15)

# N, C, O, H, W, kernel, stride, padding, dilation
SHAPES = [(32, 3, 64, 32, 32, (7, 7), (2, 2), (3, 3), (1, 1)), (4, 3, 64, 32, 32, (3, 3), (1, 1), (1, 1), (1, 1)),
          (2, 5, 70, 13, 11, (3, 2), (2, 1), (1, 0), (1, 1)), (3, 16, 128, 17, 17, (3, 3), (2, 2), (1, 1), (2, 1)),
          (1, 1, 1, 9, 9, (2, 2), (1, 1), (0, 0), (1, 1)), (2, 8, 200, 10, 10, (5, 5), (1, 3), (2, 2), (1, 1)),
          (5, 64, 64, 8, 8, (3, 3), (2, 2), (1, 1), (1, 1))]


def _reference(x, w, b, stride, padding, dilation):
    return torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                                      None if b is None else torch.tensor(b, dtype=torch.float64), stride=stride,
                                      padding=padding, dilation=dilation).numpy()


@avx512
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_direct_convolution_values(shape, bias):
    N, C, O, H, W, kernel, stride, padding, dilation = shape
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((O, C) + kernel).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    pads = tuple((p, p) for p in padding)
    with _jit.forced():
        out = _fconv.conv(x, w, b, stride, pads, dilation)
    assert out is not None and out.dtype == np.float32 and out.flags.c_contiguous
    expected = _reference(x, w, b, stride, padding, dilation)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * np.sqrt(C * kernel[0] * kernel[1]))


@avx512
def test_through_conv2d_channels_last_and_asymmetric_padding():
    x = rng.standard_normal((4, 3, 20, 20)).astype(np.float32)
    w = rng.standard_normal((64, 3, 6, 6)).astype(np.float32)
    with _jit.forced():
        same = ember.conv2d(ember.tensor(x), ember.tensor(w), padding="same")  # (even kernel: padding 2 then 3)
        cl = ember.conv2d(ember.tensor(x).to(memory_format=ember.channels_last), ember.tensor(w), stride=2)
        direct = _fconv.conv(x, w, None, (1, 1), ((2, 3), (2, 3)), (1, 1))
    np.testing.assert_allclose(same.numpy(), _reference(x, w, None, 1, "same", 1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(same.numpy(), direct)
    assert cl.is_contiguous(memory_format=ember.channels_last)
    np.testing.assert_allclose(cl.numpy(), _reference(x, w, None, 2, 0, 1), rtol=1e-5, atol=1e-4)


@avx512
def test_infinities_and_nan_propagate():
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    x[0, 1, 5, 5], x[1, 2, 0, 0] = np.inf, np.nan
    w = rng.standard_normal((64, 3, 3, 3)).astype(np.float32)
    with _jit.forced():
        out = _fconv.conv(x, w, None, (1, 1), ((1, 1), (1, 1)), (1, 1))
    expected = _reference(x, w, None, 1, 1, 1)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(expected))


@avx512
def test_split_over_threads_gives_the_same_values(monkeypatch):
    x = rng.standard_normal((6, 3, 16, 16)).astype(np.float32)
    w = rng.standard_normal((64, 3, 5, 5)).astype(np.float32)
    with _jit.forced():
        whole = _fconv.conv(x, w, None, (1, 1), ((2, 2), (2, 2)), (1, 1))
        monkeypatch.setattr(_fconv, "SPLIT_WORK", 1)
        split = _fconv.conv(x, w, None, (1, 1), ((2, 2), (2, 2)), (1, 1))
    np.testing.assert_array_equal(whole, split)


def test_small_work_and_other_dtypes_take_the_other_paths():
    x = np.ones((1, 1, 4, 4), np.float32)
    assert _fconv.conv(x, np.ones((1, 1, 2, 2), np.float32), None, (1, 1), ((0, 0), (0, 0)), (1, 1)) is None
    assert not _fconv.usable(np, x.astype(np.float64), np.ones((1, 1, 5, 5)), 1)
    assert not _fconv.usable(np, x, np.ones((1, 1, 3, 3), np.float32), 1)  # (3x3: the other paths are faster)
    assert not _fconv.usable(np, np.ones((1, 8, 9, 9), np.float32), np.ones((1, 8, 5, 5), np.float32), 1)
    assert not _fconv.usable(np, x, np.ones((1, 1, 5, 5), np.float32), 2)
    assert _fconv.usable(np, np.ones((2, 3, 9, 9), np.float32), np.ones((64, 3, 7, 7), np.float32), 1)
