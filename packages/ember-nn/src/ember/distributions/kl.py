"""KL divergence between two distributions, by a table of closed forms keyed on the pair of types. (Pairs whose
forms use lgamma/digamma need ember-special.)"""
import math

import ember
import ember.nn.functional as F

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import _EULER_GAMMA, Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal, _lowrank_logdet, _lowrank_mahalanobis
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: ``fn(p, q)`` computes KL(p || q) for instances of these types (and their subclasses)."""
    def decorator(fn):
        _KL[type_p, type_q] = fn
        return fn
    return decorator


def _lookup(type_p, type_q):
    # the most specific registered pair along both class hierarchies
    for tp in type_p.__mro__:
        for tq in type_q.__mro__:
            fn = _KL.get((tp, tq))
            if fn is not None:
                return fn
    return None


def kl_divergence(p, q):
    """KL(p || q) for each batch element. NotImplementedError if no closed form is registered for the pair."""
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fn(p, q)


def _infinite_like(t):
    return ember.full_like(t, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand_as(t), math.inf)
    t = t.masked_fill((p.probs == 0).expand_as(t), 0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, math.inf).masked_fill(p.probs == 0, 0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, math.inf).masked_fill(p.probs == 1, 0)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return result.masked_fill((q.low > p.low) | (q.high < p.high), math.inf)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    return (q.concentration * ember.log(p.rate / q.rate) + ember.lgamma(q.concentration)
            - ember.lgamma(p.concentration) + (p.concentration - q.concentration) * ember.digamma(p.concentration)
            + (q.rate - p.rate) * (p.concentration / p.rate))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    # E_p[x] = 1 / rate_p and E_p[log x] = -gamma - log rate_p in E_p[log p - log q]
    ratio = q.rate / p.rate
    return (ember.lgamma(q.concentration) - q.concentration * ratio.log() + (q.concentration - 1) * _EULER_GAMMA
            + ratio - 1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    lg = ember.lgamma
    return (lg(q.concentration1) + lg(q.concentration0) + lg(sum_p)
            - lg(p.concentration1) - lg(p.concentration0) - lg(sum_q)
            + (p.concentration1 - q.concentration1) * ember.digamma(p.concentration1)
            + (p.concentration0 - q.concentration0) * ember.digamma(p.concentration0)
            + (sum_q - sum_p) * ember.digamma(sum_p))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p, sum_q = p.concentration.sum(-1), q.concentration.sum(-1)
    expected_log = ember.digamma(p.concentration) - ember.digamma(sum_p).unsqueeze(-1)  # E_p[log x_i]
    return (ember.lgamma(sum_p) - ember.lgamma(sum_q)
            - (ember.lgamma(p.concentration) - ember.lgamma(q.concentration)).sum(-1)
            + ((p.concentration - q.concentration) * expected_log).sum(-1))


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    dist = (p.loc - q.loc).abs()
    return -ratio.log() + dist / q.scale + ratio * ember.exp(-dist / p.scale) - 1


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - ember.log1p(-q.probs) / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return kl.masked_fill(p.total_count > q.total_count, math.inf)  # p's support reaches beyond q's


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)) / (4 * p.scale * q.scale)).log()


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ratio = p.scale / q.scale
    a, b = q.loc / q.scale, p.loc / q.scale
    return (-ratio.log() - a + b + ratio * _EULER_GAMMA + ember.exp(a + ember.lgamma(1 + ratio) - b)
            - (1 + _EULER_GAMMA))


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    # the same bijections on both sides leave the divergence unchanged
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


def _trace_xxt(x):
    """trace(X X^T) per matrix: the squared Frobenius norm."""
    return x.pow(2).sum((-2, -1))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    n = p.event_shape[0]
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_log_det_ratio = lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    shape = ember.Size(ember.broadcast_shapes(lq.shape[:-2], lp.shape[:-2])) + (n, n)
    trace = _trace_xxt(ember.linalg.solve_triangular(lq.expand(shape), lp.expand(shape), upper=False))
    return half_log_det_ratio + 0.5 * (trace + _batch_mahalanobis(lq, q.loc - p.loc) - n)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with different event shapes "
                         "cannot be computed")
    wp, dp, wq, dq = (p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_factor,
                      q._unbroadcasted_cov_diag)
    log_det_ratio = (_lowrank_logdet(wq, dq, q._capacitance_tril) - _lowrank_logdet(wp, dp, p._capacitance_tril))
    mahalanobis = _lowrank_mahalanobis(wq, dq, q.loc - p.loc, q._capacitance_tril)
    # trace(Sigma_q^-1 Sigma_p) by Woodbury: Sigma_q^-1 = D^-1 - A^T A with A = C^-1 W_q^T D_q^-1
    a = ember.linalg.solve_triangular(q._capacitance_tril, wq.mT / dq.unsqueeze(-2), upper=False)
    trace = ((dp / dq).sum(-1) + _trace_xxt(wp * dq.rsqrt().unsqueeze(-1))
             - _trace_xxt(a * dp.sqrt().unsqueeze(-2)) - _trace_xxt(ember.matmul(a, wp)))
    return 0.5 * (log_det_ratio + trace + mahalanobis - p.event_shape[0])


def _check_same_event(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _check_same_event(p, q)
    lp, wq, dq = p._unbroadcasted_scale_tril, q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    log_det_ratio = _lowrank_logdet(wq, dq, q._capacitance_tril) - 2 * lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    a = ember.linalg.solve_triangular(q._capacitance_tril, wq.mT / dq.unsqueeze(-2), upper=False)
    trace = _trace_xxt(lp * dq.rsqrt().unsqueeze(-1)) - _trace_xxt(ember.matmul(a, lp))
    mahalanobis = _lowrank_mahalanobis(wq, dq, q.loc - p.loc, q._capacitance_tril)
    return 0.5 * (log_det_ratio + trace + mahalanobis - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _check_same_event(p, q)
    wp, dp, lq = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_scale_tril
    log_det_ratio = 2 * lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _lowrank_logdet(wp, dp, p._capacitance_tril)
    n = p.event_shape[0]
    shape = ember.Size(ember.broadcast_shapes(lq.shape[:-2], wp.shape[:-2]))
    lq_b = lq.expand(shape + (n, n))
    # trace(Sigma_q^-1 (W W^T + D)) = |Lq^-1 W|^2 + |Lq^-1 D^1/2|^2
    trace = (_trace_xxt(ember.linalg.solve_triangular(lq_b, wp.expand(shape + wp.shape[-2:]), upper=False))
             + _trace_xxt(ember.linalg.solve_triangular(lq_b, ember.diag_embed(dp.sqrt()).expand(shape + (n, n)),
                                                        upper=False)))
    return 0.5 * (log_det_ratio + trace + _batch_mahalanobis(lq, q.loc - p.loc) - n)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    return (p.mean * (p.logits - q.logits) + p._cont_bern_log_norm() + ember.log1p(-p.probs)
            - q._cont_bern_log_norm() - ember.log1p(-q.probs))


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    ratio = q.alpha / p.alpha
    kl = q.alpha * (p.scale / q.scale).log() - ratio.log() + ratio - 1
    return kl.masked_fill(p.scale < q.scale, math.inf)  # p reaches below q's support


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # a Bregman divergence of the log-normaliser A: A(theta_q) - A(theta_p) - <theta_q - theta_p, grad A(theta_p)>
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_params = [t.detach().requires_grad_() for t in p._natural_params]
    q_params = q._natural_params
    with ember.enable_grad():
        log_norm = p._log_normalizer(*p_params)
        grads = ember.autograd.grad(log_norm.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - log_norm
    for tp, tq, g in zip(p_params, q_params, grads):
        result = result - _sum_rightmost((tq - tp) * g, len(q.event_shape))
    return result


# ---- pairs of different families: KL(p || q) = E_p[-log q] - H(p), the cross-entropy from p's moments -------------

def _xlogx(x):
    safe = ember.where(x == 0, ember.ones_like(x), x)  # (0 log 0 = 0, with a finite gradient)
    return ember.where(x == 0, ember.zeros_like(x), safe * safe.log())


def _uniform_mean_log(low, high):
    """E[log x] for x ~ Uniform(low, high), 0 <= low."""
    return (_xlogx(high) - _xlogx(low)) / (high - low) - 1


def _mean_log(p):
    """E_p[log x]."""
    if isinstance(p, Beta):
        return ember.digamma(p.concentration1) - ember.digamma(p.concentration1 + p.concentration0)
    if isinstance(p, Gamma):
        return ember.digamma(p.concentration) - p.rate.log()
    if isinstance(p, Uniform):
        return _uniform_mean_log(p.low, p.high)
    if isinstance(p, Pareto):
        return p.scale.log() + p.alpha.reciprocal()
    raise NotImplementedError


def _mean_log1m(p):
    """E_p[log(1 - x)]."""
    if isinstance(p, Beta):
        return ember.digamma(p.concentration0) - ember.digamma(p.concentration1 + p.concentration0)
    return _uniform_mean_log(1 - p.high, 1 - p.low)


def _mean_exp(p, t):
    """E_p[exp(-t x)]."""
    if isinstance(p, Exponential):
        return p.rate / (p.rate + t)
    if isinstance(p, Gamma):
        return (1 + t / p.rate).pow(-p.concentration)
    if isinstance(p, Normal):
        return ember.exp(-t * p.loc + 0.5 * (t * p.scale).pow(2))
    width = p.high - p.low
    return (ember.exp(-t * p.low) - ember.exp(-t * p.high)) / (t * width)


def _mean(p):
    if isinstance(p, Pareto):  # alpha <= 1 has no mean (and an infinite KL, masked): a finite stand-in there
        a = ember.where(p.alpha > 1, p.alpha, 2.0)
        return a * p.scale / (a - 1)
    return p.mean


def _second_moment(p):
    if isinstance(p, Pareto):  # (likewise for alpha <= 2)
        a = ember.where(p.alpha > 2, p.alpha, 3.0)
        return a * p.scale.pow(2) / (a - 2)
    return p.variance + p.mean.pow(2)


def _cross_normal(p, q):
    mean, second = _mean(p), _second_moment(p)
    return (0.5 * (2 * math.pi * q.scale.pow(2)).log()
            + (second - 2 * q.loc * mean + q.loc.pow(2)) / (2 * q.scale.pow(2)))


def _cross_exponential(p, q):
    return -q.rate.log() + q.rate * _mean(p)


def _cross_gamma(p, q):
    return (ember.lgamma(q.concentration) - q.concentration * q.rate.log() - (q.concentration - 1) * _mean_log(p)
            + q.rate * _mean(p))


def _cross_gumbel(p, q):
    return q.scale.log() + (p.mean - q.loc) / q.scale + ember.exp(q.loc / q.scale) * _mean_exp(p, 1 / q.scale)


def _cross_beta(p, q):
    a, b = q.concentration1, q.concentration0
    return (ember.lgamma(a) + ember.lgamma(b) - ember.lgamma(a + b) - (a - 1) * _mean_log(p)
            - (b - 1) * _mean_log1m(p))


def _cross_continuous_bernoulli(p, q):
    return -(p.mean * q.logits + ember.log1p(-q.probs) + q._cont_bern_log_norm())


def _cross_pareto(p, q):
    return -q.alpha.log() - q.alpha * q.scale.log() + (q.alpha + 1) * _mean_log(p)


def _by_cross_entropy(cross, infinite=None):
    """A KL function ``cross(p, q) - H(p)``, infinite where ``infinite(p, q)`` holds (p's support leaves q's)."""
    def kl(p, q):
        result = cross(p, q) - p.entropy()
        return result if infinite is None else result.masked_fill(infinite(p, q), math.inf)
    return kl


_FINITE = {
    (Beta, ContinuousBernoulli): _by_cross_entropy(_cross_continuous_bernoulli),
    (Beta, Exponential): _by_cross_entropy(_cross_exponential),
    (Beta, Gamma): _by_cross_entropy(_cross_gamma),
    (Beta, Normal): _by_cross_entropy(_cross_normal),
    (Beta, Uniform): _by_cross_entropy(lambda p, q: (q.high - q.low).log(),
                                       lambda p, q: (q.low > 0) | (q.high < 1)),
    (ContinuousBernoulli, Exponential): _by_cross_entropy(_cross_exponential),
    (ContinuousBernoulli, Normal): _by_cross_entropy(_cross_normal),
    # (as PyTorch: also infinite when q is exactly [0, 1])
    (ContinuousBernoulli, Uniform): _by_cross_entropy(lambda p, q: (q.high - q.low).log(),
                                                      lambda p, q: (q.low >= 0) | (q.high <= 1)),
    (Exponential, Gumbel): _by_cross_entropy(_cross_gumbel),
    (Exponential, Normal): _by_cross_entropy(_cross_normal),
    (Gamma, Exponential): _by_cross_entropy(_cross_exponential),
    (Gamma, Gumbel): _by_cross_entropy(_cross_gumbel),
    (Gamma, Normal): _by_cross_entropy(_cross_normal),
    (Gumbel, Normal): _by_cross_entropy(_cross_normal),
    (Laplace, Normal): _by_cross_entropy(_cross_normal),
    (Normal, Gumbel): _by_cross_entropy(_cross_gumbel),
    (Pareto, Exponential): _by_cross_entropy(_cross_exponential, lambda p, q: p.alpha <= 1),
    (Pareto, Gamma): _by_cross_entropy(_cross_gamma, lambda p, q: p.alpha <= 1),
    (Pareto, Normal): _by_cross_entropy(_cross_normal, lambda p, q: p.alpha <= 2),
    (Uniform, Beta): _by_cross_entropy(_cross_beta, lambda p, q: (p.high > 1) | (p.low < 0)),
    # (as PyTorch: also infinite when p is exactly [0, 1])
    (Uniform, ContinuousBernoulli): _by_cross_entropy(_cross_continuous_bernoulli,
                                                      lambda p, q: (p.high >= 1) | (p.low <= 0)),
    (Uniform, Exponential): _by_cross_entropy(_cross_exponential, lambda p, q: p.low < 0),
    (Uniform, Gamma): _by_cross_entropy(_cross_gamma, lambda p, q: p.low < 0),
    (Uniform, Gumbel): _by_cross_entropy(_cross_gumbel),
    (Uniform, Normal): _by_cross_entropy(_cross_normal),
    (Uniform, Pareto): _by_cross_entropy(_cross_pareto, lambda p, q: p.low < q.scale),
    # a Poisson at x in {0, 1}: -log q(x) = rate - x log rate
    (Bernoulli, Poisson): _by_cross_entropy(lambda p, q: q.rate - p.probs * q.rate.log()),
}
for _pair, _fn in _FINITE.items():
    register_kl(*_pair)(_fn)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E|x - m| for x ~ N(mu, s^2), d = mu - m: s sqrt(2 / pi) exp(-d^2 / 2 s^2) + d erf(d / (s sqrt 2))
    d = p.loc - q.loc
    mean_abs = (math.sqrt(2 / math.pi) * p.scale * ember.exp(-0.5 * (d / p.scale).pow(2))
                + d * ember.erf(d / (p.scale * math.sqrt(2))))
    return (2 * q.scale).log() + mean_abs / q.scale - p.entropy()


def _infinite(attr):
    return lambda p, q: _infinite_like(getattr(p, attr))


# p's support reaches where q has no density
_INFINITE = {
    "concentration1": [(Beta, Pareto)],
    "probs": [(ContinuousBernoulli, Pareto)],
    "rate": [(Exponential, Beta), (Exponential, ContinuousBernoulli), (Exponential, Pareto), (Exponential, Uniform),
             (Poisson, Bernoulli), (Poisson, Binomial)],
    "concentration": [(Gamma, Beta), (Gamma, ContinuousBernoulli), (Gamma, Pareto), (Gamma, Uniform)],
    "loc": [(Gumbel, q) for q in (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)]
    + [(Laplace, q) for q in (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)]
    + [(Normal, q) for q in (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)],
    "scale": [(Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform)],
}
for _attr, _pairs in _INFINITE.items():
    for _pair in _pairs:
        register_kl(*_pair)(_infinite(_attr))
