"""record_comm: a name for the collectives a thread issues inside a block (PyTorch gives it to their Work as its
profiling title, in place of e.g. "gloo:all_reduce")."""
import contextlib
import threading

_local = threading.local()  # per thread, as PyTorch's


def _get_comm_profiling_name():
    """The name set by the innermost record_comm of this thread ("" outside any)."""
    return getattr(_local, "name", "")


def _set_comm_profiling_name(name):
    if not isinstance(name, str):
        raise TypeError(f"_set_comm_profiling_name(): name must be a str, not {type(name).__name__}")
    _local.name = name


@contextlib.contextmanager
def record_comm(name):
    """``with record_comm("FSDP::all_gather (layer1)"):`` names the collectives issued in the block; nested blocks
    restore the outer name on exit."""
    outer = _get_comm_profiling_name()
    _set_comm_profiling_name(name)
    try:
        yield
    finally:
        _set_comm_profiling_name(outer)
