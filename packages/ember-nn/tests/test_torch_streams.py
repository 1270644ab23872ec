"""ember.nn draws PyTorch's numbers for a seed: nn.init, the modules' initial weights, dropout in its functional
and module forms, and so a whole training step."""
import warnings

import numpy as np
import pytest
import torch

import ember


def _seeded(m, seed, fn):
    m.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fn(m)
    return r, m.get_rng_state().numpy()


def _host(r):
    if isinstance(r, (list, tuple)):
        return [_host(x) for x in r]
    return r.detach().numpy()


INIT = {
    "uniform_": lambda m, t: m.nn.init.uniform_(t, -0.3, 0.9),
    "normal_": lambda m, t: m.nn.init.normal_(t, 0.1, 0.02),
    "xavier_uniform_": lambda m, t: m.nn.init.xavier_uniform_(t, gain=1.3),
    "xavier_normal_": lambda m, t: m.nn.init.xavier_normal_(t),
    "kaiming_uniform_": lambda m, t: m.nn.init.kaiming_uniform_(t, a=5 ** 0.5),
    "kaiming_normal_": lambda m, t: m.nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
    "trunc_normal_": lambda m, t: m.nn.init.trunc_normal_(t),
    "trunc_normal_narrow_std": lambda m, t: m.nn.init.trunc_normal_(t, std=0.02),
    "trunc_normal_redraws": lambda m, t: m.nn.init.trunc_normal_(t, 0.5, 1.0, -0.5, 1.0),
    "trunc_normal_tail": lambda m, t: m.nn.init.trunc_normal_(t, 0.0, 1.0, 1.0, 3.0),  # the uniform sampler
    "trunc_normal_thin": lambda m, t: m.nn.init.trunc_normal_(t, 1.0, 0.5, 0.9, 1.3),
    "sparse_": lambda m, t: m.nn.init.sparse_(t.view(t.shape[0], -1), 0.3),
    "generator": lambda m, t: m.nn.init.kaiming_uniform_(t, generator=m.Generator().manual_seed(3)),
}


@pytest.mark.parametrize("shape", [(30, 20), (8, 3, 3, 3), (5, 40), (7, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", INIT)
def test_init_matches_torch(name, dtype, shape):
    def fill(m):
        t = m.empty(*shape, dtype=getattr(m, dtype))
        INIT[name](m, t)
        return t
    (mine, state), (theirs, their_state) = (_seeded(m, 1, fill) for m in (ember, torch))
    if dtype == "float64" and name.startswith("trunc_normal") and name != "trunc_normal_tail":
        # float64 normals of more than 16 values: within an ulp (NumPy's log where PyTorch calls libm's)
        np.testing.assert_array_max_ulp(_host(mine), _host(theirs), maxulp=2)
    else:
        np.testing.assert_array_equal(_host(mine), _host(theirs))
    assert np.array_equal(state, their_state)


def test_orthogonal_draws_torch_normals():
    """The same normal matrix and stream position; its QR factors come from another LAPACK, so the result
    agrees to a few ulps."""
    (mine, state), (theirs, their_state) = (_seeded(m, 1, lambda m: m.nn.init.orthogonal_(m.empty(30, 20)))
                                            for m in (ember, torch))
    np.testing.assert_allclose(_host(mine), _host(theirs), rtol=0, atol=1e-6)
    assert np.array_equal(state, their_state)


MODULES = {
    "Linear": lambda nn: nn.Linear(20, 30),
    "Conv2d": lambda nn: nn.Conv2d(3, 8, 3),
    "Conv1d_groups": lambda nn: nn.Conv1d(4, 8, 5, groups=2),
    "ConvTranspose2d": lambda nn: nn.ConvTranspose2d(4, 6, 3),
    "Embedding": lambda nn: nn.Embedding(50, 16),
    "LSTM": lambda nn: nn.LSTM(10, 20, 2),
    "GRU": lambda nn: nn.GRU(10, 20),
    "Bilinear": lambda nn: nn.Bilinear(5, 6, 7),
    "MultiheadAttention": lambda nn: nn.MultiheadAttention(16, 4),
    "TransformerEncoderLayer": lambda nn: nn.TransformerEncoderLayer(16, 4, 32),
    "Sequential": lambda nn: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
}


@pytest.mark.parametrize("name", MODULES)
def test_initial_weights_match_torch(name):
    (mine, state), (theirs, their_state) = (_seeded(m, 0, lambda m: MODULES[name](m.nn)) for m in (ember, torch))
    for a, b in zip(mine.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_array_equal(_host(a), _host(b))
    assert np.array_equal(state, their_state)


DROPOUT = {
    "dropout": lambda m: m.nn.functional.dropout(m.randn(1000), 0.3),
    "dropout_transposed": lambda m: m.nn.functional.dropout(m.randn(10, 20).t(), 0.5),
    "dropout_inplace": lambda m: m.nn.functional.dropout(m.randn(40), 0.5, True, True),
    "Dropout": lambda m: m.nn.Dropout(0.1)(m.randn(4, 50)),
    "dropout1d": lambda m: m.nn.functional.dropout1d(m.randn(4, 6, 5), 0.5),
    "dropout2d": lambda m: m.nn.functional.dropout2d(m.randn(4, 6, 3, 3), 0.5),
    "Dropout3d": lambda m: m.nn.Dropout3d(0.5)(m.randn(2, 6, 2, 3, 3)),
    "alpha_dropout": lambda m: m.nn.functional.alpha_dropout(m.randn(200), 0.2, True),
    "FeatureAlphaDropout": lambda m: m.nn.FeatureAlphaDropout(0.2)(m.randn(4, 6, 3)),
    "rrelu": lambda m: m.nn.functional.rrelu(m.randn(100), training=True),
}


@pytest.mark.parametrize("name", DROPOUT)
def test_dropout_matches_torch(name):
    (mine, state), (theirs, their_state) = (_seeded(m, 5, DROPOUT[name]) for m in (ember, torch))
    np.testing.assert_array_equal(_host(mine), _host(theirs))
    assert np.array_equal(state, their_state)


def test_training_steps_reproduce_torch_losses():
    """A small model with dropout trained for a few steps from the same seed: the same losses."""
    def losses(m):
        m.manual_seed(0)
        model = m.nn.Sequential(m.nn.Linear(8, 32), m.nn.ReLU(), m.nn.Dropout(0.2), m.nn.Linear(32, 3))
        opt = m.optim.SGD(model.parameters(), lr=0.1)
        x, y = m.randn(16, 8), m.randint(0, 3, (16,))
        out = []
        for _ in range(3):
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out
    np.testing.assert_allclose(losses(ember), losses(torch), rtol=1e-6)


# inputs with zeros (a dropped zero and a kept zero give the same output: the gradient needs the mask)
DROPOUT_GRADS = {
    "dropout": lambda m, x: m.nn.functional.dropout(x, 0.5),
    "dropout_inplace": lambda m, x: m.nn.functional.dropout(x * 1, 0.5, True, True),
    "dropout2d": lambda m, x: m.nn.functional.dropout2d(x.view(2, 4, 5), 0.5),
    "alpha_dropout": lambda m, x: m.nn.functional.alpha_dropout(x, 0.3, True),
    "feature_alpha_dropout": lambda m, x: m.nn.functional.feature_alpha_dropout(x.view(2, 4, 5), 0.3, True),
    "torch.dropout": lambda m, x: m.dropout(x, 0.5, True),
}


@pytest.mark.parametrize("name", DROPOUT_GRADS)
def test_dropout_gradient_uses_the_mask(name):
    got = []
    for m in (ember, torch):
        m.manual_seed(3)
        x = m.tensor(np.where(np.arange(40) % 2 == 0, 0.0, np.linspace(-1, 1, 40)), dtype=m.float32)
        x.requires_grad_()
        out = DROPOUT_GRADS[name](m, x)
        (out * m.arange(out.numel(), dtype=m.float32).view(out.shape)).sum().backward()
        got.append((_host(out.detach()), _host(x.grad), type(out.grad_fn).__name__))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-6)
    if name != "dropout_inplace":  # (torch's in-place records on the input's own node)
        assert got[0][2] == got[1][2]
