"""ember.from_numpy of ndarray subclasses: memory-mapped files and their slices, matrices, masked and record arrays,
held as plain ndarray views of the same memory (as torch.from_numpy does)."""
import numpy as np
import pytest
import torch

import ember


@pytest.fixture
def mapped(tmp_path):
    path = tmp_path / "values.dat"
    m = np.memmap(path, dtype=np.float32, mode="w+", shape=(20, 3))
    m[:] = np.arange(60, dtype=np.float32).reshape(20, 3)
    m.flush()
    return path, m


@pytest.mark.parametrize("view", [lambda m: m, lambda m: m[:10], lambda m: np.asarray(m[:10]), lambda m: m[::2, 1:],
                                  lambda m: m.T, lambda m: m[3]])
def test_memmap_and_its_slices(mapped, view):
    _, m = mapped
    a = view(m)
    t = ember.from_numpy(a)
    assert type(t._data) is np.ndarray
    expected = torch.from_numpy(np.array(a))
    np.testing.assert_array_equal((t * 2 + 1).sum(0).numpy(), (expected * 2 + 1).sum(0).numpy())
    np.testing.assert_array_equal(ember.matmul(t.reshape(-1, 1), t.reshape(1, -1)).numpy(),
                                  np.outer(np.array(a), np.array(a)))
    assert str(t.device) == "cpu"


def test_memmap_memory_is_shared_both_ways(mapped):
    path, m = mapped
    t = ember.from_numpy(m[:10])
    t[0, 0] = 100.0
    assert m[0, 0] == 100.0
    m[1, 1] = -5.0
    assert t[1, 1].item() == -5.0
    m.flush()
    assert np.fromfile(path, dtype=np.float32)[0] == 100.0


def test_read_only_memmap(mapped):
    path, _ = mapped
    r = np.memmap(path, dtype=np.float32, mode="r", shape=(20, 3))
    t = ember.from_numpy(r[5:])
    assert t.sum().item() == float(np.asarray(r[5:]).sum())
    assert (t + 1).dtype == ember.float32


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_masked_and_record_arrays_as_torch():
    mat = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    t = ember.from_numpy(mat)
    assert type(t._data) is np.ndarray and t.shape == (2, 2)
    np.testing.assert_array_equal((t @ t).numpy(), (torch.from_numpy(np.asarray(mat)) @ torch.from_numpy(
        np.asarray(mat))).numpy())
    masked = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    np.testing.assert_array_equal(ember.from_numpy(masked).numpy(), torch.from_numpy(masked).numpy())  # the data
    plain_records = np.arange(4.0).view(np.recarray)
    np.testing.assert_array_equal((ember.from_numpy(plain_records) + 1).numpy(),
                                  (torch.from_numpy(plain_records) + 1).numpy())
    structured = np.rec.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])
    with pytest.raises(TypeError):
        torch.from_numpy(structured)
    with pytest.raises(TypeError):
        ember.from_numpy(structured)
    with pytest.raises(TypeError):
        ember.from_numpy([1.0, 2.0])
