"""CPU tensors in memory that other processes share: ``Tensor.share_memory_``, ``Tensor.is_shared`` and how
multiprocessing pickles such tensors.

``share_memory_`` moves a tensor's array into a *segment*: an anonymous file (``memfd_create``, or an
unlinked temporary file where that is missing) mapped with ``MAP_SHARED``. A child started with ``fork``
inherits the mapping, so in-place writes on either side are seen by the other. For ``spawn``/``forkserver``
children and for queues, multiprocessing pickles the tensor with the reducer registered here: it sends the
segment's file descriptor (multiprocessing passes it to the child, or hands it over a Unix socket for
queues) with the view's offset, shape and strides, and the receiver maps the same segment. A receiver maps
each segment once, so views of one shared tensor sent separately still alias each other there.

Each segment holds two file descriptors while it is mapped (its own, which is sent, and the private
duplicate Python's mmap keeps): a process sharing thousands of tensors may need a higher ``ulimit -n``.
A process that puts a shared tensor in a queue must live until the receiver has taken it out (the
receiver fetches the descriptor from it), as with PyTorch.

Tensors that are not shared pickle by copy, also through multiprocessing (PyTorch would move them into
shared memory on the way; ember leaves the sender's tensor alone). Unlike PyTorch, which moves the whole
storage, ``share_memory_`` moves this tensor's array only: views taken from it *before* the call keep
the old memory, so share first, then take views (``module.share_memory()`` before training, as usual).
"""
import mmap
import os
import tempfile
import weakref

import numpy as np

from . import _dtype as D
from ._tensor import Tensor


class _Segment(mmap.mmap):
    """A shared mapping of an anonymous file. ``fd`` is the descriptor that other processes are sent (mmap keeps
    a private duplicate it does not expose); it is closed with the mapping."""


_attached = weakref.WeakValueDictionary()  # (st_dev, st_ino) of a segment's file -> its mapping in this process
_registered = []
_handles = weakref.WeakKeyDictionary()  # process being started -> {descriptor: its handle in that start}


def _anonymous_fd():
    if hasattr(os, "memfd_create"):
        return os.memfd_create("ember-shared", os.MFD_CLOEXEC)
    fd, path = tempfile.mkstemp(prefix="ember-shared-")
    os.unlink(path)
    return fd


def _map(fd, size):
    """The mapping of file ``fd`` (which it takes over), made unless this process maps that file already."""
    st = os.fstat(fd)
    seg = _attached.get((st.st_dev, st.st_ino))
    if seg is not None:
        if fd != seg.fd:  # (a child handed the same descriptor twice must not close the one it uses)
            os.close(fd)
        return seg
    seg = _attached[(st.st_dev, st.st_ino)] = _Segment(fd, size)
    seg.fd = fd
    weakref.finalize(seg, os.close, fd)
    return seg


def segment_of(arr):
    """The segment holding NumPy array ``arr``, or None when it is ordinary memory."""
    base = arr.base
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return base if isinstance(base, _Segment) else None


def share_memory_(self):
    """Move this CPU tensor's values into shared memory (in place; a no-op when already shared or on CUDA,
    whose memory other processes reach through CUDA IPC). Returns ``self``."""
    arr = self._data
    if type(arr) is not np.ndarray or segment_of(arr) is not None:
        return self
    fd = _anonymous_fd()
    os.ftruncate(fd, max(arr.nbytes, 1))  # a mapping cannot be empty
    seg = _map(fd, max(arr.nbytes, 1))
    order = "F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C"  # keep a transpose's strides
    shared = np.ndarray(arr.shape, dtype=arr.dtype, buffer=seg, order=order)
    shared[...] = arr
    self._data = shared
    register_reducer()
    return self


def is_shared(self):
    """True when the tensor's values are in shared memory (always for CUDA tensors, as in PyTorch)."""
    arr = self._data
    return type(arr) is not np.ndarray or segment_of(arr) is not None


def _address(buf):
    return np.frombuffer(buf, np.uint8).__array_interface__["data"][0]


def _reduce(t):
    """Pickling of a Tensor by multiprocessing: a shared one as a handle to its segment, others by copy."""
    arr = t._data
    seg = segment_of(arr) if type(arr) is np.ndarray else None
    if seg is None:
        return t.__reduce_ex__(4)
    offset = arr.__array_interface__["data"][0] - _address(seg)
    return _rebuild, (_handle(seg), len(seg), offset, arr.shape, arr.strides, D.FROM_NP[arr.dtype].name, t._rg)


def _handle(seg):
    """What carries the segment's descriptor to the receiving process. A process being started gets each
    segment's descriptor once, however many of its tensors are among the process's arguments (multiprocessing
    refuses to pass one descriptor twice)."""
    from multiprocessing import context, reduction
    popen = context.get_spawning_popen()
    if popen is None:  # a queue or a pipe: one handle per send
        return reduction.DupFd(seg.fd)
    handles = _handles.setdefault(popen, {})
    if seg.fd not in handles:
        handles[seg.fd] = reduction.DupFd(seg.fd)
    return handles[seg.fd]


def _rebuild(dup, size, offset, shape, strides, dtype, requires_grad):
    seg = _map(dup.detach(), size)
    register_reducer()  # so that this process can send it on
    t = Tensor._wrap(np.ndarray(shape, dtype=D.storage(D._by_name(dtype)), buffer=seg, offset=offset,
                                strides=strides))
    if requires_grad:
        t.requires_grad = True
    return t


def register_reducer():
    """Make multiprocessing pickle shared tensors by handle (imports multiprocessing, so done on first need)."""
    if not _registered:
        from multiprocessing.reduction import ForkingPickler
        ForkingPickler.register(Tensor, _reduce)
        _registered.append(True)
