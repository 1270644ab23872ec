"""Shared memory between the processes of one host: segments other ranks map, and counters they sleep on.

A segment is a memfd mapping: it has no name in /dev/shm, so nothing is left behind when a process dies, and a
process of the same host and user maps it through ``/proc/<pid>/fd/<fd>``. Whether two ranks share a host is
decided by that alone: a peer that maps the segment and reads back its random token shares memory with its owner
(containers with separate /proc or another machine fail to map it, and use TCP).

Counters are 32-bit words, each written by one process only (its owner), read by the others. A waiter sleeps in
the kernel (futex) on the word it waits for, in slices, so that it can check its peers' liveness and its deadline
between slices; the owner wakes sleepers after each store. On x86 and ARM64 aligned 32-bit stores are atomic and
NumPy's copies complete before the store that publishes them (x86: stores are not reordered; ARM64: the wake
syscall is a full barrier, and waiters see the counter only through the futex or after it).
"""
import ctypes
import mmap
import os
import platform
import secrets
import sys
import time

import numpy as np

_PAGE = 4096

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_SLICE = 0.05  # seconds a waiter sleeps before it checks liveness and deadline again


def available():
    """Whether shared segments can be made here (Linux with memfd and a /proc)."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


if _SYS_FUTEX is not None and available():
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long
    _SLICE_TS = _Timespec(0, int(_SLICE * 1e9))

    def _futex_wait(addr, value):
        _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAIT, ctypes.c_int(value), ctypes.byref(_SLICE_TS),
                 None, 0)

    def _futex_wake(addr):
        _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, ctypes.c_int(0x7FFFFFFF), None, None, 0)
else:  # no futex: waiters poll
    def _futex_wait(addr, value):
        time.sleep(50e-6)

    def _futex_wake(addr):
        pass


class Segment:
    """A shared mapping of ``counters`` 32-bit counters (a page or more: token first) and ``size`` data bytes.

    ``Segment(size, counters)`` makes one; ``Segment.attach(desc)`` maps a peer's from its ``desc``. Pages are
    allocated when first written, so a large ``size`` costs nothing until used."""

    def __init__(self, size, counters=16, *, desc=None):
        if desc is None:
            self.fd = os.memfd_create("ember-distributed", os.MFD_CLOEXEC)
            self.token = secrets.token_bytes(16)
            self.desc = (os.getpid(), self.fd, size, counters, self.token)
        else:
            pid, fd, size, counters, self.token = desc
            self.fd = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
            self.desc = desc
        self.size = size
        self._header = -(-(64 + 4 * counters) // _PAGE) * _PAGE
        if desc is None:
            os.ftruncate(self.fd, self._header + size)
        self.map = mmap.mmap(self.fd, self._header + size)
        if desc is None:
            self.map[:16] = self.token
        elif self.map[:16] != self.token:
            raise OSError("not the same segment")
        self.counters = np.frombuffer(self.map, np.int32, counters, 64)
        self._base = self.counters.ctypes.data

    @classmethod
    def attach(cls, desc):
        """The peer's segment, or None when it cannot be mapped from here (another host, another /proc)."""
        try:
            return cls(None, desc=desc)
        except (OSError, ValueError, TypeError):
            return None

    def data(self, offset=0, nbytes=None):
        """A uint8 array over ``nbytes`` bytes of the data area from ``offset``."""
        nbytes = self.size - offset if nbytes is None else nbytes
        return np.frombuffer(self.map, np.uint8, nbytes, self._header + offset)

    def post(self, index, value):
        """Store counter ``index`` (owner only) and wake whoever sleeps on it."""
        self.counters[index] = value
        _futex_wake(self._base + 4 * index)

    def wait(self, index, target, deadline, check):
        """Sleep until counter ``index`` reaches ``target`` (32-bit wrap-around order). ``check()`` runs between
        sleeps and raises when the owner is gone; past ``deadline`` (time.monotonic) raise TimeoutError."""
        counters, addr = self.counters, self._base + 4 * index
        target &= 0xFFFFFFFF
        cur = int(counters[index])
        if ((cur - target) & 0xFFFFFFFF) < 0x80000000:
            return
        next_check = time.monotonic() + _SLICE
        while True:
            _futex_wait(addr, cur)
            cur = int(counters[index])
            if ((cur - target) & 0xFFFFFFFF) < 0x80000000:
                return
            now = time.monotonic()
            if now >= next_check:
                check()
                if now > deadline:
                    raise TimeoutError
                next_check = now + _SLICE

    def close(self):
        self.counters = None
        try:
            self.map.close()
        except BufferError:  # arrays over it are still alive somewhere: the mapping goes with them
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


def wrap32(value):
    """``value`` as the int32 a counter stores."""
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000
