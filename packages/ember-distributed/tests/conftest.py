"""Fixtures of ember-distributed's tests: pools of rank processes, started once per session and world size. Tests
marked ``gpu`` are skipped where ember sees no CUDA GPU."""
import pytest
from launch import RankPool

import ember


def pytest_collection_modifyitems(config, items):
    if ember.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({ember.cuda._driver_probe()[1]})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ranks():
    """``ranks(n)``: a pool of ``n`` rank processes (kept for the session); ``ranks(n).run(fn, *args)``."""
    pools = {}

    def get(n):
        if n not in pools:
            pools[n] = RankPool(n)
        return pools[n]
    yield get
    for pool in pools.values():
        pool.close()
