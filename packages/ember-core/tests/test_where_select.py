"""Host ``where`` on large operands selects with bit masks (``comparison._select``): the very bits of np.where
(NaN payloads, -0.0, every dtype of 1 to 8 bytes), with broadcasting, C-ordered like np.where's result."""
import numpy as np
import pytest

import ember
from ember._ops import comparison

SHAPE = (64, 128)  # (8192 elements: over SELECT_MIN)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64", "complex64", "complex128"])
def test_same_bits_as_np_where(dtype, monkeypatch):
    assert np.prod(SHAPE) >= comparison.SELECT_MIN
    used = []
    select = comparison._select
    monkeypatch.setattr(comparison, "_select", lambda *args: used.append(1) or select(*args))
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(2, *SHAPE, 16), dtype=np.uint8)
    t = getattr(ember, dtype)
    width = ember.empty(0, dtype=t).element_size()
    x, y = (ember.from_numpy(raw[i, ..., :width].copy().view(ember.empty(0, dtype=t).numpy().dtype)[..., 0])
            for i in range(2))
    if dtype == "bool":
        x, y = x.view(ember.uint8) % 2 == 1, y.view(ember.uint8) % 2 == 1
    cond = ember.from_numpy(rng.random(SHAPE) > 0.5)
    got = ember.where(cond, x, y).numpy()
    want = np.where(cond.numpy(), x.numpy(), y.numpy())
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()
    assert used == ([1] if got.itemsize <= 8 else [])  # (complex128: np.where)


@pytest.mark.parametrize("shapes", [((64, 1), (1, 128), ()), ((1, 128), (64, 128), (64, 1)), ((64, 128), (), (128,))])
def test_broadcasting(shapes):
    rng = np.random.default_rng(1)
    cs, xs, ys = shapes
    cond = rng.random(cs) > 0.5
    x = rng.standard_normal(xs).astype(np.float32)
    y = np.float32(-0.0) if ys == () else rng.standard_normal(ys).astype(np.float32)
    got = ember.where(ember.from_numpy(np.asarray(cond)), ember.from_numpy(np.asarray(x)), ember.tensor(y)).numpy()
    want = np.where(cond, x, y)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
