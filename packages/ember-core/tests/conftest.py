"""Shared fixtures: ``device`` runs a test on the CPU and, where a GPU is present, on CUDA.

Tests marked ``gpu`` (and the ``cuda`` case of ``device``) are skipped when
``ember.cuda.is_available()`` is False, with the reason the driver probe gave.
"""
import pytest

import ember


def pytest_collection_modifyitems(config, items):
    if ember.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({ember.cuda._driver_probe()[1]})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """The device type to run on: "cpu", and "cuda" when a GPU is present."""
    return request.param
