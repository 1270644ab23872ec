"""The CPU backend (what "gloo" and "cpu" select): collectives on host memory, gloo's rules and errors.

One backend serves one process group. Its collectives run in issue order: a synchronous call runs on the calling
thread when nothing is queued (no hand-off: small collectives stay fast), anything else goes to the group's
communication thread, which runs the queue in order and completes each call's ``Work``. The work itself is done by
an engine: the shared-memory arena when every rank of the group shares this host (``_shm_engine``), else
messages over the transport (``_p2p_engine``); point-to-point calls always use the transport.

Tensors are exchanged as their host arrays: non-contiguous ones through a contiguous copy, CuPy ones staged
through host memory (as gloo does), written back when the call completes. Every call carries a descriptor of
itself (kind, dtype, sizes, root, reduction; with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` the shapes and a sequence
number too, torch's fingerprint) that all ranks compare before moving data, so ranks that disagree raise the same
error. A peer that is gone, a timeout or an internal failure leaves the group broken: every later call raises
the same error, as gloo's closed pairs do.
"""
import collections
import datetime
import os
import sys
import threading
import time

import numpy as np

from . import _transport
from ._errors import DistBackendError
from ._p2p_engine import P2PEngine
from ._reduce_op import RedOpType, Reducer
from ._shm_engine import MismatchError, ShmEngine
from ._work import Work

_TORCH_DTYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_INTEGRAL = {"int64", "int32", "int16", "int8", "uint8", "bool"}


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "").replace("ember.", "")


def _seconds(timeout):
    if timeout is None:
        return 1800.0
    return timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)


class _Host:
    """A tensor's data as a flat contiguous host array, and how to write it back when it was staged."""

    __slots__ = ("tensor", "array", "_staged")

    def __init__(self, tensor):
        a = tensor._data
        self.tensor = tensor
        if type(a) is not np.ndarray:  # CuPy: through host memory
            self._staged = a
            a = a.get()
        elif not a.flags.c_contiguous:
            self._staged = a
            a = np.ascontiguousarray(a)
        else:
            self._staged = None
        self.array = a.reshape(-1)

    def written(self):
        """The call wrote the array: copy it back if staged; bump the tensor's version."""
        s = self._staged
        if s is not None:
            if type(s) is np.ndarray:
                np.copyto(s, self.array.reshape(s.shape))
            elif s.flags.c_contiguous:  # CuPy: host to device
                s.set(self.array.reshape(s.shape))
            else:
                import cupy
                s[...] = cupy.asarray(self.array.reshape(s.shape))
        self.tensor._bump()


class _Late(Exception):
    """An error to report once the call has run to its end on every rank (the group stays usable)."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class CPUBackend:
    """The backend of one group: ``rank`` of ``size``, connected through ``store`` (private to the group)."""

    def __init__(self, store, rank, size, timeout=None, global_ranks=None, group_name=""):
        self._rank, self._size = rank, size
        self.timeout = _seconds(timeout)
        self.group_name = group_name
        self.global_ranks = list(global_ranks) if global_ranks is not None else list(range(size))
        from . import distributed_c10d
        self._c10d = distributed_c10d
        self._detail_env = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
        label = f" (group {group_name})" if group_name else ""
        self.transport = _transport.Transport(store, rank, size, label=label)
        self.p2p = P2PEngine(self.transport, rank, size)
        all_local = len(self.transport.local_peers) == size - 1 and size > 1
        store.set(f"local/{rank}", b"1" if all_local else b"0")
        use_shm = all(store.get(f"local/{q}") == b"1" for q in range(size)) and size > 1
        self.engine = ShmEngine(store, rank, size, self._check_peers) if use_shm else self.p2p
        self._seq = 0
        self._collectives = _Stream(f"ember-dist-comm {group_name}", self._execute)
        self._receives = _Stream(f"ember-dist-recv {group_name}", self._execute)
        self._error = None
        self._closed = False

    # ---- torch's ProcessGroup-like identity ------------------------------------------------------------
    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return "gloo"

    def _check_peers(self, q):
        """Raise if rank ``q`` (awaited) is gone, or any rank failed (the collective cannot end without it; a rank
        that closed cleanly had finished its part)."""
        t = self.transport
        t.poll()
        err = t.peer_error(q)
        if err is not None:
            raise err
        failed = t.failed()
        if failed:
            raise failed[min(failed)]
        if self._closed:
            raise DistBackendError(f"[Rank {self._rank}] the process group was destroyed during the call")

    # ---- running calls in order --------------------------------------------------------------------------
    def _submit(self, name, fn, outputs, async_op, written=(), stream=None):
        """Run ``fn()`` in issue order on ``stream`` (default: the collectives'); ``written``: the _Host objects
        it writes (copied back and bumped when it completes). Synchronous calls raise their error."""
        work = Work(name, outputs, self._rank)
        if self._error is not None or self._closed:
            work._complete(self._broken_error())
        else:
            work._stream = stream or self._collectives
            work._stream.submit(work, name, fn, written, async_op)
        if not async_op:
            work.wait()
        return work

    def _execute(self, work, name, fn, written, stream):
        if self._error is not None:
            work._complete(self._broken_error())
            return
        deadline = time.monotonic() + self.timeout
        if stream is self._collectives:
            self.engine.deadline = self.p2p.deadline = deadline
        try:
            result = fn(deadline)
            for h in written:
                h.written()
            if isinstance(result, int):
                work._source = result
            elif isinstance(result, list):
                work._sents, work._deadline = result, deadline
            work._complete()
        except (MismatchError, _Late) as e:  # every rank saw it alike: the group stays usable
            work._complete(e.error if isinstance(e, _Late) else e)
        except _transport.PeerError as e:
            self._error = e
            work._complete(e)
        except TimeoutError as e:
            self._error = DistBackendError(f"[Rank {self._rank}] {name}: timed out after "
                                           f"{int(self.timeout * 1000)}ms {e} (the process group's timeout)")
            work._complete(self._error)
        except BaseException as e:  # noqa: BLE001 - the ranks may now disagree about the protocol's state
            self._error = e
            work._complete(e)

    def _broken_error(self):
        if self._closed:
            return DistBackendError(f"[Rank {self._rank}] the process group has been destroyed or aborted")
        return DistBackendError(str(self._error))

    def shutdown(self):
        """Finish the queued collectives (receives still waiting for a sender fail), say goodbye to the peers and
        release the sockets and shared memory."""
        self._collectives.close(fail=None)
        self._closed = True
        self._receives.close(fail=self._broken_error())
        self._close()

    def abort(self):
        """Fail the queued calls and close at once."""
        self._closed = True
        err = self._broken_error()
        self._collectives.close(fail=err)
        self._receives.close(fail=err)
        self._close()

    def _close(self):
        self.transport.close(str(self._error) if self._error is not None else None)
        if self.engine is not self.p2p:
            self.engine.close()

    # ---- descriptors -------------------------------------------------------------------------------------
    def _sig(self, op_type, tensors, *extra):
        """The call's descriptor: compared across ranks before any data moves."""
        seq, self._seq = self._seq, self._seq + 1
        detail = self._detail_env or self._c10d.get_debug_level() == self._c10d.DebugLevel.DETAIL
        dtypes = tuple(_TORCH_DTYPE.get(_dtype_name(t), _dtype_name(t)) for t in tensors)
        shapes = tuple(list(t.shape) if detail else [t.numel()] for t in tensors)
        devices = tuple(sys.intern(str(t.device)) for t in tensors) if detail else None  # (pickled once)
        return (op_type, dtypes, shapes, extra, seq if detail else None, devices)

    def _mismatch(self, sigs, q):
        me = self._rank
        other = q if sigs[me] == sigs[0] else 0
        mine, theirs = sigs[me], sigs[other]
        diffs = []
        for label, i in (("Op type", 0), ("Tensor dtypes", 1), ("Tensor shapes", 2),
                         ("Arguments", 3), ("Sequence number", 4), ("Tensor device types", 5)):
            if mine[i] != theirs[i]:
                diffs.append(f"{label}: {_fmt(mine[i])} vs {_fmt(theirs[i])}")
        return MismatchError(
            f"Detected mismatch between collectives on ranks. Rank {me} is running collective: "
            f"{self._fingerprint(mine)}, but Rank {other} is running collective: {self._fingerprint(theirs)}. "
            f"Collectives differ in the following aspects: {'; '.join(diffs)}")

    def _fingerprint(self, sig):
        op_type, dtypes, shapes, extra, seq, devices = sig
        if seq is not None:  # TORCH_DISTRIBUTED_DEBUG=DETAIL: PyTorch's fingerprint (arguments: in the summary)
            parts = [f"SequenceNumber={seq}", f"OpType={op_type}"] + [
                f"TensorShape={_fmt(shape)}, TensorDtypes={dtype}, TensorDeviceTypes=TensorOptions(dtype=float "
                f"(default), device={device}, layout=Strided (default), requires_grad=false (default), "
                "pinned_memory=false (default), memory_format=(nullopt))"
                for shape, dtype, device in zip(shapes, dtypes, devices)]
        else:
            parts = [f"OpType={op_type}", f"TensorNumel={_fmt(shapes)}", f"TensorDtypes={', '.join(dtypes)}"]
            if extra:
                parts.append(f"Arguments={_fmt(extra)}")
        return f"CollectiveFingerPrint({', '.join(parts)})"

    # ---- collectives (group ranks; tensors already checked by the public functions) ------------------------
    def _reducer(self, op, tensor):
        """The Reducer of ``op`` for ``tensor``'s dtype, and the error to raise once the call is done (gloo's
        integer AVG divides in place after summing, and fails)."""
        dtype_name = _dtype_name(tensor)
        size = self._size
        if op == RedOpType.PREMUL_SUM:
            raise RuntimeError("Cannot use ReduceOp.PREMUL_SUM with Gloo")
        if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and dtype_name not in _INTEGRAL:
            raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
        dtype = tensor._data.dtype
        if op == RedOpType.AVG and dtype_name in _INTEGRAL:
            return Reducer(RedOpType.SUM, dtype, size), RuntimeError(
                f"result type Float can't be cast to the desired output type {_TORCH_DTYPE[dtype_name]}")
        return Reducer(op, dtype, size), None

    def allreduce(self, tensors, op, async_op=False):
        name = "allreduce"
        reducer, late = self._reducer(op, tensors[0])
        hosts = [_Host(t) for t in tensors]
        sig = self._sig("ALLREDUCE", tensors, op.name)
        if len(hosts) == 1:
            arr = hosts[0].array
        else:  # coalesced: one flat buffer
            arr = np.concatenate([h.array for h in hosts])

        def run(deadline):
            self.engine.all_reduce(arr, reducer, sig, self._mismatch)
            if len(hosts) > 1:
                lo = 0
                for h in hosts:
                    h.array[...] = arr[lo:lo + h.array.size]
                    lo += h.array.size
            if late is not None:
                for h in hosts:
                    h.written()
                raise _Late(late)
        return self._submit(name, run, list(tensors), async_op, hosts)

    def broadcast(self, tensors, root, async_op=False):
        if not 0 <= root < self._size:
            raise RuntimeError(f"ProcessGroupGloo::broadcast: invalid root rank: {root}")
        h = _Host(tensors[0])
        sig = self._sig("BROADCAST", tensors, root)
        return self._submit("broadcast", lambda d: self.engine.broadcast(h.array, root, sig, self._mismatch),
                            list(tensors), async_op, [h] if self._rank != root else [])

    def reduce(self, tensors, root, op, async_op=False):
        if not 0 <= root < self._size:
            raise RuntimeError(f"ProcessGroupGloo::reduce: invalid root rank: {root}")
        reducer, late = self._reducer(op, tensors[0])
        h = _Host(tensors[0])
        sig = self._sig("REDUCE", tensors, root, op.name)

        def run(deadline):
            self.engine.all_reduce(h.array, reducer, sig, self._mismatch, root=root)
            if late is not None:
                h.written()
                raise _Late(late)
        return self._submit("reduce", run, list(tensors), async_op, [h] if self._rank == root else [])

    def allgather(self, output_lists, inputs, async_op=False):
        outs, inp = output_lists[0], inputs[0]
        if len(outs) != self._size:
            raise RuntimeError(f"ProcessGroupGloo::allgather: invalid output tensor list at index 0 (expected "
                               f"length {self._size}, got {len(outs)})")
        for i, o in enumerate(outs):
            if tuple(o.shape) != tuple(inp.shape):
                raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor size at index {i} (expected "
                                   f"({_dims(inp.shape)}), got ({_dims(o.shape)}))")
        hin = _Host(inp)
        houts = [_Host(o) for o in outs]
        sig = self._sig("ALLGATHER", [inp])

        def run(deadline):
            self.engine.all_gather([h.array.view(np.uint8) for h in houts], hin.array, sig, self._mismatch)
        return self._submit("allgather", run, list(outs), async_op, houts)

    def allgather_into_tensor(self, output, inp, async_op=False):
        if output.numel() != inp.numel() * self._size:
            raise ValueError("output tensor size must be equal to world_size times input tensor size")
        if output.dim() != inp.dim() and not (output.dim() == 1 and inp.dim() <= 1):
            raise RuntimeError(f"ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected "
                               f"({_dims(inp.shape)}), got ({_dims(output.shape[1:])}))")
        hout, hin = _Host(output), _Host(inp)
        n = hin.array.nbytes
        sig = self._sig("_ALLGATHER_BASE", [inp])

        def run(deadline):
            flat = hout.array.view(np.uint8)
            self.engine.all_gather([flat[q * n:(q + 1) * n] for q in range(self._size)], hin.array, sig,
                                   self._mismatch)
        return self._submit("allgather", run, list(output.chunk(self._size)), async_op, [hout])

    def gather(self, outs, inp, root, async_op=False):
        hin = _Host(inp)
        houts = [_Host(o) for o in outs] if self._rank == root else []
        if self._rank == root:
            for i, o in enumerate(outs):
                if tuple(o.shape) != tuple(inp.shape):
                    raise RuntimeError(f"ProcessGroupGloo::gather: invalid tensor size at index {i} (expected "
                                       f"({_dims(inp.shape)}), got ({_dims(o.shape)}))")
        sig = self._sig("GATHER", [inp], root)

        def run(deadline):
            arrays = [h.array.view(np.uint8) for h in houts] if houts else None
            self.engine.all_gather(arrays, hin.array, sig, self._mismatch, root=root)
        return self._submit("gather", run, list(outs), async_op, houts)

    def scatter(self, out, ins, root, async_op=False):
        hout = _Host(out)
        hins = [_Host(t) for t in ins] if self._rank == root else []
        if self._rank == root:
            for i, t in enumerate(ins):
                if tuple(t.shape) != tuple(out.shape):
                    raise RuntimeError(f"ProcessGroupGloo::scatter: invalid tensor size at index {i} (expected "
                                       f"({_dims(out.shape)}), got ({_dims(t.shape)}))")
        sig = self._sig("SCATTER", [out], root)

        def run(deadline):
            arrays = [h.array.view(np.uint8) for h in hins] if hins else None
            self.engine.scatter(hout.array, arrays, root, sig, self._mismatch)
        return self._submit("scatter", run, [out], async_op, [hout])

    def reduce_scatter(self, out, ins, op, async_op=False):
        reducer, late = self._reducer(op, out)
        hout = _Host(out)
        hins = [_Host(t) for t in ins]
        sig = self._sig("REDUCE_SCATTER", ins, op.name)

        def run(deadline):
            self.engine.reduce_scatter(hout.array, [h.array for h in hins], reducer, sig, self._mismatch)
            if late is not None:
                hout.written()
                raise _Late(late)
        return self._submit("reduce_scatter", run, None, async_op, [hout])

    def reduce_scatter_tensor(self, out, inp, op, async_op=False):
        if inp.numel() != out.numel() * self._size:
            raise ValueError("input tensor must be the same size as output size times world size")
        if inp.dim() != 1 and inp.dim() == out.dim():
            raise RuntimeError(f"ProcessGroupGloo::reduce_scatter_tensor: the input must be flat or stack the "
                               f"outputs along its first dimension (got input {_dims(inp.shape)} and output "
                               f"{_dims(out.shape)})")
        reducer, late = self._reducer(op, out)
        hout, hin = _Host(out), _Host(inp)
        n = hout.array.size
        sig = self._sig("_REDUCE_SCATTER_BASE", [inp], op.name)

        def run(deadline):
            ins = [hin.array[q * n:(q + 1) * n] for q in range(self._size)]
            self.engine.reduce_scatter(hout.array, ins, reducer, sig, self._mismatch)
            if late is not None:
                hout.written()
                raise _Late(late)
        return self._submit("reduce_scatter", run, [out], async_op, [hout])

    def alltoall(self, outs, ins, async_op=False):
        ref = ins[0].shape if ins else outs[0].shape
        for label, ts in (("", ins), ("", outs)):
            for i, t in enumerate(ts):
                if tuple(t.shape) != tuple(ref):
                    raise RuntimeError(f"ProcessGroupGloo::alltoall: invalid tensor size at index {i} (expected "
                                       f"({_dims(ref)}), got ({_dims(t.shape)})){label}")
        houts, hins = [_Host(t) for t in outs], [_Host(t) for t in ins]
        sig = self._sig("ALLTOALL", ins[:1])

        def run(deadline):
            self.engine.all_to_all([h.array.view(np.uint8) for h in houts], [h.array.view(np.uint8) for h in hins],
                                   sig, self._mismatch)
        return self._submit("alltoall", run, list(outs), async_op, houts)

    def alltoall_base(self, out, inp, out_splits, in_splits, async_op=False):
        hout, hin = _Host(out), _Host(inp)
        orow = int(np.prod(out.shape[1:])) if out.dim() > 1 else 1
        irow = int(np.prod(inp.shape[1:])) if inp.dim() > 1 else 1
        in_counts = _splits(in_splits, inp, self._size, "input")
        out_counts = _splits(out_splits, out, self._size, "output")
        ob = hout.array.view(np.uint8)
        ib = hin.array.view(np.uint8)
        item = hin.array.itemsize
        ioff = np.cumsum([0] + [c * irow * item for c in in_counts])
        ooff = np.cumsum([0] + [c * orow * item for c in out_counts])
        sig = self._sig("ALLTOALL_BASE", [], _dtype_name(inp))  # sizes differ by rank: checked pairwise

        def run(deadline):
            self.engine.all_to_all([ob[ooff[q]:ooff[q + 1]] for q in range(self._size)],
                                   [ib[ioff[q]:ioff[q + 1]] for q in range(self._size)], sig, self._mismatch)
        return self._submit("alltoall_base", run, [out], async_op, [hout])

    def barrier(self, async_op=False):
        sig = self._sig("BARRIER", [])
        return self._submit("barrier", lambda d: self.engine.barrier(sig, self._mismatch), [], async_op)

    def monitored_barrier(self, timeout, wait_all_ranks):
        seconds = _seconds(timeout) if timeout is not None else self.timeout
        return self._submit("monitored_barrier", lambda d: self._monitored_barrier(seconds, wait_all_ranks), [],
                            False)

    def _monitored_barrier(self, seconds, wait_all_ranks):
        p2p, t = self.p2p, self.transport
        p2p.seq += 1
        tag = ("monitored_barrier", p2p.seq)
        deadline = time.monotonic() + seconds
        ms = int(seconds * 1000)
        if self._rank == 0:
            missing = []
            for q in range(1, self._size):
                try:
                    t.recv(q, tag, deadline if not missing or wait_all_ranks else time.monotonic()).release()
                except (TimeoutError, _transport.PeerError):
                    missing.append(q)
                    if not wait_all_ranks:
                        break
            arrived = [q for q in range(1, self._size) if q not in missing]
            if missing:
                who = (f"Rank {missing[0]}" if len(missing) == 1 else
                       f"Ranks {', '.join(map(str, missing))}")
                msg = f"[Rank 0]: {who} failed to pass monitoredBarrier in {ms} ms"
                for q in arrived:
                    t.send_obj(q, tag, msg)
                raise DistBackendError(msg)
            for q in arrived:
                t.send_obj(q, tag, None)
            return
        t.send(0, tag).wait(deadline)
        try:
            msg = t.recv_obj(0, tag, deadline + 1.0)
        except TimeoutError:
            raise DistBackendError(f"[Rank {self._rank}]: Rank 0 did not answer the monitoredBarrier in {ms} ms") \
                from None
        if msg is not None:
            raise DistBackendError(f"[Rank {self._rank}]: {msg.split(': ', 1)[1]}")

    # ---- point to point ----------------------------------------------------------------------------------
    # A send hands its pieces to the transport and returns (the Work then waits for them to leave); receives run
    # in the order posted on a stream of their own: neither waits behind a collective, nor a collective behind
    # them (gloo completes them apart from its collectives too).
    def send(self, tensors, dst, tag, async_op=True):
        h = _Host(tensors[0])
        sig = (_dtype_name(tensors[0]), tensors[0].numel())
        work = Work("send", None, self._rank)
        if self._error is not None or self._closed:
            work._complete(self._broken_error())
        else:
            self._execute(work, "send", lambda d: self.p2p.send(h.array, dst, tag, sig), (), None)
        if not async_op:
            work.wait()
        return work

    def recv(self, tensors, src, tag, async_op=True):
        h = _Host(tensors[0])
        sig = (_dtype_name(tensors[0]), tensors[0].numel())
        return self._submit("recv", lambda d: self.p2p.recv(h.array, src, tag, sig, d), None, async_op, [h],
                            self._receives)

    def recv_anysource(self, tensors, tag, async_op=True):
        return self.recv(tensors, None, tag, async_op)


_running = threading.local()  # .stream: the _Stream whose call this thread is running


class _Stream:
    """Calls run one at a time in issue order: a synchronous call on its caller's thread when nothing is queued,
    the others on a thread of the stream's own."""

    def __init__(self, name, execute):
        self.name, self._execute = name, execute
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._thread = None
        self._closed = False

    def submit(self, work, name, fn, written, async_op):
        with self._cond:
            inline = not async_op and not self._queue and not self._busy
            if inline:
                self._busy = True
            else:
                self._queue.append((work, name, fn, written))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, daemon=True, name=self.name)
                    self._thread.start()
                self._cond.notify_all()
        if inline:
            try:
                self._run(work, name, fn, written)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _loop(self):
        while True:
            with self._cond:
                while not self._queue or self._busy:
                    if self._closed and not self._queue:
                        return
                    self._cond.wait(0.5)
                work, name, fn, written = self._queue.popleft()
                self._busy = True
            try:
                self._run(work, name, fn, written)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _run(self, work, name, fn, written):
        outer, _running.stream = getattr(_running, "stream", None), self
        try:
            self._execute(work, name, fn, written, self)
        finally:
            _running.stream = outer

    def runs_here(self):
        """Whether this thread is running one of the stream's calls (e.g. a completion callback of one)."""
        return getattr(_running, "stream", None) is self

    def help_until(self, done):
        """From within one of the stream's calls: run the queued calls, in order, until ``done()``; stop when none is
        left (what ``done`` awaits is then not on this stream)."""
        while not done():
            with self._cond:
                if not self._queue:
                    return
                work, name, fn, written = self._queue.popleft()
            self._run(work, name, fn, written)

    def close(self, fail):
        """Stop taking calls: run what is queued (``fail`` None) or complete it with ``fail``."""
        with self._cond:
            self._closed = True
            if fail is not None:
                pending = list(self._queue)
                self._queue.clear()
            self._cond.notify_all()
            if fail is None:
                while self._queue or self._busy:
                    self._cond.wait(0.1)
        if fail is not None:
            for work, *_ in pending:
                work._complete(fail)


def _fmt(x):
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


def _dims(shape):
    return ", ".join(str(d) for d in shape)


def _splits(splits, t, size, which):
    if splits is None or len(splits) == 0:
        if t.dim() == 0 or t.shape[0] % size:
            raise ValueError(f"Tensor's dim 0 does not divide equally across group size (the {which})")
        return [t.shape[0] // size] * size
    splits = [int(s) for s in splits]
    if len(splits) != size:
        raise ValueError(f"Split sizes doesn't match the number of ranks ({which} splits: {len(splits)}, ranks: "
                         f"{size})")
    if sum(splits) != (t.shape[0] if t.dim() else 1):
        raise ValueError(f"Split sizes doesn't match total dim 0 size (the {which})")
    return splits
