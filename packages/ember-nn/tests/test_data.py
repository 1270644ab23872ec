"""ember.utils.data: datasets, samplers, collation (against PyTorch) and the DataLoader, also with real
worker processes."""
import collections
import os
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import ember
from ember.utils import data

P = collections.namedtuple("P", "a b")


def _g(seed=0):
    return ember.Generator().manual_seed(seed)


# ---- datasets ----------------------------------------------------------------------------------
def test_tensor_stack_concat_subset_datasets():
    x, y = ember.arange(12.0).reshape(6, 2), ember.arange(6)
    ds = data.TensorDataset(x, y)
    assert len(ds) == 6 and ds[2][0].tolist() == [4.0, 5.0] and ds[2][1].item() == 2
    with pytest.raises(AssertionError, match="Size mismatch"):
        data.TensorDataset(x, ember.arange(5))
    st = data.StackDataset(ds, y)
    assert st[1][1].item() == 1 and st.__getitems__([0, 5])[1][1].item() == 5
    kw = data.StackDataset(a=y, b=y * 2)
    assert kw[3]["b"].item() == 6
    with pytest.raises(ValueError, match="Size mismatch"):
        data.StackDataset(y, ember.arange(3))
    cat = ds + data.TensorDataset(x[:2], y[:2])
    assert isinstance(cat, data.ConcatDataset) and len(cat) == 8 and cat.cumulative_sizes == [6, 8]
    assert cat[7][1].item() == 1 and cat[-3][1].item() == 5
    with pytest.raises(ValueError, match="absolute value"):
        cat[-9]
    sub = data.Subset(ds, [5, 0, 3])
    assert len(sub) == 3 and [sub[i][1].item() for i in range(3)] == [5, 0, 3]
    assert [s[1].item() for s in sub.__getitems__([2, 0])] == [3, 5]
    with pytest.raises(NotImplementedError):
        data.Dataset()[0]


class Stream(data.IterableDataset):
    """0 .. n-1, split between workers by worker id."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = data.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def test_chain_dataset():
    chained = Stream(3) + Stream(2)
    assert isinstance(chained, data.ChainDataset) and list(chained) == [0, 1, 2, 0, 1] and len(chained) == 5


def test_random_split_lengths_fractions_and_generator():
    ds = list(range(10))
    a, b = data.random_split(ds, [7, 3], generator=_g(1))
    assert len(a) == 7 and len(b) == 3 and sorted(list(a) + list(b)) == ds
    a2, _ = data.random_split(ds, [7, 3], generator=_g(1))
    assert list(a) == list(a2)
    parts = data.random_split(ds, [0.5, 0.3, 0.2], generator=_g(2))
    assert [len(p) for p in parts] == [5, 3, 2]
    parts = data.random_split(list(range(11)), [0.25, 0.25, 0.5])  # 2.75, 2.75, 5.5 -> remainder round robin
    assert [len(p) for p in parts] == [3, 3, 5]
    assert [len(p) for p in tdata.random_split(list(range(11)), [0.25, 0.25, 0.5])] == [3, 3, 5]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        data.random_split(ds, [5, 4])


# ---- samplers ----------------------------------------------------------------------------------
def test_sequential_and_random_samplers():
    src = list(range(10))
    assert list(data.SequentialSampler(src)) == src
    r = data.RandomSampler(src, generator=_g(0))
    first, second = list(r), list(r)
    assert sorted(first) == src and sorted(second) == src and first != second and len(r) == 10
    assert list(data.RandomSampler(src, generator=_g(0))) == first  # seeded: reproducible
    many = list(data.RandomSampler(src, num_samples=25, generator=_g(0)))
    assert len(many) == 25 and sorted(many[:10]) == src and sorted(many[10:20]) == src
    rep = list(data.RandomSampler(src, replacement=True, num_samples=70, generator=_g(0)))
    assert len(rep) == 70 and set(rep) <= set(src) and len(set(rep)) < 70
    assert len(list(tdata.RandomSampler(src, replacement=True, num_samples=70))) == 70
    ember.manual_seed(5)
    a = list(data.RandomSampler(src))
    ember.manual_seed(5)
    assert list(data.RandomSampler(src)) == a
    with pytest.raises(ValueError, match="num_samples"):
        data.RandomSampler(src, num_samples=0)
    with pytest.raises(TypeError, match="replacement"):
        data.RandomSampler(src, replacement=1)


def test_subset_weighted_batch_samplers():
    s = list(data.SubsetRandomSampler([10, 20, 30, 40], generator=_g(0)))
    assert sorted(s) == [10, 20, 30, 40]
    w = list(data.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=_g(0)))
    assert len(w) == 200 and set(w) == {1, 3} and w.count(3) > w.count(1)
    nw = list(data.WeightedRandomSampler([1.0, 1.0, 1.0, 1.0], 4, replacement=False, generator=_g(0)))
    assert sorted(nw) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="num_samples"):
        data.WeightedRandomSampler([1.0], 0)
    for drop_last in (False, True):
        e = data.BatchSampler(range(10), 3, drop_last)
        t = tdata.BatchSampler(range(10), 3, drop_last)
        assert list(e) == list(t) and len(e) == len(t)
    with pytest.raises(ValueError, match="batch_size"):
        data.BatchSampler(range(3), 0, False)


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (2, 4, False), (12, 4, True)])
def test_distributed_sampler_partitions_like_torch(n, replicas, drop_last):
    ds = list(range(n))
    for shuffle in (False, True):
        parts = [list(data.DistributedSampler(ds, replicas, r, shuffle=shuffle, drop_last=drop_last))
                 for r in range(replicas)]
        tparts = [list(tdata.DistributedSampler(ds, replicas, r, shuffle=shuffle, drop_last=drop_last))
                  for r in range(replicas)]
        assert [len(p) for p in parts] == [len(p) for p in tparts]
        if not shuffle:
            assert parts == tparts
        flat = sum(parts, [])
        assert set(flat) == set(sum(tparts, [])) if not shuffle else set(flat) <= set(ds)
    s = data.DistributedSampler(ds, replicas, 0, seed=3)
    e0 = list(s)
    s.set_epoch(1)
    assert list(s) != e0 or n <= replicas
    with pytest.raises(ValueError, match="Invalid rank"):
        data.DistributedSampler(ds, 2, 2)


# ---- collation ---------------------------------------------------------------------------------
def _plain(x):
    """A comparable form of a collated structure (ember or torch)."""
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), np.asarray(x).tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _plain(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, [_plain(v) for v in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return x


BATCHES = [
    [1, 2, 3],
    [1.5, 2.0],
    [True, False],
    [np.float32(1), np.float32(2)],
    [np.int32(1), np.int32(7)],
    [np.array(1.5), np.array(2.5)],
    [np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)],
    ["a", "b"],
    [b"x", b"y"],
    [{"x": (1, 2.0), "s": "a"}, {"x": (3, 4.0), "s": "b"}],
    [P(1, [np.zeros(2)]), P(2, [np.ones(2)])],
    [[1, [2.0, "q"]], [3, [4.0, "r"]]],
    [collections.OrderedDict(a=1, b=np.int64(2)), collections.OrderedDict(a=3, b=np.int64(4))],
]


@pytest.mark.parametrize("batch", BATCHES, ids=range(len(BATCHES)))
def test_default_collate_matches_torch(batch):
    assert _plain(data.default_collate(batch)) == _plain(tdata.default_collate(batch))


def test_default_collate_tensors_and_errors():
    out = data.default_collate([(ember.ones(2), 1), (ember.zeros(2), 2)])
    assert isinstance(out, list) and out[0].shape == (2, 2) and out[1].dtype == ember.int64
    with pytest.raises(RuntimeError, match="equal size"):
        data.default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        data.default_collate([ember.ones(2), ember.ones(3)])
    with pytest.raises(TypeError, match="batch must contain tensors"):
        data.default_collate([object()])
    with pytest.raises(TypeError, match="found <U1"):
        data.default_collate([np.array(["a"])])


@pytest.mark.parametrize("sample", [(np.zeros(2), np.float64(3), "s", [np.int8(1)]), {"a": np.arange(3)},
                                    P(np.ones(1), 2), np.array(["x"]), 7])
def test_default_convert_matches_torch(sample):
    assert _plain(data.default_convert(sample)) == _plain(tdata.default_convert(sample))


# ---- DataLoader --------------------------------------------------------------------------------
class Squares(data.Dataset):
    def __init__(self, n=23):
        self.n = n

    def __getitem__(self, i):
        return {"x": np.full(3, i, np.float32), "y": i * i, "pid": os.getpid()}

    def __len__(self):
        return self.n


def _ys(loader):
    return [b["y"].tolist() for b in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_in_order(workers):
    loader = data.DataLoader(Squares(), batch_size=5, num_workers=workers)
    batches = list(loader)
    assert len(loader) == 5 and len(batches) == 5
    assert [len(b["y"]) for b in batches] == [5, 5, 5, 5, 3]
    assert sum(_ys(loader), []) == [i * i for i in range(23)]
    assert batches[0]["x"].dtype == ember.float32 and batches[0]["x"].shape == (5, 3)
    pids = {p for b in batches for p in b["pid"].tolist()}
    assert (pids == {os.getpid()}) if workers == 0 else (len(pids) == 2 and os.getpid() not in pids)
    dropped = data.DataLoader(Squares(), batch_size=5, drop_last=True, num_workers=workers)
    assert len(dropped) == 4 and [len(b) for b in _ys(dropped)] == [5] * 4


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_shuffle_with_generator_is_reproducible(workers):
    runs = [sum(_ys(data.DataLoader(Squares(), batch_size=4, shuffle=True, generator=_g(7), num_workers=workers)),
                []) for _ in range(2)]
    assert runs[0] == runs[1] and sorted(runs[0]) == [i * i for i in range(23)] and runs[0] != sorted(runs[0])


def test_loader_samplers_and_unbatched():
    loader = data.DataLoader(Squares(), batch_sampler=[[3, 1], [0]])
    assert _ys(loader) == [[9, 1], [0]] and len(loader) == 2
    loader = data.DataLoader(Squares(6), sampler=[5, 4], batch_size=2)
    assert _ys(loader) == [[25, 16]]
    single = list(data.DataLoader(Squares(3), batch_size=None))
    assert single[1]["y"] == 1 and isinstance(single[1]["x"], ember.Tensor) and single[1]["x"].shape == (3,)
    custom = data.DataLoader(Squares(4), batch_size=2, collate_fn=lambda b: [s["y"] for s in b])
    assert list(custom) == [[0, 1], [4, 9]]


def test_loader_argument_errors():
    ds = Squares()
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        data.DataLoader(ds, sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        data.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        data.DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        data.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers"):
        data.DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        data.DataLoader(Stream(4), shuffle=True)
    with pytest.raises(ValueError, match="drop_last"):
        data.DataLoader(ds, batch_size=None, drop_last=True)
    loader = data.DataLoader(ds, pin_memory=True)
    with pytest.raises(ValueError, match="should not be set after"):
        loader.batch_size = 3


def _record_init(worker_id):
    info = data.get_worker_info()
    assert info is not None and info.id == worker_id
    info.dataset.init_pid = os.getpid()  # the worker's own copy of the dataset
    info.dataset.init_seed = info.seed


class Informed(data.Dataset):
    init_pid = None
    init_seed = None

    def __getitem__(self, i):
        info = data.get_worker_info()
        return [info.id, info.num_workers, info.seed, self.init_pid, os.getpid(), self.init_seed,
                int(ember.randint(0, 2 ** 30, (1,)).item()), float(np.random.rand())]

    def __len__(self):
        return 8


def test_worker_init_fn_worker_info_and_seeding():
    assert data.get_worker_info() is None
    rows = [r.tolist() for b in data.DataLoader(Informed(), batch_size=2, num_workers=2, worker_init_fn=_record_init,
                                                generator=_g(3)) for r in [ember.stack(b, 1)]]
    rows = [x for batch in rows for x in batch]
    by_worker = {int(r[0]): r for r in rows}
    assert set(by_worker) == {0, 1} and all(int(r[1]) == 2 for r in rows)
    for r in rows:
        assert r[3] == r[4] and r[3] != os.getpid()  # worker_init_fn ran in that very worker process
        assert r[5] == r[2]
    assert by_worker[1][2] == by_worker[0][2] + 1  # seeds are base_seed + worker_id
    assert len({r[6] for r in rows}) == len(rows)  # workers' ember RNG streams differ
    again = [x for b in data.DataLoader(Informed(), batch_size=2, num_workers=2, worker_init_fn=_record_init,
                                        generator=_g(3)) for x in ember.stack(b, 1).tolist()]
    assert [r[2] for r in again] == [r[2] for r in rows] and [r[6] for r in again] == [r[6] for r in rows]
    assert [r[7] for r in again] == [r[7] for r in rows]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_dataset_sharding(workers, drop_last):
    loader = data.DataLoader(Stream(10), batch_size=3, num_workers=workers, drop_last=drop_last)
    tloader = tdata.DataLoader(_TorchStream(10), batch_size=3, num_workers=workers, drop_last=drop_last)
    assert [b.tolist() for b in loader] == [b.tolist() for b in tloader]


class _TorchStream(tdata.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = tdata.get_worker_info()
        return iter(range(self.n) if info is None else range(info.id, self.n, info.num_workers))


def test_persistent_workers_are_reused_across_epochs():
    loader = data.DataLoader(Squares(), batch_size=5, num_workers=2, persistent_workers=True)
    pids = []
    for _ in range(3):
        assert sum(_ys(loader), []) == [i * i for i in range(23)]
        pids.append(tuple(w.pid for w in loader._iterator._workers))
    assert pids[0] == pids[1] == pids[2] and all(w.is_alive() for w in loader._iterator._workers)
    it = iter(loader)  # abandon an epoch half way: the next one still starts from the beginning
    next(it)
    assert sum(_ys(loader), []) == [i * i for i in range(23)]
    stream = data.DataLoader(Stream(7), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream]
    workers = loader._iterator._workers
    loader._iterator._shutdown_workers()
    assert not any(w.is_alive() for w in workers)


class Faulty(data.Dataset):
    def __getitem__(self, i):
        if i == 6:
            raise ValueError(f"bad sample {i}")
        return i

    def __len__(self):
        return 10


@pytest.mark.parametrize("workers", [0, 2])
def test_worker_errors_are_reraised(workers):
    loader = data.DataLoader(Faulty(), batch_size=2, num_workers=workers)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]
    msg = "bad sample 6" if workers == 0 else r"Caught ValueError in DataLoader worker process [01](.|\n)*bad sample 6"
    with pytest.raises(ValueError, match=msg):
        list(it)
    if workers:
        assert not any(w.is_alive() for w in it._workers)  # shut down cleanly


def _failing_init(worker_id):
    raise KeyError("no config")


def test_worker_init_fn_error_and_timeout():
    with pytest.raises(KeyError, match="in DataLoader worker process"):
        list(data.DataLoader(Squares(), num_workers=1, worker_init_fn=_failing_init))

    class Slow(data.Dataset):
        def __getitem__(self, i):
            import time
            time.sleep(3)
            return i

        def __len__(self):
            return 2

    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(data.DataLoader(Slow(), num_workers=1, timeout=0.5))


def test_spawn_context_and_large_batches():
    ds = data.TensorDataset(ember.arange(4 * 100_000, dtype=ember.float32).reshape(4, 100_000))
    loader = data.DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn")
    out = [b[0] for b in loader]
    assert out[1][1, -1].item() == 4 * 100_000 - 1 and out[0]._data.flags.writeable


def test_pin_memory_without_an_accelerator_warns_as_torch():
    # imagenet's loaders ask for pinned memory; on a CPU-only machine PyTorch says it is not used (once per iterator)
    messages = []
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader = m.utils.data.DataLoader(list(range(4)), batch_size=2, pin_memory=True)
            batches = [b.tolist() for b in loader]
        messages.append((batches, [str(w.message) for w in caught if w.category is UserWarning]))
    assert messages[1] == messages[0]
