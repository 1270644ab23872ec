"""ember.special: the functions of ``torch.special``.

Each function is an op of ember's registry (``_ops``); the names PyTorch also has at the top level
(``torch.erf``, ``Tensor.digamma``, ...) are the same ops as ``ember.erf``/``Tensor.digamma``, and
the aliases (``psi``, ``gammaln``, ``expit``, ...) are the very functions they alias. Importing this
package is cheap: SciPy, numba and CuPy load on first use.
"""
from ember._registry import REGISTRY as _R
from ember._tensor import Tensor as Tensor  # torch.special re-exports Tensor too

from . import _cuda, _ops  # noqa: F401  (registers the ops and the CuPy kernels)
from ._version import __version__  # noqa: F401


def _fn(name):
    return _R[name].fn


# functions that are ember-special's own ops
airy_ai = _fn("special_airy_ai")
bessel_j0 = _fn("special_bessel_j0")
bessel_j1 = _fn("special_bessel_j1")
bessel_y0 = _fn("special_bessel_y0")
bessel_y1 = _fn("special_bessel_y1")
modified_bessel_i0 = _fn("special_modified_bessel_i0")
modified_bessel_i1 = _fn("special_modified_bessel_i1")
modified_bessel_k0 = _fn("special_modified_bessel_k0")
modified_bessel_k1 = _fn("special_modified_bessel_k1")
scaled_modified_bessel_k0 = _fn("special_scaled_modified_bessel_k0")
scaled_modified_bessel_k1 = _fn("special_scaled_modified_bessel_k1")
spherical_bessel_j0 = _fn("special_spherical_bessel_j0")
chebyshev_polynomial_t = _fn("special_chebyshev_polynomial_t")
chebyshev_polynomial_u = _fn("special_chebyshev_polynomial_u")
chebyshev_polynomial_v = _fn("special_chebyshev_polynomial_v")
chebyshev_polynomial_w = _fn("special_chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _fn("special_shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _fn("special_shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _fn("special_shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _fn("special_shifted_chebyshev_polynomial_w")
hermite_polynomial_h = _fn("special_hermite_polynomial_h")
hermite_polynomial_he = _fn("special_hermite_polynomial_he")
laguerre_polynomial_l = _fn("special_laguerre_polynomial_l")
legendre_polynomial_p = _fn("special_legendre_polynomial_p")
digamma = psi = _fn("digamma")
polygamma = _fn("polygamma")
gammaln = _fn("lgamma")
multigammaln = _fn("mvlgamma")
gammainc = _fn("igamma")
gammaincc = _fn("igammac")
zeta = _fn("special_zeta")
entr = _fn("special_entr")
erf = _fn("erf")
erfc = _fn("erfc")
erfcx = _fn("special_erfcx")
erfinv = _fn("erfinv")
ndtr = _fn("special_ndtr")
ndtri = _fn("special_ndtri")
log_ndtr = _fn("special_log_ndtr")
i0 = _fn("i0")
i0e = _fn("special_i0e")
i1 = _fn("special_i1")
i1e = _fn("special_i1e")
logit = _fn("logit")
xlogy = _fn("xlogy")
xlog1py = _fn("special_xlog1py")
sinc = _fn("sinc")
# ember-core's ops, under their torch.special names
expit = _fn("sigmoid")
exp2 = _fn("exp2")
expm1 = _fn("expm1")
log1p = _fn("log1p")
round = _ops.special_round
softmax = _fn("softmax")
log_softmax = _fn("log_softmax")
logsumexp = _fn("logsumexp")

__all__ = sorted(n for n, v in globals().items() if callable(v) and not n.startswith("_"))
