"""Tensor.set_ / is_set_to (sharing memory without copies), dim_order, module_load and volatile, against torch."""
import warnings

import pytest
import torch

import ember


def _state(m, t):
    return t.tolist(), tuple(t.shape), t.stride(), t.storage_offset()


CASES = {
    "set_()": lambda m, z: m.zeros(2, 2).set_(),
    "set_(tensor)": lambda m, z: m.zeros(3).set_(z),
    "set_(view)": lambda m, z: m.zeros(3).set_(z[1:, ::2]),
    "set_(tensor, geometry)": lambda m, z: m.zeros(2).set_(z, 1, (2, 2), (3, 1)),
    "set_(untyped storage, geometry)": lambda m, z: m.zeros(2).set_(z.untyped_storage(), 2, (3,), (2,)),
    "set_(typed storage)": lambda m, z: m.zeros(2).set_(z.storage()),
    "set_(empty geometry)": lambda m, z: m.zeros(2).set_(z.untyped_storage(), 0, (0, 4)),
    "set_ other dtype": lambda m, z: m.zeros(2, dtype=m.int64).set_(z),
}


@pytest.mark.parametrize("name", CASES)
def test_set_as_torch(name):
    outcome = []
    for m in (torch, ember):
        z = m.arange(12.0).reshape(3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (TypedStorage is deprecated)
            try:
                t = CASES[name](m, z)
            except RuntimeError as e:
                outcome.append(str(e))
                continue
        before = _state(m, t)
        if t.numel():  # the memory is shared: writes show through both ways
            t.view(-1)[0:1].fill_(-1.0) if t.is_contiguous() else t.fill_(-1.0)
            z[-1, -1] = 99.0
        outcome.append((before, _state(m, t), z.tolist()))
    assert outcome[1] == outcome[0]


def test_geometry_past_the_storage_is_refused():
    """(PyTorch reads past the storage here, and returns what lies beyond it)"""
    z = ember.arange(12.0)
    with pytest.raises(RuntimeError, match=r"setStorage: sizes \[3\], strides \[1\], storage offset 10, and itemsize 4 "
                                           r"requiring a storage size of 52 are out of bounds for storage of size 48"):
        ember.zeros(2).set_(z.untyped_storage(), 10, (3,), (1,))


def test_is_set_to():
    for m in (torch, ember):
        z = m.ones(4)
        t = m.zeros(1)
        assert t.set_(z) is t and t.is_set_to(z) and z.is_set_to(t)
        assert not t.is_set_to(z[1:]) and not t.is_set_to(z.view(2, 2)) and not t.is_set_to(z.clone())


@pytest.mark.parametrize("shape, fmt", [((2, 3), None), ((2, 1, 3), None), ((), None), ((2, 3, 4, 5), "channels_last"),
                                        ((2, 3, 4, 5, 6), "channels_last_3d"), ((3, 4), "t")])
def test_dim_order_as_torch(shape, fmt):
    outcome = []
    for m in (torch, ember):
        t = m.ones(shape)
        t = t.t() if fmt == "t" else t.to(memory_format=getattr(m, fmt)) if fmt else t
        try:
            checked = t.dim_order(ambiguity_check=True)
        except RuntimeError:
            checked = "ambiguous"
        outcome.append((t.dim_order(), checked))
    assert outcome[1] == outcome[0]


def test_module_load_and_volatile():
    for m in (torch, ember):
        a, b = m.zeros(2), m.ones(2)
        assigned = a.module_load(b, assign=True)  # (detached: a new tensor object over b's memory)
        assert assigned is not b and assigned.data_ptr() == b.data_ptr()
        copied = a.module_load(b)
        assert copied.data_ptr() == a.data_ptr() and a.tolist() == [1.0, 1.0]
        with pytest.warns(UserWarning, match="volatile was removed"):
            assert a.volatile is False
