"""ember.nn.init: distributions, deterministic initialisers, gains, errors, generators and deprecations."""
import math

import numpy as np
import pytest
import torch

import ember
import ember.nn.init as init


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                        ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_matches_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_calculate_gain_errors():
    with pytest.raises(ValueError):
        init.calculate_gain("swish")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", "a")


def _stats(fn, shape=(300, 200), **kwargs):
    t = ember.empty(*shape, dtype=ember.float64)
    assert fn(t, **kwargs) is t
    return t.numpy()


def test_random_initialisers_have_the_expected_distributions():
    ember.manual_seed(0)
    a = _stats(init.uniform_, a=-2.0, b=3.0)
    assert a.min() >= -2 and a.max() < 3 and abs(a.mean() - 0.5) < 0.05
    a = _stats(init.normal_, mean=1.0, std=2.0)
    assert abs(a.mean() - 1) < 0.05 and abs(a.std() - 2) < 0.05
    a = _stats(init.trunc_normal_, mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert a.min() >= -0.5 and a.max() <= 1.0
    # moments of the truncated normal
    ref = torch.nn.init.trunc_normal_(torch.empty(300, 200, dtype=torch.float64), 0.5, 1.0, -0.5, 1.0).numpy()
    assert abs(a.mean() - ref.mean()) < 0.02 and abs(a.std() - ref.std()) < 0.02
    fan_in, fan_out = 200, 300
    a = _stats(init.xavier_uniform_, gain=2.0)
    assert np.abs(a).max() <= 2.0 * math.sqrt(6 / (fan_in + fan_out))
    a = _stats(init.xavier_normal_)
    assert abs(a.std() - math.sqrt(2 / (fan_in + fan_out))) < 0.002
    a = _stats(init.kaiming_uniform_, a=math.sqrt(5))
    assert np.abs(a).max() <= 1 / math.sqrt(fan_in)
    a = _stats(init.kaiming_normal_, mode="fan_out", nonlinearity="relu")
    assert abs(a.std() - math.sqrt(2 / fan_out)) < 0.002


def test_deterministic_initialisers_match_torch():
    for fn, shape, kwargs in [("constant_", (3, 4), {"val": 0.3}), ("ones_", (3, 4), {}), ("zeros_", (2,), {}),
                              ("eye_", (3, 5), {}), ("dirac_", (6, 4, 3), {"groups": 2}),
                              ("dirac_", (4, 4, 3, 3), {}), ("dirac_", (2, 3, 3, 1, 3), {})]:
        t = getattr(torch.nn.init, fn)(torch.empty(*shape), **kwargs)
        e = getattr(init, fn)(ember.empty(*shape), **kwargs)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_orthogonal_and_sparse():
    for shape in [(4, 6), (6, 4), (3, 2, 2)]:
        w = init.orthogonal_(ember.empty(*shape, dtype=ember.float64), gain=2.0)
        flat = w.reshape(shape[0], -1).numpy()
        gram = flat @ flat.T if shape[0] <= flat.shape[1] else flat.T @ flat
        np.testing.assert_allclose(gram, 4 * np.eye(gram.shape[0]), atol=1e-10)
    w = init.sparse_(ember.empty(10, 7), sparsity=0.3, std=0.5)
    assert ((w.numpy() == 0).sum(0) >= 3).all()


def test_generators_make_initialisation_reproducible():
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    a = init.kaiming_uniform_(ember.empty(5, 4), generator=g1)
    b = init.kaiming_uniform_(ember.empty(5, 4), generator=g2)
    assert a.tolist() == b.tolist()


def test_runs_without_recording_gradients():
    w = ember.ones(3, 4, requires_grad=True)
    init.normal_(w)
    init.xavier_uniform_(w)
    assert w.grad_fn is None and w.requires_grad


def test_errors_match_torch():
    for fn, args in [("xavier_uniform_", (ember.empty(3),)), ("eye_", (ember.empty(3, 3, 3),)),
                     ("dirac_", (ember.empty(3, 3),)), ("dirac_", (ember.empty(3, 3, 3), 2)),
                     ("kaiming_normal_", (ember.empty(3, 3),), ), ("sparse_", (ember.empty(3, 3, 3), 0.1))]:
        kwargs = {"mode": "fan_avg"} if fn == "kaiming_normal_" else {}
        with pytest.raises(ValueError):
            getattr(init, fn)(*args, **kwargs)
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(ember.empty(0, 3))


def test_deprecated_aliases_warn_and_work():
    with pytest.warns(FutureWarning, match="deprecated in favor of `nn.init.normal_`"):
        t = init.normal(ember.empty(3), 0.0, 1.0)
    assert t.shape == (3,)
    with pytest.warns(FutureWarning):
        assert init.constant(ember.empty(2), 5.0).tolist() == [5.0, 5.0]
