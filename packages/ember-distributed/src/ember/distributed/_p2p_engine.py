"""Collectives as messages between ranks (the transport): for groups spanning hosts, or forced onto TCP.

Small payloads go in one round: every rank sends its part (with the call's descriptor) straight to the ranks that
need it, and reductions are done by every receiver in rank order, so all ranks round alike. Large payloads are
cut into ``PIPE``-byte pieces and move around a ring: all_reduce is a reduce-scatter (each piece reduced as it
arrives, then passed on, so the arithmetic on one piece overlaps the transfer of the next) followed by an
all-gather; broadcast is a pipelined chain from the root. Before a large collective the ranks exchange their
descriptors (one small round), so a mismatch raises the same error on every rank instead of hanging.

Each collective takes the next sequence number; its messages are tagged (sequence, step, piece), so messages of
different collectives never mix. User send/recv use tags of their own (("p2p", tag, piece)).
"""
import pickle

import numpy as np

from ._shm_engine import MismatchError

PIPE = 8 << 20  # bytes per piece of a large payload (64 MB all_reduce, 4 ranks, TCP: 1 MB pieces 97-100 ms, 8 MB 91-97)
SMALL = 64 << 10  # payloads up to this size go in one round


class P2PEngine:
    def __init__(self, transport, rank, size):
        self.t, self.rank, self.size = transport, rank, size
        self.seq = 0
        self.deadline = None
        self._others = tuple(q for q in range(size) if q != rank)

    # ---- messaging helpers -------------------------------------------------------------------------------
    def _recv(self, src, tag):
        try:
            return self.t.recv(src, tag, self.deadline, self._others)  # any rank lost: the collective cannot end
        except TimeoutError:
            raise TimeoutError(f"waiting for rank {src}" if src is not None else "waiting for a sender") from None

    def _wait_sent(self, sents):
        for s in sents:
            try:
                s.wait(self.deadline)
            except TimeoutError:
                raise TimeoutError(f"sending to rank {s._peer}") from None

    def _peers(self):
        return [q for q in range(self.size) if q != self.rank]

    def _exchange(self, sig, payloads, mismatch, step=0, key=None):
        """Send ``payloads[q]`` (a list of frames, maybe empty) with ``sig`` to every peer q and receive theirs;
        check that all descriptors agree (``key(sig)`` when given); returns ({q: Message}, {q: descriptor})."""
        tag = (self.seq, step)
        head = pickle.dumps(sig, protocol=5)
        sents = [self.t.send(q, tag, [head, *payloads[q]]) for q in self._peers()]
        msgs = {q: self._recv(q, tag) for q in self._peers()}
        sigs = {q: pickle.loads(m.frames[0]) for q, m in msgs.items()}
        sigs[self.rank] = sig
        keys = [sigs[q] if key is None else key(sigs[q]) for q in range(self.size)]
        for q in range(1, self.size):
            if keys[q] != keys[0]:
                for m in msgs.values():
                    m.release()
                raise mismatch(keys, q)
        self._wait_sent(sents)
        return msgs, sigs

    def _agree(self, sig, mismatch):
        """Every rank's descriptor equals ``sig`` (one small round among all ranks)."""
        self._exchange(sig, {q: [] for q in self._peers()}, mismatch, step="agree")

    def _pieces(self, arr):
        per = max(1, PIPE // arr.itemsize)
        return [arr[i:i + per] for i in range(0, arr.size, per)]

    @staticmethod
    def _view(msg, k, dtype):
        return np.frombuffer(msg.frames[k], dtype)

    # ---- rings -------------------------------------------------------------------------------------------
    def _ring_reduce_scatter(self, blocks, combine):
        """Reduce ``blocks`` (one per rank, 1-D) around the ring in place: rank r ends with block r reduced."""
        n, r, t = self.size, self.rank, self.t
        nxt, prv = (r + 1) % n, (r - 1) % n
        sents = [t.send(nxt, (self.seq, "rs", 0, i), [p]) for i, p in enumerate(self._pieces(blocks[(r - 1) % n]))]
        for s in range(n - 1):
            for i, p in enumerate(self._pieces(blocks[(r - s - 2) % n])):
                m = self._recv(prv, (self.seq, "rs", s, i))
                combine([p, self._view(m, 0, p.dtype)], p)
                m.release()
                if s < n - 2:
                    sents.append(t.send(nxt, (self.seq, "rs", s + 1, i), [p]))
        self._wait_sent(sents)

    def _ring_all_gather(self, blocks):
        """Rank r holds block r; afterwards every rank holds all blocks."""
        n, r, t = self.size, self.rank, self.t
        nxt, prv = (r + 1) % n, (r - 1) % n
        sents = [t.send(nxt, (self.seq, "ag", 0, i), [p]) for i, p in enumerate(self._pieces(blocks[r]))]
        for s in range(n - 1):
            for i, p in enumerate(self._pieces(blocks[(r - s - 1) % n])):
                m = self._recv(prv, (self.seq, "ag", s, i))
                p[...] = self._view(m, 0, p.dtype)
                m.release()
                if s < n - 2:
                    sents.append(t.send(nxt, (self.seq, "ag", s + 1, i), [p]))
        self._wait_sent(sents)

    def _blocks(self, arr):
        n = arr.size
        return [arr[q * n // self.size:(q + 1) * n // self.size] for q in range(self.size)]

    def _send_pieces(self, dst, arr, step):
        return [self.t.send(dst, (self.seq, step, i), [p]) for i, p in enumerate(self._pieces(arr))]

    def _recv_pieces(self, src, arr, step):
        for i, p in enumerate(self._pieces(arr)):
            m = self._recv(src, (self.seq, step, i))
            p[...] = self._view(m, 0, p.dtype)
            m.release()

    # ---- collectives -------------------------------------------------------------------------------------
    def barrier(self, sig, mismatch):
        self.seq += 1
        self._agree(sig, mismatch)

    def all_reduce(self, arr, reducer, sig, mismatch, root=None):
        self.seq += 1
        if arr.nbytes <= SMALL:
            gets = root is None or root == self.rank
            payloads = {q: ([arr] if root is None or root == q else []) for q in self._peers()}
            msgs, _ = self._exchange(sig, payloads, mismatch)
            if gets:
                srcs = [arr.copy() if q == self.rank else self._view(msgs[q], 1, arr.dtype) for q in range(self.size)]
                reducer.combine(srcs, arr)
                reducer.finish(arr)
            for m in msgs.values():
                m.release()
            return
        self._agree(sig, mismatch)
        work = arr if root is None or root == self.rank else arr.copy()
        blocks = self._blocks(work)
        self._ring_reduce_scatter(blocks, reducer.combine)
        reducer.finish(blocks[self.rank])
        if root is None:
            self._ring_all_gather(blocks)
        elif root == self.rank:
            for q in self._peers():
                self._recv_pieces(q, blocks[q], "gather")
        else:
            self._wait_sent(self._send_pieces(root, blocks[self.rank], "gather"))

    def broadcast(self, arr, root, sig, mismatch):
        self.seq += 1
        arr = arr.view(np.uint8)
        if arr.nbytes <= SMALL or self.size == 2:
            msgs, _ = self._exchange(sig, {q: [arr] if self.rank == root else [] for q in self._peers()}, mismatch)
            if self.rank != root:
                arr[...] = self._view(msgs[root], 1, np.uint8)
            for m in msgs.values():
                m.release()
            return
        self._agree(sig, mismatch)
        pos = (self.rank - root) % self.size
        nxt, prv = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        sents = []
        for i, p in enumerate(self._pieces(arr)):
            if pos:
                m = self._recv(prv, (self.seq, "bc", i))
                p[...] = self._view(m, 0, np.uint8)
                m.release()
            if pos < self.size - 1:
                sents.append(self.t.send(nxt, (self.seq, "bc", i), [p]))
        self._wait_sent(sents)

    def all_gather(self, outs, inp, sig, mismatch, root=None):
        self.seq += 1
        inp = inp.view(np.uint8)
        if inp.nbytes <= SMALL or root is not None:
            gets = root is None or root == self.rank
            if inp.nbytes <= SMALL:
                payloads = {q: ([inp] if root is None or root == q else []) for q in self._peers()}
                msgs, _ = self._exchange(sig, payloads, mismatch)
                if gets:
                    for q in self._peers():
                        outs[q][...] = self._view(msgs[q], 1, np.uint8)
                for m in msgs.values():
                    m.release()
            else:  # gather of large parts: straight to the root
                self._agree(sig, mismatch)
                if gets:
                    for q in self._peers():
                        self._recv_pieces(q, outs[q], "gather")
                else:
                    self._wait_sent(self._send_pieces(root, inp, "gather"))
            if gets:
                _copy(outs[self.rank], inp)
            return
        self._agree(sig, mismatch)
        _copy(outs[self.rank], inp)
        self._ring_all_gather(outs)

    def scatter(self, out, ins, root, sig, mismatch):
        self.seq += 1
        out = out.view(np.uint8)
        if out.nbytes <= SMALL:
            msgs, _ = self._exchange(sig, {q: [ins[q]] if self.rank == root else [] for q in self._peers()}, mismatch)
            if self.rank != root:
                out[...] = self._view(msgs[root], 1, np.uint8)
            for m in msgs.values():
                m.release()
        else:
            self._agree(sig, mismatch)
            if self.rank == root:
                sents = [s for q in self._peers() for s in self._send_pieces(q, ins[q], "scatter")]
                self._wait_sent(sents)
            else:
                self._recv_pieces(root, out, "scatter")
        if self.rank == root:
            _copy(out, ins[root])

    def reduce_scatter(self, out, ins, reducer, sig, mismatch):
        self.seq += 1
        if max(x.nbytes for x in ins) <= SMALL:
            msgs, _ = self._exchange(sig, {q: [ins[q]] for q in self._peers()}, mismatch)
            own = ins[self.rank].copy() if np.shares_memory(ins[self.rank], out) else ins[self.rank]
            srcs = [own if q == self.rank else self._view(msgs[q], 1, out.dtype) for q in range(self.size)]
            reducer.combine(srcs, out)
            reducer.finish(out)
            for m in msgs.values():
                m.release()
            return
        self._agree(sig, mismatch)
        work = np.concatenate(ins)
        offs = np.cumsum([0] + [x.size for x in ins])
        blocks = [work[offs[q]:offs[q + 1]] for q in range(self.size)]
        self._ring_reduce_scatter(blocks, reducer.combine)
        reducer.finish(blocks[self.rank])
        out[...] = blocks[self.rank]

    def all_to_all(self, outs, ins, sig, mismatch):
        self.seq += 1
        sizes = ([x.size for x in ins], [x.size for x in outs])
        _, table = self._exchange((sig, sizes), {q: [] for q in self._peers()}, mismatch, step="sizes",
                                  key=lambda d: d[0])
        for p in range(self.size):  # every rank checks every pair: all raise alike
            for q in range(self.size):
                if table[p][1][0][q] != table[q][1][1][p]:
                    raise MismatchError(
                        f"all_to_all: rank {p} sends {table[p][1][0][q]} bytes to rank {q}, which expects "
                        f"{table[q][1][1][p]} bytes from it (split sizes disagree across ranks)")
        sents = [s for q in self._peers() for s in self._send_pieces(q, ins[q], "a2a")]
        for q in self._peers():
            self._recv_pieces(q, outs[q], "a2a")
        _copy(outs[self.rank], ins[self.rank])
        self._wait_sent(sents)

    # ---- point to point ----------------------------------------------------------------------------------
    def send(self, arr, dst, tag, sig):
        """Hand ``arr`` to the transport for ``dst``; returns the ``Sent`` handles (``arr`` is read until they are
        done)."""
        arr = arr.view(np.uint8)
        pieces = self._pieces(arr) or [arr]
        head = pickle.dumps((sig, len(pieces)), protocol=5)
        sents = [self.t.send(dst, ("p2p", tag, 0), [head, pieces[0]])]
        sents += [self.t.send(dst, ("p2p", tag, i), [p]) for i, p in enumerate(pieces[1:], 1)]
        return sents

    def recv(self, arr, src, tag, sig, deadline):
        """Receive into ``arr`` from ``src`` (None: any rank); returns the sender. A sender's descriptor (dtype and
        size) that differs from ``sig`` raises MismatchError."""
        arr = arr.view(np.uint8)
        try:
            m = self.t.recv(src, ("p2p", tag, 0), deadline)
            src = m.src
            their, count = pickle.loads(m.frames[0])
            if their != sig:
                m.release()
                for i in range(1, count):
                    self.t.recv(src, ("p2p", tag, i), deadline).release()
                raise MismatchError(f"recv: rank {src} sent {_describe(their)} but this rank expects "
                                    f"{_describe(sig)} (tag {tag})")
            pieces = self._pieces(arr) or [arr]
            pieces[0][...] = self._view(m, 1, np.uint8)
            m.release()
            for i, p in enumerate(pieces[1:], 1):
                mi = self.t.recv(src, ("p2p", tag, i), deadline)
                p[...] = self._view(mi, 0, np.uint8)
                mi.release()
        except TimeoutError:
            raise TimeoutError(f"waiting for rank {src}" if src is not None else "waiting for a sender") from None
        return src


def _describe(sig):
    dtype, numel = sig
    return f"{numel} elements of {dtype}"


def _copy(dst, src):
    """``dst[...] = src`` unless they are the same memory."""
    if dst.ctypes.data != src.ctypes.data or dst.nbytes != src.nbytes:
        dst[...] = src


