"""Backend names to the factories that make a group's backend.

``create(name, store, rank, size, timeout, global_ranks, group_name)`` makes the backend of one process group;
``store`` is private to the group. "gloo" and "cpu" select ember's CPU backend (``_cpu_backend``), "nccl" the NCCL
backend (``_nccl_backend``, available with CuPy's NCCL and a GPU); other packages or modules add theirs with
``register(name, factory)``.
"""

_FACTORIES = {}  # name -> (factory, availability check or None)


def register(name, factory, available=None):
    """Make ``name`` (case-insensitive) select ``factory(store, rank, size, timeout, global_ranks, group_name)``;
    ``available()``, if given, says whether it can be used on this machine."""
    _FACTORIES[name.lower()] = (factory, available)


def available(name):
    entry = _FACTORIES.get(name.lower())
    return entry is not None and (entry[1] is None or bool(entry[1]()))


def create(name, store, rank, size, timeout, global_ranks=None, group_name=""):
    entry = _FACTORIES.get(str(name).lower())
    if entry is None:
        raise RuntimeError(f"Invalid backend: '{name}' (available: {', '.join(sorted(_FACTORIES))})")
    return entry[0](store, rank, size, timeout, global_ranks, group_name)


def _cpu(store, rank, size, timeout, global_ranks, group_name):
    from ._cpu_backend import CPUBackend
    return CPUBackend(store, rank, size, timeout, global_ranks, group_name)


register("gloo", _cpu)
register("cpu", _cpu)


def _nccl(store, rank, size, timeout, global_ranks, group_name):
    from ._nccl_backend import NCCLBackend
    return NCCLBackend(store, rank, size, timeout, global_ranks, group_name)


def _nccl_available():
    from ._nccl_backend import is_available
    return is_available()


register("nccl", _nccl, available=_nccl_available)
