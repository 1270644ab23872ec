"""Fixtures of ember-rpc's tests: pools of worker processes, started once per session and size. Tests marked
``gpu`` are skipped where ``ember.cuda.is_available()`` is False."""
import pytest
from rpc_launch import WorkerPool

import ember


def pytest_collection_modifyitems(config, items):
    if ember.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({ember.cuda._driver_probe()[1]})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
