"""Ready-made parametrizations on ``nn.utils.parametrize``: ``orthogonal`` (a weight kept orthogonal/unitary),
``weight_norm`` (magnitude and direction as two tensors) and ``spectral_norm`` (a weight divided by its largest
singular value, estimated by power iteration)."""
import enum

import ember
from ember._tensor import Tensor

from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---- orthogonal ----------------------------------------------------------------------------------------------
def _is_orthogonal(Q):
    n, k = Q.shape[-2], Q.shape[-1]
    eye = ember.eye(k, dtype=Q.dtype, device=Q.device)
    return ember.allclose(Q.mH @ Q, eye, atol=10.0 * n * ember.finfo(Q.dtype).eps)


def _make_orthogonal(A):
    """Q of A's QR decomposition with R's diagonal made positive (the unique such Q for a full-rank A)."""
    X, tau = ember.geqrf(A)
    Q = ember.linalg.householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(enum.Enum):
    matrix_exp = enum.auto()
    cayley = enum.auto()
    householder = enum.auto()


class _Orthogonal(Module):
    """Maps an unconstrained matrix to one with orthonormal columns (or rows, when wide): through the matrix
    exponential or the Cayley transform of a skew-Hermitian matrix, or a product of Householder reflectors. With
    ``use_trivialization`` the result multiplies a stored orthogonal ``base``, which assignment sets."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == _OrthMaps.householder:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = ember.linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)  # the diagonal's signs (+-1) flip columns
        else:
            X = X.tril()
            if n != k:
                X = ember.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH  # skew-Hermitian
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = ember.matrix_exp(A)
            else:
                eye = ember.eye(n, dtype=A.dtype, device=A.device)
                Q = ember.linalg.solve(ember.add(eye, A, alpha=-0.5), ember.add(eye, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    @ember.no_grad()
    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape "
                             f"{Q.shape}.")
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map != _OrthMaps.householder:
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            # the reflectors of Q's QR decomposition, with the signs of R's diagonal (+-1) where forward reads them
            A, tau = ember.geqrf(Q)
            A.diagonal(dim1=-2, dim2=-1).sign_()
            A.diagonal(dim1=-2, dim2=-1)[tau == 0.0] *= -1
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # complete the columns to a square orthogonal base at random
            N = ember.randn(*(Q.shape[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(ember.cat([Q, N], dim=-1))
        self.base = Q
        # the point that forward maps to the identity (so the weight becomes ``base``'s first columns)
        neg_eye = ember.zeros_like(Q_init)
        neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep ``module.<name>`` (a matrix or batch of matrices) orthogonal, or unitary if complex.

    ``orthogonal_map`` is "matrix_exp", "cayley" or "householder" (default: matrix_exp for square or complex
    matrices, householder otherwise). Returns ``module``.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                         f"{orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---- weight_norm ---------------------------------------------------------------------------------------------
class _WeightNorm(Module):
    """``weight = g * v / ||v||``, the norm over every dim but ``dim`` (over all of them when ``dim`` is None)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / ember.norm_except_dim(weight_v, 2, self.dim))

    def right_inverse(self, weight):
        return ember.norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Parametrize ``module.<name>`` by a magnitude (``parametrizations.<name>.original0``) and a direction
    (``original1``). State dicts of the older ``<name>_g``/``<name>_v`` form load too. Returns ``module``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def rename_old_keys(module, state_dict, prefix, *rest):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(rename_old_keys)
    return module


# ---- spectral_norm -------------------------------------------------------------------------------------------
class _SpectralNorm(Module):
    """``weight / sigma``, sigma the largest singular value of the weight (as a matrix of rows along ``dim``),
    estimated by power iteration whose vectors ``_u``/``_v`` advance ``n_power_iterations`` steps per training
    forward. A 1-d weight is just normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)  # start from a good estimate

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    @ember.no_grad()
    def _power_method(self, weight_mat, n_power_iterations):
        for _ in range(n_power_iterations):
            self._u = F.normalize(ember.mv(weight_mat, self._v), dim=0, eps=self.eps, out=self._u)
            self._v = F.normalize(ember.mv(weight_mat.H, self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # copies: the next power step writes the buffers in place, and backward still needs these values
        u, v = self._u.clone(), self._v.clone()
        sigma = ember.vdot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its spectral norm on every access (``dim``: the output dim, 1 for transposed
    convolutions by default). Returns ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
