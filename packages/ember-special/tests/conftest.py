"""Fixtures of ember-special's tests."""
import pytest


@pytest.fixture
def compiled_loops():
    """Every call of a function with a numba loop takes that loop, whatever its size (``ember._jit.forced``): tests
    of the loops themselves."""
    from ember import _jit
    with _jit.forced():
        yield
