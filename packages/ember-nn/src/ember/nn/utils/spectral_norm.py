"""The older, hook-based spectral normalisation (PyTorch's ``nn.utils.spectral_norm``): the parameter moves to
``<name>_orig``, buffers ``<name>_u``/``<name>_v`` hold the power iteration's singular vectors, and a forward
pre-hook sets ``<name> = <name>_orig / sigma``, advancing the iteration in training mode only.
``nn.utils.parametrizations.spectral_norm`` is the newer form."""
import ember

from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.lazy import UninitializedParameter
from ..parameter import Parameter

__all__ = ["remove_spectral_norm", "spectral_norm"]


class _SpectralNormHook:
    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def weight_matrix(self, weight):
        """``weight`` as a matrix whose rows run along ``dim``."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.weight_matrix(weight)
        if do_power_iteration:
            with ember.no_grad():  # the buffers advance in place
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(ember.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(ember.mv(weight_mat, v), dim=0, eps=self.eps))
                # copies: backward needs these values after the next step overwrites the buffers
                u, v = u.clone(), v.clone()
        return weight / ember.dot(u, ember.mv(weight_mat, v))

    def remove(self, module):
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divides ``module.<name>`` by its largest singular value (of the weight as a matrix of rows along ``dim``:
    0, or 1 for transposed convolutions, by default), estimated by ``n_power_iterations`` power-iteration steps per
    training forward. Returns ``module``."""
    if any(isinstance(h, _SpectralNormHook) and h.name == name for h in module._forward_pre_hooks.values()):
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    if isinstance(weight, UninitializedParameter):
        raise ValueError("The module passed to `SpectralNorm` can't have uninitialized parameters. Make sure to run "
                         "the dummy forward before applying spectral normalization")
    with ember.no_grad():
        h, w = hook.weight_matrix(weight).shape
        u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.data)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undoes ``spectral_norm``: ``<name>`` becomes a plain parameter holding ``<name>_orig / sigma``."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
