"""Process-wide tuning of glibc's malloc, applied once when ember is imported (Linux with glibc only).

Why: NumPy allocates array memory with malloc. By default glibc serves large blocks (from 128 KiB, a
limit it raises as blocks are freed) with fresh mmap mappings and gives freed memory at the top of the heap
back to the kernel beyond a small threshold. Every new temporary of a few MB (an autograd graph of
elementwise ops on 1M float32 makes dozens of 4 MB arrays per step) then costs page faults while the kernel
zeroes fresh pages: an elementwise chain measured several times slower for it. Serving blocks up to
``_MMAP_MAX`` from the heap and keeping up to ``_TRIM`` of freed heap memory lets them be reused. The peak
resident memory is what it was (memory is reused, not grown); memory freed after a peak may stay resident.

``EMBER_MALLOC_TUNING=0`` in the environment leaves malloc as it is. On other platforms, C libraries or
when anything fails, nothing changes.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)
_MMAP_MAX = 32 << 20  # glibc's largest allowed mmap threshold on 64-bit
_TRIM = 256 << 20


def tune():
    """Apply the settings above; returns whether they were applied."""
    if os.environ.get("EMBER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (musl's mallopt ignores the settings)
            return False
        mallopt = libc.mallopt
        mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)) & bool(mallopt(_M_TRIM_THRESHOLD, _TRIM))
    except (OSError, AttributeError):
        return False
