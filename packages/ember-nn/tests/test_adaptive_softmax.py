"""nn.AdaptiveLogSoftmaxWithLoss against torch from the same weights: structure, forward (output, loss) and their
gradients, log_prob, predict (all three of its paths), unbatched inputs, construction and input errors."""
import numpy as np
import pytest
import torch

import ember
import ember.nn as nn

CONFIGS = [dict(in_features=8, n_classes=10, cutoffs=[2, 6], div_value=2.0, head_bias=True),
           dict(in_features=16, n_classes=20, cutoffs=[5, 9, 15]),
           dict(in_features=6, n_classes=4, cutoffs=[3], div_value=1.0)]


def _pair(config, dtype=torch.float64):
    torch.manual_seed(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(**config).to(dtype)
    e = nn.AdaptiveLogSoftmaxWithLoss(**config).to(getattr(ember, str(dtype)[6:]))
    assert repr(e) == repr(t)
    assert [(k, tuple(v.shape)) for k, v in e.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return t, e


@pytest.mark.parametrize("config", CONFIGS)
def test_forward_and_gradients_match_torch(config):
    t, e = _pair(config)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, config["in_features"]))
    y = rng.integers(0, config["n_classes"], 7)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    to, eo = t(tx, torch.tensor(y)), e(ex, ember.tensor(y))
    assert type(eo).__name__ == "_ASMoutput" and eo._fields == ("output", "loss")
    np.testing.assert_allclose(eo.output.detach().numpy(), to.output.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(eo.loss.item(), to.loss.item(), rtol=1e-12)
    (to.loss + to.output[2]).backward()
    (eo.loss + eo.output[2]).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    for (name, p), (_, q) in zip(t.named_parameters(), e.named_parameters()):
        assert (q.grad is None) == (p.grad is None), name  # (a cluster no target falls in takes no gradient)
        if p.grad is not None:
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(e.log_prob(ex).detach().numpy(), t.log_prob(tx).detach().numpy(), rtol=1e-12)
    assert e.predict(ex).tolist() == t.predict(tx).tolist()


def test_unbatched_and_float32():
    t, e = _pair(CONFIGS[0], torch.float32)
    x = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    to, eo = t(torch.tensor(x), torch.tensor(7)), e(ember.tensor(x), ember.tensor(7))
    assert eo.output.shape == () and eo.output.dtype == ember.float32
    np.testing.assert_allclose(eo.output.item(), to.output.item(), rtol=1e-6)


def test_predict_paths():
    """All in the shortlist, all in clusters, and a mix: each row's class as log_prob's argmax."""
    t, e = _pair(CONFIGS[1])
    with torch.no_grad():
        t.head.weight[:5] *= 0
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 16)) * 3
    preds = e.predict(ember.tensor(x)).tolist()
    assert preds == t.predict(torch.tensor(x)).tolist() == e.log_prob(ember.tensor(x)).argmax(1).tolist()
    heads = e.head(ember.tensor(x)).argmax(1)
    assert bool((heads >= 5).any()) and bool((heads < 5).any())  # (the mixed path ran)
    for rows in (heads < 5, heads >= 5):
        sub = x[rows.numpy()]
        assert e.predict(ember.tensor(sub)).tolist() == t.predict(torch.tensor(sub)).tolist()


@pytest.mark.parametrize("cutoffs", [[], [6, 2], [0, 2], [2, 10], [2, 2], [2.5]])
def test_bad_cutoffs(cutoffs):
    with pytest.raises(ValueError, match="cutoffs should be a sequence"):
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
    with pytest.raises(ValueError, match="cutoffs should be a sequence"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)


@pytest.mark.parametrize("x,y,message", [
    ((4, 8), [0, 3, 9], "same size in the batch"), ((8,), [0, 3, 9, 1], "same size in the batch"),
    ((4, 8), [[0, 3], [9, 1]], "multi-target"), ((4, 8), 3, "0D target tensor expects 1D"),
    ((1, 1, 8), [1], "1D target tensor expects 2D"),
    ((4, 8), [0, 3, 10, 1], r"Target values should be in \[0, 9\], but values in range \[0, 10\]"),
    ((4, 8), [0, 3, -1, 1], r"values in range \[-1, 3\]")])
def test_input_errors(x, y, message):
    t, e = _pair(CONFIGS[0])
    for lib, m in ((torch, t), (ember, e)):
        with pytest.raises(RuntimeError, match=message):
            m(lib.zeros(x, dtype=lib.float64), lib.tensor(y))
