"""Messages' pickles: small CPU tensors travel as their bytes (``_agent._reduce_tensor``), every other tensor as
its own reduction; both unpickle to equal, writable tensors of the same dtype, shape and requires_grad."""
import pickle

import numpy as np
import pytest

import ember
from ember.distributed.rpc import _agent


def _round_trip(obj):
    frames = _agent._dumps(obj)
    return pickle.loads(frames[0], buffers=frames[1:]), frames


@pytest.mark.parametrize("make", [
    lambda: ember.ones(10),
    lambda: ember.arange(6).reshape(2, 3),
    lambda: ember.tensor([True, False, True]),
    lambda: ember.tensor(3.5, dtype=ember.float64),
    lambda: ember.zeros(0, 4),
    lambda: ember.tensor([1 + 2j, 3 - 1j], dtype=ember.complex64),
    lambda: ember.arange(5, dtype=ember.float16),
    lambda: ember.arange(5, dtype=ember.uint8),
    lambda: ember.arange(5.0, requires_grad=True),
    lambda: ember.arange(5, dtype=ember.bfloat16),  # (no NumPy number type: its own reduction)
    lambda: ember.arange(16.0).reshape(4, 4).t(),  # (not contiguous: its own reduction)
    lambda: ember.arange(8192.0),  # (32 KB: out of band)
])
def test_tensors_round_trip(make):
    t = make()
    back, frames = _round_trip({"t": t, "again": t})
    got = back["t"]
    assert back["again"] is got  # (one object, pickled once)
    assert got.dtype == t.dtype and got.shape == t.shape and got.requires_grad == t.requires_grad
    np.testing.assert_array_equal(got.detach().numpy(), t.detach().numpy())
    if got.numel() and len(frames) == 1:  # (out-of-band buffers are the sender's memory until sent)
        first = (0,) * got.dim()
        before = t.detach()[first].item()
        with ember.no_grad():
            got[first] = not before if isinstance(before, bool) else before + 1  # writable, and not the sender's memory
        assert t.detach()[first].item() == before
    small = t.is_contiguous() and t.dtype != ember.bfloat16 and t.numel() * t.element_size() < _agent.INBAND_MAX
    assert (b"_rebuild_small" in bytes(frames[0])) == small
    assert len(frames) == (2 if t.numel() == 8192 else 1)  # (large buffers out of band)


def test_later_copyreg_registrations_apply():
    class Point:
        def __init__(self, x):
            self.x = x

    import copyreg

    copyreg.pickle(Point, lambda p: (complex, (p.x, 1)))
    try:
        back, _ = _round_trip(Point(2))
    finally:
        del copyreg.dispatch_table[Point]
    assert back == 2 + 1j
