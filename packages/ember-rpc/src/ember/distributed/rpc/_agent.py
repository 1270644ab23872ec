"""The RPC agent: requests and responses between named workers over ember-distributed's transport.

Every message travels under one transport tag as frames ``[header, payload, *buffers]``: the header is a small
pickle ``(kind, request id, meta)`` read by the receiving worker's reader, the payload a protocol-5
pickle whose buffers (tensors' arrays) are frames of their own (shared memory between workers of one host).
The dispatcher thread reads every message, unpickles it (so messages of one peer take effect in the order sent:
an RRef's deletion never overtakes the call that carried it), completes the caller's futures on responses and
hands requests to a pool of ``num_worker_threads`` threads (a thread waiting in ``rpc_sync`` may take the
dispatcher's place meanwhile: one reader at a time, see ``Agent._read_until``). A request whose function returns a
Future (see ``functions.async_execution``) is answered when that future completes, holding no thread meanwhile.

Failures: a call's deadline, the loss of its callee (the transport reports a peer that closed or died within a
fraction of a second, a silent host within seconds) and errors pickling or unpickling either side's message all
complete the caller's future with an error naming the worker; nothing is raised in a background thread.
"""
import collections
import copyreg
import io
import itertools
import pickle
import struct
import threading
import time
import traceback
from _thread import allocate_lock as _allocate_lock
from _thread import get_ident as _get_ident
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ember._serialization import _rebuild_plain
from ember._tensor import Tensor
from ember.distributed._errors import DistBackendError
from ember.distributed._transport import SLOT, SLOTS, Message, PeerError, Transport
from ember.futures import Future

from . import _cpu_latency, _devmap, _rref

TAG = "rpc"
PART_TAG = "rpc-part"
_CALL, _REMOTE, _OK, _ERR, _ONEWAY = range(5)
# A message's first frame: kind, request id and the size of the pickled (meta, parts) that follow when either is
# set (struct, not pickle: the dispatcher reads it for every message), then the payload's pickle.
_HEAD = struct.Struct("<BQI")
_TICK = 0.05  # seconds between the dispatcher's looks at deadlines, lost peers and RRef deletions
PARK = 0.002  # seconds the dispatcher leaves the messages to threads in rpc_sync after one returned (see _read_until)
# Larger buffers to a worker of this host are cut into messages of this size, each through the transport's shared
# memory (a whole message fits in its slots; a larger frame would go through the socket).
INBAND_MAX = 16 << 10  # smaller buffers are copied into the pickle: one message frame less to send and receive
CHUNK = SLOT * SLOTS // 2  # (half the slots: the sender fills one half while the receiver reads the other)


class WorkerInfo:
    """A worker's ``name`` and ``id`` (its rank)."""

    __slots__ = ("name", "id")

    def __init__(self, name, id):  # noqa: A002 - torch's name
        self.name, self.id = name, id

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and (self.name, self.id) == (other.name, other.id)

    def __hash__(self):
        return hash((self.name, self.id))

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, name={self.name})"

    def __reduce__(self):
        return WorkerInfo, (self.name, self.id)


class RemoteError:
    """An exception raised by a callee, as sent back: its type and the message the caller raises it with."""

    __slots__ = ("exc_type", "msg")

    def __init__(self, exc_type, msg):
        self.exc_type, self.msg = exc_type, msg

    def __reduce__(self):
        return RemoteError, (self.exc_type, self.msg)

    def exception(self):
        try:
            exc = self.exc_type(self.msg)
        except BaseException as e:  # noqa: BLE001 - a type that takes other arguments
            exc = RuntimeError(f"Failed to create original exception type. Error msg was {e} Original exception "
                               f"on remote side was {self.msg}")
        exc._ember_remote = self  # passed on as is if it fails another call (to_here of a failed remote)
        return exc


def _remote_error(worker, exc):
    if isinstance(getattr(exc, "_ember_remote", None), RemoteError):
        return exc._ember_remote
    text = f"On {worker}:\n{exc!r}\n{''.join(traceback.format_exception(exc))}"
    exc_type = type(exc)
    try:
        pickle.loads(pickle.dumps(exc_type))
    except Exception:  # noqa: BLE001 - a type the caller could not rebuild
        exc_type = RuntimeError
    return RemoteError(exc_type, text)


def _join(kind, rid, meta, parts, data):
    """One frame: the header (kind, request id, and meta and parts when set) and the payload."""
    if meta is None and parts is None:
        return _HEAD.pack(kind, rid, 0) + data
    extra = pickle.dumps((meta, parts), protocol=5)
    return b"".join((_HEAD.pack(kind, rid, len(extra)), extra, data))


def _nbytes(frame):
    return frame.nbytes if hasattr(frame, "nbytes") else len(frame)


class _Table(dict):
    """The dispatch table of messages' picklers: ``_reduce_tensor`` for tensors; other types as copyreg says (read
    at each lookup: registrations made later count)."""

    def __missing__(self, cls):
        return copyreg.dispatch_table[cls]


def _reduce_tensor(t):
    """A small contiguous CPU tensor of a NumPy number type as its bytes, dtype and shape: pickled in a third of the
    time of the array's own reduction, unpickled in half (10 floats: 1.9 against 5.6 us, 1.7 against 3.1); any
    other tensor as its own ``__reduce_ex__`` says."""
    a = t._data
    if type(a) is np.ndarray and a.nbytes < INBAND_MAX and a.dtype.kind in "biufc" and a.flags.c_contiguous:
        return _rebuild_small, (bytearray(a), a.dtype.str, a.shape, t._rg)
    return t.__reduce_ex__(5)


def _rebuild_small(data, dtype, shape, requires_grad):
    return _rebuild_plain(np.frombuffer(data, dtype).reshape(shape), requires_grad)


_TABLE = _Table({Tensor: _reduce_tensor})


def _dumps(obj, mapping=None):
    """Frames of ``obj``: its pickle, then its large buffers (out of band: never copied into the pickle).
    ``mapping``: (device map, destination name, whether a response), to move CUDA tensors (see ``_devmap``)."""
    buffers = []

    def out_of_band(b):
        raw = b.raw()
        if raw.nbytes < INBAND_MAX:
            return True
        buffers.append(raw)
        return False
    if mapping is not None and _devmap.needed(mapping[0]):
        return [_devmap.dumps(obj, out_of_band, *mapping), *buffers]
    f = io.BytesIO()
    pickler = pickle.Pickler(f, 5, buffer_callback=out_of_band)
    pickler.dispatch_table = _TABLE
    pickler.dump(obj)
    return [f.getvalue(), *buffers]


class _Pending:
    """A call waiting for its response: it completes ``future`` (rpc_async, remote) or hands the result to a caller
    parked on ``lock`` (rpc_sync, to_here: woken directly, no Future). ``dependents``: calls that fail with this
    one (a to_here waiting on the remote that creates the value)."""

    __slots__ = ("future", "lock", "value", "exc", "dst", "deadline", "ms", "dependents", "rid")

    def __init__(self, future, lock, dst, deadline, ms):
        self.future, self.lock, self.dst, self.deadline, self.ms = future, lock, dst, deadline, ms
        self.value = self.exc = self.dependents = self.rid = None


class Agent:
    """One worker's end of RPC: ``name``, ``rank`` among ``world_size`` workers meeting in ``store``."""

    def __init__(self, store, name, rank, world_size, options):
        import ember

        self.rpc_timeout = options.rpc_timeout
        self.rank, self.world_size = rank, world_size
        self.store = store
        store.set(f"names/{rank}", name.encode())
        mine = (ember.cuda.device_count(), {k: {str(a): str(b) for a, b in m.items()} for k, m in
                                            options.device_maps.items()}, [str(d) for d in options.devices])
        store.set(f"devices/{rank}", pickle.dumps(mine))
        # one ZeroMQ io thread: a call's request and its response cross it back to back (about 10% less CPU per call
        # than two on 2 cores); large buffers to workers of this host go through shared memory, not through it
        self.transport = Transport(store, rank, world_size, prefix="transport/", label=f" (rpc worker {name})",
                                   io_threads=1)
        try:  # (keys set before the transport's barrier: all there)
            names = [store.get(f"names/{r}").decode() if r != rank else name for r in range(world_size)]
            got = [pickle.loads(store.get(f"devices/{r}")) if r != rank else mine for r in range(world_size)]
            self._all_read(store, time.monotonic() + max(self.rpc_timeout, 10.0))
        except BaseException:
            self.transport.close("init_rpc failed")
            raise
        self.workers = [WorkerInfo(n, r) for r, n in enumerate(names)]
        self.by_name = {w.name: w for w in self.workers}
        if len(self.by_name) != world_size:
            dup = sorted({n for n in names if names.count(n) > 1})
            self.transport.close("duplicate worker names")
            raise RuntimeError(f"RPC worker names must be unique: {dup} used by more than one worker")
        self.info = self.workers[rank]
        try:
            self._init_device_maps(got)
        except ValueError:
            self.transport.close("invalid device maps")
            raise
        self._ids = itertools.count(1)
        self._part_locks = collections.defaultdict(threading.Lock)
        self._pending = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(options.num_worker_threads, thread_name_prefix=f"ember-rpc-{name}")
        self._serving = collections.Counter()  # caller -> its requests running here or waiting on a future
        self._sent = self._answered = 0  # requests sent, responses sent (counted for graceful shutdown)
        self._gone_seen = set()
        self._stop = False
        self.owner_table = _rref.OwnerTable(self)
        self.closed = threading.Event()
        self._awake = _cpu_latency.Holder()  # CPUs kept from deep idle while messages flow
        # One thread at a time reads and dispatches messages (in order): the holder of _role, the dispatcher or a
        # thread waiting in call_sync (_reader); the dispatcher stays off until _park_until (see _read_until).
        self._role = threading.Lock()
        self._reader = None
        self._park_until = 0.0
        self._unpark = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"ember-rpc-dispatch-{name}")

    def _all_read(self, store, deadline):
        """Return once every worker has read the others' names and devices: the store lives in rank 0, which may
        close it at once if the checks that follow fail (the others would then fail reading, not checking)."""
        store.add("init/read", 1)
        if self.rank == 0:
            while store.add("init/read", 0) < self.world_size and time.monotonic() < deadline:
                time.sleep(0.002)

    def _init_device_maps(self, got):
        """Check every worker's devices and maps (``got``: by rank, as published; PyTorch's init_rpc checks), and
        keep the maps of requests to each worker and the inverse maps of responses to each caller (by rank)."""
        names = [w.name for w in self.workers]
        got = dict(zip(names, got))
        dev = _devmap._device
        counts = {n: g[0] for n, g in got.items()}
        maps = {n: {k: {dev(a): dev(b) for a, b in m.items()} for k, m in g[1].items()} for n, g in got.items()}
        devices = {n: [dev(d) for d in g[2]] for n, g in got.items()}
        _devmap.check_all(names, counts, maps, devices)
        back = _devmap.reverse_maps(self.info.name, maps)
        self.devices = _devmap.device_list(devices[self.info.name], maps[self.info.name], back)
        self._request_maps = [(maps[self.info.name].get(w.name), w.name, False) for w in self.workers]
        self._response_maps = [(back.get(w.name), w.name, True) for w in self.workers]

    def start(self):
        """Start serving (once the agent is the process's current one: requests may use the RPC API)."""
        self._thread.start()

    # ---- calling -------------------------------------------------------------------------------------------
    def worker(self, to):
        """The WorkerInfo of ``to`` (a name, a rank or a WorkerInfo)."""
        if isinstance(to, WorkerInfo):
            return to
        if isinstance(to, str):
            w = self.by_name.get(to)
            if w is None:
                raise RuntimeError(f"Unknown destination worker {to}")
            return w
        if isinstance(to, int) and 0 <= to < self.world_size:
            return self.workers[to]
        raise RuntimeError(f"Unknown destination worker {to!r}")

    def call(self, to, kind, payload, timeout, meta=None):
        """Send a request; its Future (the callee's result, or its error)."""
        return self.call_with_id(self.worker(to).id, kind, payload, timeout, meta)[0]

    def call_with_id(self, dst, kind, payload, timeout, meta=None):
        """``call`` to rank ``dst``; the Future and the request's id (for ``call_sync``'s ``after``)."""
        fut = Future()
        return fut, self._request(dst, kind, payload, timeout, meta, fut, None).rid

    def call_sync(self, dst, kind, payload, timeout, meta=None, after=None):
        """Send a request to rank ``dst`` and wait for its result (raise its error). ``after``: the request id of
        a pending call whose failure fails this one too."""
        lock = _allocate_lock()
        lock.acquire()
        p = self._request(dst, kind, payload, timeout, meta, None, lock, after)
        if dst != self.rank:
            self._read_until(lock)
        lock.acquire()  # released by whoever completes the call: its response, its deadline, a lost peer, shutdown
        if p.exc is not None:
            raise p.exc
        return p.value

    def _read_until(self, lock):
        """Read and dispatch messages in this thread until ``lock`` is released (the call is complete), if no other
        thread reads them: the response then wakes this thread directly, not the dispatcher, which would hand it
        over. A thread completing a synchronous call keeps the dispatcher off the messages for ``PARK`` seconds
        (``_settle``), so that a caller making one call after another reads its responses itself."""
        me = _get_ident()
        own = self._reader != me  # (else: a call made while this thread dispatches, e.g. by an inline function)
        if own:
            if not self._role.acquire(False):
                return
            self._reader = me
        recv, deadline = self.transport.recv, time.monotonic
        try:
            while not lock.acquire(False):
                try:
                    msg = recv(None, TAG, deadline() + _TICK)
                except TimeoutError:
                    continue
                except DistBackendError:  # every peer gone, or the transport closed: the dispatcher settles
                    return
                try:
                    self._dispatch(msg)
                except Exception:  # noqa: BLE001 - as in the dispatcher
                    traceback.print_exc()
            lock.release()  # (acquired above: the caller acquires it again)
        finally:
            if own:
                self._reader = None
                self._role.release()

    def _request(self, dst, kind, payload, timeout, meta, fut, lock, after=None):
        try:  # an unpicklable request raises here, in the caller
            frames = _dumps_to(payload, dst, self._request_maps[dst])
        except _devmap.DeviceMapError as e:
            raise RuntimeError(str(e)) from None
        timeout = self.rpc_timeout if timeout is None or timeout < 0 else timeout
        p = _Pending(fut, lock, dst, time.monotonic() + timeout if timeout > 0 else None, int(timeout * 1000))
        with self._lock:
            if self._stop:
                raise RuntimeError("RPC has not been initialized or has been shut down")
            p.rid = rid = next(self._ids)
            self._pending[rid] = p
            self._sent += 1
            first = self._pending.get(after) if after is not None else None
            if first is not None:
                if first.dependents is None:
                    first.dependents = []
                first.dependents.append(rid)
        self._awake.touch()
        try:
            self._post(dst, kind, rid, meta, frames)
        except (PeerError, DistBackendError) as e:
            self._fail(rid, self._lost(dst, e))
        return p

    def oneway(self, dst, payload):
        """A message run by ``dst``'s dispatcher with no answer (RRef bookkeeping); lost if ``dst`` is gone."""
        try:
            self._post(dst, _ONEWAY, 0, None, _dumps(payload))
        except (PeerError, DistBackendError):
            pass

    def _lost(self, dst, err):
        w = self.workers[dst]
        return RuntimeError(f"RPC to worker {w.name} (rank {w.id}) failed: the worker is gone ({err})")

    def _fail(self, rid, exc):
        with self._lock:
            p = self._pending.pop(rid, None)
        if p is not None:
            self._settle(p, None, exc)

    def _settle(self, p, value, exc):
        """Complete the call ``p`` (popped from the pending table: once)."""
        if p.lock is not None:
            p.value, p.exc = value, exc
            self._park_until = time.monotonic() + PARK
            p.lock.release()
        else:
            self._complete(p.future, value, exc)
        if exc is not None and p.dependents:
            for rid in p.dependents:
                self._fail(rid, exc)

    def _complete(self, fut, value, exc):
        if fut._has_callbacks():  # user callbacks may wait on other calls: never on the dispatcher
            self._pool.submit(_settle, fut, value, exc)
        else:
            _settle(fut, value, exc)

    # ---- the dispatcher ------------------------------------------------------------------------------------
    def _loop(self):
        recv, dispatch, role = self.transport.recv, self._dispatch, self._role
        monotonic = time.monotonic
        last = monotonic()
        while not self._stop:
            park = self._park_until - monotonic()
            if park > 0:  # a thread in call_sync reads the messages
                self._unpark.wait(min(park, _TICK))
            elif role.acquire(timeout=_TICK):
                try:
                    msg = recv(None, TAG, last + _TICK) if self._park_until <= monotonic() else None
                except TimeoutError:
                    msg = None
                except PeerError:  # every peer is gone: nothing more can arrive
                    msg = None
                    self._unpark.wait(_TICK)
                except DistBackendError:  # the transport closed
                    role.release()
                    break
                else:
                    if msg is not None and not self._stop:
                        try:
                            dispatch(msg)
                        except Exception:  # noqa: BLE001 - a malformed message must not stop the agent
                            traceback.print_exc()
                role.release()
            now = monotonic()
            if now - last >= _TICK:
                last = now
                self._housekeeping(now)
        self.closed.set()

    def _post(self, dst, kind, rid, meta, frames):
        """Send a message (``frames``: the payload's pickle and its buffers); buffers larger than ``CHUNK`` to a
        worker of this host follow in pieces, as messages of their own under ``PART_TAG`` (one such message at a
        time per destination: the receiver reads the pieces in the order of the messages)."""
        if dst == self.rank:  # read at once, in this thread: the dispatcher may be waiting on the sockets
            frames[0] = _join(kind, rid, meta, None, frames[0])
            try:
                self._dispatch(Message(dst, TAG, [bytes(f) for f in frames]))
            except Exception:  # noqa: BLE001 - as in the dispatcher: a malformed message is not the sender's error
                traceback.print_exc()
            return
        if len(frames) == 1 and len(frames[0]) <= CHUNK or dst not in self.transport.local_peers:
            big = None
        else:
            big = [(i, _nbytes(f)) for i, f in enumerate(frames) if _nbytes(f) > CHUNK]
        if not big:
            frames[0] = _join(kind, rid, meta, None, frames[0])
            self.transport.send(dst, TAG, frames)
            return
        with self._part_locks[dst]:
            self.transport.send(dst, TAG, [_join(kind, rid, meta, big, b"" if big[0][0] == 0 else frames[0]),
                                           *(b"" if _nbytes(f) > CHUNK else f for f in frames[1:])])
            for i, n in big:  # (sends of pieces that wait for shared memory queue: this returns at once)
                view = memoryview(frames[i]).cast("B")
                for lo in range(0, n, CHUNK):
                    self.transport.send(dst, PART_TAG, [view[lo:lo + CHUNK]])

    def _receive_parts(self, src, big, frames):
        deadline = time.monotonic() + max(self.rpc_timeout, 10.0)
        for i, n in big:
            buf = np.empty(n, np.uint8)
            lo = 0
            while lo < n:
                m = self.transport.recv(src, PART_TAG, deadline)
                piece = np.frombuffer(m.frames[0], np.uint8)
                buf[lo:lo + len(piece)] = piece
                lo += len(piece)
                m.release()
            frames[i] = buf

    def _dispatch(self, msg):
        self._awake.touch()
        frames = msg.frames
        if msg._releases:  # in shared memory: copied out so the sender may reuse the slots at once
            frames = [np.frombuffer(f, np.uint8).copy() if _nbytes(f) > 4096 else bytes(f) for f in frames]
            msg.release()
        head = frames[0]
        kind, rid, n = _HEAD.unpack_from(head)
        src = msg.src
        if n:
            view = memoryview(head)
            meta, parts = pickle.loads(view[_HEAD.size:_HEAD.size + n])
            frames[0] = view[_HEAD.size + n:]
            if parts is not None:
                try:
                    self._receive_parts(src, parts, frames)
                except (PeerError, TimeoutError, DistBackendError):
                    return  # the sender is gone: its request or response with it
        else:
            meta = None
            frames[0] = memoryview(head)[_HEAD.size:]
        try:
            payload = pickle.loads(frames[0], buffers=frames[1:])
            error = None
        except Exception as e:  # noqa: BLE001 - answered (or reported) as an error
            payload, error = None, e
        if kind == _OK or kind == _ERR:
            with self._lock:
                p = self._pending.pop(rid, None)
            if p is None:
                return  # timed out meanwhile
            if error is not None:
                self._settle(p, None, RuntimeError(
                    f"could not unpickle the response of worker {self.workers[src].name}: "
                    f"{type(error).__name__}: {error}"))
            elif kind == _ERR:
                self._settle(p, None, payload.exception())
            else:
                if meta is not None:
                    payload = _autograd().on_response(src, meta, payload)
                self._settle(p, payload, None)
        elif kind == _ONEWAY:
            if error is None:
                fn, args = payload
                fn(self, src, *args)
        else:
            entry = None
            if kind == _REMOTE:  # (a remote() to this worker itself made its entry already)
                entry = self.owner_table.get(meta[0]) or self.owner_table.create(meta[0], src, meta[1])
            with self._lock:
                self._serving[src] += 1
            if error is not None:
                self._respond(src, rid, None, RuntimeError(
                    f"worker {self.info.name} could not unpickle the request: {type(error).__name__}: {error}"),
                    entry)
            elif _inline(payload[0]):
                self._serve(src, rid, meta, payload, entry)
            else:
                self._pool.submit(self._serve, src, rid, meta, payload, entry)

    def _serve(self, src, rid, meta, payload, entry):
        try:
            fn, args, kwargs = payload
            ctx = None
            if meta is not None and meta[-1] is not None:
                ctx, args, kwargs = _autograd().on_request(src, meta[-1], args, kwargs)
            if ctx is not None:
                with _autograd()._entered(ctx):
                    result = fn(*args, **kwargs)
            else:
                result = fn(*args, **kwargs)
            if _is_async(fn):
                if not isinstance(result, Future):
                    raise TypeError(f"an async_execution function must return a Future, got {type(result).__name__}")
                result.add_done_callback(lambda f: self._finish(src, rid, f, entry, ctx))
                return
        except BaseException as e:  # noqa: BLE001 - sent back to the caller
            self._respond(src, rid, None, _remote_error(self.info, e), entry)
            return
        self._respond(src, rid, result, None, entry, ctx)

    def _finish(self, src, rid, fut, entry, ctx):
        try:
            value = fut.wait()
        except BaseException as e:  # noqa: BLE001
            self._respond(src, rid, None, _remote_error(self.info, e), entry)
            return
        self._respond(src, rid, value, None, entry, ctx)

    def _respond(self, src, rid, value, error, entry=None, ctx=None):
        meta = None
        if entry is not None:  # a remote(): the value stays here, the creator is told it exists
            entry.settle(value, error)
            value = None
        elif ctx is not None and error is None:
            meta, value = _autograd().on_reply(src, ctx, value)
        if error is not None:
            kind, payload = _ERR, error if isinstance(error, RemoteError) else _remote_error(self.info, error)
        else:
            kind, payload = _OK, value
        try:
            frames = _dumps_to(payload, src, self._response_maps[src])
        except _devmap.DeviceMapError as e:  # PyTorch's error for a tensor on a device without a map
            kind, meta = _ERR, None
            frames = _dumps(RemoteError(RuntimeError, str(e)))
        except Exception as e:  # noqa: BLE001 - told to the caller instead
            kind, meta = _ERR, None
            frames = _dumps(RemoteError(RuntimeError, f"On {self.info}:\ncould not pickle the result: "
                                                      f"{type(e).__name__}: {e}"))
        try:
            self._post(src, kind, rid, meta, frames)
        except (PeerError, DistBackendError):
            pass  # the caller is gone
        with self._lock:
            self._serving[src] -= 1
            self._answered += 1

    def _housekeeping(self, now):
        gone = self.transport.gone() if not self._stop else {}
        expired = []
        with self._lock:
            for rid, p in self._pending.items():
                if p.dst in gone:
                    expired.append((rid, self._lost(p.dst, gone[p.dst])))
                elif p.deadline is not None and now > p.deadline:
                    expired.append((rid, RuntimeError(f"RPC ran for more than set timeout ({p.ms} ms) and will now "
                                                      "be marked with an error")))
            expired = [(self._pending.pop(rid), exc) for rid, exc in expired]
        for p, exc in expired:
            self._settle(p, None, exc)
        for peer in gone:
            if peer not in self._gone_seen:
                self._gone_seen.add(peer)
                self.owner_table.peer_gone(peer)
        self.owner_table.flush_deletes()
        self._awake.check(now)

    # ---- shutting down -------------------------------------------------------------------------------------
    def idle(self):
        """No call of this worker outstanding, no request of a live worker unanswered."""
        gone = self.transport.gone()
        with self._lock:
            return not self._pending and not any(n for src, n in self._serving.items() if src not in gone)

    def counters(self):
        with self._lock:
            return self._sent, self._answered

    def shutdown(self, graceful=True, timeout=None):
        """Graceful: wait until no worker has work left (rounds of counters in the store, lost workers
        excepted), then close. Returns within ``timeout`` (default: the RPC timeout) whatever the peers do."""
        if graceful:
            deadline = time.monotonic() + (self.rpc_timeout if timeout is None else timeout)
            try:
                self.owner_table.flush_deletes()  # (references still held stay valid: work may yet use them)
                self._drain(deadline)
            except Exception:  # noqa: BLE001 - a lost store or peer: close anyway
                pass
        with self._lock:
            self._stop = True
            pending, self._pending = self._pending, {}
        self._unpark.set()
        err = RuntimeError("RPC agent is shut down")
        for p in pending.values():
            self._settle(p, None, err)
        self.closed.wait(1.0)
        self._awake.close()
        self.transport.close()
        self._pool.shutdown(wait=False, cancel_futures=True)  # what runs still is for callers that are gone
        self.owner_table.clear()

    def _drain(self, deadline):
        store, previous = self.store, None
        for rnd in itertools.count():
            pause = _pauses()
            while not self.idle():
                if time.monotonic() > deadline:
                    return
                time.sleep(next(pause))
            store.set(f"shutdown/{rnd}/{self.rank}", pickle.dumps(self.counters()))
            seen = {}
            for r in range(self.world_size):
                key = f"shutdown/{rnd}/{r}"
                pause = _pauses()
                while r not in seen:
                    if r in self.transport.gone() or time.monotonic() > deadline:
                        seen[r] = None
                    elif store.check([key]):
                        seen[r] = pickle.loads(store.get(key))
                    else:
                        time.sleep(next(pause))
            if seen == previous and self.idle():
                break
            previous = seen
        # the store lives in rank 0: it waits until every live worker has read the last round
        store.add("shutdown/done", 1)
        if self.rank == 0:
            live = self.world_size - len(self.transport.gone())
            pause = _pauses()
            while store.add("shutdown/done", 0) < live and time.monotonic() < deadline:
                time.sleep(next(pause))
                live = self.world_size - len(self.transport.gone())


def _pauses(first=0.002, longest=0.02):
    """Sleeps between looks at a condition, doubling from ``first`` to ``longest`` seconds: a worker that shuts
    down while others still call it (or each other) polls its state and the store without stealing much CPU."""
    pause = first
    while True:
        yield pause
        pause = min(2 * pause, longest)


def _settle(fut, value, exc):
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


def _inline(fn):
    """Whether the dispatcher runs ``fn`` itself: ember's operators (they never wait on other workers) and the
    agent's own quick functions; anything else runs on the pool."""
    return getattr(fn, "__module__", None) == "ember" or getattr(fn, "_rpc_inline", False)


def _is_async(fn):
    return getattr(fn, "_wrapped_async_rpc_function", None) is not None


def _dumps_to(obj, dst, mapping):
    """Pickle for worker ``dst`` (RRefs pickled into the message fork for it; tensors move by ``mapping``)."""
    _rref.SER.dst = dst
    try:
        return _dumps(obj, mapping)
    finally:
        _rref.SER.dst = None


def _autograd():
    from ember.distributed.autograd import _context

    return _context

