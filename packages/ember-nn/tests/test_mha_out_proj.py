"""MultiheadAttention's output projection is a NonDynamicallyQuantizableLinear (a Linear), as in PyTorch, and its
checkpoints cross between the two: state_dicts both ways; a whole pickled PyTorch module is refused clearly (ember
loads tensors and state_dicts, not PyTorch's module classes)."""
import pickle

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
from ember.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear


def test_out_proj_class_as_torch():
    e, t = nn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2)
    assert type(e.out_proj).__name__ == type(t.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(e.out_proj, NonDynamicallyQuantizableLinear) and isinstance(e.out_proj, Linear)
    assert repr(e) == repr(t)
    assert not hasattr(nn, "NonDynamicallyQuantizableLinear")
    assert not hasattr(torch.nn, "NonDynamicallyQuantizableLinear")
    layer = NonDynamicallyQuantizableLinear(3, 2, bias=False, dtype=ember.float64)
    assert repr(layer) == repr(torch.nn.modules.linear.NonDynamicallyQuantizableLinear(3, 2, bias=False))
    assert layer.weight.dtype == ember.float64 and layer.bias is None


def _inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((5, 3, 8)) for _ in range(3)]


def _same_outputs(e_mha, t_mha):
    arrays = _inputs()
    t_out, t_w = t_mha(*[torch.from_numpy(a) for a in arrays])
    e_out, e_w = e_mha(*[ember.from_numpy(a) for a in arrays])
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e_w.detach().numpy(), t_w.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"kdim": 4, "vdim": 6}, {"bias": False, "add_bias_kv": True}])
def test_state_dict_from_torch_checkpoint(tmp_path, kwargs):
    torch.manual_seed(0)
    t = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **kwargs)
    torch.save(t.state_dict(), tmp_path / "mha.pt")
    e = nn.MultiheadAttention(8, 2, dtype=ember.float64, **kwargs)
    state = ember.load(tmp_path / "mha.pt")
    assert list(state) == list(e.state_dict())
    e.load_state_dict(state)
    if not kwargs:
        _same_outputs(e, t)


def test_state_dict_to_torch_checkpoint(tmp_path):
    e = nn.MultiheadAttention(8, 2, dtype=ember.float64)
    with ember.no_grad():
        e.out_proj.bias.uniform_(-1, 1)
    ember.save(e.state_dict(), tmp_path / "mha.pt")
    t = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    t.load_state_dict(torch.load(tmp_path / "mha.pt", weights_only=True))
    _same_outputs(e, t)


def test_whole_torch_module_is_refused_clearly(tmp_path):
    torch.save(torch.nn.MultiheadAttention(8, 2), tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError):  # PyTorch's own default refuses it too
        torch.load(tmp_path / "model.pt")
    for weights_only in (True, False):
        with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.activation.MultiheadAttention"):
            ember.load(tmp_path / "model.pt", weights_only=weights_only)


def test_whole_ember_module_round_trips(tmp_path):
    """A whole ember module loads with weights_only=False, or with its classes allow-listed."""
    e = nn.MultiheadAttention(8, 2, dtype=ember.float64)
    ember.save(e, tmp_path / "model.pt")
    arrays = _inputs()
    expected = e(*[ember.from_numpy(a) for a in arrays])[0].detach().numpy()
    with pytest.raises(pickle.UnpicklingError, match="ember.nn.modules.activation.MultiheadAttention"):
        ember.load(tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match="ember.nn.modules.linear.NonDynamicallyQuantizableLinear"):
        with ember.serialization.safe_globals([nn.MultiheadAttention]):
            ember.load(tmp_path / "model.pt")
    with ember.serialization.safe_globals([nn.MultiheadAttention, NonDynamicallyQuantizableLinear]):
        allowed = ember.load(tmp_path / "model.pt")
    for back in (allowed, ember.load(tmp_path / "model.pt", weights_only=False)):
        assert type(back.out_proj) is NonDynamicallyQuantizableLinear
        np.testing.assert_array_equal(back(*[ember.from_numpy(a) for a in arrays])[0].detach().numpy(), expected)
