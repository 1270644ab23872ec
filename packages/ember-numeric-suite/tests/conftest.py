"""Fixtures of ember-numeric-suite's tests: each test starts on the default engine ("x86") with torch's too, and
PyTorch's deprecation warnings of quantized tensors and eager quantization silenced."""
import warnings
from pathlib import Path

import pytest

import ember

EXPECTED_WARNINGS = [".*quantized tensor creation functions.*", ".*torch.ao.quantization is deprecated.*",
                     "Please use quant_min and quant_max.*"]


def pytest_collection_modifyitems(items):
    # (as marks, so that they also hold while module-scoped fixtures quantize the models)
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            for message in EXPECTED_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(f"ignore:{message}"))


@pytest.fixture(autouse=True)
def _default_engine():
    for message in EXPECTED_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    yield
    ember.backends.quantized.engine = "x86"
    try:
        import torch
    except ImportError:
        return
    torch.backends.quantized.engine = "x86"
