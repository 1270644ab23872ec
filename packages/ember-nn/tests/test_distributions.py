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


# ---- transforms, constraints, biject_to / transform_to ----------------------------------------------------------

def _transforms(m):
    T = m.distributions.transforms
    return [T.ExpTransform(), T.AffineTransform(1.5, -2.0), T.AffineTransform(m.tensor([1.0, 2.0, 3.0]),
                                                                              m.tensor([0.5, 2.0, -1.0])),
            T.SigmoidTransform(), T.TanhTransform(), T.SoftplusTransform(), T.PowerTransform(m.tensor(2.5)),
            T.ExpTransform().inv, T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.SigmoidTransform()]),
            T.IndependentTransform(T.ExpTransform(), 1), T.SoftmaxTransform(), T.StickBreakingTransform(),
            T.CatTransform([T.ExpTransform(), T.identity_transform, T.SigmoidTransform()], dim=-1, lengths=[1, 1, 1]),
            T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.AffineTransform(1.0, 3.0)], dim=-1)]


@pytest.mark.parametrize("i", range(14))
def test_transform_forward_inverse_log_det(i):
    def build(m):
        t = _transforms(m)[i]
        x = m.tensor([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]], requires_grad=True)
        x_in = x.abs() + 0.1 if isinstance(t, m.distributions.transforms.PowerTransform) else x
        y = t(x_in)
        out = [y, t.inv(y), t.domain.check(x_in), t.codomain.check(y)]
        if t.bijective:
            ladj = t.log_abs_det_jacobian(x_in, y)
            out += [ladj, m.autograd.grad(ladj.sum() + y.sum(), x)[0]]
        return out, repr(t), t.bijective, tuple(t.forward_shape((4, 2, 3))), tuple(t.inverse_shape((4, 2, 3)))
    t, e = _both(build)
    assert e[1:] == t[1:]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)


def test_matrix_transforms():
    def build(m):
        T = m.distributions.transforms
        x = m.tensor([[[0.3, -1.2, 0.8], [1.5, 0.1, -0.4], [0.2, 0.7, -0.9]]], requires_grad=True)
        v = m.tensor([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]], requires_grad=True)
        low, pd, corr = T.LowerCholeskyTransform(), T.PositiveDefiniteTransform(), T.CorrCholeskyTransform()
        c = corr(v)
        ladj = corr.log_abs_det_jacobian(v, c)
        r = T.ReshapeTransform((2, 3), (3, 2))
        return (low(x), low.inv(low(x)), pd(x), pd.inv(pd(x)), c, corr.inv(c), ladj,
                m.autograd.grad(ladj.sum() + c.sum(), v)[0], r(v), r.log_abs_det_jacobian(v, r(v)),
                m.distributions.constraints.corr_cholesky.check(c), tuple(corr.forward_shape((5, 6))),
                tuple(corr.inverse_shape((4, 4))))
    t, e = _both(build)
    assert e[-2:] == t[-2:]
    assert_same(e[:-2], t[:-2], rtol=1e-5, atol=1e-6)
    for m in (torch, ember):
        with pytest.raises(ValueError, match="flattened lower-diagonal"):
            m.distributions.transforms.CorrCholeskyTransform().forward_shape((4,))


def test_transform_identity_inverse_cache_and_equality():
    T = ember.distributions.transforms
    exp = T.ExpTransform()
    assert exp.inv.inv is exp and exp.inv == T.ExpTransform().inv and exp != T.SigmoidTransform()
    assert T.AffineTransform(1.0, 2.0) == T.AffineTransform(1.0, 2.0) != T.AffineTransform(1.0, 3.0)
    # with a cache, inverting an output returns the very input (AbsTransform is not injective)
    cached = T.AbsTransform(cache_size=1)
    x = ember.tensor([-1.0, 2.0])
    assert cached.inv(cached(x)) is x
    assert T.AbsTransform().inv(T.AbsTransform()(x)).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="cache_size"):
        T.ExpTransform(cache_size=2)
    assert T.ComposeTransform([T.ExpTransform(), T.SoftmaxTransform()]).domain.event_dim == 1
    with pytest.raises(ValueError, match="domain.event_dim or .codomain.event_dim"):
        T.CorrCholeskyTransform().event_dim  # noqa: B018
    assert repr(T.identity_transform) == repr(torch.distributions.transforms.identity_transform)


def test_biject_to_and_transform_to():
    def build(m):
        D = m.distributions
        C = D.constraints
        cons = [C.real, C.positive, C.nonnegative, C.greater_than(2.0), C.less_than(-1.0), C.unit_interval,
                C.interval(-1.0, 3.0), C.half_open_interval(0.0, 2.0), C.simplex, C.real_vector,
                C.independent(C.positive, 1), C.cat([C.positive, C.real], dim=-1, lengths=[2, 1]),
                C.stack([C.positive, C.unit_interval, C.real], dim=-1)]
        x = m.tensor([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]])
        out, names = [], []
        for registry in (D.biject_to, D.transform_to):
            for c in cons:
                t = registry(c)
                y = t(x)
                names.append(repr(t))
                out += [y, c.check(y)]
        matrix = m.tensor([[0.3, -1.2], [1.5, 0.1]])
        for c in (C.lower_cholesky, C.positive_definite, C.corr_cholesky):
            y = D.transform_to(c)(matrix if c is not C.corr_cholesky else m.tensor([0.4]))
            out += [y, c.check(y)]
        return out, names
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)
    for m in (torch, ember):
        with pytest.raises(NotImplementedError, match="Cannot transform _Boolean"):
            m.distributions.biject_to(m.distributions.constraints.boolean)


def test_new_constraints():
    def build(m):
        C = m.distributions.constraints
        x = m.tensor([[[2.0, 0.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, -1.0]]])
        s = x @ x.mT
        return [c.check(v) for c, v in [
            (C.lower_cholesky, x), (C.lower_triangular, x), (C.square, x), (C.symmetric, s), (C.symmetric, x),
            (C.positive_definite, s), (C.positive_definite, m.tensor([[1.0, 2.0], [2.0, 1.0]])),
            (C.positive_semidefinite, s), (C.corr_cholesky, m.eye(2)), (C.multinomial(5), x.abs()),
            (C.cat([C.positive, C.real], dim=-1, lengths=[1, 1]), x),
            (C.stack([C.positive, C.real], dim=-1), x)]]
    t, e = _both(build)
    assert_same(e, t)
    C = ember.distributions.constraints
    assert (C.lower_cholesky.event_dim, C.positive_definite.event_dim, C.multinomial(3).is_discrete) == (2, 2, True)
    assert repr(C.positive_definite) == repr(torch.distributions.constraints.positive_definite)


# ---- distributions ------------------------------------------------------------------------------------------------

X3 = [0.5, 1.0, 2.5]


def _spec(m, name):
    """Distributions whose samples are transforms of uniform/normal/exponential/Cauchy draws (seeded samples equal
    PyTorch's) and whose densities need no ember-special, with points of their support."""
    D, t = m.distributions, m.tensor
    cov = t([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    return {
        "Exponential": (lambda p: D.Exponential(p[0]), [t([0.5, 1.0, 3.0])], t(X3)),
        "Laplace": (lambda p: D.Laplace(p[0], p[1]), [t([0.0, 1.0, -1.0]), t([1.0, 2.0, 0.5])], t([0.5, 1.0, -2.0])),
        "LogNormal": (lambda p: D.LogNormal(p[0], p[1]), [t([0.0, 1.0, -1.0]), t([1.0, 2.0, 0.5])], t(X3)),
        "Cauchy": (lambda p: D.Cauchy(p[0], p[1]), [t([0.0, 1.0, -1.0]), t([1.0, 2.0, 0.5])], t([0.5, 1.0, -2.0])),
        "Gumbel": (lambda p: D.Gumbel(p[0], p[1]), [t([0.0, 1.0, -1.0]), t([1.0, 2.0, 0.5])], t([0.5, 1.0, -2.0])),
        "HalfNormal": (lambda p: D.HalfNormal(p[0]), [t([1.0, 2.0, 0.5])], t(X3)),
        "HalfCauchy": (lambda p: D.HalfCauchy(p[0]), [t([1.0, 2.0, 0.5])], t(X3)),
        "Geometric": (lambda p: D.Geometric(p[0]), [t([0.2, 0.5, 0.9])], t([0.0, 1.0, 4.0])),
        "MultivariateNormal": (lambda p: D.MultivariateNormal(p[0], p[1]), [t([0.5, 1.5, 3.0]), cov],
                               t([[0.0, 1.0, 7.0], [1.0, 2.0, 3.0]])),
        "MultivariateNormal(precision)": (lambda p: D.MultivariateNormal(p[0], precision_matrix=p[1]),
                                          [t([0.5, 1.5, 3.0]), cov], t([[0.0, 1.0, 7.0], [1.0, 2.0, 3.0]])),
        "MultivariateNormal(scale_tril)": (lambda p: D.MultivariateNormal(p[0].expand(2, 3), scale_tril=p[1]),
                                           [t([0.5, 1.5, 3.0]), m.linalg.cholesky(cov)], t([0.0, 1.0, 7.0])),
        "LowRankMultivariateNormal": (lambda p: D.LowRankMultivariateNormal(p[0], p[1], p[2]),
                                      [t([0.5, 1.5, 3.0]), t([[1.0, 0.0], [0.5, 2.0], [0.1, 0.3]]), t([1.0, 0.5, 2.0])],
                                      t([[0.0, 1.0, 7.0], [1.0, 2.0, 3.0]])),
    }[name]


def _props(d):
    out = []
    for name in ("mean", "mode", "variance", "stddev"):
        try:
            out.append(getattr(d, name))
        except NotImplementedError:
            out.append(None)
    return out


@pytest.mark.parametrize("name", ["Exponential", "Laplace", "LogNormal", "Cauchy", "Gumbel", "HalfNormal",
                                  "HalfCauchy", "Geometric", "MultivariateNormal", "MultivariateNormal(precision)",
                                  "MultivariateNormal(scale_tril)", "LowRankMultivariateNormal"])
def test_distribution_against_torch(name):
    def build(m):
        make, params, x = _spec(m, name)
        d = make(params)
        s = d.sample((4,))
        out = [s, d.log_prob(x), d.log_prob(s), d.entropy(), d.sample()] + _props(d)
        if d.has_rsample:
            out.append(d.rsample((2,)))
        e = d.expand((5,) + tuple(d.batch_shape))
        es = e.sample()
        out += [es, e.log_prob(es)]
        info = (tuple(d.batch_shape), tuple(d.event_shape), tuple(e.batch_shape), repr(d.support), d.has_rsample,
                type(d).__name__ == type(e).__name__)
        return out, info
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["Exponential", "Laplace", "LogNormal", "Cauchy", "Gumbel", "HalfNormal",
                                  "HalfCauchy", "MultivariateNormal", "MultivariateNormal(precision)",
                                  "LowRankMultivariateNormal"])
def test_rsample_and_log_prob_gradients(name):
    def build(m):
        make, params, x = _spec(m, name)
        params = [p.clone().requires_grad_(True) for p in params]
        d = make(params)
        loss = (d.rsample((3,)) ** 2).sum() + d.log_prob(x).sum() + d.entropy().sum()
        return m.autograd.grad(loss, params)
    t, e = _both(build)
    assert_same(e, t, rtol=1e-4, atol=1e-5)


def test_cdf_icdf_without_special():
    def build(m):
        D, t = m.distributions, m.tensor
        p = t([0.1, 0.5, 0.9])
        out = []
        for d, x in [(D.Exponential(t([0.5, 1.0, 3.0])), t(X3)), (D.Laplace(t([0.0, 1.0, -1.0]), 2.0), t(X3)),
                     (D.Cauchy(t([0.0, 1.0, -1.0]), 2.0), t(X3)), (D.Gumbel(t([0.0, 1.0, -1.0]), 2.0), t(X3)),
                     (D.HalfCauchy(t([1.0, 2.0, 0.5])), t(X3))]:
            out += [d.cdf(x), d.icdf(p)]
        return out
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)


def test_transformed_distribution():
    def build(m):
        D, T = m.distributions, m.distributions.transforms
        loc = m.tensor([0.0, 1.0], requires_grad=True)
        d = D.TransformedDistribution(D.Normal(loc, m.tensor([1.0, 0.5])),
                                      [T.AffineTransform(1.0, -2.0), T.SigmoidTransform()])
        s = d.rsample((3,))
        lp = d.log_prob(m.tensor([0.2, 0.7]))
        # a vector transform makes the event one-dimensional and sums the base log-densities
        v = D.TransformedDistribution(D.Normal(m.zeros(2, 3), m.ones(2, 3)), T.StickBreakingTransform())
        y = v.sample()
        # the transform's parameters broadcast the base distribution
        b = D.TransformedDistribution(D.Exponential(m.tensor(1.0)), T.AffineTransform(m.tensor([1.0, 2.0]), 3.0))
        u = D.TransformedDistribution(D.Uniform(m.tensor([0.0]), m.tensor([1.0])), T.AffineTransform(2.0, -3.0))
        return ((s, lp, m.autograd.grad(lp.sum() + s.sum(), loc)[0], y, v.log_prob(y), b.sample(),
                 b.log_prob(m.tensor([1.5, 2.5])), u.cdf(m.tensor([-0.5])), u.icdf(m.tensor([0.25])),
                 d.expand((4, 2)).sample()),
                [tuple(x.batch_shape) + (None,) + tuple(x.event_shape) for x in (d, v, b)] + [repr(v.support)])
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)
    for m in (torch, ember):
        with pytest.raises(ValueError, match="transforms must be a Transform or list"):
            m.distributions.TransformedDistribution(m.distributions.Normal(0.0, 1.0), "exp")


def test_multinomial_samples_as_torch():
    def build(m):
        d = m.distributions.Multinomial(6, m.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
        return d.sample((3,)), d.mean, d.variance, tuple(d.batch_shape), tuple(d.event_shape)
    t, e = _both(build)
    assert e[3:] == t[3:]
    assert_same(e[:3], t[:3])


def _invalid(m):
    """(construction, message it raises) pairs, run under ``m``."""
    D, t = m.distributions, m.tensor
    return [(lambda: D.Exponential(t([-1.0])), "constraint GreaterThan"),
            (lambda: D.Laplace(t([0.0]), t([0.0])), "constraint GreaterThan"),
            (lambda: D.Geometric(t([0.0])), "to be positive"),
            (lambda: D.MultivariateNormal(t(0.0), m.eye(1)), "loc must be at least one-dimensional"),
            (lambda: D.MultivariateNormal(t([0.0]), m.eye(1), scale_tril=m.eye(1)), "Exactly one of"),
            (lambda: D.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 2.0], [2.0, 1.0]])), "PositiveDefinite"),
            (lambda: D.LowRankMultivariateNormal(t([0.0, 0.0]), t([1.0, 0.0]), t([1.0, 1.0])),
             "cov_factor must be at least two-dimensional"),
            (lambda: D.Exponential(t([1.0])).log_prob(t([-1.0])), "support"),
            (lambda: D.Geometric(t([0.5])).log_prob(t([1.5])), "support"),
            (lambda: D.MultivariateNormal(t([0.0, 0.0]), m.eye(2)).log_prob(t([0.0, 0.0, 0.0])), "event_shape")]


def test_new_validation_errors_as_torch():
    for m in (torch, ember):
        for make, match in _invalid(m):
            with pytest.raises(ValueError, match=match):
                make()
        with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
            m.distributions.Multinomial(m.tensor(3), m.tensor([0.5, 0.5]))


def _special_spec(m, name):
    """Distributions whose densities need lgamma/digamma (ember-special) and whose samplers are PyTorch's own
    rejection algorithms (seeded samples differ), with points of their support."""
    D, t = m.distributions, m.tensor
    return {
        "Gamma": (lambda p: D.Gamma(p[0], p[1]), [t([0.5, 1.0, 3.0]), t([1.0, 2.0, 0.5])], t(X3)),
        "Chi2": (lambda p: D.Chi2(p[0]), [t([0.5, 1.5, 3.0])], t(X3)),
        "Beta": (lambda p: D.Beta(p[0], p[1]), [t([0.5, 1.0, 3.0]), t([1.0, 2.0, 0.5])], t([0.2, 0.5, 0.9])),
        "Dirichlet": (lambda p: D.Dirichlet(p[0]), [t([[0.5, 1.0, 3.0], [2.0, 2.0, 2.0]])], t([0.2, 0.5, 0.3])),
        "StudentT": (lambda p: D.StudentT(p[0], p[1], p[2]),
                     [t([0.5, 1.5, 3.0]), t([0.0, 1.0, 2.0]), t([1.0, 2.0, 0.5])], t([0.5, 1.0, -2.0])),
        "Poisson": (lambda p: D.Poisson(p[0]), [t([0.5, 1.0, 30.0])], t([0.0, 1.0, 27.0])),
        "Binomial": (lambda p: D.Binomial(10, p[0]), [t([0.1, 0.5, 0.9])], t([0.0, 4.0, 10.0])),
        "Binomial(logits)": (lambda p: D.Binomial(t([5.0, 10.0, 20.0]), logits=p[0]), [t([-1.0, 0.0, 3.0])],
                             t([0.0, 4.0, 10.0])),
        "Multinomial": (lambda p: D.Multinomial(6, p[0]), [t([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])], t([2.0, 1.0, 3.0])),
    }[name]


SPECIAL = ["Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "Poisson", "Binomial", "Binomial(logits)", "Multinomial"]


@pytest.mark.special
@pytest.mark.parametrize("name", SPECIAL)
def test_special_distribution_densities(name):
    def build(m):
        make, params, x = _special_spec(m, name)
        params = [p.clone().requires_grad_(True) for p in params]
        d = make(params)
        lp = d.log_prob(x)
        try:
            h = d.entropy()  # (not for Poisson, nor a Binomial of several total counts)
        except NotImplementedError:
            h = m.zeros(())
        try:
            mode = d.mode
        except NotImplementedError:
            mode = None
        grads = m.autograd.grad(lp.sum() + h.sum(), params)
        return ([lp, h, d.mean, d.variance, mode, grads, d.expand((2,) + tuple(d.batch_shape)).log_prob(x)],
                (tuple(d.batch_shape), tuple(d.event_shape), repr(d.support), d.has_rsample))
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", SPECIAL)
def test_rejection_sampler_statistics(name):
    # PyTorch's rejection samplers draw differently from the same stream: compare moments over many draws instead
    make, params, _ = _special_spec(ember, name)
    d = make([p.double() for p in params])
    ember.manual_seed(0)
    s = d.sample((4000,))
    assert tuple(s.shape) == (4000,) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert bool(d.support.check(s).all())
    n = 4000 ** 0.5
    sd = d.variance.sqrt() if name != "StudentT" else d.scale * 2  # (df <= 2 has no finite variance)
    mean = d.mean if name != "StudentT" else d.loc
    center = s.mean(0) if name != "StudentT" else s.median(0).values
    ok = (center - mean).abs() <= 5 * sd / n + 1e-9
    assert bool(ok.all()), (center, mean)
    if name not in ("StudentT",):
        np.testing.assert_allclose(s.var(0).numpy(), d.variance.numpy(), rtol=0.15)


@pytest.mark.special
def test_gamma_family_rsample_gradient():
    # E[X] = concentration / rate: the mean of reparameterised samples' gradients estimates d/dc E[X] = 1 / rate
    c = ember.tensor([0.3, 1.0, 4.0], dtype=ember.float64, requires_grad=True)
    ember.manual_seed(0)
    ember.distributions.Gamma(c, 2.0).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), [0.5, 0.5, 0.5], rtol=0.03)
    # Beta: E[X] = a / (a + b), d/da = b / (a + b)^2
    a = ember.tensor([0.5, 2.0], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([1.0, 3.0], dtype=ember.float64)
    ember.distributions.Beta(a, b).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1 / 2.25, 3 / 25], rtol=0.05)


@pytest.mark.special
def test_cdfs_needing_special():
    def build(m):
        D, t = m.distributions, m.tensor
        ln, hn = D.LogNormal(t([0.0, 1.0, -1.0]), t([1.0, 2.0, 0.5])), D.HalfNormal(t([1.0, 2.0, 0.5]))
        p = t([0.1, 0.5, 0.9])
        return (ln.cdf(t(X3)), ln.icdf(p), hn.cdf(t(X3)), hn.icdf(p),
                D.Gamma(t([0.5, 1.0, 3.0]), t([1.0, 2.0, 0.5])).cdf(t(X3)))
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)


@pytest.mark.special
def test_exponential_family_entropy_by_bregman_divergence():
    # the base class's entropy (from the log-normaliser's gradient) equals the closed forms
    D = ember.distributions
    for d in (D.Exponential(ember.tensor([0.5, 2.0])), D.Gamma(ember.tensor([0.5, 3.0]), ember.tensor([1.0, 2.0]))):
        np.testing.assert_allclose(D.ExponentialFamily.entropy(d).detach().numpy(), d.entropy().numpy(), rtol=1e-5)


COV_A = [[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]]
COV_B = [[1.0, 0.1, 0.2], [0.1, 2.0, 0.0], [0.2, 0.0, 1.5]]


def _kl_pairs(m, special):
    D, t = m.distributions, m.tensor

    def lr(loc):
        return D.LowRankMultivariateNormal(t(loc), t([[1.0, 0.0], [0.5, 2.0], [0.1, 0.3]]), t([1.0, 0.5, 2.0]))
    lr2 = D.LowRankMultivariateNormal(t([1.0, 0.0, -1.0]), t([[0.3, 1.0], [0.2, 0.1], [1.0, 0.0]]), t([0.7, 1.5, 0.2]))
    mvn = D.MultivariateNormal(t([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]), t(COV_A))
    mvn2 = D.MultivariateNormal(t([1.0, 0.0, -1.0]), t(COV_B))
    if special:
        return [(D.Gamma(t([0.5, 2.0]), t([1.0, 3.0])), D.Gamma(t([1.5, 0.2]), t([0.4, 3.0]))),
                (D.Exponential(t([0.5, 2.0])), D.Gamma(t([1.5, 0.2]), t([0.4, 3.0]))),
                (D.Beta(t([0.5, 2.0]), t([1.0, 3.0])), D.Beta(t([1.5, 0.2]), t([0.4, 3.0]))),
                (D.Dirichlet(t([[0.5, 2.0, 1.0]])), D.Dirichlet(t([[1.5, 0.2, 3.0], [1.0, 1.0, 1.0]]))),
                (D.Gumbel(t([0.5, 2.0]), 1.0), D.Gumbel(t([1.0, 3.0]), t([0.5, 2.0])))]
    return [(D.Exponential(t([0.5, 2.0])), D.Exponential(t([1.0, 3.0]))),
            (D.Poisson(t([0.5, 2.0])), D.Poisson(t([1.0, 3.0]))),
            (D.Laplace(t([0.5, 2.0]), 1.0), D.Laplace(t([1.0, 3.0]), t([0.5, 2.0]))),
            (D.Geometric(t([0.5, 0.2])), D.Geometric(t([0.1, 0.3]))),
            (D.Binomial(t([5.0, 6.0]), t([0.5, 0.2])), D.Binomial(t([5.0, 5.0]), t([0.1, 0.3]))),
            (D.Cauchy(t([0.5, 2.0]), 1.0), D.Cauchy(t([1.0, 3.0]), t([0.5, 2.0]))),
            (D.HalfNormal(t([0.5, 2.0])), D.HalfNormal(t([1.0, 3.0]))),
            (D.LogNormal(t([0.5, 2.0]), 1.0), D.LogNormal(t([1.0, 3.0]), t([0.5, 2.0]))),
            (mvn, mvn2), (lr([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]), lr2), (mvn, lr2),
            (lr([0.0, 1.0, 2.0]), mvn2)]


@pytest.mark.parametrize("special", [False, pytest.param(True, marks=pytest.mark.special)])
def test_more_kl_divergences(special):
    t, e = _both(lambda m: [m.distributions.kl_divergence(p, q) for p, q in _kl_pairs(m, special)])
    assert_same(e, t, rtol=1e-5, atol=1e-6)


def test_kl_not_implemented_cases_as_torch():
    for m in (torch, ember):
        D, t = m.distributions, m.tensor
        with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
            D.kl_divergence(D.Binomial(t([2.0]), t([0.5])), D.Binomial(t([3.0]), t([0.5])))
        with pytest.raises(NotImplementedError):  # different transforms
            D.kl_divergence(D.LogNormal(0.0, 1.0), D.HalfCauchy(1.0))
        with pytest.raises(ValueError, match="different event shapes"):
            D.kl_divergence(D.MultivariateNormal(m.zeros(2), m.eye(2)), D.MultivariateNormal(m.zeros(3), m.eye(3)))


def _more_spec(m, name):
    """name -> (distribution, a value in its support)."""
    D, t = m.distributions, m.tensor
    # (Laplace: its cdf needs no ember-special)
    mix_components = D.Laplace(t([[-1.0, 0.0, 2.0], [1.0, 1.0, 1.0]]), t([[0.5, 1.0, 2.0], [1.0, 2.0, 3.0]]))
    return {
        "Pareto": (D.Pareto(t([1.0, 1.5, 0.5]), t([0.5, 2.0, 3.0])), t([1.5, 2.0, 3.0])),
        "LogisticNormal": (D.LogisticNormal(t([1.0, 1.5]), t([0.5, 2.0])), t([0.5, 0.2, 0.3])),
        "RelaxedBernoulli": (D.RelaxedBernoulli(t(0.5), t([0.1, 0.5, 0.9])), t([0.5, 0.2, 0.3])),
        "ContinuousBernoulli": (D.ContinuousBernoulli(t([0.1, 0.5, 0.4999, 0.9])), t([0.5, 0.2, 0.3, 0.9])),
        "ContinuousBernoulli(logits)": (D.ContinuousBernoulli(logits=t([-2.0, 0.0, 1e-4, 3.0])),
                                        t([0.5, 0.2, 0.3, 0.9])),
        "GeneralizedPareto": (D.GeneralizedPareto(t([0.0, 0.1, -0.2]), t([1.0, 2.0, 0.5]), t([0.0, 0.3, -0.4])),
                              t([0.5, 0.2, 0.3])),
        "VonMises": (D.VonMises(t([1.0, 3.0, -2.0]), t([0.3, 5.0, 9.0])), t([0.5, 2.0, 5.0])),
        "MixtureSameFamily": (D.MixtureSameFamily(D.Categorical(t([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])),
                                                  mix_components), t([0.5, 2.0])),
        "MixtureSameFamily(Independent)": (D.MixtureSameFamily(D.Categorical(t([0.2, 0.8])), D.Independent(
            D.Normal(t([[-1.0, 0.0], [2.0, 1.0]]), t([[0.5, 1.0], [2.0, 1.0]])), 1)), t([[0.5, 1.0], [2.0, 0.0]])),
        "OneHotCategoricalStraightThrough": (D.OneHotCategoricalStraightThrough(t([0.2, 0.3, 0.5])),
                                             t([0.0, 1.0, 0.0])),
        # ember-special below (lgamma/digamma)
        "Weibull": (D.Weibull(t([1.0, 1.5, 0.5]), t([0.5, 2.0, 3.0])), t([1.5, 2.0, 3.0])),
        "Kumaraswamy": (D.Kumaraswamy(t([1.0, 1.5, 0.5]), t([0.5, 2.0, 3.0])), t([0.5, 0.2, 0.3])),
        "RelaxedOneHotCategorical": (D.RelaxedOneHotCategorical(t(0.5), t([0.1, 0.5, 0.4])), t([0.5, 0.2, 0.3])),
        "InverseGamma": (D.InverseGamma(t([1.0, 1.5, 3.0]), t([0.5, 2.0, 1.0])), t([0.5, 0.2, 0.3])),
        "NegativeBinomial": (D.NegativeBinomial(t([0.5, 3.0, 5.5]), t([0.1, 0.5, 0.9])), t([0.0, 2.0, 5.0])),
        "NegativeBinomial(logits)": (D.NegativeBinomial(t([0.0, 3.0, 5.5]), logits=t([-1.0, 0.5, 2.0])),
                                     t([0.0, 2.0, 5.0])),
        "FisherSnedecor": (D.FisherSnedecor(t([1.0, 3.0, 5.5]), t([3.0, 5.0, 9.0])), t([0.5, 2.0, 5.0])),
    }[name]


def _evaluate(m, d, x, samples):
    """What ``d`` computes, None where it raises NotImplementedError (as PyTorch must then too)."""
    def get(f):
        try:
            return f()
        except NotImplementedError:
            return None
    out = [d.log_prob(x), get(d.entropy), get(lambda: d.mean), get(lambda: d.mode), get(lambda: d.variance),
           get(lambda: d.cdf(x)), get(lambda: d.expand((2,) + tuple(d.batch_shape)).log_prob(x))]
    if samples:
        out += [d.sample((3,)), get(lambda: d.rsample((2,)))]
    return out, (tuple(d.batch_shape), tuple(d.event_shape), repr(d.support), d.has_rsample)


PLAIN = ["Pareto", "LogisticNormal", "RelaxedBernoulli", "ContinuousBernoulli", "ContinuousBernoulli(logits)",
         "GeneralizedPareto", "VonMises", "MixtureSameFamily", "MixtureSameFamily(Independent)",
         "OneHotCategoricalStraightThrough"]
WITH_SPECIAL = [("Weibull", True), ("Kumaraswamy", True), ("RelaxedOneHotCategorical", True),
                ("InverseGamma", False), ("NegativeBinomial", False), ("NegativeBinomial(logits)", False),
                ("FisherSnedecor", False)]


@pytest.mark.parametrize("name,samples", [(n, True) for n in PLAIN] + [
    pytest.param(n, s, marks=pytest.mark.special) for n, s in WITH_SPECIAL])
def test_more_distributions_against_torch(name, samples):
    t, e = _both(lambda m: _evaluate(m, *_more_spec(m, name), samples))
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=2e-5, atol=1e-6)


@pytest.mark.special
@pytest.mark.parametrize("name", ["InverseGamma", "NegativeBinomial", "FisherSnedecor"])
def test_more_rejection_sampler_statistics(name):
    d, _ = _more_spec(ember, name)
    ember.manual_seed(0)
    s = d.sample((4000,)).double()
    assert bool(d.support.check(s).all())
    if name == "InverseGamma":  # (heavy tails: compare medians with the closed-form quantiles' neighbourhood)
        ref = torch.distributions.InverseGamma(torch.tensor([1.0, 1.5, 3.0]), torch.tensor([0.5, 2.0, 1.0]))
        torch.manual_seed(0)
        np.testing.assert_allclose(s.median(0).values.numpy(), ref.sample((4000,)).median(0).values.numpy(), rtol=0.1)
    else:
        mean = d.mean.double()
        ok = ((s.mean(0) - mean).abs() <= 5 * s.std(0) / 4000 ** 0.5) | mean.isnan()
        assert bool(ok.all()), (s.mean(0), mean)


def test_rsample_gradients_of_new_distributions():
    def build(m):
        D, t = m.distributions, m.tensor
        p = [t([1.0, 1.5]).requires_grad_(), t([0.5, 2.0]).requires_grad_(), t([0.2, 0.7]).requires_grad_(),
             t([0.3, 0.5, 0.2]).requires_grad_()]
        loss = (D.Pareto(p[0], p[1]).rsample((3,)).sum() + D.LogisticNormal(p[0], p[1]).rsample().pow(2).sum()
                + D.RelaxedBernoulli(t(0.5), p[2]).rsample((2,)).pow(2).sum()
                + D.ContinuousBernoulli(p[2]).rsample((2,)).pow(2).sum()
                + D.GeneralizedPareto(p[0], p[1], p[2]).rsample((2,)).sum()
                + (D.OneHotCategoricalStraightThrough(p[3]).rsample((2,)) * t([1.0, 2.0, 3.0])).sum())
        return m.autograd.grad(loss, p)
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)


def test_mixture_same_family_errors_as_torch():
    for m in (torch, ember):
        D, t = m.distributions, m.tensor
        with pytest.raises(ValueError, match="needs to be an  instance"):
            D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(t([0.0, 1.0]), 1.0))
        with pytest.raises(ValueError, match="does not equal"):
            D.MixtureSameFamily(D.Categorical(t([0.5, 0.5])), D.Normal(t([0.0, 1.0, 2.0]), 1.0))


@pytest.mark.special
@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart(param):
    def build(m):
        cov = m.tensor(COV_A)
        d = m.distributions.Wishart(m.tensor([4.0, 5.5]), **{param: cov if param != "scale_tril"
                                                            else m.linalg.cholesky(cov)})
        x = m.tensor([[1.0, 0.2, 0.0], [0.2, 2.0, 0.1], [0.0, 0.1, 1.5]])
        return ([d.log_prob(x), d.entropy(), d.mean, d.mode, d.variance, d.precision_matrix, d.covariance_matrix,
                 d.scale_tril, d.expand((3, 2)).log_prob(x)],
                (tuple(d.batch_shape), tuple(d.event_shape), repr(d.support), d.has_rsample))
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)


@pytest.mark.special
def test_wishart_and_lkj_samples():
    ember.manual_seed(0)
    cov = ember.tensor(COV_A, dtype=ember.float64)
    d = ember.distributions.Wishart(ember.tensor(5.0, dtype=ember.float64), covariance_matrix=cov)
    s = d.sample((3000,))
    assert bool(d.support.check(s).all())
    np.testing.assert_allclose(s.mean(0).numpy(), d.mean.numpy(), atol=0.35)
    lkj = ember.distributions.LKJCholesky(3, ember.tensor([0.5, 2.0]))
    s = lkj.sample((3000,))
    assert tuple(s.shape) == (3000, 2, 3, 3) and bool(lkj.support.check(s).all())
    # an off-diagonal correlation of LKJ(eta) in dimension d is 2 Beta(b, b) - 1, b = eta - 1 + d / 2
    b = np.array([0.5, 2.0]) + 0.5
    np.testing.assert_allclose((s @ s.mT)[..., 1, 0].var(0).numpy(), 1 / (2 * b + 1), rtol=0.1)


@pytest.mark.special
def test_lkj_cholesky_log_prob_and_errors():
    def build(m):
        low = m.linalg.cholesky(m.tensor([[1.0, 0.2, 0.0], [0.2, 1.0, 0.1], [0.0, 0.1, 1.0]]))
        d = m.distributions.LKJCholesky(3, m.tensor([0.5, 2.0]))
        return [d.log_prob(low), d.expand((2, 2)).log_prob(low)], (tuple(d.batch_shape), tuple(d.event_shape))
    t, e = _both(build)
    assert e[1] == t[1]
    assert_same(e[0], t[0], rtol=1e-5, atol=1e-6)
    for m in (torch, ember):
        with pytest.raises(ValueError, match="greater than or equal to 2"):
            m.distributions.LKJCholesky(1)
        with pytest.raises(ValueError, match="expected to be greater than ndim - 1"):
            m.distributions.Wishart(m.tensor(1.0), m.eye(3))


def test_tril_vector_helpers_and_module_layout():
    def build(m):
        U = m.distributions.utils
        v = m.arange(6.0).reshape(1, 6)
        return [U.vec_to_tril_matrix(v), U.vec_to_tril_matrix(v, diag=-1),
                U.tril_matrix_to_vec(m.arange(9.0).reshape(3, 3)),
                U.tril_matrix_to_vec(m.arange(16.0).reshape(4, 4), -2)]
    t, e = _both(build)
    assert_same(e, t)
    for m in (torch, ember):
        with pytest.raises(ValueError, match="cannot be expressed as the lower triangular part"):
            m.distributions.utils.vec_to_tril_matrix(m.zeros(5))
    from ember.distributions.one_hot_categorical import OneHotCategorical
    from ember.distributions.relaxed_categorical import ExpRelaxedCategorical
    assert OneHotCategorical is ember.distributions.OneHotCategorical and ExpRelaxedCategorical.has_rsample


def _cross_family(m):
    """One distribution of each family in PyTorch's table of KL pairs between families, batched over 3."""
    D, t = m.distributions, m.tensor
    return {
        "Beta": D.Beta(t([0.5, 2.0, 3.0]), t([1.5, 2.0, 0.7])),
        "ContinuousBernoulli": D.ContinuousBernoulli(t([0.2, 0.5, 0.8])),
        "Exponential": D.Exponential(t([0.5, 2.0, 1.0])),
        "Gamma": D.Gamma(t([0.5, 2.0, 3.0]), t([1.5, 2.0, 0.7])),
        "Gumbel": D.Gumbel(t([0.0, 1.0, -1.0]), t([1.0, 0.5, 2.0])),
        "Laplace": D.Laplace(t([0.0, 1.0, -1.0]), t([1.0, 0.5, 2.0])),
        "Normal": D.Normal(t([0.0, 1.0, -1.0]), t([1.0, 0.5, 2.0])),
        "Pareto": D.Pareto(t([1.0, 0.5, 2.0]), t([0.8, 1.5, 3.0])),
        "Uniform": D.Uniform(t([0.1, 0.0, -0.5]), t([0.9, 1.0, 2.0])),
        "Poisson": D.Poisson(t([0.5, 2.0, 1.0])),
        "Bernoulli": D.Bernoulli(t([0.2, 0.5, 0.8])),
        "Binomial": D.Binomial(5, t([0.2, 0.5, 0.8])),
    }


def _cross_pairs(special):
    import torch.distributions.kl as tkl
    names = {type(d).__name__ for d in _cross_family(torch).values()}
    pairs = sorted({(p.__name__, q.__name__) for p, q in tkl._KL_REGISTRY
                    if p.__name__ in names and q.__name__ in names and p is not q})
    uses_special = {"Beta", "Gamma"}  # (entropies and E[log x] by lgamma/digamma; Normal-Laplace by erf)
    return [pq for pq in pairs
            if special == (bool(uses_special & set(pq)) or pq == ("Normal", "Laplace"))]


@pytest.mark.parametrize("special", [False, pytest.param(True, marks=pytest.mark.special)])
def test_kl_between_families_as_torch(special):
    pairs = _cross_pairs(special)
    assert len(pairs) > 20

    def build(m):
        fam = _cross_family(m)
        return [m.distributions.kl_divergence(fam[p], fam[q]) for p, q in pairs]
    t, e = _both(build)
    assert_same(e, t, rtol=2e-5, atol=2e-5)


@pytest.mark.special
def test_kl_bregman_and_continuous_bernoulli_as_torch():
    def build(m):
        D, t = m.distributions, m.tensor
        # Chi2 has no pair of its own (Gamma's serves); the Bregman form of the ExponentialFamily pair
        return [D.kl_divergence(D.Chi2(t([1.0, 3.0])), D.Chi2(t([2.0, 2.0]))),
                D.kl_divergence(D.ContinuousBernoulli(t([0.2, 0.7])), D.ContinuousBernoulli(t([0.5, 0.1]))),
                D.kl_divergence(D.Pareto(t([1.0, 2.0]), t([2.0, 3.0])), D.Pareto(t([1.5, 1.0]), t([1.0, 2.0]))),
                D.kl_divergence(D.Exponential(t([0.5])), D.Exponential(t([2.0]))),
                D.kl._kl_expfamily_expfamily(D.Exponential(t([0.5, 1.0])), D.Exponential(t([2.0, 0.3])))]
    t, e = _both(build)
    assert_same(e, t, rtol=1e-5, atol=1e-6)


@pytest.mark.special
def test_gamma_sample_gradient_equals_torchs_at_the_same_points():
    # the implicit reparameterisation dx/dalpha at given (alpha, x) is a function: PyTorch's approximates it
    from ember.distributions._gamma import _dsample_dalpha
    ember.manual_seed(0)
    alpha = ember.tensor([0.05, 0.3, 1.0, 2.5, 8.0, 50.0, 500.0]).repeat(20)
    x = ember.distributions.Gamma(alpha, 1.0).sample()
    expected = torch._standard_gamma_grad(torch.tensor(alpha.numpy()), torch.tensor(x.numpy()))
    np.testing.assert_allclose(_dsample_dalpha(x, alpha).numpy(), expected.numpy(), rtol=2e-3)
