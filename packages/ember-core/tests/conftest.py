"""Shared fixtures: ``device`` runs a test on the CPU and, where a GPU is present, on CUDA.

Tests marked ``gpu`` (and the ``cuda`` case of ``device``) are skipped when
``ember.cuda.is_available()`` is False, with the reason the driver probe gave.
"""
import pytest

from ember.testing._pytest import skip_gpu_tests


def pytest_collection_modifyitems(config, items):
    skip_gpu_tests(items)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """The device type to run on: "cpu", and "cuda" when a GPU is present."""
    return request.param
