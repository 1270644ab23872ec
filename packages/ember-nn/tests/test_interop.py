"""Interoperability with PyTorch: the same model defined in both libraries loads the other's state_dict through
ember.save / torch.save files and gives the same outputs (an MLP, a CNN with BatchNorm, an LSTM, a Transformer
encoder layer)."""
import numpy as np
import pytest
import torch

import ember


def _mlp(nn):
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))


def _cnn(nn):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 5))


def _lstm(nn):
    return nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True)


def _encoder(nn):
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)


MODELS = [(_mlp, (4, 6)), (_cnn, (2, 3, 8, 8)), (_lstm, (3, 4, 5)), (_encoder, (2, 5, 8))]


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _train_a_little(model, x):
    """A few batches in training mode so that BatchNorm's running statistics are not their initial values."""
    for _ in range(3):
        _first(model(x)).sum()


@pytest.mark.parametrize("build,shape", MODELS, ids=[m[0].__name__ for m in MODELS])
def test_torch_to_ember(build, shape, tmp_path):
    torch.manual_seed(0)
    t_model = build(torch.nn)
    x = torch.randn(*shape)
    _train_a_little(t_model, x)
    torch.save(t_model.state_dict(), tmp_path / "torch.pt")
    e_model = build(ember.nn)
    result = e_model.load_state_dict(ember.load(tmp_path / "torch.pt"))
    assert not result.missing_keys and not result.unexpected_keys
    t_model.eval()
    e_model.eval()
    with torch.no_grad():
        expected = _first(t_model(x)).numpy()
    got = _first(e_model(ember.tensor(x.numpy()))).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("build,shape", MODELS, ids=[m[0].__name__ for m in MODELS])
def test_ember_to_torch(build, shape, tmp_path):
    ember.manual_seed(0)
    e_model = build(ember.nn)
    x = ember.randn(*shape)
    _train_a_little(e_model, x)
    ember.save(e_model.state_dict(), tmp_path / "ember.pt")
    t_model = build(torch.nn)
    result = t_model.load_state_dict(torch.load(tmp_path / "ember.pt"))
    assert not result.missing_keys and not result.unexpected_keys
    e_model.eval()
    t_model.eval()
    got = _first(e_model(x)).detach().numpy()
    with torch.no_grad():
        expected = _first(t_model(torch.from_numpy(x.numpy()))).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # the running statistics travelled too
    if build is _cnn:
        assert int(t_model[1].num_batches_tracked) == 3
        np.testing.assert_allclose(t_model[1].running_mean.numpy(), e_model[1].running_mean.numpy(), rtol=1e-6)
