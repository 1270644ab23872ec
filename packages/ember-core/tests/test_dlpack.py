"""DLPack: zero-copy exchange of ember tensors with NumPy and PyTorch."""
import gc
import weakref

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import ember
import ember.utils.dlpack
from ember import _dtype as D

DTYPES = [d for d in D.ALL if d.np is not None]


def _torch_dtype(d):
    return getattr(torch, d.name)


def _values(d, shape=(2, 3)):
    return (torch.arange(6) % 2 == 0).reshape(shape) if d is D.bool else torch.arange(6).reshape(shape).to(
        _torch_dtype(d))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_to_ember_shares_memory(dtype):
    t = _values(dtype)
    e = ember.from_dlpack(t)
    assert e.dtype is dtype and e.tolist() == t.tolist() and e.stride() == t.stride()
    t[0, 1] = t[1, 2]
    assert e.tolist() == t.tolist()
    e[1, 0] = e[0, 0]
    assert e.tolist() == t.tolist()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ember_to_torch_shares_memory(dtype):
    e = ember.from_dlpack(_values(dtype).clone())
    t = torch.from_dlpack(e)
    assert t.dtype == _torch_dtype(dtype) and t.tolist() == e.tolist()
    t[0, 1] = t[1, 2]
    assert e.tolist() == t.tolist()
    assert e.__dlpack_device__() == tuple(int(x) for x in t.__dlpack_device__())


def test_numpy_round_trip():
    a = np.arange(6.0).reshape(2, 3)
    e = ember.from_dlpack(a)
    a[0, 0] = 42.0
    assert e[0, 0].item() == 42.0
    back = np.from_dlpack(e)
    back[1, 1] = -1.0
    assert a[1, 1] == -1.0 and e[1, 1].item() == -1.0
    assert np.shares_memory(back, a)


@pytest.mark.parametrize("make", [lambda x: x.T, lambda x: x[:, 1:], lambda x: x[0], lambda x: x[1, 2]],
                         ids=["T", "slice", "row", "0-d"])
def test_views(make):
    t = torch.arange(12.0).reshape(3, 4)
    e = ember.from_dlpack(make(t))
    assert e.tolist() == make(t).tolist() and e.stride() == make(t).stride()
    e2 = make(ember.from_dlpack(t.clone()))
    t2 = torch.from_dlpack(e2)
    assert t2.tolist() == e2.tolist() and t2.stride() == e2.stride()


def test_empty():
    e = ember.from_dlpack(torch.zeros(0, 3))
    assert tuple(e.shape) == (0, 3)
    assert torch.from_dlpack(ember.zeros(2, 0)).shape == (2, 0)


def test_capsules():
    t = torch.arange(4.0)
    e = ember.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    e[0] = 9.0  # writable, unlike NumPy's arrays from legacy capsules
    assert t[0].item() == 9.0
    b = ember.ones(3, dtype=ember.bfloat16)
    tb = torch.utils.dlpack.from_dlpack(ember.utils.dlpack.to_dlpack(b))
    assert tb.dtype == torch.bfloat16
    tb[2] = 0.5
    assert b[2].item() == 0.5


def test_capsule_is_consumed_once():
    capsule = ember.utils.dlpack.to_dlpack(ember.ones(2))
    torch.utils.dlpack.from_dlpack(capsule)
    with pytest.raises(RuntimeError, match="consumed only once"):
        ember.from_dlpack(capsule)


def test_producer_memory_lives_as_long_as_the_tensor():
    a = np.arange(1000.0)
    alive = weakref.ref(a)
    e = ember.from_dlpack(a)
    del a
    gc.collect()
    assert alive() is not None and e[999].item() == 999.0
    del e
    gc.collect()
    assert alive() is None  # the capsule's deleter ran: no leak


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="uint16"):
        ember.from_dlpack(np.arange(3, dtype=np.uint16))
    with pytest.raises(TypeError, match="__dlpack__"):
        ember.from_dlpack([1, 2, 3])


@pytest.mark.autograd
def test_tensor_that_requires_grad_is_not_exported():
    e = ember.ones(2).requires_grad_(True)
    for x in (e, torch.ones(2, requires_grad=True)):
        with pytest.raises(BufferError, match="require gradient"):
            x.__dlpack__()
