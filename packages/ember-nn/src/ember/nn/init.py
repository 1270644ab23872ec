"""ember.nn.init: in-place initialisers of parameters (run without recording gradients)."""
import math
import numbers
import warnings

import ember

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "sparse_", "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]

_UNIT_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The standard deviation scale that keeps activations' variance stable through ``nonlinearity``."""
    if nonlinearity in _UNIT_GAIN:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Number) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with ember.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with ember.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal values conditioned on [a, b], sampled as PyTorch samples them: when [a, b] holds more than 0.3 of
    the distribution's mass, normal draws with every value outside redrawn (a whole new draw per round) until
    none is; otherwise uniform candidates on [a, b], each kept when log(u) of a uniform u is below the log of
    its density relative to the peak, the others redrawn, again whole tensors per round."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    with ember.no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            lo, hi = (ember.tensor(v, dtype=tensor.dtype).item() for v in (a, b))  # the bounds the tensor holds
            tensor.normal_(mean, std, generator=generator)
            while (outside := (tensor < lo) | (tensor > hi)).any():
                tensor.copy_(ember.where(outside, ember.empty_like(tensor).normal_(mean, std, generator=generator),
                                         tensor))
            return tensor
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def rejected(candidates):
            log_density = candidates.sub(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
            return ember.empty_like(tensor).uniform_(generator=generator).log_().gt(log_density)
        tensor.uniform_(a, b, generator=generator)
        pending = rejected(tensor)
        while pending.any():
            candidates = ember.empty_like(tensor).uniform_(a, b, generator=generator)
            tensor.copy_(ember.where(pending, candidates, tensor))
            pending = ember.where(pending, rejected(candidates), pending)
        return tensor


def constant_(tensor, val):
    with ember.no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with ember.no_grad():
        return tensor.zero_()


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with ember.no_grad():
        return tensor.copy_(ember.eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor, groups=1):
    """Convolution weights that pass each input channel through unchanged (per group)."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_channels = tensor.shape[0]
    if out_channels % groups:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out_channels // groups
    n = min(per_group, tensor.shape[1])
    with ember.no_grad():
        tensor.zero_()
        centre = tuple(k // 2 for k in tensor.shape[2:])
        rows = (ember.arange(groups)[:, None] * per_group + ember.arange(n)).flatten()
        cols = ember.arange(n).repeat(groups)
        tensor[(rows, cols) + centre] = 1
        return tensor


def _check_empty(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    bound = math.sqrt(3.0) * (gain * math.sqrt(2.0 / float(fan_in + fan_out)))  # PyTorch's rounding of the bound
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if _check_empty(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if _check_empty(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (of the tensor flattened to 2-d), from the QR factors of a normal matrix."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = ember.empty(rows, cols, dtype=tensor.dtype, device=tensor.device).normal_(0, 1, generator=generator)
    if rows < cols:
        flat = flat.t()
    q, r = ember.linalg.qr(flat)
    q = q * r.diagonal().sign()  # makes the factorisation unique, so the result is uniformly distributed
    if rows < cols:
        q = q.t()
    with ember.no_grad():
        return tensor.copy_(q.reshape(tensor.shape)).mul_(gain)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Normal(0, std) values with a fraction ``sparsity`` of each column set to zero: the rows a permutation
    puts first, one permutation per column, as PyTorch draws them (from the default generator)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with ember.no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            tensor[ember.randperm(rows, device=tensor.device)[:zeros], col] = 0
        return tensor


def _deprecated(new):
    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{new.__name__[:-1]}` is now deprecated in favor of `nn.init.{new.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)
    old.__name__ = new.__name__[:-1]
    old.__doc__ = f"Deprecated alias of ``{new.__name__}``."
    return old


uniform, normal, constant, eye, dirac, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, orthogonal, \
    sparse = map(_deprecated, (uniform_, normal_, constant_, eye_, dirac_, xavier_uniform_, xavier_normal_,
                               kaiming_uniform_, kaiming_normal_, orthogonal_, sparse_))
