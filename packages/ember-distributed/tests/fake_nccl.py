"""A stand-in for the CUDA side of the NCCL backend, so that its logic runs without a GPU: NumPy arrays (ember's CPU
tensors) stand in for CuPy's, and ``FakeNccl`` implements the calls of ``cupy.cuda.nccl`` (communicators by unique
id, allReduce, broadcast, reduce, allGather, reduceScatter, send, recv, groupStart/groupEnd) among the threads of
this process, on raw pointers and counts as NCCL gets them. A call returns once every rank of the communicator made
it (the work of a stream that runs at once); calls between groupStart and groupEnd run at groupEnd, sends first.
"""
import contextlib
import ctypes
import os
import threading

import ml_dtypes
import numpy as np

import ember

NUMPY_TYPES = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64, 6: np.float16,
               7: np.float32, 8: np.float64, 9: ml_dtypes.bfloat16}
_REDUCE = {0: np.add, 1: np.multiply, 2: np.maximum, 3: np.minimum}


def _view(ptr, count, datatype):
    dtype = np.dtype(NUMPY_TYPES[datatype])
    if count == 0:
        return np.empty(0, dtype)
    raw = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, np.uint8).view(dtype)


class _World:
    """The ranks of one communicator: a rendezvous per collective, and mailboxes for send/recv."""

    def __init__(self, size):
        self.size = size
        self.cond = threading.Condition()
        self.rounds = {}  # sequence number -> {rank: contribution}
        self.reads = {}
        self.mail = {}  # (src, dst) -> list of arrays

    def exchange(self, seq, rank, value):
        with self.cond:
            self.rounds.setdefault(seq, {})[rank] = value
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: len(self.rounds[seq]) == self.size, timeout=30):
                raise RuntimeError(f"fake NCCL: rank {rank} waited 30 s for the others (collective {seq})")
            values = [self.rounds[seq][q] for q in range(self.size)]
            self.reads[seq] = self.reads.get(seq, 0) + 1
            if self.reads[seq] == self.size:
                del self.rounds[seq], self.reads[seq]
            return values

    def post(self, src, dst, array):
        with self.cond:
            self.mail.setdefault((src, dst), []).append(array)
            self.cond.notify_all()

    def take(self, src, dst):
        with self.cond:
            if not self.cond.wait_for(lambda: self.mail.get((src, dst)), timeout=30):
                raise RuntimeError(f"fake NCCL: rank {dst} waited 30 s for a message of rank {src}")
            return self.mail[(src, dst)].pop(0)


class FakeCommunicator:
    """``cupy.cuda.nccl.NcclCommunicator``'s calls on this process's threads."""

    worlds = {}
    worlds_lock = threading.Lock()

    def __init__(self, ndev, commId, rank, nccl):
        assert len(commId) == 128 and all(-128 <= b < 128 for b in commId)
        with FakeCommunicator.worlds_lock:
            self.world = FakeCommunicator.worlds.setdefault(commId, _World(ndev))
        assert self.world.size == ndev
        self._rank, self._nccl, self._seq = rank, nccl, 0
        self.calls = []
        self.destroyed = self.aborted = False

    def rank_id(self):
        return self._rank

    def size(self):
        return self.world.size

    def _run(self, name, fn):
        self.calls.append(name)
        if self._nccl.grouped is not None:
            self._nccl.grouped.append((name, fn))
        else:
            fn()

    def _collective(self, contribution):
        self._seq += 1
        return self.world.exchange(self._seq, self._rank, contribution)

    @staticmethod
    def _reduce(values, op):
        if op == 4:  # ncclAvg
            total = np.add.reduce(values)
            return (total / len(values)).astype(values[0].dtype) if total.dtype.kind == "f" else \
                (total // len(values)).astype(values[0].dtype)
        return _REDUCE[op].reduce(values)

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        def run():
            values = self._collective(_view(sendbuf, count, datatype).copy())
            _view(recvbuf, count, datatype)[...] = self._reduce(values, op)
        self._run("allReduce", run)

    def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
        def run():
            values = self._collective(_view(sendbuf, count, datatype).copy())
            if self._rank == root:
                _view(recvbuf, count, datatype)[...] = self._reduce(values, op)
        self._run("reduce", run)

    def broadcast(self, sendbuff, recvbuff, count, datatype, root, stream):
        def run():
            values = self._collective(_view(sendbuff, count, datatype).copy() if self._rank == root else None)
            _view(recvbuff, count, datatype)[...] = values[root]
        self._run("broadcast", run)

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):
        def run():
            values = self._collective(_view(sendbuf, count, datatype).copy())
            _view(recvbuf, count * self.world.size, datatype)[...] = np.concatenate(values)
        self._run("allGather", run)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):
        def run():
            values = self._collective(_view(sendbuf, recvcount * self.world.size, datatype).copy())
            lo = self._rank * recvcount
            _view(recvbuf, recvcount, datatype)[...] = self._reduce([v[lo:lo + recvcount] for v in values], op)
        self._run("reduceScatter", run)

    def send(self, sendbuf, count, datatype, peer, stream):
        self._run("send", lambda: self.world.post(self._rank, peer, _view(sendbuf, count, datatype).copy()))

    def recv(self, recvbuf, count, datatype, peer, stream):
        def run():
            _view(recvbuf, count, datatype)[...] = self.world.take(peer, self._rank)
        self._run("recv", run)

    def destroy(self):
        self.destroyed = True

    def abort(self):
        self.aborted = True


class FakeNccl:
    """The module ``cupy.cuda.nccl`` as the backend uses it (its group state is per thread, as NCCL's)."""

    def __init__(self):
        self._local = threading.local()
        self.communicators = []

    @property
    def grouped(self):
        return getattr(self._local, "grouped", None)

    def get_unique_id(self):
        return tuple(b - 256 if b > 127 else b for b in os.urandom(128))

    def NcclCommunicator(self, ndev, commId, rank):  # noqa: N802 - CuPy's name
        comm = FakeCommunicator(ndev, commId, rank, self)
        self.communicators.append(comm)
        return comm

    def groupStart(self):  # noqa: N802 - CuPy's name
        assert self.grouped is None, "fake NCCL: nested groups are not used by the backend"
        self._local.grouped = []

    def groupEnd(self):  # noqa: N802 - CuPy's name
        calls, self._local.grouped = self._local.grouped, None
        for _, fn in sorted(calls, key=lambda c: c[0] != "send"):  # sends never wait: post them first
            fn()


class _Stream:
    ptr = 0

    def __init__(self):
        self.waited = []

    def wait_event(self, event):
        assert event.recorded, "a stream waits for an event that was never recorded"
        self.waited.append(event)


class _Event:
    def __init__(self):
        self.recorded = False

    def record(self, stream=None):
        self.recorded = True

    @property
    def done(self):
        return self.recorded


class FakeCuda:
    """The backend's CUDA side with NumPy: every tensor is on "device 0" (ember's CPU)."""

    def __init__(self):
        self.nccl = FakeNccl()
        self.current = _Stream()

    def check(self, tensor):
        assert tensor.device.type == "cpu"

    def index(self, tensor):
        return 0

    def current_index(self):
        return 0

    def device(self, index):
        return ember.device("cpu")

    def use(self, index):
        return contextlib.nullcontext()

    def on(self, stream):
        return contextlib.nullcontext()

    def current_stream(self):
        return self.current

    def new_stream(self):
        return _Stream()

    def new_event(self):
        return _Event()

    def empty(self, n, dtype):
        return np.empty(n, dtype)
