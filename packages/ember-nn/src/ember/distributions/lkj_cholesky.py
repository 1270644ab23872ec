"""The LKJ distribution over Cholesky factors of correlation matrices, density proportional to
``det(L L^T) ** (concentration - 1)``. Samples by the onion method (Beta radii, uniform directions), so seeded
samples do not reproduce PyTorch's; ``log_prob`` needs ember-special (lgamma, mvlgamma)."""
import math

import ember

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # row i's squared off-diagonal length ~ Beta(i / 2, concentration + (dim - 2 - (i - 1)) / 2) (row 0: none)
        c = self.concentration
        offset = ember.arange(dim - 1, dtype=c.dtype, device=c.device)
        offset = ember.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, (c + 0.5 * (dim - 2)).unsqueeze(-1) - 0.5 * offset)
        super().__init__(c.size(), ember.Size((dim, dim)), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = ember.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=ember.Size()):
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u = ember.randn(self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
        norm = u.norm(dim=-1, keepdim=True)
        direction = u / ember.where(norm == 0, ember.ones_like(norm), norm)  # (row 0 is all zeros)
        w = ember.sqrt(y) * direction
        diag = ember.clamp(1 - ember.sum(w ** 2, dim=-1), min=ember.finfo(w.dtype).tiny).sqrt()
        return w + ember.diag_embed(diag)

    def log_prob(self, value):
        # density of L: prod_i L_ii ** (2 (concentration - 1) + dim - i), i = 2..dim (the Jacobian of L -> L L^T
        # included), normalised as in Lewandowski, Kurowicka and Joe (2009)
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = ember.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = ember.sum(order * diag.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        log_norm = 0.5 * dm1 * math.log(math.pi) + ember.mvlgamma(alpha - 0.5, dm1) - ember.lgamma(alpha) * dm1
        return unnormalized - log_norm
