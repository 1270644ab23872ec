"""``nn.attention.sdpa_kernel`` and the SDP flags of ``backends.cuda``, against PyTorch's CPU build; the other
``backends`` switches programs touch (mkldnn, openmp) exist."""
import warnings

import pytest
import torch

import ember

BACKENDS = ["MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"]
FLAGS = ["flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled"]


def _flags(m):
    return [getattr(m.backends.cuda, f)() for f in FLAGS]


def test_backend_names_and_numbers():
    for name, member in torch.nn.attention.SDPBackend.__members__.items():
        mine = ember.nn.attention.SDPBackend[name]
        assert (int(mine), str(mine), repr(mine)) == (int(member), str(member), repr(member))


@pytest.mark.parametrize("allowed", [["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION"], ["CUDNN_ATTENTION"],
                                     ["EFFICIENT_ATTENTION", "MATH"], []])
def test_sdpa_kernel_sets_the_flags_and_refuses_as_torch(allowed):
    seen = []
    for m in (torch, ember):
        q = m.ones(1, 2, 3, 4)
        with m.nn.attention.sdpa_kernel([getattr(m.nn.attention.SDPBackend, a) for a in allowed]):
            inside = _flags(m)
            try:
                m.nn.functional.scaled_dot_product_attention(q, q, q)
                outcome = None
            except RuntimeError as e:
                outcome = str(e)
        seen.append((inside, outcome, _flags(m)))
    assert seen[0] == seen[1]


def test_switches_and_deprecated_sdp_kernel():
    for m in (torch, ember):
        m.backends.cuda.enable_math_sdp(False)
        assert not m.backends.cuda.math_sdp_enabled()
        m.backends.cuda.enable_math_sdp(True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with m.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
                assert _flags(m) == [False, False, True, True]
        assert any(issubclass(x.category, FutureWarning) for x in w)
        assert _flags(m) == [True, True, True, True]


def test_mkldnn_and_openmp_switches_exist():
    with ember.backends.mkldnn.flags(enabled=False):
        assert ember.backends.mkldnn.enabled is False
    assert ember.backends.mkldnn.enabled is True
    assert ember.backends.openmp.is_available() is False and ember.backends.mkldnn.is_available() is False
