"""Fixtures of ember-rpc's tests: pools of worker processes, started once per session and size."""
import pytest
from rpc_launch import WorkerPool


@pytest.fixture(scope="session")
def workers():
    """``workers(n)``: a pool of ``n`` worker processes (kept for the session); ``workers(n).run(fn, *args)``."""
    pools = {}

    def get(n):
        if n not in pools:
            pools[n] = WorkerPool(n)
        return pools[n]
    yield get
    for pool in pools.values():
        pool.close()
