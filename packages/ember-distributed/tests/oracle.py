"""PyTorch, the oracle, where it is installed (for Python 3.11 only on this machine). A test module that also
tests ember alone takes torch's modules from here (``torch_module(name)``: None without PyTorch) instead of
importing them, so that the root conftest.py still collects it without PyTorch; its comparisons carry
``needs_torch``."""
import importlib
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch, which is not installed here")


def torch_module(name):
    return importlib.import_module(name) if HAS_TORCH else None
