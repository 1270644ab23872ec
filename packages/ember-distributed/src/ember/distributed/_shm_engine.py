"""Collectives among ranks of one host through a shared arena: each rank reads its peers' memory directly.

Every rank owns a segment: one counter (its phase) and two halves, each a descriptor area and ``capacity`` data
bytes. A collective runs as epochs; epoch ``e`` uses half ``e % 2`` of every segment and each rank posts exactly
two phases in it (so phase numbers agree across ranks): the first once it has written its data for the epoch
(which it does only after finishing epoch ``e - 1``), the second after its middle step. Before writing a half a
rank waits until every peer posted the first phase of the previous epoch, i.e. finished with the epoch that used
the same half before: two halves let one epoch's writes overlap the peers' reads of the previous one.

all_reduce of a chunk: every rank copies it into its half; rank ``r`` then reduces slice ``r`` of all halves
(in rank order, so every rank gets the same rounding) into its own half, and every rank copies the reduced
slices out — each element is read from shared memory by its reducer and written once per rank, with no socket in
between. Small tensors skip the slices: every rank reduces the whole (one wait instead of two). The first epoch
of each collective carries a descriptor of the call (kind, dtype, sizes, root...); every rank compares all of
them before touching data, so a mismatch across ranks raises the same error everywhere instead of hanging.
"""
import pickle

import numpy as np

from . import _shm, _transport

CAPACITY = 32 << 20  # data bytes per half per rank (less for many ranks: at most 512 MB per half in all); few
# epochs matter more than cache fit: on a busy machine each wait can cost a scheduler delay
DIRECT_MAX = 64 << 10  # all_reduce below this size: every rank reduces the whole
_ALIGN = 64  # slice boundaries on cache lines


class MismatchError(RuntimeError):
    """Ranks called different collectives (or with different sizes or dtypes)."""


class ShmEngine:
    """The arena of one group. ``check(q)`` raises when peer ``q`` is gone; ``describe(sig)`` formats a
    descriptor for error messages."""

    def __init__(self, store, rank, size, check, *, capacity=None, key="arena/"):
        self.rank, self.size, self._check = rank, size, check
        self.capacity = capacity = capacity or min(CAPACITY, max(1 << 20, (512 << 20) // size))
        self._desc_bytes = 1024 + 64 * size
        half = self._desc_bytes + capacity
        self._half = half
        self.seg = _shm.Segment(2 * half, counters=1)
        store.set(f"{key}{rank}", pickle.dumps(self.seg.desc))
        self.segs = []
        for q in range(size):
            if q == rank:
                self.segs.append(self.seg)
                continue
            seg = _shm.Segment.attach(pickle.loads(store.get(f"{key}{q}")))
            if seg is None:
                raise RuntimeError(f"rank {q} does not share memory with rank {rank}")
            self.segs.append(seg)
        self._data = [[s.data(h * half + self._desc_bytes, capacity) for h in (0, 1)] for s in self.segs]
        self._descs = [[s.data(h * half, self._desc_bytes) for h in (0, 1)] for s in self.segs]
        _transport._store_barrier(store, f"{key}ready/", rank, size)  # all mapped before anyone may close
        self.phase = 0
        self.epoch = 0
        self._last = (None, b"")  # the descriptor last written and its bytes
        self._starts = [0, 0]  # phase count when the last two epochs began
        self.deadline = float("inf")

    def close(self):
        self._data = self._descs = None
        for s in self.segs:
            s.close()

    # ---- epochs and phases -------------------------------------------------------------------------------
    def _begin(self):
        e = self.epoch
        h = e & 1
        if e:
            need = self._starts[(e - 1) & 1] + 1
            for q in range(self.size):
                if q != self.rank:
                    self._wait(q, need)
        self._starts[h] = self.phase
        self.epoch = e + 1
        return h

    def _post(self):
        self.phase += 1
        self.seg.post(0, _shm.wrap32(self.phase))

    def _wait(self, q, target):
        try:
            self.segs[q].wait(0, target, self.deadline, lambda: self._check(q))
        except TimeoutError:
            raise TimeoutError(f"waiting for rank {q}") from None

    def _wait_all(self, target):
        for q in range(self.size):
            if q != self.rank:
                self._wait(q, target)

    def _put_desc(self, h, sig):
        b = pickle.dumps(sig, protocol=5)
        if len(b) + 4 > self._desc_bytes:
            raise ValueError("collective descriptor too large")
        d = self._descs[self.rank][h]
        d[:4] = np.frombuffer(np.uint32(len(b)).tobytes(), np.uint8)
        d[4:4 + len(b)] = np.frombuffer(b, np.uint8)
        self._last = (sig, b)

    def _raw_desc(self, q, h):
        d = self._descs[q][h]
        return d[4:4 + int(d[:4].view(np.uint32)[0])].tobytes()

    def _get_desc(self, q, h):
        return pickle.loads(self._raw_desc(q, h))

    def _agree(self, h, sig, mismatch):
        """Compare every rank's descriptor with ``sig`` (after the first phase: their bytes, unpickled only when
        they differ); ``mismatch(sigs, q)`` is the error to raise (the same on every rank: the lowest rank that
        disagrees with rank 0)."""
        mine = self._last[1] if self._last[0] is sig else pickle.dumps(sig, protocol=5)
        if all(q == self.rank or self._raw_desc(q, h) == mine for q in range(self.size)):
            return
        sigs = [sig if q == self.rank else self._get_desc(q, h) for q in range(self.size)]
        for q in range(1, self.size):
            if sigs[q] != sigs[0]:
                raise mismatch(sigs, q)

    def _typed(self, q, h, dtype, n, offset=0):
        return self._data[q][h][offset:offset + n * dtype.itemsize].view(dtype)

    def _bounds(self, m, itemsize):
        g = max(1, _ALIGN // itemsize)
        units = -(-m // g)
        return [min(m, (q * units // self.size) * g) for q in range(self.size + 1)]

    # ---- collectives -------------------------------------------------------------------------------------
    def barrier(self, sig, mismatch):
        h = self._begin()
        self._put_desc(h, sig)
        self._post()
        self._wait_all(self.phase)
        self._agree(h, sig, mismatch)
        self._post()

    def all_reduce(self, arr, reducer, sig, mismatch, root=None):
        """Reduce ``arr`` (1-D contiguous) over the ranks in place; with ``root`` only that rank's ``arr``
        receives the result (reduce)."""
        n, dt, item = arr.size, arr.dtype, arr.itemsize
        if arr.nbytes <= min(DIRECT_MAX, self.capacity):
            return self._all_reduce_direct(arr, reducer, sig, mismatch, root)
        per = max(1, self.capacity // item)
        for k, lo in enumerate(range(0, max(n, 1), per)):
            hi = min(n, lo + per)
            m = hi - lo
            h = self._begin()
            b = self._bounds(m, item)
            s0, s1 = b[self.rank], b[self.rank + 1]
            mine = self._typed(self.rank, h, dt, m)
            mine[:s0] = arr[lo:lo + s0]  # my own slice is read from arr directly
            mine[s1:] = arr[lo + s1:hi]
            if k == 0:
                self._put_desc(h, sig)
            self._post()
            self._wait_all(self.phase)
            if k == 0:
                self._agree(h, sig, mismatch)
            if s1 > s0:
                srcs = [arr[lo + s0:lo + s1] if q == self.rank else self._typed(q, h, dt, s1 - s0, s0 * item)
                        for q in range(self.size)]
                reducer.combine(srcs, mine[s0:s1])
                reducer.finish(mine[s0:s1])
            self._post()
            if root is None or root == self.rank:
                p2 = self.phase
                for q in range(self.size):
                    q0, q1 = b[q], b[q + 1]
                    if q1 > q0:
                        if q != self.rank:
                            self._wait(q, p2)
                        arr[lo + q0:lo + q1] = self._typed(q, h, dt, q1 - q0, q0 * item)

    def _all_reduce_direct(self, arr, reducer, sig, mismatch, root):
        h = self._begin()
        mine = self._typed(self.rank, h, arr.dtype, arr.size)
        mine[...] = arr
        self._put_desc(h, sig)
        self._post()
        self._wait_all(self.phase)
        self._agree(h, sig, mismatch)
        if root is None or root == self.rank:
            reducer.combine([self._typed(q, h, arr.dtype, arr.size) for q in range(self.size)], arr)
            reducer.finish(arr)
        self._post()

    def broadcast(self, arr, root, sig, mismatch):
        arr = arr.view(np.uint8)
        n = arr.size
        for k, lo in enumerate(range(0, max(n, 1), self.capacity)):
            hi = min(n, lo + self.capacity)
            h = self._begin()
            if self.rank == root:
                self._data[root][h][:hi - lo] = arr[lo:hi]
            if k == 0:
                self._put_desc(h, sig)
            self._post()
            if k == 0:
                self._wait_all(self.phase)
                self._agree(h, sig, mismatch)
            elif self.rank != root:
                self._wait(root, self.phase)
            if self.rank != root:
                arr[lo:hi] = self._data[root][h][:hi - lo]
            self._post()

    def all_gather(self, outs, inp, sig, mismatch, root=None):
        """``outs[q] = inp of rank q`` (all 1-D uint8 of the same size); with ``root`` only there (gather)."""
        inp = inp.view(np.uint8)
        n = inp.size
        gets = root is None or root == self.rank
        for k, lo in enumerate(range(0, max(n, 1), self.capacity)):
            hi = min(n, lo + self.capacity)
            h = self._begin()
            self._data[self.rank][h][:hi - lo] = inp[lo:hi]
            if k == 0:
                self._put_desc(h, sig)
            self._post()
            if k == 0 or gets:
                self._wait_all(self.phase)
            if k == 0:
                self._agree(h, sig, mismatch)
            if gets:
                for q in range(self.size):
                    outs[q][lo:hi] = inp[lo:hi] if q == self.rank else self._data[q][h][:hi - lo]
            self._post()

    def scatter(self, out, ins, root, sig, mismatch):
        """``out = ins[rank]`` of ``root`` (uint8 arrays of one size)."""
        out = out.view(np.uint8)
        n = out.size
        w = max(1, self.capacity // self.size)
        for k, lo in enumerate(range(0, max(n, 1), w)):
            hi = min(n, lo + w)
            h = self._begin()
            if self.rank == root:
                for q in range(self.size):
                    self._data[root][h][q * w:q * w + hi - lo] = ins[q][lo:hi]
            if k == 0:
                self._put_desc(h, sig)
            self._post()
            if k == 0:
                self._wait_all(self.phase)
                self._agree(h, sig, mismatch)
            else:
                self._wait(root, self.phase)
            out[lo:hi] = self._data[root][h][self.rank * w:self.rank * w + hi - lo]
            self._post()

    def reduce_scatter(self, out, ins, reducer, sig, mismatch):
        """``out = reduce over ranks of their ins[rank]`` (``ins[q]`` 1-D, of the size of rank q's ``out``)."""
        dt, item = out.dtype, out.itemsize
        w = max(1, self.capacity // (self.size * item))
        longest = max(x.size for x in ins)
        for k, lo in enumerate(range(0, max(longest, 1), w)):
            h = self._begin()
            for q in range(self.size):
                part = ins[q][lo:lo + w]
                self._typed(self.rank, h, dt, part.size, q * w * item)[...] = part
            if k == 0:
                self._put_desc(h, sig)
            self._post()
            self._wait_all(self.phase)
            if k == 0:
                self._agree(h, sig, mismatch)
            m = max(0, min(out.size - lo, w))
            if m:
                reducer.combine([self._typed(q, h, dt, m, self.rank * w * item) for q in range(self.size)],
                                out[lo:lo + m])
                reducer.finish(out[lo:lo + m])
            self._post()

    def all_to_all(self, outs, ins, sig, mismatch):
        """``outs[q] = ins[rank] of rank q`` (uint8 arrays; sizes agreed: checked through the descriptors)."""
        w = max(1, self.capacity // self.size)
        mine = (sig, [x.size for x in ins], [x.size for x in outs])
        k = lo = 0
        nep = 1
        while k < nep:
            h = self._begin()
            for q in range(self.size):
                part = ins[q][lo:lo + w]
                self._data[self.rank][h][q * w:q * w + part.size] = part
            if k == 0:
                self._put_desc(h, mine)
            self._post()
            self._wait_all(self.phase)
            if k == 0:
                descs = [mine if q == self.rank else self._get_desc(q, h) for q in range(self.size)]
                for q in range(1, self.size):
                    if descs[q][0] != descs[0][0]:
                        raise mismatch([d[0] for d in descs], q)
                for p in range(self.size):  # every rank checks every pair: all raise alike
                    for q in range(self.size):
                        if descs[p][1][q] != descs[q][2][p]:
                            raise MismatchError(
                                f"all_to_all: rank {p} sends {descs[p][1][q]} bytes to rank {q}, which expects "
                                f"{descs[q][2][p]} bytes from it (split sizes disagree across ranks)")
                nep = max(1, -(-max(max(d[1]) for d in descs) // w))
            for q in range(self.size):
                m = max(0, min(outs[q].size - lo, w))
                if m:
                    outs[q][lo:lo + m] = self._data[q][h][self.rank * w:self.rank * w + m]
            self._post()
            k += 1
            lo += w
