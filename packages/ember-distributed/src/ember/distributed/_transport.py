"""Messages between the ranks of a group: ZeroMQ over TCP, shared memory between ranks of one host.

Each rank binds one ROUTER socket and connects one DEALER to every peer's ROUTER (its identity is the rank), so a
message from ``src`` arrives on the receiver's ROUTER tagged with ``src``; addresses are published in the store
the transport is given (the ROUTER also listens on a Unix socket, which peers of its host use: cheaper than TCP).
A message is a tag (any picklable value) and a list of frames (bytes-like objects).
Frames travel as separate ZeroMQ frames (``copy=False``: ZeroMQ reads the sender's memory, nothing is joined or
pickled), and objects are pickled with protocol 5 with their buffers (tensors' arrays) out of band as frames of
their own. Received messages wait in a mailbox keyed by (source, tag) until asked for, in the order sent.

Between ranks of one host (they map each other's segments, see ``_shm``) a frame of ``SHM_MIN`` bytes or more is
copied by the sender into a slot of a shared segment it owns for that receiver (a message uses at most ``SLOTS``
slots; larger frames go through the socket, so callers cut large payloads into several messages); only a small
header crosses the socket, and the receiver reads the slot in place until it releases the message. Each receiver
publishes, per sender and slot, the generation it released, so a sender reuses a slot once its last use was
released. When no slot is free a send is queued for a thread of its own, keeping the caller (and the order of
messages) moving: two ranks sending each other more than the slots hold must not wait for each other.
``EMBER_DIST_TRANSPORT=tcp`` turns shared memory off (every frame through the sockets).

A peer's failure is seen three ways: a goodbye it sends when it closes (after all its messages), the
DISCONNECTED event of the socket monitor on its DEALER (its process ended: the kernel closed its sockets), and
ZeroMQ heartbeats (a silent host). Messages it sent before may still be in flight when the event arrives, so a
disconnected peer is declared gone ``GRACE`` seconds later; then every operation waiting on it raises
``PeerError`` naming it, and so does every later one.
"""
import collections
import ipaddress
import os
import pickle
import socket
import threading
import time

import numpy as np
import zmq

from . import _shm
from ._errors import DistBackendError

SHM_MIN = 64 << 10  # frames from this size go through shared memory to peers of this host
SLOT = 4 << 20  # bytes of one shared-memory slot
SLOTS = 4  # slots per (sender, receiver) pair
COPY_MAX = 16 << 10  # frames below this size are copied into ZeroMQ's messages (cheaper than tracking them)
GRACE = 0.2  # seconds a disconnected peer's last messages may take to arrive
WATCH = 0.05  # seconds between looks at the monitors (dropped connections) while messages keep arriving
LINGER = 10.0  # seconds close() waits for peers to read what this rank left in shared memory
HEARTBEAT_MS, HEARTBEAT_TIMEOUT_MS = 1000, 5000
IO_THREADS = 2  # ZeroMQ's: sending and receiving large frames proceed side by side (2 ranks: twice as fast)
_DATA, _BYE = 0, 1


class PeerError(DistBackendError):
    """A peer closed its connection or died: ``peer`` is its rank in the transport."""

    def __init__(self, message, peer):
        super().__init__(message)
        self.peer = peer


def shm_enabled():
    """Whether ranks of one host may use shared memory (not forced to TCP by ``EMBER_DIST_TRANSPORT=tcp``)."""
    return os.environ.get("EMBER_DIST_TRANSPORT", "").lower() != "tcp" and _shm.available()


def _bind_host():
    """The address this rank listens on: ``EMBER_DIST_HOST``, else the interface that reaches MASTER_ADDR."""
    host = os.environ.get("EMBER_DIST_HOST")
    if host:
        return host
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        addr = socket.getaddrinfo(master, None, socket.AF_INET)[0][4][0]
        if ipaddress.ip_address(addr).is_loopback:
            return "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((addr, 9))  # no packet is sent: this only picks the route
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class Message:
    """A received message: ``src``, ``tag`` and ``frames`` (bytes-like). Frames read in place from shared
    memory are valid until ``release()``, which every receiver calls when done with them."""

    __slots__ = ("src", "tag", "frames", "_releases", "_owner")

    def __init__(self, src, tag, frames, releases=(), owner=None):
        self.src, self.tag, self.frames, self._releases, self._owner = src, tag, frames, releases, owner

    def release(self):
        if self._releases:
            post = self._owner.post
            for index, gen in self._releases:
                post(index, gen)
            self._releases = ()


class Sent:
    """The completion of a send: ``wait(deadline)`` returns once the frames' memory may be changed again."""

    __slots__ = ("_transport", "_peer", "_trackers", "_event", "_error")

    def __init__(self, transport, peer, trackers=(), event=None):
        self._transport, self._peer, self._trackers, self._event, self._error = transport, peer, trackers, event, None

    def done(self):
        return (self._event is None or self._event.is_set()) and all(t.done for t in self._trackers)

    def wait(self, deadline=None):
        tr = self._transport
        if self._event is not None:
            while not self._event.wait(0.05):
                tr.poll()
                tr._check_deadline(self._peer, deadline, "send")
            if self._error is not None:
                raise self._error
        for t in self._trackers:
            while not t.done:
                try:
                    t.wait(0.05)
                except zmq.NotDone:
                    tr.poll()
                    tr._check_deadline(self._peer, deadline, "send")


_DONE = Sent(None, None)


class _Outbox:
    """Sending to one peer of this host: the slots of a shared segment, and a queue drained by a thread when a
    send had to wait for a slot (later sends to that peer queue behind it, keeping the order)."""

    def __init__(self, transport, peer, control):
        self.transport, self.peer, self.control = transport, peer, control  # control: the peer's counters
        self.segment = _shm.Segment(SLOTS * SLOT, counters=0)
        self.slots = [self.segment.data(i * SLOT, SLOT) for i in range(SLOTS)]
        self.gens = [0] * SLOTS  # generations sent per slot; the peer releases them in its counters
        self.next = 0
        self.index0 = transport.rank * SLOTS  # this sender's counters in the peer's control segment
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.thread = None

    def free_slot(self):
        i = self.next
        for k in range(SLOTS):
            j = (i + k) % SLOTS
            if int(self.control.counters[self.index0 + j]) == _shm.wrap32(self.gens[j]):
                self.next = (j + 1) % SLOTS
                return j
        return None

    def wait_slot(self, deadline):
        """A free slot, sleeping on the oldest one's release."""
        j = self.next
        tr = self.transport
        self.control.wait(self.index0 + j, _shm.wrap32(self.gens[j]), deadline if deadline else float("inf"),
                          lambda: tr.poll() or tr._check_deadline(self.peer, None, "send"))
        self.next = (j + 1) % SLOTS
        return j

    def fill(self, frame, get_slot):
        """Copy ``frame`` into as many slots as it needs; the layout entry that tells the receiver where."""
        data = np.frombuffer(frame, np.uint8) if not isinstance(frame, np.ndarray) else frame.reshape(-1).view(
            np.uint8)
        pieces = []
        for lo in range(0, max(len(data), 1), SLOT):
            part = data[lo:lo + SLOT]
            j = get_slot()
            np.copyto(self.slots[j][:len(part)], part)
            self.gens[j] += 1
            pieces.append((j, self.gens[j], len(part)))
        return pieces


class Transport:
    """Messages among ``size`` ranks (this one is ``rank``), connected through ``store`` (keys ``prefix + rank``).

    ``send(dst, tag, frames)`` returns a ``Sent``; ``recv(src, tag, deadline)`` a ``Message`` (``src=None``: from
    any peer). ``send_obj``/``recv_obj`` move one picklable object. Deadlines are ``time.monotonic()`` values
    (None: no limit). Threads may send and receive at the same time. ``close()`` says goodbye to the peers.
    ``io_threads``: ZeroMQ's threads of the context the sockets use (shared with transports asking the same)."""

    def __init__(self, store, rank, size, *, prefix="transport/", label="", io_threads=IO_THREADS):
        self.rank, self.size, self.label = rank, size, label
        self._ctx = _context(io_threads)
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.RCVHWM, 0)
        self._router.setsockopt(zmq.LINGER, 0)
        host = _bind_host()
        port = self._router.bind_to_random_port(f"tcp://{host}")
        self.address = f"{host}:{port}"
        self._control = _shm.Segment(0, counters=size * SLOTS) if shm_enabled() and size > 1 else None
        ipc = _ipc_namespace() if self._control is not None else None
        if ipc is not None:  # peers of this host connect through a Unix socket (cheaper than TCP)
            ipc = (ipc, f"ipc://@ember-transport-{os.getpid()}-{port}")  # (abstract: no file to remove)
            self._router.bind(ipc[1])
        store.set(f"{prefix}{rank}", pickle.dumps({"address": self.address, "pid": os.getpid(), "ipc": ipc,
                                                   "control": self._control and self._control.desc}))
        self.addresses = {}
        self._dealers, self._send_locks, self._monitors, self._outboxes, self._inboxes = {}, {}, {}, {}, {}
        self._peer_controls = {}
        for p in range(size):
            if p == rank:
                continue
            info = pickle.loads(store.get(f"{prefix}{p}"))
            self.addresses[p] = info["address"]
            d = self._ctx.socket(zmq.DEALER)
            d.setsockopt(zmq.IDENTITY, str(rank).encode())
            d.setsockopt(zmq.SNDHWM, 0)
            d.setsockopt(zmq.LINGER, 2000)
            d.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
            d.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            mon = d.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED)
            if self._control is not None and info["control"] is not None:
                ctl = _shm.Segment.attach(info["control"])
                if ctl is not None:
                    self._peer_controls[p] = ctl
            peer_ipc = info.get("ipc")
            if p in self._peer_controls and ipc is not None and peer_ipc is not None and peer_ipc[0] == ipc[0]:
                d.connect(peer_ipc[1])
            else:
                d.connect(f"tcp://{info['address']}")
            self._dealers[p], self._send_locks[p], self._monitors[mon] = d, threading.Lock(), p
        self.local_peers = frozenset(self._peer_controls)  # peers sharing memory with this rank
        _store_barrier(store, f"{prefix}ready/", rank, size)  # nobody closes before all have mapped its segment
        self._mail = collections.defaultdict(collections.deque)
        self._cond = threading.Condition()
        self._pumping = False
        self._suspect = {}  # peer -> monotonic time its connection dropped
        self._gone = {}  # peer -> PeerError
        self._failed = set()  # the gone peers that died or closed after an error (not a clean goodbye)
        self._closed = False
        self._rcvtimeo = -1  # the router's receive timeout (ms), as last set
        self._watched = 0.0  # when the monitors were last read

    # ---- sending -----------------------------------------------------------------------------------------
    def send(self, dst, tag, frames=()):
        """Send ``frames`` to ``dst`` under ``tag``; the frames must stay unchanged until the ``Sent`` is done."""
        if dst == self.rank:  # to itself: copies straight into the mailbox
            with self._cond:
                self._mail[(dst, tag)].append(Message(dst, tag, [bytearray(f) for f in frames]))
                self._cond.notify_all()
            return _DONE
        self._raise_if_gone(dst)
        box = self._outboxes.get(dst)
        if box is None and dst in self._peer_controls and any(_nbytes(f) >= SHM_MIN for f in frames):
            box = self._outboxes[dst] = _Outbox(self, dst, self._peer_controls[dst])
        if box is not None:
            with box.cond:
                if not box.queue:
                    sent = self._send_now(dst, tag, frames, box, wait=False)
                    if sent is not None:
                        return sent
                ev = threading.Event()
                sent = Sent(self, dst, event=ev)
                box.queue.append((tag, frames, sent))
                if box.thread is None:
                    box.thread = threading.Thread(target=self._drain, args=(box,), daemon=True,
                                                  name=f"ember-dist-send-{dst}")
                    box.thread.start()
                box.cond.notify()
                return sent
        return self._send_now(dst, tag, frames, None, wait=False)

    def _send_now(self, dst, tag, frames, box, wait):
        """Send through the slots of ``box`` (waiting for them if ``wait``) and the socket; None when the slots
        needed are not free and ``wait`` is false (nothing is sent then)."""
        self._raise_if_gone(dst)
        zframes, header = frames, None
        if box is not None:
            big, need = [], 0
            for f in frames:  # shared memory for large frames, as long as the message fits in the slots
                n = _nbytes(f)
                b = n >= SHM_MIN and need + _slots_needed(n) <= SLOTS
                need += _slots_needed(n) if b else 0
                big.append(b)
            if need and not wait and need > self._free_slots(box):
                return None
            if need:
                get = (lambda: box.wait_slot(None)) if wait else box.free_slot
                layout = [box.fill(f, get) if b else None for f, b in zip(frames, big)]
                zframes = [f for f, b in zip(frames, big) if not b]
                header = pickle.dumps((_DATA, tag, layout, box.segment.desc), protocol=5)
        if header is None:
            header = pickle.dumps((_DATA, tag, None, None), protocol=5)
        trackers = []
        with self._send_locks[dst]:
            d = self._dealers[dst]
            if not zframes:
                d.send(header)
            else:
                d.send(header, zmq.SNDMORE)
                last = len(zframes) - 1
                for i, f in enumerate(zframes):
                    flags = zmq.SNDMORE if i < last else 0
                    if _nbytes(f) < COPY_MAX:
                        d.send(f, flags)
                    else:
                        trackers.append(d.send(f, flags, copy=False, track=True))
        return Sent(self, dst, trackers) if trackers else _DONE

    def _free_slots(self, box):
        ctl, i0 = box.control.counters, box.index0
        return sum(int(ctl[i0 + j]) == _shm.wrap32(box.gens[j]) for j in range(SLOTS))

    def _drain(self, box):
        while True:
            with box.cond:
                while not box.queue:
                    if self._closed:
                        return
                    box.cond.wait(1.0)
                tag, frames, sent = box.queue[0]
            try:
                self._send_now(box.peer, tag, frames, box, wait=True)
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the send
                sent._error = e
            with box.cond:
                box.queue.popleft()
            sent._event.set()

    def send_obj(self, dst, tag, obj):
        """Pickle ``obj`` (protocol 5, buffers out of band) and send it; returns the ``Sent``."""
        buffers = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        return self.send(dst, tag, [data, *(b.raw() for b in buffers)])

    # ---- receiving ---------------------------------------------------------------------------------------
    def recv(self, src, tag, deadline=None, watch=()):
        """The next message from ``src`` (None: any peer) under ``tag``; the loss of ``src``, or the failure of a
        peer in ``watch`` (one whose failure means the message will never come; a peer that said a clean goodbye
        had finished), raises its PeerError."""
        cond = self._cond
        with cond:
            while True:
                msg = self._take(src, tag)
                if msg is not None:
                    return msg
                self._check_deadline(src, deadline, "recv")
                for p in watch:
                    if p in self._failed:
                        raise self._gone[p]
                timeout = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
                if self._pumping:
                    cond.wait(timeout)
                    continue
                self._pumping = True
                arrived = []
                cond.release()  # (the sockets are read without the lock; the mailbox is filled with it)
                try:
                    self._pump(timeout, arrived)
                finally:
                    cond.acquire()
                    self._pumping = False
                    self._post(arrived)

    def recv_obj(self, src, tag, deadline=None):
        """The next object from ``src`` under ``tag`` (``(src, obj)`` when ``src`` is None)."""
        msg = self.recv(src, tag, deadline)
        frames = msg.frames
        if msg._releases:  # in shared memory: copy out, the slots go back at once
            frames = [bytearray(f) for f in frames]
            msg.release()
        obj = pickle.loads(frames[0], buffers=frames[1:])
        return obj if src is not None else (msg.src, obj)

    def _post(self, arrived):
        """Put messages read by ``_pump`` in the mailbox and wake its readers (with the lock held)."""
        mail = self._mail
        for msg in arrived:
            mail[(msg.src, msg.tag)].append(msg)
        self._cond.notify_all()

    def _take(self, src, tag):
        if not self._mail:
            return None
        if src is None:
            src = next((s for s, t in self._mail if t == tag), None)
        q = self._mail.get((src, tag))
        if not q:
            return None
        msg = q.popleft()
        if not q:  # tags may be used once (rpc's are per request): an emptied queue goes, or the mailbox grows
            del self._mail[(src, tag)]
        return msg

    def _pump(self, timeout, arrived):
        """Read what arrived into the list ``arrived`` (for the mailbox): with ``timeout`` (seconds), the first
        message to arrive within it (a blocking receive: no poll before it, no exception after it); without, all
        that has arrived. Note dropped connections (every ``WATCH`` seconds at least)."""
        router = self._router
        ms = int(timeout * 1000)
        if ms > 0:
            if ms != self._rcvtimeo:
                router.setsockopt(zmq.RCVTIMEO, ms)
                self._rcvtimeo = ms
            try:
                self._deliver(_recv_parts(router, 0), arrived)
            except zmq.Again:  # nothing within the timeout
                pass
        else:
            while True:
                try:
                    parts = _recv_parts(router, zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._deliver(parts, arrived)
        now = time.monotonic()
        if now - self._watched >= WATCH or ms <= 0:
            self._watched = now
            self._watch(now)

    def _watch(self, now):
        """Read the monitors' events; declare gone the peers whose connection dropped ``GRACE`` seconds ago."""
        for mon, p in self._monitors.items():
            while True:
                try:
                    mon.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._suspect.setdefault(p, now)
        if self._suspect:
            for p, t in list(self._suspect.items()):
                if now - t >= GRACE and p not in self._gone:
                    self._failed.add(p)
                    self._gone[p] = PeerError(
                        f"[Rank {self.rank}] Connection closed by peer rank {p} ({self.addresses[p]}){self.label}: "
                        "it exited, crashed or closed the process group", p)

    def _deliver(self, parts, arrived):
        src = int(parts[0].bytes)
        kind, tag, layout, seg_desc = pickle.loads(parts[1].bytes)
        if kind == _BYE:  # its tag: why it closed, when an error made it
            why = f" after an error: {tag}" if tag else ""
            if tag:
                self._failed.add(src)
            self._gone.setdefault(src, PeerError(
                f"[Rank {self.rank}] Connection closed by peer rank {src} ({self.addresses[src]}){self.label}: "
                f"it closed the process group{why}", src))
            return
        zframes = [f.buffer for f in parts[2:]]
        releases = ()
        if layout is None:
            frames = zframes
        else:
            inbox = self._inbox(src, seg_desc)
            frames, releases, k = [], [], 0
            base = src * SLOTS
            for entry in layout:
                if entry is None:
                    frames.append(zframes[k])
                    k += 1
                elif len(entry) == 1:
                    j, gen, n = entry[0]
                    frames.append(inbox[j][:n])
                    releases.append((base + j, _shm.wrap32(gen)))
                else:  # a frame larger than a slot: joined into memory of its own
                    buf = np.empty(sum(n for _, _, n in entry), np.uint8)
                    lo = 0
                    for j, gen, n in entry:
                        buf[lo:lo + n] = inbox[j][:n]
                        lo += n
                        self._control.post(base + j, _shm.wrap32(gen))
                    frames.append(buf)
        arrived.append(Message(src, tag, frames, releases, self._control))

    def _inbox(self, src, desc):
        box = self._inboxes.get(src)
        if box is None or box[0] != desc:
            seg = _shm.Segment(None, desc=desc)
            box = self._inboxes[src] = (desc, seg, [seg.data(i * SLOT, SLOT) for i in range(SLOTS)])
        return box[2]

    # ---- failures ----------------------------------------------------------------------------------------
    def peer_error(self, peer):
        """The PeerError of ``peer`` if it is gone, else None (reads pending events without waiting)."""
        if peer not in self._gone and not self._pumping:
            self.poll()
        return self._gone.get(peer)

    def poll(self):
        """Read what has arrived without waiting (mailbox, peer events); for callers that wait elsewhere."""
        with self._cond:
            if self._pumping:
                return
            self._pumping = True
        arrived = []
        try:
            self._pump(0, arrived)
        finally:
            with self._cond:
                self._pumping = False
                self._post(arrived)

    def gone(self):
        """The peers known to be gone: {rank: PeerError}."""
        return dict(self._gone)

    def failed(self):
        """The gone peers that died or closed after an error: {rank: PeerError}."""
        return {p: self._gone[p] for p in self._failed}

    def _raise_if_gone(self, peer):
        err = self._gone.get(peer)
        if err is not None:
            raise err
        self._raise_if_closed()

    def _raise_if_closed(self):
        if self._closed:
            raise DistBackendError(f"[Rank {self.rank}] the transport{self.label} is closed")

    def _check_deadline(self, peer, deadline, what):
        """Raise if ``peer`` (None: any of them, for receives from any source) is gone or ``deadline`` passed.
        (Receivers look in the mailbox first: a gone peer's last messages are there.)"""
        if peer is None:
            if len(self._gone) == self.size - 1 and self.size > 1:
                raise next(iter(self._gone.values()))
            self._raise_if_closed()
        else:
            self._raise_if_gone(peer)
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(what)

    # ---- closing -----------------------------------------------------------------------------------------
    def _linger(self, deadline):
        """Wait (until ``deadline``) for queued sends to leave and for live peers to release this rank's slots:
        the segment they read goes away with the process."""
        for box in self._outboxes.values():
            while time.monotonic() < deadline and box.peer not in self._gone and box.peer not in self._suspect:
                with box.cond:
                    busy = bool(box.queue)
                if not busy and self._free_slots(box) == SLOTS:
                    break
                time.sleep(0.002)
                self.poll()

    def close(self, reason=None):
        """Say goodbye to every peer (after the messages already sent; ``reason``: the error that made this rank
        close, told to the peers) and close the sockets."""
        if self._closed:
            return
        self._linger(time.monotonic() + LINGER)
        self._closed = True  # receivers raise at their next look; nobody pumps the sockets after this
        with self._cond:
            while self._pumping:
                self._cond.wait(0.05)
            self._pumping = True
        bye = pickle.dumps((_BYE, reason, None, None))
        for p, d in self._dealers.items():
            with self._send_locks[p]:
                try:
                    d.send(bye, zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass
        for box in self._outboxes.values():
            with box.cond:
                box.cond.notify_all()
        for d in self._dealers.values():
            d.disable_monitor()
        for mon in self._monitors:
            mon.close(0)
        for p, d in self._dealers.items():
            d.close(0 if p in self._gone else 1000)
        self._router.close(0)
        segments = [*(b.segment for b in self._outboxes.values()), *(seg for _, seg, _ in self._inboxes.values()),
                    *self._peer_controls.values(), *([self._control] if self._control is not None else [])]
        self._inboxes.clear()
        for seg in segments:
            seg.close()


_contexts = {}  # (pid, io threads) -> the ZeroMQ context of the transports asking for that many
_contexts_lock = threading.Lock()


def _context(io_threads):
    """This process's ZeroMQ context with ``io_threads`` threads (``IO_THREADS``: pyzmq's shared instance)."""
    if io_threads == IO_THREADS:
        return zmq.Context.instance(io_threads=IO_THREADS)
    with _contexts_lock:
        key = (os.getpid(), io_threads)  # (a forked child makes its own)
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = _contexts[key] = zmq.Context(io_threads=io_threads)
        return ctx


def _ipc_namespace():
    """The network namespace of this process where Unix sockets may have abstract names (Linux), else None: two
    ranks of one host reach each other's abstract sockets when they are in the same one."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def _recv_parts(sock, flags):
    """The frames of the next message (``recv_multipart(copy=False)`` without its option read per frame)."""
    f = sock.recv(flags, copy=False)
    parts = [f]
    while f.more:
        f = sock.recv(flags, copy=False)
        parts.append(f)
    return parts


def _store_barrier(store, prefix, rank, size):
    """Return once every rank has reached this point (keys ``prefix + rank`` in ``store``)."""
    store.set(f"{prefix}{rank}", b"1")
    for q in range(size):
        if q != rank:
            store.get(f"{prefix}{q}")


def _nbytes(frame):
    return frame.nbytes if hasattr(frame, "nbytes") else len(frame)


def _slots_needed(n):
    return max(1, -(-n // SLOT))
