"""Backend names to the factories that make a group's backend.

``create(name, store, rank, size, timeout, global_ranks, group_name)`` makes the backend of one process group;
``store`` is private to the group. "gloo" and "cpu" select ember's CPU backend (``_cpu_backend``); other packages
or modules add theirs with ``register(name, factory)``.
"""

_FACTORIES = {}


def register(name, factory):
    """Make ``name`` (case-insensitive) select ``factory(store, rank, size, timeout, global_ranks, group_name)``."""
    _FACTORIES[name.lower()] = factory


def available(name):
    return name.lower() in _FACTORIES


def create(name, store, rank, size, timeout, global_ranks=None, group_name=""):
    factory = _FACTORIES.get(str(name).lower())
    if factory is None:
        raise RuntimeError(f"Invalid backend: '{name}' (available: {', '.join(sorted(_FACTORIES))})")
    return factory(store, rank, size, timeout, global_ranks, group_name)


def _cpu(store, rank, size, timeout, global_ranks, group_name):
    from ._cpu_backend import CPUBackend
    return CPUBackend(store, rank, size, timeout, global_ranks, group_name)


register("gloo", _cpu)
register("cpu", _cpu)
