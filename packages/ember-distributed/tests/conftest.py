"""Fixtures of ember-distributed's tests: pools of rank processes, started once per session and world size. Tests
marked ``gpu`` are skipped where ember sees no CUDA GPU."""
import pytest

from ember.distributed._testing import pools
from ember.testing._pytest import skip_gpu_tests


def pytest_collection_modifyitems(config, items):
    skip_gpu_tests(items)


@pytest.fixture(scope="session")
def ranks():
    """``ranks(n)``: a pool of ``n`` rank processes (kept for the session); ``ranks(n).run(fn, *args)``."""
    with pools() as get:
        yield get
