"""Synchronisation of agents through a store: ``barrier`` and ``synchronize``."""
import time
from datetime import timedelta

from ember.distributed import DistStoreError

__all__ = ["barrier", "get_all", "store_timeout", "synchronize"]


class store_timeout:
    """Context manager: ``store``'s timeout is ``timeout`` seconds inside."""

    def __init__(self, store, timeout):
        self._store, self._timeout = store, timedelta(seconds=timeout)

    def __enter__(self):
        self._old = self._store.timeout
        self._store.set_timeout(self._timeout)

    def __exit__(self, *exc):
        self._store.set_timeout(self._old)


def _check_in(store, world_size, key_prefix):
    """Count this member in; the last one sets the key everybody waits for. Returns that key."""
    last = key_prefix + "/last_member"
    if store.add(key_prefix + "/num_members", 1) == world_size:
        store.set(last, "<val_ignored>")
    return last


def get_all(store, rank, prefix, world_size):
    """The values of keys ``prefix0`` .. ``prefix{world_size-1}``; rank 0 returns only after every rank read them
    (so rank 0 may delete them)."""
    values = store.multi_get([f"{prefix}{i}" for i in range(world_size)])
    done = _check_in(store, world_size, f"{prefix}/finished")
    if rank == 0:
        store.wait([done])
    return values


def synchronize(store, data, rank, world_size, key_prefix, timeout=300):
    """Every rank's ``data`` (bytes), in rank order."""
    with store_timeout(store, timeout):
        store.set(f"{key_prefix}{rank}", data)
        return get_all(store, rank, key_prefix, world_size)


def barrier(store, world_size, key_prefix, barrier_timeout=300, rank=None, rank_tracing_decoder=None,
            trace_timeout=10, give_up=None, poll_interval=1.0):
    """Wait until ``world_size`` members reached the barrier ``key_prefix`` (DistStoreError after
    ``barrier_timeout`` seconds). ``give_up`` (ember): a function asked every ``poll_interval`` seconds while
    waiting; when it returns a true value (e.g. the members that died), the wait ends with DistStoreError naming it
    instead of lasting the whole timeout."""
    last = _check_in(store, world_size, key_prefix)
    end = time.monotonic() + barrier_timeout
    while True:
        left = end - time.monotonic()
        step = left if give_up is None else min(left, poll_interval)
        try:
            store.wait([last], timedelta(seconds=max(step, 0)))
            return
        except DistStoreError:
            if time.monotonic() >= end:
                raise DistStoreError(f"Timed out waiting on barrier for key prefix: {key_prefix} (world_size="
                                     f"{world_size}, timeout={barrier_timeout})") from None
        lost = give_up()
        if lost:
            raise DistStoreError(f"Barrier {key_prefix} (world_size={world_size}) abandoned: members gone: {lost}")
