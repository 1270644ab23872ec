"""Shared fixtures of ember-amp's tests."""
import pytest

import ember
from ember import _dispatch
from ember.amp import _layer, autocast_mode


@pytest.fixture(autouse=True)
def _no_autocast_left_over():
    """Every test starts and must end outside any autocast region, with the fast path restored."""
    assert not ember.is_autocast_enabled("cpu") and _dispatch.FORCED[0] == 0
    yield
    assert not ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled("cuda")
    assert "autocast" not in _dispatch.layers() and _dispatch.FORCED[0] == 0


@pytest.fixture
def fake_cuda(monkeypatch):
    """CUDA autocast without a GPU: CPU tensors are treated as CUDA tensors, and CUDA reports itself available,
    so the CUDA policy table and its casts run on NumPy arrays."""
    monkeypatch.setattr(_layer, "device_type", lambda t: "cuda")
    monkeypatch.setattr(autocast_mode, "_cuda_available", lambda: True)
