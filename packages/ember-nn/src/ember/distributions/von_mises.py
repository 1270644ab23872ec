"""The von Mises distribution of angles (radians, modulo 2 pi). As PyTorch, ``log I0`` and ``log I1`` use the
polynomial approximations of Abramowitz and Stegun (9.8.1-9.8.4), and samples come from Best and Fisher's
rejection algorithm in float64 drawing three uniforms per round: seeded samples equal PyTorch's."""
import math

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]

# Abramowitz & Stegun: I0(x), I1(x)/x for |x| < 3.75 in (x/3.75)^2; sqrt(x) e^-x I_n(x) beyond, in 3.75/x
_SMALL = ([1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2],
          [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3])
_LARGE = ([0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
           -0.1647633e-1, 0.392377e-2],
          [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1, -0.2895312e-1,
           0.1787654e-1, -0.420059e-2])


def _poly(y, coefs):
    result = coefs[-1]
    for c in reversed(coefs[:-1]):
        result = c + y * result
    return result


def _log_bessel_i(x, order=0):
    """log I_order(x) for x > 0, order 0 or 1."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    small = _poly((x / 3.75) ** 2, _SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _poly(3.75 / x, _LARGE[order]).log()
    return ember.where(x < 3.75, small.log(), large)


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, ember.Size(), validate_args)

    def expand(self, batch_shape, _instance=None):
        return type(self)(self.loc.expand(batch_shape), self.concentration.expand(batch_shape),
                          validate_args=self.__dict__.get("_validate_args"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * ember.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_bessel_i(self.concentration, order=0))

    @lazy_property
    def _loc(self):
        return self.loc.to(ember.double)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(ember.double)

    @lazy_property
    def _proposal_r(self):
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        return ember.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))  # (small kappa: Taylor)

    def sample(self, sample_shape=ember.Size()):
        # float64 throughout: in float32 a tiny concentration can reject forever
        with ember.no_grad():
            shape = self._extended_shape(sample_shape)
            loc, kappa, r = self._loc, self._concentration, self._proposal_r
            x = ember.zeros(shape, dtype=ember.double, device=self.loc.device)
            done = ember.zeros(shape, dtype=ember.bool, device=self.loc.device)
            while not bool(done.all()):
                u1, u2, u3 = ember.rand((3,) + tuple(shape), dtype=ember.double, device=self.loc.device).unbind()
                z = ember.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                # (as PyTorch: a later acceptance replaces an earlier one, which keeps the streams equal)
                x = ember.where(accept, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance, 1 - I1(k) / I0(k)."""
        k = self.concentration
        return 1 - (_log_bessel_i(k, order=1) - _log_bessel_i(k, order=0)).exp()
