"""Fixtures of ember-distributed's tests: pools of rank processes, started once per session and world size."""
import pytest
from launch import RankPool


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
