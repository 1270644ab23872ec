"""The NCCL backend ("nccl"): collectives of CUDA tensors through NCCL, as CuPy exposes it (``cupy.cuda.nccl``, on
the ``nvidia-nccl-cu12``/``-cu13`` wheels: the ``nccl12``/``nccl13`` extras).

A communicator per device of the group, made on the first call on that device: rank 0 asks NCCL for a unique id
and publishes it in the group's store, the others read it. Calls run on a stream of the communicator's own, after
the work queued so far on the caller's current stream (an event recorded there); each returns a Work holding an
event recorded after the call. ``Work.wait()`` makes the current stream wait for that event (the host does not
wait, as with PyTorch's NCCL backend); a synchronous call does the same before returning. The Work keeps the
tensors and temporary buffers of the call alive until the event has passed.

How each call maps onto NCCL: all_reduce/broadcast/reduce/all_gather/reduce_scatter onto their NCCL collectives
(lists of tensors through one flat buffer, several all_reduces in one NCCL group); all_to_all, gather, scatter and
send/recv onto grouped ncclSend/ncclRecv; barrier onto an all_reduce of one byte that the host waits for.
ReduceOp AVG is NCCL's ncclAvg; PREMUL_SUM (which CuPy does not expose) multiplies the input by its factor, on the
communicator's stream, before a sum; bool tensors travel as uint8 (SUM and MAX as max, PRODUCT and MIN as min).

The CUDA side (CuPy's NCCL module, streams, events, devices) comes from one object, ``_CupyCuda``; tests give the
backend a stand-in with NumPy arrays and a communicator of Python threads instead, since the logic must be
checked where no GPU is.
"""
import contextlib
import datetime
import functools
import threading
import time

import numpy as np

import ember

from ._errors import DistBackendError
from ._reduce_op import RedOpType, op_type
from ._work import Future

# ember dtype name -> NCCL datatype (the ncclDataType_t values, which CuPy's constants carry too)
_DATATYPES = {"int8": 0, "uint8": 1, "bool": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
              "float32": 7, "float64": 8, "bfloat16": 9}
_SUM, _PROD, _MAX, _MIN, _AVG = 0, 1, 2, 3, 4
_OPS = {RedOpType.SUM: _SUM, RedOpType.PRODUCT: _PROD, RedOpType.MAX: _MAX, RedOpType.MIN: _MIN,
        RedOpType.AVG: _AVG, RedOpType.PREMUL_SUM: _SUM}
_BOOL_OPS = {RedOpType.SUM: _MAX, RedOpType.PRODUCT: _MIN, RedOpType.MAX: _MAX, RedOpType.MIN: _MIN}


@functools.cache
def is_available():
    """Whether NCCL can be used: a GPU is there (asked of the driver, without importing CuPy) and CuPy's NCCL
    module loads its library."""
    if not ember.cuda.is_available():
        return False
    try:
        from cupy.cuda import nccl
    except ImportError:
        return False
    return bool(getattr(nccl, "available", True))


class _CupyCuda:
    """The CUDA side of the backend, through CuPy."""

    def __init__(self):
        ember.cuda.init()
        import cupy
        from cupy.cuda import nccl
        self.nccl, self._cupy = nccl, cupy

    def check(self, tensor):
        if tensor.device.type != "cuda":
            raise ValueError("Tensors must be CUDA and dense")

    def index(self, tensor):
        return tensor.device.index

    def current_index(self):
        return self._cupy.cuda.runtime.getDevice()

    def device(self, index):
        return ember.device("cuda", index)

    def use(self, index):
        return self._cupy.cuda.Device(index)

    def on(self, stream):
        return stream

    def current_stream(self):
        return self._cupy.cuda.get_current_stream()

    def new_stream(self):
        return self._cupy.cuda.Stream(non_blocking=True)

    def new_event(self):
        return self._cupy.cuda.Event(disable_timing=True)

    def empty(self, n, dtype):
        return self._cupy.empty(n, dtype)


def _ptr(a):
    return a.ctypes.data if type(a) is np.ndarray else a.data.ptr


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


class _Comm:
    __slots__ = ("nccl", "stream", "index")

    def __init__(self, nccl, stream, index):
        self.nccl, self.stream, self.index = nccl, stream, index


class NCCLWork:
    """The handle of one NCCL call: ``wait`` (the current stream waits; with ``timeout`` the host), ``is_completed``,
    ``is_success``, ``exception``, ``result``, ``get_future``, ``synchronize``."""

    def __init__(self, backend, name, index, outputs, done, keep, host_wait=False):
        self._backend, self._name, self._index, self._outputs = backend, name, index, outputs
        self._done, self._keep, self._host_wait = done, keep, host_wait
        self._future = None
        self._exc = None

    def _finished(self):
        """True once the event passed (the kept buffers are let go then)."""
        if self._keep is not None and self._done.done:
            self._keep = None
        return self._keep is None

    def wait(self, timeout=None):
        if self._exc is not None:
            raise self._exc
        if timeout is not None or self._host_wait:
            seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
            deadline = None if seconds is None else time.monotonic() + float(seconds)
            while not self._finished():
                if deadline is not None and time.monotonic() > deadline:
                    raise DistBackendError(f"[Rank {self._backend.rank()}] Timed out waiting "
                                           f"{int(float(seconds) * 1000)}ms for {self._name} operation to complete")
                time.sleep(0.0002)
        else:
            cuda = self._backend._cuda
            with cuda.use(self._index):
                cuda.current_stream().wait_event(self._done)
        if self._exc is not None:
            raise self._exc
        return True

    synchronize = wait

    def is_completed(self):
        return self._exc is not None or self._finished()

    def is_success(self):
        if not self.is_completed():
            raise RuntimeError("Work.is_success(): the work has not completed yet")
        return self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        if self._outputs is None:
            raise RuntimeError("result() not implemented.")
        return self._outputs

    def source_rank(self):
        raise RuntimeError("source_rank() may only be called on a recv from any source, which NCCL does not have")

    def get_future(self):
        """A Future completed (on the backend's watch thread) once the call has run; its value: the outputs."""
        if self._future is None:
            self._future = Future()
            self._backend._watch(self)
        return self._future

    def _fail(self, exc):
        self._exc = exc
        if self._future is not None and not self._future.done():
            self._future.set_exception(exc)


class NCCLBackend:
    """The backend of one group on NCCL: ``rank`` of ``size``, its communicators' unique ids shared through
    ``store`` (private to the group). ``cuda``: the CUDA side (default: CuPy's)."""

    def __init__(self, store, rank, size, timeout=None, global_ranks=None, group_name="", cuda=None):
        self._store, self._rank, self._size = store, rank, size
        self.timeout = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else (timeout or 600.0)
        self.group_name = group_name
        self.global_ranks = list(global_ranks) if global_ranks is not None else list(range(size))
        self._cuda = cuda if cuda is not None else _CupyCuda()
        self._used_index = None  # the device of the latest call (the barrier runs there)
        self._comms = {}  # device index -> _Comm
        self._made = 0  # communicators made so far (names their unique id's key)
        self._pending = []  # works whose buffers are kept until their event passed
        self._watched, self._watch_lock, self._watcher = [], threading.Lock(), None
        self._error = None
        self._closed = False

    # ---- torch's ProcessGroup-like identity ------------------------------------------------------------
    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return "nccl"

    # ---- communicators and launching --------------------------------------------------------------------
    def _comm(self, index):
        comm = self._comms.get(index)
        if comm is None:
            nccl = self._cuda.nccl
            key = f"nccl/unique_id/{self._made}"
            self._made += 1
            if self._rank == 0:
                uid = nccl.get_unique_id()
                self._store.set(key, bytes(b & 0xFF for b in uid))
            else:
                uid = tuple(b - 256 if b > 127 else b for b in self._store.get(key))
            with self._cuda.use(index):
                comm = _Comm(nccl.NcclCommunicator(self._size, uid, self._rank), self._cuda.new_stream(), index)
            self._comms[index] = comm
        return comm

    def _array(self, tensor):
        """The device array of ``tensor``, checked as NCCL needs it."""
        if self._closed or self._error is not None:
            raise DistBackendError(f"[Rank {self._rank}] the NCCL process group was destroyed or aborted"
                                   if self._closed else str(self._error))
        self._cuda.check(tensor)
        if not tensor.is_contiguous():
            raise ValueError("Tensors must be contiguous")
        if _dtype_name(tensor) not in _DATATYPES:
            raise TypeError(f"Input tensor data type is not supported for NCCL process group: {tensor.dtype}")
        return tensor._data.reshape(-1)

    @contextlib.contextmanager
    def _group(self):
        self._cuda.nccl.groupStart()
        try:
            yield
        finally:
            self._cuda.nccl.groupEnd()

    def _launch(self, name, uses, issue, async_op, outputs, written=(), host_wait=False):
        """Run ``issue(comm, stream_ptr)`` (NCCL calls and the copies around them; returns the temporary buffers
        to keep) on the communicator's stream of the device of ``uses`` (the tensors the call reads or writes),
        after the caller's current stream; a Work."""
        index = self._cuda.index(uses[0])
        comm = self._comm(index)
        self._used_index = index
        with self._cuda.use(index):
            ready = self._cuda.new_event()
            ready.record(self._cuda.current_stream())
            comm.stream.wait_event(ready)
            try:
                with self._cuda.on(comm.stream):
                    temps = issue(comm.nccl, comm.stream.ptr)
            except Exception as e:
                raise DistBackendError(f"[Rank {self._rank}] NCCL error in {name}: {e}") from e
            done = self._cuda.new_event()
            done.record(comm.stream)
        for t in written:
            t._bump()
        work = NCCLWork(self, name, index, outputs, done, (uses, temps), host_wait)
        self._pending = [w for w in self._pending if not w._finished()]
        self._pending.append(work)
        if not async_op:
            work.wait()
        return work

    def _watch(self, work):
        """Complete ``work``'s future once its event passed (or fail it after the group's timeout), on a thread
        of the backend's own."""
        with self._watch_lock:
            self._watched.append((work, time.monotonic() + self.timeout))
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch_loop, daemon=True, name="ember-nccl-watch")
                self._watcher.start()

    def _watch_loop(self):
        while True:
            with self._watch_lock:
                watched = list(self._watched)
                if not watched:  # the next get_future starts another
                    self._watcher = None
                    return
            now, finished = time.monotonic(), []
            for work, deadline in watched:
                if work._exc is not None:
                    finished.append(work)
                elif work._finished():
                    work._future.set_result(work._outputs if work._outputs is not None else [])
                    finished.append(work)
                elif now > deadline:
                    work._fail(DistBackendError(f"[Rank {self._rank}] Watchdog caught collective operation "
                                                f"timeout: {work._name} ran for more than "
                                                f"{int(self.timeout * 1000)} milliseconds"))
                    finished.append(work)
            with self._watch_lock:
                self._watched = [w for w in self._watched if w[0] not in finished]
            time.sleep(0.0005)

    def _reduction(self, op, tensor):
        """The NCCL op for ``op`` on ``tensor``, and PREMUL_SUM's factor (None otherwise)."""
        red = op_type(op, "NCCL collective")
        if red in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR):
            raise ValueError(f"Cannot use ReduceOp.{red.name} with NCCL")
        factor = None
        if red == RedOpType.PREMUL_SUM:
            factor = getattr(op, "factor", None)
            if factor is None:
                raise ValueError("ReduceOp.PREMUL_SUM needs a factor: make it with _make_nccl_premul_sum(factor)")
        if _dtype_name(tensor) == "bool":
            if red not in _BOOL_OPS:
                raise ValueError(f"Cannot use ReduceOp.{red.name} with boolean inputs")
            return _BOOL_OPS[red], None
        return _OPS[red], factor

    @staticmethod
    def _scaled(a, factor):
        """``a`` times PREMUL_SUM's ``factor`` (a number or a one-element tensor on the device), in ``a``'s
        dtype (a new buffer)."""
        if isinstance(factor, ember.Tensor):
            factor = factor._data.reshape(())
        return (a * factor).astype(a.dtype, copy=False)

    # ---- collectives (group ranks; tensors already checked by the public functions) ----------------------
    def allreduce(self, tensors, op, async_op=False):
        arrays = [self._array(t) for t in tensors]
        nops = [self._reduction(op, t) for t in tensors]

        def issue(comm, stream):
            sends = [a if factor is None else self._scaled(a, factor) for a, (_, factor) in zip(arrays, nops)]
            with self._group():
                for t, a, s, (nop, _) in zip(tensors, arrays, sends, nops):
                    comm.allReduce(_ptr(s), _ptr(a), a.size, _DATATYPES[_dtype_name(t)], nop, stream)
            return sends
        return self._launch("allreduce", list(tensors), issue, async_op, list(tensors), tensors)

    def broadcast(self, tensors, root, async_op=False):
        t = tensors[0]
        a = self._array(t)

        def issue(comm, stream):
            comm.broadcast(_ptr(a), _ptr(a), a.size, _DATATYPES[_dtype_name(t)], root, stream)
        return self._launch("broadcast", [t], issue, async_op, list(tensors), [t] if self._rank != root else [])

    def reduce(self, tensors, root, op, async_op=False):
        t = tensors[0]
        a = self._array(t)
        nop, factor = self._reduction(op, t)

        def issue(comm, stream):
            send = a if factor is None else self._scaled(a, factor)
            comm.reduce(_ptr(send), _ptr(a), a.size, _DATATYPES[_dtype_name(t)], nop, root, stream)
            return send
        return self._launch("reduce", [t], issue, async_op, list(tensors), [t] if self._rank == root else [])

    def allgather(self, output_lists, inputs, async_op=False):
        outs, inp = output_lists[0], inputs[0]
        if len(outs) != self._size:
            raise ValueError(f"Tensor list input to allgather must be of size {self._size} (the world size), got "
                             f"{len(outs)}")
        if any(o.numel() != inp.numel() or o.dtype != inp.dtype for o in outs):
            raise ValueError("All tensor operands to allgather must have the same number of elements and dtype")
        a = self._array(inp)
        out_arrays = [self._array(o) for o in outs]

        def issue(comm, stream):
            flat = self._cuda.empty(a.size * self._size, a.dtype)
            comm.allGather(_ptr(a), _ptr(flat), a.size, _DATATYPES[_dtype_name(inp)], stream)
            for q, o in enumerate(out_arrays):
                o[...] = flat[q * a.size:(q + 1) * a.size]
            return flat
        return self._launch("allgather", [inp, *outs], issue, async_op, list(outs), outs)

    def allgather_into_tensor(self, output, inp, async_op=False):
        if output.numel() != inp.numel() * self._size:
            raise ValueError("output tensor size must be equal to world_size times input tensor size")
        o, a = self._array(output), self._array(inp)

        def issue(comm, stream):
            comm.allGather(_ptr(a), _ptr(o), a.size, _DATATYPES[_dtype_name(inp)], stream)
        return self._launch("allgather", [inp, output], issue, async_op, [output], [output])

    def reduce_scatter(self, out, ins, op, async_op=False):
        if len(ins) != self._size or any(t.numel() != out.numel() for t in ins):
            raise ValueError("reduce_scatter: one input per rank, each with as many elements as the output")
        o = self._array(out)
        arrays = [self._array(t) for t in ins]
        nop, factor = self._reduction(op, out)

        def issue(comm, stream):
            flat = self._cuda.empty(o.size * self._size, o.dtype)
            for q, a in enumerate(arrays):
                flat[q * o.size:(q + 1) * o.size] = a
            if factor is not None:
                flat = self._scaled(flat, factor)
            comm.reduceScatter(_ptr(flat), _ptr(o), o.size, _DATATYPES[_dtype_name(out)], nop, stream)
            return flat
        return self._launch("reduce_scatter", [out, *ins], issue, async_op, [out], [out])

    def reduce_scatter_tensor(self, out, inp, op, async_op=False):
        if inp.numel() != out.numel() * self._size:
            raise ValueError("input tensor must be the same size as output size times world size")
        o, a = self._array(out), self._array(inp)
        nop, factor = self._reduction(op, out)

        def issue(comm, stream):
            send = a if factor is None else self._scaled(a, factor)
            comm.reduceScatter(_ptr(send), _ptr(o), o.size, _DATATYPES[_dtype_name(out)], nop, stream)
            return send
        return self._launch("reduce_scatter", [out, inp], issue, async_op, [out], [out])

    def _exchange(self, comm, stream, sends, recvs, datatype):
        """One NCCL group of sends ``(array, peer)`` and receives ``(array, peer)``."""
        with self._group():
            for a, peer in sends:
                comm.send(_ptr(a), a.size, datatype, peer, stream)
            for a, peer in recvs:
                comm.recv(_ptr(a), a.size, datatype, peer, stream)

    def alltoall(self, outs, ins, async_op=False):
        if len(outs) != self._size or len(ins) != self._size:
            raise ValueError(f"all_to_all needs {self._size} input and output tensors (the world size)")
        o, i = [self._array(t) for t in outs], [self._array(t) for t in ins]
        datatype = _DATATYPES[_dtype_name(ins[0])]

        def issue(comm, stream):
            self._exchange(comm, stream, [(a, q) for q, a in enumerate(i)], [(a, q) for q, a in enumerate(o)],
                           datatype)
        return self._launch("alltoall", [*ins, *outs], issue, async_op, list(outs), outs)

    def alltoall_base(self, out, inp, out_splits, in_splits, async_op=False):
        from ._cpu_backend import _splits
        o, a = self._array(out), self._array(inp)
        orow = o.size // out.shape[0] if out.dim() and out.shape[0] else 1
        irow = a.size // inp.shape[0] if inp.dim() and inp.shape[0] else 1
        ocounts = [c * orow for c in _splits(out_splits, out, self._size, "output")]
        icounts = [c * irow for c in _splits(in_splits, inp, self._size, "input")]
        ooff, ioff = np.cumsum([0] + ocounts), np.cumsum([0] + icounts)
        datatype = _DATATYPES[_dtype_name(inp)]

        def issue(comm, stream):
            self._exchange(comm, stream, [(a[ioff[q]:ioff[q + 1]], q) for q in range(self._size)],
                           [(o[ooff[q]:ooff[q + 1]], q) for q in range(self._size)], datatype)
        return self._launch("alltoall_base", [inp, out], issue, async_op, [out], [out])

    def gather(self, outs, inp, root, async_op=False):
        a = self._array(inp)
        o = [self._array(t) for t in outs] if self._rank == root else []
        datatype = _DATATYPES[_dtype_name(inp)]

        def issue(comm, stream):
            if self._rank == root:
                self._exchange(comm, stream, [(a, root)], [(x, q) for q, x in enumerate(o)], datatype)
            else:
                self._exchange(comm, stream, [(a, root)], [], datatype)
        return self._launch("gather", [inp, *outs], issue, async_op, list(outs),
                            list(outs) if self._rank == root else [])

    def scatter(self, out, ins, root, async_op=False):
        o = self._array(out)
        i = [self._array(t) for t in ins] if self._rank == root else []
        datatype = _DATATYPES[_dtype_name(out)]

        def issue(comm, stream):
            self._exchange(comm, stream, [(x, q) for q, x in enumerate(i)], [(o, root)], datatype)
        return self._launch("scatter", [out, *ins], issue, async_op, [out], [out])

    def barrier(self, async_op=False):
        """An all_reduce of one byte on this process's current device; the host waits for it."""
        index = self._used_index if self._used_index is not None else self._cuda.current_index()
        with self._cuda.use(index):
            token = ember.zeros(1, dtype=ember.uint8, device=self._cuda.device(index))
        a = self._array(token)

        def issue(comm, stream):
            comm.allReduce(_ptr(a), _ptr(a), 1, _DATATYPES["uint8"], _SUM, stream)
        return self._launch("barrier", [token], issue, async_op, [], host_wait=True)

    # ---- point to point (on the group's communicators; tags are not NCCL's: ignored) --------------------------
    def send(self, tensors, dst, tag, async_op=True):
        t = tensors[0]
        a = self._array(t)

        def issue(comm, stream):
            self._exchange(comm, stream, [(a, dst)], [], _DATATYPES[_dtype_name(t)])
        return self._launch("send", [t], issue, async_op, None)

    def recv(self, tensors, src, tag, async_op=True):
        t = tensors[0]
        a = self._array(t)

        def issue(comm, stream):
            self._exchange(comm, stream, [], [(a, src)], _DATATYPES[_dtype_name(t)])
        return self._launch("recv", [t], issue, async_op, None, [t])

    def recv_anysource(self, tensors, tag, async_op=True):
        raise RuntimeError("ProcessGroupNCCL does not support recv from any source: name the sending rank")

    # ---- shutting down ----------------------------------------------------------------------------------------
    def shutdown(self):
        """Wait for the calls issued, then destroy the communicators."""
        for work in self._pending:
            while not work._finished():
                time.sleep(0.0002)
        self._close(abort=False)

    def abort(self):
        """Abort the communicators at once (pending calls fail)."""
        self._close(abort=True)

    def _close(self, abort):
        self._closed = True
        error = DistBackendError(f"[Rank {self._rank}] the NCCL process group was destroyed or aborted")
        with self._watch_lock:
            watched = [w for w, _ in self._watched]
        for work in watched:
            if abort or not work._finished():
                work._fail(error)
        for comm in self._comms.values():
            comm.nccl.abort() if abort else comm.nccl.destroy()
        self._comms.clear()
        self._pending = []

