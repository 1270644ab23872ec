"""pytest support shared by the packages' test suites."""
import pytest

import ember


def skip_gpu_tests(items):
    """Mark the collected ``items`` carrying the ``gpu`` marker skipped where ember sees no CUDA GPU, with the reason
    the driver probe gave (a ``pytest_collection_modifyitems`` hook's work)."""
    if ember.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({ember.cuda._driver_probe()[1]})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
