"""Keep the CPUs out of deep idle while calls are in flight: a PM QoS request of zero wake-up latency
(``/dev/cpu_dma_latency``, Linux), held from the first message until ``IDLE`` seconds pass without one.

Why: a call's request and response each wake three threads (ZeroMQ's io thread on both sides, then the receiver),
and a CPU that idles in ``hlt`` takes tens of microseconds to wake, more in a VM, where ``hlt`` leaves the guest
(measured on a 2-vCPU VM: a bare ZeroMQ round trip took 84 us, 32 us with the request held; an rpc_sync of a small
add 190 us, 80-116 us). With the request held, idle CPUs poll instead: a woken thread runs at once. It costs
power while held, not CPU time of the process; TensorPipe's agent busy-polls a core per process instead, all the
time. The device is the kernel's own interface for this; opening it needs root (or a udev rule granting it), so
elsewhere nothing is done. ``EMBER_RPC_CPU_LATENCY=off`` turns it off.
"""
import os
import struct
import threading
import time
import weakref

DEVICE = "/dev/cpu_dma_latency"
IDLE = 0.05  # seconds without a message after which the request is withdrawn
_ZERO, _NONE = struct.pack("i", 0), struct.pack("i", 2_000_000_000)  # (the kernel's "no constraint")
_HOLDERS = weakref.WeakSet()


class Holder:
    """The request of one agent: ``touch()`` on every message (cheap), ``check(now)`` now and then (withdraws it
    after ``IDLE`` seconds without one), ``close()`` at shutdown."""

    def __init__(self):
        self._fd = None
        self._held = False
        self.last = 0.0
        self._lock = threading.Lock()
        if os.environ.get("EMBER_RPC_CPU_LATENCY", "on").lower() in ("off", "0", "no", "false"):
            return
        try:
            self._fd = os.open(DEVICE, os.O_WRONLY)
            os.write(self._fd, _NONE)
        except OSError:  # not Linux, no such device, or not permitted
            self.close()
        else:
            _HOLDERS.add(self)

    @property
    def enabled(self):
        return self._fd is not None

    @property
    def held(self):
        return self._held

    def touch(self):
        self.last = time.monotonic()
        if not self._held and self._fd is not None:
            self._set(True)

    def check(self, now):
        """Withdraw the request when ``IDLE`` seconds passed since the last message or call."""
        if self._held and now - self.last >= IDLE:
            self._set(False)

    def _set(self, hold):
        with self._lock:
            if self._fd is not None and self._held != hold:
                try:
                    os.write(self._fd, _ZERO if hold else _NONE)
                except OSError:
                    return
                self._held = hold

    def close(self):
        with self._lock:
            fd, self._fd, self._held = self._fd, None, False
        if fd is not None:
            os.close(fd)  # (the kernel drops the request with its file)


def _forget():
    """A forked child closes its copies of the files: a request lives as long as any process holds its file, and
    the child (a data loader's worker, say) has no agent of its own."""
    for holder in list(_HOLDERS):
        fd, holder._fd, holder._held = holder._fd, None, False
        if fd is not None:
            os.close(fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
