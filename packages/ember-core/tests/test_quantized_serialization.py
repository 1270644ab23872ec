"""Quantized tensors through PyTorch's checkpoint format, both ways: torch.save -> ember.load and the reverse,
per tensor and per channel, whole tensors and views, in state_dicts."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def make(m):
    x = m.tensor(np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32))
    qt = m.quantize_per_tensor(x, 0.05, 3, m.quint8)
    return {
        "per_tensor": qt,
        "qint8": m.quantize_per_tensor(x, 0.02, -4, m.qint8),
        "qint32": m.quantize_per_tensor(x, 1e-3, 7, m.qint32),
        "per_channel": m.quantize_per_channel(x, m.tensor([0.1, 0.2, 0.05, 0.01], dtype=m.float64),
                                              m.tensor([0, 1, -1, 2]), 0, m.qint8),
        "per_channel_axis1": m.quantize_per_channel(x, m.tensor(np.linspace(0.01, 0.06, 6)),
                                                    m.tensor([0, 1, 2, 3, 4, 5]), 1, m.quint8),
        "float_qparams": m.quantize_per_channel(x, m.tensor([0.1, 0.2, 0.05, 0.01]),
                                                m.tensor([0.5, 1.0, -1.0, 2.0]), 0, m.quint8),
        "view": qt[1:, 2:],
        "transposed": qt.t(),
        "dense": x,
    }


def same(e, t):
    if not t.is_quantized:
        np.testing.assert_array_equal(e.numpy(), t.numpy())
        return
    assert e.is_quantized and str(e.dtype)[6:] == str(t.dtype)[6:]
    assert str(e.qscheme())[6:] == str(t.qscheme())[6:] or (
        # PyTorch reads per_channel_affine_float_qparams back as per_channel_affine (it writes it so)
        str(t.qscheme()) == "torch.per_channel_affine" and str(e.qscheme()) == "ember.per_channel_affine_float_qparams")
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(e.dequantize().numpy(), t.dequantize().numpy())


@pytest.mark.parametrize("weights_only", [True, False])
def test_torch_to_ember(weights_only):
    ref = make(torch)
    buf = io.BytesIO()
    torch.save(ref, buf)
    got = ember.load(io.BytesIO(buf.getvalue()), weights_only=weights_only)
    assert set(got) == set(ref)
    for k in ref:
        same(got[k], ref[k])


@pytest.mark.parametrize("legacy", [False, True])
def test_ember_to_torch(legacy):
    mine = make(ember)
    buf = io.BytesIO()
    ember.save(mine, buf, _use_new_zipfile_serialization=not legacy)
    got = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    ref = make(torch)
    for k in ref:
        same(mine[k], got[k])
        same(mine[k], ref[k])


def test_round_trip_keeps_views_on_one_storage():
    mine = make(ember)
    buf = io.BytesIO()
    ember.save({"a": mine["per_tensor"], "b": mine["view"]}, buf)
    got = torch.load(io.BytesIO(buf.getvalue()))
    assert got["a"].untyped_storage().data_ptr() == got["b"].untyped_storage().data_ptr()
    back = ember.load(io.BytesIO(buf.getvalue()))
    same(back["b"], got["b"])


def test_quint4x2_is_refused():
    q = ember.quantize_per_tensor(ember.randn(4), 0.1, 1, ember.quint4x2)
    with pytest.raises(TypeError, match="quint4x2"):
        ember.save(q, io.BytesIO())
