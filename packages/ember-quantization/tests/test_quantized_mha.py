"""Static quantization of nn.MultiheadAttention against torch: prepare puts the quantizable attention in its place,
convert makes it ao.nn.quantized.MultiheadAttention; outputs and attention weights equal torch's for the same
observer statistics (biases, add_bias_kv, add_zero_attn, masks, per-head weights), state_dict keys; batch_first
against the float attention (PyTorch's quantizable attention mixes the heads up there); dequantize; errors."""
import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
from _torch_compare import copy_float_model, numpy, to_ember

import ember
import ember.ao.nn.quantizable as nnqa
import ember.ao.nn.quantized as nnq
import ember.ao.quantization as eq

# (FloatFunctional.mul_scalar, the query scaling, observes nothing: its observer warns at convert, in both)
# (torch's warning of a quantized cat of different qparams: bias_k and bias_v joined to the keys and values)
pytestmark = [pytest.mark.filterwarnings("ignore:must run observer before calling calculate_qparams"),
              pytest.mark.filterwarnings("ignore:All inputs of this cat operator must share")]
X = np.random.default_rng(1).standard_normal((5, 3, 8)).astype(np.float32)


def _model(nn, q, **kwargs):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
            self.mha = nn.MultiheadAttention(8, 2, **kwargs)

        def forward(self, x, **call):
            x = self.quant(x)
            y, w = self.mha(x, x, x, **call)
            return self.dequant(y), None if w is None else self.dequant(w)
    return Net().eval()


def _converted(**kwargs):
    torch.manual_seed(0)
    t = _model(torch.nn, tq, **kwargs)
    e = copy_float_model(t, _model(ember.nn, eq, **kwargs))
    for model, q in ((t, tq), (e, eq)):
        model.qconfig = q.get_default_qconfig("x86")
        q.prepare(model, inplace=True)
    assert type(e.mha) is nnqa.MultiheadAttention and e.mha._get_name() == t.mha._get_name()
    calib = np.random.default_rng(0).standard_normal(X.shape).astype(np.float32)
    t(torch.tensor(calib))
    e(ember.tensor(calib))
    eq.load_observer_state_dict(e, to_ember(dict(tq.get_observer_state_dict(t))))
    tq.convert(t, inplace=True)
    eq.convert(e, inplace=True)
    return t, e


@pytest.mark.parametrize("kwargs", [{}, {"add_bias_kv": True, "add_zero_attn": True}, {"bias": False}],
                         ids=["default", "bias-kv-zero-attn", "no-bias"])
def test_static_quantized_mha(kwargs):
    t, e = _converted(**kwargs)
    assert type(e.mha) is nnq.MultiheadAttention and e.mha._get_name() == "QuantizedMultiheadAttention"
    assert list(e.state_dict()) == list(t.state_dict())
    mask = np.triu(np.ones((X.shape[0], X.shape[0]), bool), 1)  # (bias_k's and the zero step's added inside)
    padding = np.zeros(X.shape[1::-1], bool)
    padding[0, 1] = True
    for call in ({}, {"need_weights": False}, {"average_attn_weights": False}, {"attn_mask": mask},
                 {"key_padding_mask": padding}):
        got = e(ember.tensor(X), **{k: ember.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()})
        expected = t(torch.tensor(X), **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                         for k, v in call.items()})
        for a, b in zip(got, expected):
            if b is None:
                assert a is None
            else:
                np.testing.assert_array_equal(numpy(a), numpy(b), err_msg=str(call))


def test_batch_first_is_the_float_attention():
    """ember's batch_first attention is the float one's, within the quantization's error; PyTorch's quantizable
    attention views (batch * heads, target, head_dim) as (batch, target, embed) there, mixing the heads up."""
    outputs = {}
    for lib, q in ((torch, tq), (ember, eq)):
        lib.manual_seed(0)
        model = _model(lib.nn, q, batch_first=True)
        x = lib.tensor(X.transpose(1, 0, 2).copy())
        reference = model(x)[0]
        model.qconfig = q.get_default_qconfig("x86")
        q.prepare(model, inplace=True)
        model(x)
        q.convert(model, inplace=True)
        outputs[lib.__name__] = numpy(model(x)[0]), numpy(reference)
    got, reference = outputs["ember"]
    np.testing.assert_allclose(got, reference, atol=0.05)
    torch_got, torch_reference = outputs["torch"]
    assert np.abs(torch_got - torch_reference).max() > 0.1


def test_dequantize_and_errors():
    _, e = _converted()
    fp = e.mha.dequantize()
    assert type(fp) is ember.nn.MultiheadAttention
    x = ember.tensor(X)
    np.testing.assert_allclose(numpy(fp(x, x, x)[0]), numpy(e(x)[0]), atol=0.1)
    float_mha = ember.nn.MultiheadAttention(8, 2)
    with pytest.raises(AssertionError, match="The float module must have 'qconfig'"):
        nnqa.MultiheadAttention.from_float(float_mha)
    with pytest.raises(NotImplementedError, match="non-observed MHA"):
        nnq.MultiheadAttention.from_float(float_mha)
    with pytest.raises(NotImplementedError, match="trying to prepare an MHA"):
        nnqa.MultiheadAttention.from_observed(float_mha)
    with pytest.raises(AssertionError, match="causal mask not supported"):
        nnqa.MultiheadAttention(8, 2)(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="The size of the 2D attn_mask is not correct"):
        nnqa.MultiheadAttention(8, 2)(x, x, x, attn_mask=ember.zeros(2, 2))
