"""Tensor.untyped_storage() / storage() / storage_type() and the storage classes against torch: sizes, element
sizes, dtypes, values, shared memory (views share their base's storage and data_ptr), writes through storages,
copies, the legacy names, errors."""
import copy
import warnings

import numpy as np
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (TypedStorage's deprecation, checked below)
        yield


def _pair(dtype="float32", shape=(2, 3)):
    a = np.arange(np.prod(shape)).reshape(shape)
    return torch.tensor(a, dtype=getattr(torch, dtype)), ember.tensor(a, dtype=getattr(ember, dtype))


VIEWS = [lambda x: x, lambda x: x[1], lambda x: x[:, 1:], lambda x: x.t(), lambda x: x.reshape(-1)[2:5],
         lambda x: x[1, 1:]]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int16", "bool", "bfloat16", "complex64"])
@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_storages_of_views_match_torch(dtype, view):
    t, e = _pair(dtype)
    tv, ev = VIEWS[view](t), VIEWS[view](e)
    tu, eu = tv.untyped_storage(), ev.untyped_storage()
    assert (eu.size(), eu.nbytes(), len(eu), eu.element_size()) == (tu.size(), tu.nbytes(), len(tu), 1)
    assert eu.tolist() == tu.tolist() and eu[3] == tu[3] and str(eu.device) == str(tu.device) == "cpu"
    assert eu.data_ptr() == e.data_ptr() and eu.data_ptr() == ev.data_ptr() - ev.storage_offset() * e.element_size()
    assert ev.storage_offset() == tv.storage_offset()
    ts, es = tv.storage(), ev.storage()
    assert (es.size(), len(es), es.element_size(), es.nbytes()) == (ts.size(), len(ts), ts.element_size(), ts.nbytes())
    assert str(es.dtype) == str(ts.dtype).replace("torch", "ember") and es.data_ptr() == eu.data_ptr()
    expected = ts.tolist() if dtype != "bfloat16" else [float(v) for v in t.float().reshape(-1)]
    assert es.tolist() == expected and es[-1] == expected[-1]
    assert ev.storage_type().__name__ == tv.storage_type().__name__ and es.type() == ts.type()
    assert isinstance(es, ev.storage_type()) and isinstance(ts, tv.storage_type())


def test_writes_show_through_both_ways():
    for lib in (torch, ember):
        x = lib.zeros(4)
        s, u = x.storage(), x[2:].untyped_storage()
        s[0], s[1] = 1, 7
        s[2:4] = 5
        assert x.tolist() == [1.0, 7.0, 5.0, 5.0]
        u[0:4] = 0  # the bytes of the first element: the view's storage is its base's
        assert x.tolist() == [0.0, 7.0, 5.0, 5.0]
        x.add_(1)
        assert s.tolist() == x.tolist()
        s.fill_(3)
        assert x.tolist() == [3.0] * 4
        s.copy_(lib.FloatStorage([1, 2, 3, 4]))
        assert x.tolist() == [1.0, 2.0, 3.0, 4.0]
        c = s.clone()
        c[0] = 9
        assert c.data_ptr() != s.data_ptr() and x[0].item() == 1.0 and c.tolist() == [9.0, 2.0, 3.0, 4.0]
        d = copy.deepcopy(u)
        assert d.data_ptr() != u.data_ptr() and d.tolist() == u.tolist()


def test_sharing_is_seen_through_data_ptr():
    x = ember.randn(4, 5)
    same = [x.view(20), x[1:], x.t(), x.narrow(1, 2, 2), x.detach(), x.unsqueeze(0)]
    assert all(v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for v in same)
    other = [x.clone(), x.contiguous() + 0, x.t().contiguous()]
    assert all(v.untyped_storage().data_ptr() != x.untyped_storage().data_ptr() for v in other)


def test_constructors_and_legacy_names():
    for lib in (torch, ember):
        f = lib.FloatStorage([1, 2, 3])
        assert type(f) is lib.TypedStorage and f.dtype == lib.float32 and f.tolist() == [1.0, 2.0, 3.0]
        assert isinstance(f, lib.FloatStorage) and not isinstance(f, lib.DoubleStorage)
        assert issubclass(lib.LongStorage, lib.TypedStorage) and lib.LongStorage.dtype == lib.int64
        assert lib.FloatStorage(5).size() == 5 and lib.UntypedStorage(4).nbytes() == 4
        assert lib.UntypedStorage([1, 2, 255, 300, -1]).tolist() == [1, 2, 255, 44, 255]
        assert lib.TypedStorage([1, 2], dtype=lib.int16).element_size() == 2
        assert lib.FloatStorage.from_buffer(b"\x00\x00\x80?", "little").tolist() == [1.0]
        assert f.long().tolist() == [1, 2, 3] and f.double().dtype == lib.float64 and f.long() is not f
        assert f.untyped().nbytes() == 12 and f.untyped() is f._untyped_storage
        assert lib.TypedStorage(wrap_storage=f.untyped(), dtype=lib.int32).size() == 3
    assert repr(ember.FloatStorage([1, 2])) == \
        " 1.0\n 2.0\n[ember.TypedStorage(dtype=ember.float32, device=cpu) of size 2]"
    assert repr(ember.UntypedStorage(0)) == " \n[ember.UntypedStorage(device=cpu) of size 0]"


def test_typed_storage_warns_once():
    import ember._storage as S
    S._warned[0] = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.zeros(2).storage()
        ember.zeros(2).storage()
        ember.FloatStorage(2)
        ember.zeros(2).untyped_storage()
    assert [str(w.message)[:25] for w in caught] == ["TypedStorage is deprecate"]


@pytest.mark.parametrize("call,error", [
    (lambda lib: lib.zeros(3).storage()[5], IndexError), (lambda lib: lib.zeros(3).untyped_storage()[-13], IndexError),
    (lambda lib: lib.zeros(3).storage()[0:2], RuntimeError),
    (lambda lib: lib.from_numpy(np.zeros(3)).untyped_storage().resize_(0), RuntimeError),
    (lambda lib: lib.zeros(3).to_sparse().untyped_storage(), NotImplementedError),
    (lambda lib: lib.UntypedStorage([1, 2.5]), RuntimeError)])
def test_errors_match_torch(call, error):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(ember)
