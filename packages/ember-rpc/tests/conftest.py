"""Fixtures of ember-rpc's tests: pools of worker processes, started once per session and size. Tests marked
``gpu`` are skipped where ``ember.cuda.is_available()`` is False."""
import pytest

from ember.distributed._testing import pools
from ember.testing._pytest import skip_gpu_tests


def pytest_collection_modifyitems(config, items):
    skip_gpu_tests(items)


@pytest.fixture(scope="session")
def workers():
    """``workers(n)``: a pool of ``n`` worker processes (kept for the session); ``workers(n).run(fn, *args)``."""
    with pools() as get:
        yield get
