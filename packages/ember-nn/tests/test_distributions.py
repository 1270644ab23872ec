"""ember.distributions against torch.distributions: seeded samples, log-densities, entropies, gradients, KL,
shapes, validation errors."""
import numpy as np
import pytest
import torch
from _torch_compare import assert_same

import ember

PROBS = [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]


def _both(build, seed=0):
    """``build(m)`` under torch and ember, each after ``manual_seed(seed)``."""
    out = []
    for m in (torch, ember):
        m.manual_seed(seed)
        out.append(build(m))
    return out


def _grads(m, make, f):
    """Gradient of ``f(distribution).sum()`` with respect to the parameters ``make(m)`` returns."""
    params = [p.requires_grad_(True) for p in make(m)]
    f(m, params).sum().backward()
    return [p.grad for p in params]


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_categorical(kind):
    def build(m):
        param = m.tensor(PROBS) if kind == "probs" else m.tensor(PROBS).log() * 1.5
        d = m.distributions.Categorical(**{kind: param})
        s = d.sample((4,))
        return (s, d.log_prob(s), d.entropy(), d.probs, d.logits, d.mode, d.sample(), d.enumerate_support(),
                d.batch_shape, d.event_shape)
    t, e = _both(build)
    assert tuple(e[-2]) == tuple(t[-2]) and tuple(e[-1]) == tuple(t[-1])
    assert_same(e[:-2], t[:-2], rtol=1e-6)
    # REINFORCE's loss: -log_prob(action) * return, differentiated through softmax probabilities
    ge, gt = (_grads(m, lambda m: [m.tensor([[0.3, -1.0, 2.0]])],
                     lambda m, p: -m.distributions.Categorical(m.softmax(p[0], -1)).log_prob(m.tensor([2])) * 0.7
                     - m.distributions.Categorical(logits=p[0]).entropy()) for m in (ember, torch))
    assert_same(ge, gt, rtol=1e-5)


def test_normal():
    def build(m):
        loc, scale = m.tensor([0.0, 1.0, -2.0]), m.tensor([1.0, 0.5, 2.0])
        d = m.distributions.Normal(loc, scale)
        x = d.sample((2,))
        return (x, d.rsample(), d.log_prob(x), d.entropy(), d.mean, d.stddev, d.variance,
                m.distributions.Normal(0.0, 1.0).sample((3,)))
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)
    ge, gt = (_grads(m, lambda m: [m.tensor([0.5, -1.0]), m.tensor([1.5, 0.3])],
                     lambda m, p: m.distributions.Normal(p[0], p[1]).log_prob(m.tensor([0.2, 0.1]))
                     + m.distributions.Normal(p[0], p[1]).entropy()) for m in (ember, torch))
    assert_same(ge, gt, rtol=1e-5)
    # a reparameterised sample carries the gradient
    ge, gt = _both(lambda m: _grads(m, lambda m: [m.tensor([0.5, -1.0]), m.tensor([1.5, 0.3])],
                                    lambda m, p: m.distributions.Normal(p[0], p[1]).rsample((3,)) ** 2))
    assert_same(ge, gt, rtol=1e-5)


@pytest.mark.special
def test_normal_cdf():  # (erf and erfinv are ember-special's)
    def build(m):
        d = m.distributions.Normal(m.tensor([0.0, 1.0, -2.0]), m.tensor([1.0, 0.5, 2.0]))
        return d.cdf(m.tensor([0.3, 1.0, -5.0])), d.icdf(m.tensor([0.1, 0.5, 0.9]))
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_bernoulli(kind):
    def build(m):
        param = m.tensor([0.1, 0.5, 0.9]) if kind == "probs" else m.tensor([-2.0, 0.0, 3.0])
        d = m.distributions.Bernoulli(**{kind: param})
        x = d.sample((3,))
        return x, d.log_prob(x), d.entropy(), d.mean, d.variance, d.enumerate_support()
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-7)


def test_uniform_one_hot_independent():
    def build(m):
        u = m.distributions.Uniform(m.tensor([0.0, -1.0]), m.tensor([2.0, 3.0]))
        x = u.rsample((3,))
        oh = m.distributions.OneHotCategorical(m.tensor(PROBS))
        y = oh.sample()
        ind = m.distributions.Independent(m.distributions.Normal(m.zeros(2, 3), m.ones(2, 3)), 1)
        z = ind.sample()
        return (x, u.log_prob(x), u.entropy(), u.cdf(m.tensor([1.5, 0.0])), y, oh.log_prob(y), oh.entropy(),
                z, ind.log_prob(z), ind.entropy(), ember.Size(ind.batch_shape) if m is ember else ind.batch_shape)
    t, e = _both(build)
    assert tuple(e[-1]) == tuple(t[-1]) == (2,)
    assert_same(e[:-1], t[:-1], rtol=1e-5, atol=1e-7)


def test_kl_divergence():
    def build(m):
        D = m.distributions
        return (D.kl_divergence(D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])),
                                D.Normal(m.tensor([0.5, 0.0]), m.tensor([0.5, 1.0]))),
                D.kl_divergence(D.Categorical(m.tensor(PROBS)), D.Categorical(logits=m.tensor(PROBS) * 2)),
                D.kl_divergence(D.Bernoulli(m.tensor([0.2, 0.0])), D.Bernoulli(m.tensor([0.6, 0.5]))),
                D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(-1.0, 2.0)))
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5)
    for m in (torch, ember):
        with pytest.raises(NotImplementedError):
            m.distributions.kl_divergence(m.distributions.Normal(0.0, 1.0), m.distributions.Bernoulli(0.5))


def test_shapes_expand_and_sample_shapes():
    def build(m):
        d = m.distributions.Normal(m.zeros(3), m.ones(3)).expand((2, 3))
        c = m.distributions.Categorical(m.tensor(PROBS)).expand((4, 2))
        return (tuple(d.sample((5,)).shape), tuple(d.batch_shape), tuple(c.sample((3,)).shape),
                tuple(c.log_prob(m.tensor([0, 2])).shape))
    t, e = _both(build)
    assert e == t


def test_validation_errors_as_torch():
    for m in (torch, ember):
        D = m.distributions
        with pytest.raises(ValueError, match="constraint GreaterThan"):
            D.Normal(m.tensor([0.0]), m.tensor([-1.0]))
        with pytest.raises(ValueError, match="Simplex"):
            D.Categorical(probs=m.tensor([[-0.5, 1.5]]))
        with pytest.raises(ValueError, match="Either `probs` or `logits`"):
            D.Categorical()
        with pytest.raises(ValueError, match="support"):
            D.Categorical(m.tensor([0.5, 0.5])).log_prob(m.tensor(3))
        with pytest.raises(ValueError, match="LessThan"):
            D.Uniform(1.0, 0.0)
        with pytest.raises(ValueError, match="support"):
            D.Uniform(m.tensor([0.0]), m.tensor([1.0])).log_prob(m.tensor([1.5]))
        D.Normal(m.tensor([0.0]), m.tensor([-1.0]), validate_args=False)  # unchecked when asked


def test_lazy_parameters_and_repr():
    d = ember.distributions.Categorical(probs=ember.tensor([0.25, 0.75]))
    assert "logits" not in d.__dict__  # computed on first use only
    np.testing.assert_allclose(d.logits.numpy(), np.log([0.25, 0.75]), rtol=1e-6)
    t = torch.distributions.Normal(torch.tensor(0.0), torch.tensor(1.0))
    assert repr(ember.distributions.Normal(ember.tensor(0.0), ember.tensor(1.0))) == repr(t)


def test_reachable_as_torch_spells_it():
    import ember.distributions.categorical as cat
    assert ember.distributions.Categorical is cat.Categorical
    from ember.distributions.normal import Normal
    assert Normal is ember.distributions.Normal
