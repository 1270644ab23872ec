"""Key-value stores through which the processes of a job meet, with torch.distributed's methods and errors.

``HashStore`` lives in one process (shared by its threads), ``FileStore`` in a file every process can open,
``TCPStore`` in a server thread of one process (the master) with clients anywhere, and ``PrefixStore`` is a
namespace inside another store. Keys are str; values are bytes (str values are stored UTF-8 encoded). A read of a
missing key (get, wait, multi_get, a blocking queue_pop) waits for it up to the timeout, then raises what PyTorch
raises: DistStoreError from TCPStore and HashStore, a plain RuntimeError from FileStore.
"""
import errno
import fcntl
import heapq
import marshal
import operator
import os
import re
import selectors
import socket
import struct
import threading
import time
import weakref
from collections import deque
from datetime import timedelta

from ._errors import DistError, DistNetworkError, DistStoreError, QueueEmptyError

_DEFAULT_TIMEOUT = timedelta(seconds=300)
_INT64 = 1 << 63
_LEADING_INT = re.compile(rb"\s*[+-]?\d+")  # what C's strtoll reads, as PyTorch's add parses a stored counter


# ---------------------------------------------------------------------------------------------------------- arguments

def _key(key):
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).decode()
    raise TypeError(f"a store key must be str, not {type(key).__name__}")


def _keys(keys):
    if isinstance(keys, (str, bytes, bytearray)):
        raise TypeError("store keys must be a sequence of str, not a single key")
    return [_key(k) for k in keys]


def _value(value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError:
            raise TypeError("a store value must be str (valid UTF-8) or bytes") from None
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"a store value must be str or bytes, not {type(value).__name__}")


def _amount(value):
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"add(): the amount must be an integer, not {type(value).__name__}") from None
    if not -_INT64 <= value < _INT64:
        raise TypeError("add(): the amount must fit in a signed 64-bit integer")
    return value


def _timedelta(timeout):
    if not isinstance(timeout, timedelta):
        raise TypeError(f"a store timeout must be a datetime.timedelta, not {type(timeout).__name__}")
    return timeout


def _ms(timeout):
    return timeout // timedelta(milliseconds=1)


def _added(key, old, amount):
    """The counter ``key`` (stored value ``old``, None if missing) after adding ``amount``, wrapping as int64."""
    if old is None:
        return amount
    match = _LEADING_INT.match(old)
    if match is None:
        raise ValueError(f"add(): the value of key {key!r} is not an integer: {old[:40]!r}")
    return (int(match.group()) + amount + _INT64) % (2 * _INT64) - _INT64


def _compare_set(current, expected, desired):
    """PyTorch's compare_set of a key holding ``current`` (None: missing): (whether to store ``desired``, the value
    returned). A missing key is created only when ``expected`` is empty; else the call returns ``expected``."""
    if current is None:
        return (True, desired) if not expected else (False, expected)
    return (True, desired) if current == expected else (False, current)


class _Deadline:
    """A wait's end on the monotonic clock; a zero timeout means no limit (HashStore's and FileStore's rule)."""
    __slots__ = ("end",)

    def __init__(self, timeout):
        seconds = timeout.total_seconds()
        self.end = None if seconds == 0 else time.monotonic() + seconds

    def remaining(self):
        return None if self.end is None else self.end - time.monotonic()


# ------------------------------------------------------------------------------------------------------------- Store

class Store:
    """Base class of the stores. A subclass implements set, get, add, compare_set, check, wait, delete_key and
    num_keys; multi_get, multi_set, append and barrier have generic versions built on those."""

    _timeout = _DEFAULT_TIMEOUT

    def __init__(self):
        self._timeout = _DEFAULT_TIMEOUT

    @property
    def timeout(self):
        """The default timeout of the store's blocking operations (a timedelta)."""
        return self._timeout

    def set_timeout(self, timeout):
        self._timeout = _timedelta(timeout)

    def _missing(self, name):
        return NotImplementedError(f"{type(self).__name__}.{name} is not implemented")

    def set(self, key, value):
        raise self._missing("set")

    def get(self, key):
        raise self._missing("get")

    def add(self, key, amount):
        raise self._missing("add")

    def compare_set(self, key, expected_value, desired_value):
        raise self._missing("compare_set")

    def check(self, keys):
        raise self._missing("check")

    def wait(self, keys, timeout=None):
        raise self._missing("wait")

    def delete_key(self, key):
        raise self._missing("delete_key")

    def num_keys(self):
        raise self._missing("num_keys")

    def list_keys(self):
        raise self._missing("list_keys")

    def clone(self):
        raise self._missing("clone")

    def multi_get(self, keys):
        return [self.get(k) for k in _keys(keys)]

    def multi_set(self, keys, values):
        keys, values = _keys(keys), list(values)
        if len(keys) != len(values):
            raise ValueError(f"multi_set(): {len(keys)} keys but {len(values)} values")
        for k, v in zip(keys, values):
            self.set(k, v)

    def append(self, key, value):
        key, value = _key(key), _value(value)
        current = b""
        while True:  # compare-and-swap until no other writer came in between
            stored = self.compare_set(key, current, current + value)
            if stored == current + value:
                return
            current = stored

    def barrier(self, key, world_size, timeout=None):
        """Block until ``world_size`` callers reached the barrier named ``key``."""
        key = _key(key)
        if self.add(f"{key}/num_members", 1) == world_size:
            self.set(f"{key}/last_member", "1")
        self.wait([f"{key}/last_member"], self.timeout if timeout is None else timeout)

    def queue_push(self, key, value):
        raise NotImplementedError("queue support is not implemented.")

    def queue_pop(self, key, block=True):
        raise NotImplementedError("queue support is not implemented.")

    def queue_len(self, key):
        raise NotImplementedError("queue support is not implemented.")

    def has_extended_api(self):
        return False


# --------------------------------------------------------------------------------------------------------- HashStore

class _HashState:
    __slots__ = ("data", "queues", "cond")

    def __init__(self):
        self.data, self.queues, self.cond = {}, {}, threading.Condition()


class HashStore(Store):
    """An in-memory store of one process (threads share it; so do its clones)."""

    def __init__(self):
        super().__init__()
        self._state = _HashState()

    def _wait_until(self, ready, timeout):
        """Wait (holding the condition) until ``ready()``; DistStoreError after ``timeout``."""
        cond, deadline = self._state.cond, _Deadline(timeout)
        while not ready():
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise DistStoreError("Wait timeout")
            cond.wait(remaining)

    def set(self, key, value):
        key, value = _key(key), _value(value)
        with self._state.cond:
            self._state.data[key] = value
            self._state.cond.notify_all()

    def get(self, key):
        key, data = _key(key), self._state.data
        with self._state.cond:
            self._wait_until(lambda: key in data, self.timeout)
            return data[key]

    def add(self, key, amount):
        key, amount = _key(key), _amount(amount)
        with self._state.cond:
            value = _added(key, self._state.data.get(key), amount)
            self._state.data[key] = b"%d" % value
            self._state.cond.notify_all()
            return value

    def compare_set(self, key, expected_value, desired_value):
        key, expected, desired = _key(key), _value(expected_value), _value(desired_value)
        with self._state.cond:
            store, result = _compare_set(self._state.data.get(key), expected, desired)
            if store:
                self._state.data[key] = desired
                self._state.cond.notify_all()
            return result

    def check(self, keys):
        keys = _keys(keys)
        with self._state.cond:
            return all(k in self._state.data for k in keys)

    def wait(self, keys, timeout=None):
        keys, data = _keys(keys), self._state.data
        timeout = self.timeout if timeout is None else _timedelta(timeout)
        with self._state.cond:
            self._wait_until(lambda: all(k in data for k in keys), timeout)

    def delete_key(self, key):
        key = _key(key)
        with self._state.cond:
            return self._state.data.pop(key, None) is not None

    def num_keys(self):
        return len(self._state.data)

    def list_keys(self):
        with self._state.cond:
            return list(self._state.data)

    def multi_get(self, keys):
        keys, data = _keys(keys), self._state.data
        with self._state.cond:
            self._wait_until(lambda: all(k in data for k in keys), self.timeout)
            return [data[k] for k in keys]

    def multi_set(self, keys, values):
        keys, values = _keys(keys), [_value(v) for v in values]
        if len(keys) != len(values):
            raise ValueError(f"multi_set(): {len(keys)} keys but {len(values)} values")
        with self._state.cond:
            self._state.data.update(zip(keys, values))
            self._state.cond.notify_all()

    def append(self, key, value):
        key, value = _key(key), _value(value)
        with self._state.cond:
            self._state.data[key] = self._state.data.get(key, b"") + value
            self._state.cond.notify_all()

    def queue_push(self, key, value):
        key, value = _key(key), _value(value)
        with self._state.cond:
            self._state.queues.setdefault(key, deque()).append(value)
            self._state.cond.notify_all()

    def queue_pop(self, key, block=True):
        key, queues = _key(key), self._state.queues
        with self._state.cond:
            if not block and not queues.get(key):
                raise QueueEmptyError("queue is empty")
            self._wait_until(lambda: bool(queues.get(key)), self.timeout)
            return queues[key].popleft()

    def queue_len(self, key):
        with self._state.cond:
            return len(self._state.queues.get(_key(key), ()))

    def clone(self):
        twin = HashStore.__new__(HashStore)
        twin._state, twin._timeout = self._state, self._timeout
        return twin

    def has_extended_api(self):
        return True


# --------------------------------------------------------------------------------------------------------- FileStore

_REC = struct.Struct("<cII")  # kind (b"S" set, b"D" delete, b"I" internal counter), key length, value length


class _FileLog:
    """A FileStore's file: a log of records appended under an exclusive lock, replayed into dicts on each access."""

    def __init__(self, path):
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DistStoreError(os.strerror(e.errno)) from None
        self.path, self.pos, self.data, self.internal = path, 0, {}, {}
        self.mutex = threading.Lock()  # flock does not exclude threads sharing one descriptor

    def lock(self, exclusive=True):
        self.mutex.acquire()
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            self._catch_up()
        except BaseException:
            self.unlock()
            raise
        return self

    def unlock(self):
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self.mutex.release()

    def __enter__(self):
        return self.lock()

    def __exit__(self, *exc):
        self.unlock()

    def _catch_up(self):
        size = os.fstat(self.fd).st_size
        if size < self.pos:  # the file was truncated: replay it from the start
            self.pos, self.data, self.internal = 0, {}, {}
        if size == self.pos:
            return
        buf, at = os.pread(self.fd, size - self.pos, self.pos), 0
        while at + _REC.size <= len(buf):
            kind, klen, vlen = _REC.unpack_from(buf, at)
            end = at + _REC.size + klen + vlen
            if end > len(buf):
                break
            key = buf[at + _REC.size:at + _REC.size + klen].decode()
            value = buf[at + _REC.size + klen:end]
            if kind == b"S":
                self.data[key] = value
            elif kind == b"D":
                self.data.pop(key, None)
            else:
                self.internal[key] = value
            at = end
        self.pos += at

    def put(self, kind, key, value=b""):
        """Append a record (the caller holds the exclusive lock, so the log is caught up and ends at ``pos``)."""
        k = key.encode()
        record = _REC.pack(kind, len(k), len(value)) + k + value
        os.pwrite(self.fd, record, self.pos)
        self.pos += len(record)
        if kind == b"S":
            self.data[key] = value
        elif kind == b"D":
            self.data.pop(key, None)
        else:
            self.internal[key] = value

    def bump(self, name, amount):
        value = int(self.internal.get(name, b"0")) + amount
        self.put(b"I", name, b"%d" % value)
        return value


def _release_file(log, world_size):
    """A FileStore instance is gone: count it as finished; the last of ``world_size`` finished workers removes the
    file once no instance holds it (PyTorch's cleanup rule)."""
    try:
        with log:
            finished, holders = log.bump("cleanup", 1), log.bump("refcount", -1)
            if 0 < world_size <= finished and holders == 0:
                os.unlink(log.path)
    except OSError:
        pass
    finally:
        os.close(log.fd)


class FileStore(Store):
    """A store in a file that every process of the job can open (a shared filesystem across hosts)."""

    def __init__(self, file_name, world_size=-1):
        super().__init__()
        self._path, self._world_size = os.fspath(file_name), operator.index(world_size)
        self._log = _FileLog(self._path)
        with self._log as log:
            log.bump("refcount", 1)
        weakref.finalize(self, _release_file, self._log, self._world_size)

    @property
    def path(self):
        return self._path

    def _read(self, fn):
        log = self._log.lock(exclusive=False)
        try:
            return fn(log)
        finally:
            log.unlock()

    def _poll(self, ready, timeout, fail):
        """``ready(log)`` once it is not None, polling the file; raises ``fail()`` after ``timeout``."""
        deadline, pause = _Deadline(timeout), 0.0005
        while True:
            result = self._read(ready)
            if result is not None:
                return result
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise fail()
            time.sleep(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, 0.02)

    def set(self, key, value):
        key, value = _key(key), _value(value)
        with self._log as log:
            log.put(b"S", key, value)

    def get(self, key):
        key, timeout = _key(key), self.timeout
        return self._poll(lambda log: log.data.get(key), timeout,
                          lambda: RuntimeError(f"Timeout waiting for key: {key} after {_ms(timeout)} ms"))

    def add(self, key, amount):
        key, amount = _key(key), _amount(amount)
        with self._log as log:
            value = _added(key, log.data.get(key), amount)
            log.put(b"S", key, b"%d" % value)
            return value

    def compare_set(self, key, expected_value, desired_value):
        key, expected, desired = _key(key), _value(expected_value), _value(desired_value)
        with self._log as log:
            store, result = _compare_set(log.data.get(key), expected, desired)
            if store:
                log.put(b"S", key, desired)
            return result

    def check(self, keys):
        keys = _keys(keys)
        return self._read(lambda log: all(k in log.data for k in keys))

    def wait(self, keys, timeout=None):
        keys = _keys(keys)
        timeout = self.timeout if timeout is None else _timedelta(timeout)
        self._poll(lambda log: True if all(k in log.data for k in keys) else None, timeout,
                   lambda: RuntimeError("Wait timeout"))

    def delete_key(self, key):
        key = _key(key)
        with self._log as log:
            log.put(b"D", key)
        return True  # as PyTorch's FileStore, whether or not the key existed

    def num_keys(self):
        return self._read(lambda log: len(log.data) + len(log.internal))

    def list_keys(self):
        return self._read(lambda log: list(log.data))

    def multi_get(self, keys):
        return [self.get(k) for k in _keys(keys)]

    def append(self, key, value):
        key, value = _key(key), _value(value)
        with self._log as log:
            log.put(b"S", key, log.data.get(key, b"") + value)

    def clone(self):
        return FileStore(self._path, self._world_size)


# ---------------------------------------------------------------------------------------------------- TCPStore server

_LEN = struct.Struct("<I")
(_SET, _GET, _ADD, _CAS, _CHECK, _WAIT, _DELETE, _NUM_KEYS, _MULTI_GET, _MULTI_SET, _APPEND, _QUEUE_PUSH, _QUEUE_POP,
 _QUEUE_LEN, _LIST_KEYS, _JOIN, _WAIT_WORKERS, _BARRIER, _DONE, _LINGER) = range(20)
_OK, _TIMEOUT, _VALUE_ERROR, _QUEUE_EMPTY = range(4)  # reply status

# A client opens each connection with PyTorch's own greeting (VALIDATE with its magic number, then PING with a nonce).
# PyTorch's TCPStore server answers the nonce, ember's a frame of its own: a client that reached PyTorch's server
# (e.g. the store of torchrun's agent) says so at once instead of waiting for replies that server will never send.
_GREETING = struct.Struct("<BIBI")  # 0 (VALIDATE), PyTorch's magic number, 13 (PING), the nonce
_TORCH_MAGIC, _NONCE = 0x3C85F7CE, 0xE7BE5701  # (the nonce reads as no length of an ember reply frame)
_HELLO = _GREETING.pack(0, _TORCH_MAGIC, 13, _NONCE)


class _Peer:
    """A client connection on the server side."""
    __slots__ = ("sock", "inbuf", "outbuf", "closed", "greeted")

    def __init__(self, sock):
        self.sock, self.inbuf, self.outbuf, self.closed, self.greeted = sock, bytearray(), bytearray(), False, False


class _Waiter:
    """A request the server answers later: when its keys exist (get/wait/multi_get), a queue has an item, or a
    counter reaches ``need`` (workers joined, barrier members); or when its deadline passes."""
    __slots__ = ("peer", "op", "keys", "need", "ms", "done")

    def __init__(self, peer, op, keys, need, ms):
        self.peer, self.op, self.keys, self.need, self.ms, self.done = peer, op, keys, need, ms, False


class _TCPServer:
    """The store's data and a selector loop in a daemon thread serving every client connection.

    Every request is handled at once; one that must wait becomes a _Waiter answered when a later request satisfies it
    or when its timeout (measured here) passes, so a blocked client never holds up the others."""

    def __init__(self, listener):
        listener.setblocking(False)
        self.listener, self.port = listener, listener.getsockname()[1]
        self.data, self.queues, self.barriers, self.joined = {}, {}, {}, None
        self.key_waiters, self.queue_waiters, self.count_waiters = {}, {}, {}
        self.timers, self.seq, self.stopping = [], 0, False
        self.peers, self.done = 0, 0  # open client connections; ranks done with a rendezvous store (_DONE)
        self.linger = None  # (ranks, monotonic end): serving on after the master let go, until they are done
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.sel.register(self.wake_r, selectors.EVENT_READ, None)
        self.ops = {_SET: self._set, _GET: self._get, _ADD: self._add, _CAS: self._cas, _CHECK: self._check,
                    _WAIT: self._wait, _DELETE: self._delete, _NUM_KEYS: self._num_keys,
                    _MULTI_GET: self._multi_get, _MULTI_SET: self._multi_set, _APPEND: self._append,
                    _QUEUE_PUSH: self._queue_push, _QUEUE_POP: self._queue_pop, _QUEUE_LEN: self._queue_len,
                    _LIST_KEYS: self._list_keys, _JOIN: self._join, _WAIT_WORKERS: self._wait_workers,
                    _BARRIER: self._barrier, _DONE: self._done, _LINGER: self._linger}
        self.thread = threading.Thread(target=self._run, name=f"ember-tcpstore-{self.port}", daemon=True)
        self.thread.start()

    def stop(self):
        """Stop serving and close every connection; returns once the port is free (unless called by the loop)."""
        self.stopping = True
        try:
            self.wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self.thread:
            self.thread.join(5.0)

    # -- the loop

    def _run(self):
        try:
            while not self.stopping:
                ends = ([self.timers[0][0]] if self.timers else []) + ([self.linger[1]] if self.linger else [])
                timeout = max(0.0, min(ends) - time.monotonic()) if ends else None
                for key, events in self.sel.select(timeout):
                    sock, peer = key.fileobj, key.data
                    if peer is not None:
                        if events & selectors.EVENT_WRITE:
                            self._flush(peer)
                        if events & selectors.EVENT_READ and not peer.closed:
                            self._read(peer)
                    elif sock is self.listener:
                        self._accept()
                    else:
                        self.wake_r.recv(4096)
                self._expire()
                self._check_linger()
        finally:
            for key in list(self.sel.get_map().values()):
                key.fileobj.close()
            self.sel.close()
            self.wake_w.close()
            _forget_lingering(self)

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of descriptors: refuse this one, keep serving the others
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sel.register(sock, selectors.EVENT_READ, _Peer(sock))
            self.peers += 1

    def _close(self, peer):
        if not peer.closed:
            peer.closed = True  # its pending waiters are dropped when next met
            self.sel.unregister(peer.sock)
            peer.sock.close()
            self.peers -= 1
            self._check_linger()

    def _check_linger(self):
        """A server the master let go of stops once every rank is done with it, or none is connected any more, or
        its time is up."""
        if self.linger is not None and (self.done >= self.linger[0] or self.peers == 0
                                        or time.monotonic() >= self.linger[1]):
            self.stopping = True

    def _greet(self, peer):
        """Answer a new connection's greeting (False: not an ember client, or not yet complete)."""
        if len(peer.inbuf) < _GREETING.size:
            return False
        if bytes(peer.inbuf[:_GREETING.size]) != _HELLO:
            self._close(peer)
            return False
        del peer.inbuf[:_GREETING.size]
        peer.greeted = True
        self._reply(peer, _OK, "ember")
        return True

    def _read(self, peer):
        try:
            chunk = peer.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(peer)
            return
        buf = peer.inbuf
        buf += chunk
        if not peer.greeted and not self._greet(peer):
            return
        at = 0
        while len(buf) - at >= 4:
            n = _LEN.unpack_from(buf, at)[0]
            if len(buf) - at - 4 < n:
                break
            try:
                msg = marshal.loads(memoryview(buf)[at + 4:at + 4 + n])
                reply = self.ops[msg[0]](peer, *msg[1:])
            except Exception:  # noqa: BLE001 - a malformed request: drop that client, not the server
                self._close(peer)
                return
            at += 4 + n
            if reply is not None:
                self._reply(peer, *reply)
        del buf[:at]

    def _reply(self, peer, status, payload=None):
        if peer.closed:
            return
        data = marshal.dumps((status, payload))
        frame = _LEN.pack(len(data)) + data
        if peer.outbuf:
            peer.outbuf += frame
            return
        try:
            sent = peer.sock.send(frame)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(peer)
            return
        if sent < len(frame):
            peer.outbuf += frame[sent:]
            self.sel.modify(peer.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, peer)

    def _flush(self, peer):
        try:
            sent = peer.sock.send(peer.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(peer)
            return
        del peer.outbuf[:sent]
        if not peer.outbuf:
            self.sel.modify(peer.sock, selectors.EVENT_READ, peer)

    # -- waiting requests

    def _park(self, waiter, index, name):
        if waiter.ms <= 0:
            self._time_out(waiter)
            return
        bucket = index.get(name)
        if bucket is None:
            bucket = index[name] = deque()
        elif len(bucket) >= 8 and not len(bucket) & (len(bucket) - 1):
            # at sizes 8, 16, 32...: drop the waiters answered or timed out (amortised; keeps the order)
            bucket = index[name] = deque(w for w in bucket if not (w.done or w.peer.closed))
        bucket.append(waiter)
        self.seq += 1
        heapq.heappush(self.timers, (time.monotonic() + waiter.ms / 1000, self.seq, waiter))

    def _expire(self):
        now, timers = time.monotonic(), self.timers
        while timers and timers[0][0] <= now:
            waiter = heapq.heappop(timers)[2]
            if not waiter.done:
                self._time_out(waiter)

    def _time_out(self, w):
        w.done = True
        if w.op == _WAIT_WORKERS:
            self._reply(w.peer, _TIMEOUT, f"Timed out after {-(-w.ms // 1000)} seconds waiting for clients. "
                                          f"{self.joined or 0}/{w.need} clients joined.")
        elif w.op == _BARRIER:
            self._reply(w.peer, _TIMEOUT, f"barrier timeout after {w.ms}ms, key: {w.keys}")
        else:
            keys = [w.keys] if w.op == _QUEUE_POP else w.keys
            self._reply(w.peer, _TIMEOUT, f"wait timeout after {w.ms}ms, keys: {', '.join('/' + k for k in keys)}")

    def _await_keys(self, peer, op, keys, ms):
        """Answer a get/wait/multi_get now if its keys exist, else once they do (or at its timeout)."""
        missing = next((k for k in keys if k not in self.data), None)
        if missing is None:
            return self._keys_reply(op, keys)
        self._park(_Waiter(peer, op, keys, None, ms), self.key_waiters, missing)

    def _keys_reply(self, op, keys):
        if op == _GET:
            return _OK, self.data[keys[0]]
        if op == _MULTI_GET:
            return _OK, [self.data[k] for k in keys]
        return _OK, None

    def _stored(self, key):
        """Key ``key`` was written: answer the waiters it completes, move the others to a key still missing."""
        waiters = self.key_waiters.pop(key, None)
        for w in waiters or ():
            if w.done or w.peer.closed:
                continue
            missing = next((k for k in w.keys if k not in self.data), None)
            if missing is None:
                w.done = True
                self._reply(w.peer, *self._keys_reply(w.op, w.keys))
            else:
                self.key_waiters.setdefault(missing, deque()).append(w)

    def _counted(self, name, count):
        waiters = self.count_waiters.get(name)
        if not waiters:
            return
        keep = []
        for w in waiters:
            if w.done or w.peer.closed:
                continue
            if count >= w.need:
                w.done = True
                self._reply(w.peer, _OK, count)
            else:
                keep.append(w)
        self.count_waiters[name] = deque(keep)

    # -- operations: each returns its reply (status, payload), or None when it waits

    def _set(self, peer, key, value):
        self.data[key] = value
        self._stored(key)
        return _OK, None

    def _get(self, peer, key, ms):
        return self._await_keys(peer, _GET, [key], ms)

    def _add(self, peer, key, amount):
        try:
            value = _added(key, self.data.get(key), amount)
        except ValueError as e:
            return _VALUE_ERROR, str(e)
        self._set(peer, key, b"%d" % value)
        return _OK, value

    def _cas(self, peer, key, expected, desired):
        store, result = _compare_set(self.data.get(key), expected, desired)
        if store:
            self._set(peer, key, desired)
        return _OK, result

    def _check(self, peer, keys):
        return _OK, all(k in self.data for k in keys)

    def _wait(self, peer, keys, ms):
        return self._await_keys(peer, _WAIT, keys, ms)

    def _delete(self, peer, key):
        return _OK, self.data.pop(key, None) is not None

    def _num_keys(self, peer):
        return _OK, len(self.data) + len(self.barriers) + (self.joined is not None)

    def _multi_get(self, peer, keys, ms):
        return self._await_keys(peer, _MULTI_GET, keys, ms)

    def _multi_set(self, peer, keys, values):
        for key, value in zip(keys, values):
            self._set(peer, key, value)
        return _OK, None

    def _append(self, peer, key, value):
        return self._set(peer, key, self.data.get(key, b"") + value)

    def _queue_push(self, peer, key, value):
        queue = self.queues.setdefault(key, deque())
        queue.append(value)
        waiters = self.queue_waiters.get(key)
        while queue and waiters:
            w = waiters.popleft()
            if not (w.done or w.peer.closed):
                w.done = True
                self._reply(w.peer, _OK, queue.popleft())
        return _OK, None

    def _queue_pop(self, peer, key, block, ms):
        queue = self.queues.get(key)
        if queue:
            return _OK, queue.popleft()
        if not block:
            return _QUEUE_EMPTY, "queue is empty"
        self._park(_Waiter(peer, _QUEUE_POP, key, None, ms), self.queue_waiters, key)

    def _queue_len(self, peer, key):
        return _OK, len(self.queues.get(key, ()))

    def _list_keys(self, peer):
        return _OK, list(self.data) + list(self.barriers)

    def _join(self, peer):
        self.joined = (self.joined or 0) + 1
        self._counted(None, self.joined)
        return _OK, self.joined

    def _wait_workers(self, peer, world_size, ms):
        if (self.joined or 0) >= world_size:
            return _OK, self.joined
        self._park(_Waiter(peer, _WAIT_WORKERS, None, world_size, ms), self.count_waiters, None)

    def _barrier(self, peer, key, world_size, ms):
        count = self.barriers[key] = self.barriers.get(key, 0) + 1
        self._counted(key, count)
        if count >= world_size:
            return _OK, count
        self._park(_Waiter(peer, _BARRIER, key, world_size, ms), self.count_waiters, key)

    def _done(self, peer):
        self.done += 1
        self._check_linger()
        return _OK, None

    def _linger(self, peer, world_size, ms):
        self.linger = (world_size, time.monotonic() + ms / 1000)
        return self._done(peer)


class _ServerHandle:
    """Keeps a server running while a master store holds it (several multi-tenant stores may share one)."""

    def __init__(self, server):
        self.server, self.port = server, server.port
        self.holders = 0  # master stores using it (a released store lets go)
        weakref.finalize(self, server.stop)


_TENANTS = {}  # port -> weakref to the _ServerHandle shared by this process's multi-tenant master stores
_TENANTS_LOCK = threading.Lock()
_LINGERING = {}  # port -> _ServerHandle of a rendezvous store its master let go, serving until the ranks are done
_LINGERING_LOCK = threading.Lock()  # (never held while waiting for a server thread: that thread takes it to leave)


def _forget_lingering(server):
    with _LINGERING_LOCK:
        handle = _LINGERING.get(server.port)
        if handle is not None and handle.server is server:
            del _LINGERING[server.port]


def _listen(port, listen_fd):
    if listen_fd is not None:
        sock = socket.socket(fileno=listen_fd)
        sock.listen(1024)
        return sock
    try:
        if socket.has_dualstack_ipv6():
            try:
                return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise
        return socket.create_server(("", port), backlog=1024)
    except OSError as e:
        code = e.errno or 0
        raise DistNetworkError(
            f"The server socket has failed to listen on any local network address. port: {port}, code: -{code}, "
            f"name: {errno.errorcode.get(code, '?')}, message: {os.strerror(code).lower()}") from None


def _serve(port, multi_tenant, listen_fd):
    with _TENANTS_LOCK:
        with _LINGERING_LOCK:
            lingering = _LINGERING.pop(port, None) if port else None
        if lingering is not None:  # this process's previous rendezvous server: a new master takes the port now
            lingering.server.stop()
        ref = _TENANTS.get(port) if multi_tenant and port else None
        handle = ref() if ref is not None else None
        if handle is None or handle.server.stopping:
            handle = _ServerHandle(_TCPServer(_listen(port, listen_fd)))
            if multi_tenant:
                _TENANTS[handle.port] = weakref.ref(handle)
        handle.holders += 1
        return handle


# ---------------------------------------------------------------------------------------------------- TCPStore client

class _Connection:
    """One client socket; requests on it are strictly one at a time (request, then its reply)."""
    __slots__ = ("sock", "buf", "limit")

    def __init__(self, sock, where):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.buf, self.limit = sock, bytearray(), -1.0
        try:
            sock.sendall(_HELLO)
            if not self._fill(_LEN.size):  # (a server stopping: the caller may retry)
                raise ConnectionResetError(errno.ECONNRESET, "the store server closed the connection")
            if _LEN.unpack_from(self.buf)[0] == _NONCE:
                raise DistNetworkError(
                    f"The store at {where} is a PyTorch TCPStore server: ember's TCPStore speaks to ember's servers "
                    "only (torchrun's agent serves its workers' store: launch ember scripts with emberrun).")
            if self._reply() != (_OK, "ember"):
                raise DistNetworkError(f"The server at {where} is not an ember TCPStore server")
        except BaseException:
            sock.close()
            raise

    def _fill(self, n):
        """Receive until ``n`` bytes are buffered (False if the server closed the connection first)."""
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def _reply(self):
        buf = self.buf
        while True:
            if len(buf) >= 4:
                n = _LEN.unpack_from(buf)[0]
                if len(buf) >= 4 + n:
                    reply = marshal.loads(memoryview(buf)[4:4 + n])
                    del buf[:4 + n]
                    return reply
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise DistNetworkError("Failed to recv, got 0 bytes. Connection was likely closed. "
                                       "Did the remote server shutdown or crash?")
            buf += chunk

    def request(self, msg, limit):
        data = marshal.dumps(msg)
        if limit != self.limit:
            self.sock.settimeout(limit)
            self.limit = limit
        self.sock.sendall(_LEN.pack(len(data)) + data)
        return self._reply()

    def close(self):
        self.sock.close()


def _close_connections(idle):
    while idle:
        idle.pop().close()


_REPLY_GRACE = 10.0  # seconds a client waits for a reply beyond the operation's own timeout before it gives up


class TCPStore(Store):
    """A store served by a thread of the master process (``is_master=True``; port 0 picks a free port, see ``port``)
    and reached over TCP by every other process (clients retry connecting until ``timeout``).

    With ``world_size`` given and ``wait_for_workers``, each store counts itself in and the master waits until
    ``world_size`` stores (itself included) joined. The server stops when the master store is garbage collected."""

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=_DEFAULT_TIMEOUT,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True):
        super().__init__()
        if not isinstance(host_name, str):
            raise TypeError(f"TCPStore(): host_name must be str, not {type(host_name).__name__}")
        port = operator.index(port)
        world_size = None if world_size is None else operator.index(world_size)
        self._timeout = _timedelta(timeout)
        self._host, self.libuvBackend = host_name, bool(use_libuv)
        self._server = _serve(port, multi_tenant, master_listen_fd) if is_master else None
        self._port = self._server.port if is_master else port
        self._idle = []  # open connections not in use (a caller takes one; concurrent callers open more)
        self._released = False
        weakref.finalize(self, _close_connections, self._idle)
        try:
            self._idle.append(self._connect(retry=True))
            if world_size is not None and wait_for_workers:
                self._call((_JOIN,))
                if is_master:
                    ms = _ms(self._timeout)
                    self._call((_WAIT_WORKERS, world_size, ms), ms)
        except BaseException:
            self._release()  # now: the traceback keeps this half-made store alive, its port must not stay taken
            raise

    def _connect(self, retry, end=None):
        """A new connection; with ``retry``, attempts go on until ``end`` (monotonic; default: the timeout)."""
        seconds = max(self._timeout.total_seconds(), 0.0)
        end, pause = time.monotonic() + seconds if end is None else end, 0.005
        while True:
            try:
                return _Connection(socket.create_connection((self._host, self._port), timeout=max(seconds, 1.0)),
                                   f"({self._host}, {self._port})")
            except OSError as e:
                remaining = end - time.monotonic()
                if not retry or remaining <= 0:
                    raise DistNetworkError(
                        f"The client socket has timed out after {_ms(self._timeout)}ms while trying to connect to "
                        f"({self._host}, {self._port})." if retry else
                        f"Failed to connect to the store at ({self._host}, {self._port}): {e}") from None
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, 0.25)

    def _call(self, msg, wait_ms=None):
        """Send ``msg`` and return the reply's payload; ``wait_ms``: how long the server may hold the request."""
        idle = self._idle
        try:
            conn = idle.pop()
        except IndexError:
            if self._released:
                raise DistNetworkError("this TCPStore was released (its process group was destroyed)") from None
            conn = self._connect(retry=False)
        seconds = max(self._timeout.total_seconds() if wait_ms is None else wait_ms / 1000, 0.0)
        try:
            status, payload = conn.request(msg, seconds + _REPLY_GRACE)
        except BaseException as e:
            conn.close()  # its state is unknown (a reply may still come): never reuse it
            if isinstance(e, TimeoutError):
                raise DistNetworkError(f"the store server at ({self._host}, {self._port}) did not reply within "
                                       f"{seconds + _REPLY_GRACE:.0f} s") from None
            if isinstance(e, OSError):
                raise DistNetworkError(os.strerror(e.errno) if e.errno else str(e)) from None
            raise
        idle.append(conn)
        if status == _OK:
            return payload
        if status == _TIMEOUT:
            raise DistStoreError(payload)
        if status == _QUEUE_EMPTY:
            raise QueueEmptyError(payload)
        raise ValueError(payload)


    def _join(self, world_size):
        """Count this store in and wait until the ``world_size`` stores of its round (init_process_group's
        rendezvous) joined. A server going away meanwhile was the previous round's (its master is stopping it
        before starting the new one on the same port): join the new one."""
        end = time.monotonic() + max(self._timeout.total_seconds(), 0.0)
        while True:
            try:
                joined = self._call((_JOIN,))
                ms = max(int((end - time.monotonic()) * 1000), 0)
                self._call((_WAIT_WORKERS, -(-joined // world_size) * world_size, ms), ms)
                return
            except DistNetworkError:
                if time.monotonic() >= end:
                    raise
                _close_connections(self._idle)
                self._idle.append(self._connect(retry=True, end=end))

    def _release(self, world_size=None):
        """Close this store's connections and let go of its server (which stops now unless another multi-tenant
        store of this process shares it); later calls fail with DistNetworkError.

        With ``world_size`` (the store of a rendezvous, at destroy_process_group) each rank tells the server it is
        done, and a master's server serves on until the ``world_size`` ranks are, none is connected any more, or the
        store's timeout passed: ranks slower than the master may still be using it. A new master store of this
        process on the same port stops it at once."""
        handle, self._server = self._server, None
        if handle is not None:
            with _TENANTS_LOCK:
                handle.holders -= 1
                alone = handle.holders == 0
        if world_size is not None and not self._released:
            try:
                if handle is not None and alone:
                    with _LINGERING_LOCK:
                        _LINGERING[handle.port] = handle
                    self._call((_LINGER, world_size, _ms(self._timeout)))
                else:
                    self._call((_DONE,))
            except DistError:  # the server is gone already: nothing to tell
                pass
        _close_connections(self._idle)
        self._released = True

    @property
    def host(self):
        return self._host

    @property
    def port(self):
        return self._port

    def __repr__(self):
        return f"TCPStore(host={self._host!r}, port={self._port}, server={self._server is not None})"

    def set(self, key, value):
        self._call((_SET, _key(key), _value(value)))

    def get(self, key):
        ms = _ms(self._timeout)
        return self._call((_GET, _key(key), ms), ms)

    def add(self, key, amount):
        return self._call((_ADD, _key(key), _amount(amount)))

    def compare_set(self, key, expected_value, desired_value):
        return self._call((_CAS, _key(key), _value(expected_value), _value(desired_value)))

    def check(self, keys):
        return self._call((_CHECK, _keys(keys)))

    def wait(self, keys, timeout=None):
        ms = _ms(self._timeout if timeout is None else _timedelta(timeout))
        self._call((_WAIT, _keys(keys), ms), ms)

    def delete_key(self, key):
        return self._call((_DELETE, _key(key)))

    def num_keys(self):
        return self._call((_NUM_KEYS,))

    def list_keys(self):
        return self._call((_LIST_KEYS,))

    def multi_get(self, keys):
        ms = _ms(self._timeout)
        return self._call((_MULTI_GET, _keys(keys), ms), ms)

    def multi_set(self, keys, values):
        keys, values = _keys(keys), [_value(v) for v in values]
        if len(keys) != len(values):
            raise ValueError(f"multi_set(): {len(keys)} keys but {len(values)} values")
        self._call((_MULTI_SET, keys, values))

    def append(self, key, value):
        self._call((_APPEND, _key(key), _value(value)))

    def queue_push(self, key, value):
        self._call((_QUEUE_PUSH, _key(key), _value(value)))

    def queue_pop(self, key, block=True):
        ms = _ms(self._timeout)
        return self._call((_QUEUE_POP, _key(key), bool(block), ms), ms)

    def queue_len(self, key):
        return self._call((_QUEUE_LEN, _key(key)))

    def barrier(self, key, world_size, timeout=None):
        ms = _ms(self._timeout if timeout is None else _timedelta(timeout))
        self._call((_BARRIER, _key(key), operator.index(world_size), ms), ms)

    def clone(self):
        return TCPStore(self._host, self._port, timeout=self._timeout, use_libuv=self.libuvBackend)

    def has_extended_api(self):
        return True


# ------------------------------------------------------------------------------------------------------- PrefixStore

class PrefixStore(Store):
    """The keys of ``store`` that start with ``prefix + "/"``, seen without that prefix."""

    def __init__(self, prefix, store):
        if not isinstance(prefix, str):
            raise TypeError(f"PrefixStore(): prefix must be str, not {type(prefix).__name__}")
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore(): store must be a Store, not {type(store).__name__}")
        self._prefix, self._store = prefix, store

    def _k(self, key):
        return f"{self._prefix}/{_key(key)}"

    @property
    def timeout(self):
        return self._store.timeout

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    @property
    def underlying_store(self):
        return self._store

    @property
    def _underlying_non_prefix_store(self):
        store = self._store
        while isinstance(store, PrefixStore):
            store = store._store
        return store

    def set(self, key, value):
        self._store.set(self._k(key), value)

    def get(self, key):
        return self._store.get(self._k(key))

    def add(self, key, amount):
        return self._store.add(self._k(key), amount)

    def compare_set(self, key, expected_value, desired_value):
        return self._store.compare_set(self._k(key), expected_value, desired_value)

    def check(self, keys):
        return self._store.check([self._k(k) for k in _keys(keys)])

    def wait(self, keys, timeout=None):
        keys = [self._k(k) for k in _keys(keys)]
        if timeout is None:
            self._store.wait(keys)
        else:
            self._store.wait(keys, timeout)

    def delete_key(self, key):
        return self._store.delete_key(self._k(key))

    def num_keys(self):
        return self._store.num_keys()

    def list_keys(self):
        head = self._prefix + "/"
        return [k[len(head):] for k in self._store.list_keys() if k.startswith(head)]

    def multi_get(self, keys):
        return self._store.multi_get([self._k(k) for k in _keys(keys)])

    def multi_set(self, keys, values):
        self._store.multi_set([self._k(k) for k in _keys(keys)], values)

    def append(self, key, value):
        self._store.append(self._k(key), value)

    def queue_push(self, key, value):
        self._store.queue_push(self._k(key), value)

    def queue_pop(self, key, block=True):
        return self._store.queue_pop(self._k(key), block)

    def queue_len(self, key):
        return self._store.queue_len(self._k(key))

    def clone(self):
        return PrefixStore(self._prefix, self._store.clone())

    def has_extended_api(self):
        return self._store.has_extended_api()
