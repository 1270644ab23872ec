"""Fixtures of ember-quantization's tests: each test starts on the default engine ("x86") with torch's too, and
PyTorch's deprecation warnings of quantized tensors and eager quantization silenced."""
import warnings

import pytest

import ember


@pytest.fixture(autouse=True)
def _default_engine():
    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
    warnings.filterwarnings("ignore", message=".*torch.ao.quantization is deprecated.*")
    warnings.filterwarnings("ignore", message="Please use quant_min and quant_max.*")
    yield
    ember.backends.quantized.engine = "x86"
    try:
        import torch
    except ImportError:
        return
    torch.backends.quantized.engine = "x86"
