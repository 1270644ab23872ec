"""Standard gamma variates from ember's generator, differentiable in the shape parameter.

PyTorch draws these with its own rejection sampler, whose consumption of the random stream ember does not
reproduce: seeded gamma (and so Beta, Dirichlet, Chi2, StudentT) samples differ from PyTorch's, with the same
distribution. Sampling is Marsaglia and Tsang's method (shape < 1 boosted by ``U ** (1 / shape)``); the gradient
is the implicit reparameterisation ``dx/da = -(dF/da) / f(x)`` with ``F`` the regularised lower incomplete
gamma function, differentiated in ``a`` numerically in float64 (``ember.igamma`` and ``ember.lgamma``: the
backward pass needs ember-special)."""
import ember

__all__ = ["standard_gamma"]


def _marsaglia_tsang(alpha):
    """Gamma(alpha, 1) variates, alpha a flat float64 tensor with entries >= 1 (no gradients)."""
    d = alpha - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    out = ember.empty_like(alpha)
    todo = ember.arange(alpha.numel(), device=alpha.device)
    while todo.numel():
        dt, ct = d[todo], c[todo]
        x = ember.randn(todo.numel(), dtype=alpha.dtype, device=alpha.device)
        u = ember.rand(todo.numel(), dtype=alpha.dtype, device=alpha.device)
        v = (1 + ct * x) ** 3
        ok = (v > 0) & (u.log() < 0.5 * x * x + dt - dt * v + dt * v.clamp(min=1e-300).log())
        out[todo[ok]] = (dt * v)[ok]
        todo = todo[~ok]
    return out


def _sample(alpha):
    with ember.no_grad():
        a = alpha.detach().reshape(-1).double()
        small = a < 1
        x = _marsaglia_tsang(ember.where(small, a + 1, a))
        if bool(small.any()):  # Gamma(a) = Gamma(a + 1) * U ** (1 / a)
            u = ember.rand(int(small.sum()), dtype=a.dtype, device=a.device)
            x[small] = x[small] * u.pow(1 / a[small])
        tiny = ember.finfo(alpha.dtype).tiny
        return x.clamp(min=tiny).to(alpha.dtype).reshape(alpha.shape)


def _dsample_dalpha(x, alpha):
    """d x / d alpha at fixed CDF value, for Gamma(alpha, 1) samples ``x``."""
    x64, a64 = x.double(), alpha.double()
    h = 1e-5 * a64  # central difference: truncation ~h^2, rounding ~1e-16 / h
    dcdf = (ember.igamma(a64 + h, x64) - ember.igamma(a64 - h, x64)) / (2 * h)
    log_pdf = (a64 - 1) * x64.log() - x64 - ember.lgamma(a64)
    return (-dcdf / log_pdf.exp()).to(x.dtype)


class _StandardGamma(ember.autograd.Function):
    @staticmethod
    def forward(ctx, alpha):
        x = _sample(alpha)
        ctx.save_for_backward(x, alpha)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        return grad * _dsample_dalpha(x, alpha.detach())


def standard_gamma(alpha):
    """Gamma(alpha, 1) variates of ``alpha``'s shape; reparameterised when ``alpha`` requires grad."""
    return _StandardGamma.apply(alpha) if alpha.requires_grad else _sample(alpha)

