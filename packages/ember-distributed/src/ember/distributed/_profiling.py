"""Collectives in profiles, named as PyTorch names them: a ``c10d::allreduce_`` event around the backend's own
(``gloo:all_reduce``), with the name a ``record_comm`` block gives in between. Nothing is recorded, and no wrapper made,
unless a profiler (or a profiling callback) of ember.autograd.profiler is open."""
import sys

from ._comm_name import _get_comm_profiling_name

# backend method -> (the c10d event, the operation in the backend's event); PyTorch's gloo runs reduce-scatter as an
# all-reduce and names it so
_EVENTS = {
    "allreduce": ("c10d::allreduce_", "all_reduce"),
    "broadcast": ("c10d::broadcast_", "broadcast"),
    "reduce": ("c10d::reduce_", "reduce"),
    "allgather": ("c10d::allgather_", "all_gather"),
    "allgather_into_tensor": ("c10d::_allgather_base_", "all_gather"),
    "reduce_scatter": ("c10d::reduce_scatter_", "all_reduce"),
    "reduce_scatter_tensor": ("c10d::_reduce_scatter_base_", "all_reduce"),
    "alltoall": ("c10d::alltoall_", "all_to_all"),
    "alltoall_base": ("c10d::alltoall_base_", "all_to_all"),
    "gather": ("c10d::gather_", "gather"),
    "scatter": ("c10d::scatter_", "scatter"),
    "barrier": ("c10d::barrier", "barrier"),
    "monitored_barrier": ("c10d::monitored_barrier_", None),  # (no backend event: it runs over the store)
}


def _profiler():
    """ember.autograd.profiler when it has something open (a profile, a callback), else None."""
    prof = sys.modules.get("ember.autograd.profiler")
    return prof if prof is not None and (prof._active or prof._callbacks) else None


def observed(backend):
    """``backend``, or while a profiler is open, a stand-in recording its collectives."""
    return backend if _profiler() is None else _Profiled(backend)


class _Profiled:
    __slots__ = ("_backend",)

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, attr):
        fn = getattr(self._backend, attr)
        names = _EVENTS.get(attr)
        if names is None:
            return fn

        def call(*args, **kwargs):
            prof = _profiler()
            if prof is None:
                return fn(*args, **kwargs)
            titled = _get_comm_profiling_name()
            events = [names[0]] + ([titled] if titled else []) + ([f"{self._backend.name()}:{names[1]}"]
                                                                 if names[1] else [])
            states = []
            try:
                for name in events:  # (each inside the one before)
                    states.append(prof._enter(name, (), False))
                return fn(*args, **kwargs)
            finally:
                for state in reversed(states):
                    prof._exit(state)
        return call
