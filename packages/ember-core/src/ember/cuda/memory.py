"""Memory statistics of ember's CUDA memory pool.

ember allocates device arrays from its own ``cupy.cuda.MemoryPool`` (installed as CuPy's allocator
by ``ember.cuda._lazy_init``). Each block handed out and each cudaMalloc segment of the pool is
wrapped so that its lifetime is counted: allocated and reserved bytes, their peaks and the
allocation counts are exact and cost O(1) per allocation (CuPy's ``used_bytes()`` walks every live
block). Before CUDA is initialised the statistics are zero, as in PyTorch.
"""
import collections

from .. import _backend
from . import OutOfMemoryError, _index, _on, is_initialized

__all__ = ["caching_allocator_alloc", "caching_allocator_delete", "empty_cache", "get_per_process_memory_fraction",
           "max_memory_allocated", "max_memory_cached", "max_memory_reserved", "memory_allocated", "memory_cached",
           "memory_reserved", "memory_stats", "memory_stats_as_nested_dict", "memory_summary",
           "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "reset_peak_memory_stats", "set_per_process_memory_fraction"]

_STATS = ("allocation", "allocated_bytes", "segment", "reserved_bytes")


class _Stat:
    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def add(self, n):
        self.current += n
        self.allocated += n
        if self.current > self.peak:
            self.peak = self.current

    def sub(self, n):
        self.current -= n
        self.freed += n


class _DeviceStats:
    __slots__ = _STATS + ("num_ooms",)

    def __init__(self):
        for name in _STATS:
            setattr(self, name, _Stat())
        self.num_ooms = 0


_stats = collections.defaultdict(_DeviceStats)
_pool = None
_kept = {}  # pointers handed out by caching_allocator_alloc -> their memory


class _Owner:
    """Holds one pool block (or pool segment) and counts it for as long as any pointer into it lives."""

    __slots__ = ("mem", "count", "nbytes")

    def __init__(self, mem, count, nbytes):
        self.mem, self.count, self.nbytes = mem, count, nbytes
        count.add(1)
        nbytes.add(mem.size)

    def __del__(self):
        self.count.sub(1)
        self.nbytes.sub(self.mem.size)


def _install(cp):
    """Make ember's counted pool CuPy's allocator; CuPy's OutOfMemoryError becomes ember's."""
    global _pool
    runtime = cp.cuda.runtime
    cupy_oom = cp.cuda.memory.OutOfMemoryError
    # caught by `except ember.cuda.OutOfMemoryError` and, inside CuPy, by `except cupy...OutOfMemoryError`
    oom = type("OutOfMemoryError", (OutOfMemoryError, cupy_oom), {"__module__": __name__})

    def counted(mem, dev, count, nbytes):
        owner = _Owner(mem, count, nbytes)
        return cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(mem.ptr, mem.size, owner, dev), 0)

    def segment(size):
        dev = runtime.getDevice()
        s = _stats[dev]
        return counted(cp.cuda.Memory(size), dev, s.segment, s.reserved_bytes)

    def malloc(size):
        dev = runtime.getDevice()
        s = _stats[dev]
        try:
            ptr = pool.malloc(size)
        except cupy_oom as e:
            s.num_ooms += 1
            raise oom(f"CUDA out of memory. Tried to allocate {_fmt(size)} on GPU {dev}; ember holds "
                      f"{_fmt(s.allocated_bytes.current)} in arrays and {_fmt(s.reserved_bytes.current)} "
                      f"reserved by its pool ({e})") from None
        return counted(ptr.mem, dev, s.allocation, s.allocated_bytes)

    pool = cp.cuda.MemoryPool(segment)
    cp.cuda.set_allocator(malloc)
    _pool = pool


def _fmt(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.2f} {unit}"
        n /= 1024


def _device_stats(device):
    return _stats[_index(device)] if is_initialized() else None


def memory_allocated(device=None):
    """Bytes of device memory held by live arrays on ``device``."""
    s = _device_stats(device)
    return s.allocated_bytes.current if s else 0


def max_memory_allocated(device=None):
    s = _device_stats(device)
    return s.allocated_bytes.peak if s else 0


def memory_reserved(device=None):
    """Bytes the pool holds from the driver on ``device`` (live arrays plus cached free blocks)."""
    s = _device_stats(device)
    return s.reserved_bytes.current if s else 0


def max_memory_reserved(device=None):
    s = _device_stats(device)
    return s.reserved_bytes.peak if s else 0


def reset_peak_memory_stats(device=None):
    s = _device_stats(device)
    for name in _STATS if s else ():
        stat = getattr(s, name)
        stat.peak = stat.current


def reset_accumulated_memory_stats(device=None):
    s = _device_stats(device)
    if s:
        for name in _STATS:
            getattr(s, name).allocated = getattr(s, name).freed = 0
        s.num_ooms = 0


# PyTorch's older names for the same numbers
memory_cached, max_memory_cached = memory_reserved, max_memory_reserved
reset_max_memory_allocated = reset_max_memory_cached = reset_peak_memory_stats


def memory_stats_as_nested_dict(device=None):
    s = _device_stats(device)
    if not s:
        return {}
    out = {name: {"all": {k: getattr(getattr(s, name), k) for k in _Stat.__slots__}} for name in _STATS}
    out["num_ooms"] = s.num_ooms
    return out


def memory_stats(device=None):
    """Flat statistics of the pool, keys as in PyTorch (``"allocated_bytes.all.current"``, ...)."""
    flat = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, sub in v.items():
                walk(f"{prefix}.{k}" if prefix else k, sub)
        else:
            flat[prefix] = v

    walk("", memory_stats_as_nested_dict(device))
    return collections.OrderedDict(sorted(flat.items()))


def memory_summary(device=None, abbreviated=False):
    """A readable table of ``memory_stats``."""
    s = _device_stats(device)
    if not s:
        return "CUDA is not initialised: no memory allocated by ember.\n"
    rows = [f"{'':<18}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}"]
    for name in _STATS:
        st = getattr(s, name)
        show = _fmt if name.endswith("bytes") else str
        rows.append(f"{name:<18}" + "".join(f"{show(getattr(st, k)):>14}" for k in _Stat.__slots__))
    rows.append(f"{'num_ooms':<18}{s.num_ooms:>14}")
    return "\n".join(rows) + "\n"


def empty_cache():
    """Return the pool's cached free blocks to the driver (arrays still alive keep their memory)."""
    if _pool is not None:
        _pool.free_all_blocks()


def set_per_process_memory_fraction(fraction, device=None):
    """Cap the pool on ``device`` at ``fraction`` of its total memory; beyond it allocations raise OutOfMemoryError."""
    if not 0 < fraction <= 1:  # CuPy reads a limit of 0 as "no limit"
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: (0, 1]")
    with _on(_index(device)):
        _pool.set_limit(fraction=fraction)


def get_per_process_memory_fraction(device=None):
    from . import mem_get_info
    with _on(_index(device)):
        limit = _pool.get_limit()
        return limit / mem_get_info()[1] if limit else 1.0


def caching_allocator_alloc(size, device=None, stream=None):
    """Allocate ``size`` bytes from the pool; returns the pointer, kept until ``caching_allocator_delete``."""
    from .streams import StreamContext
    with _on(_index(device)), StreamContext(stream):
        mem = _backend.cupy().cuda.alloc(size)
    _kept[mem.ptr] = mem
    return mem.ptr


def caching_allocator_delete(mem_ptr):
    if _kept.pop(mem_ptr, None) is None:
        raise ValueError(f"pointer {mem_ptr:#x} was not allocated by caching_allocator_alloc")
