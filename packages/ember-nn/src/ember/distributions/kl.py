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
from .dirichlet import Dirichlet
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
