"""Activation functions: thin wrappers of ember-core's activation ops, plus softmin and gumbel_softmax."""
import warnings

import ember

from ._common import core, core_, registered, tensor_parameters

__all__ = ["relu", "relu_", "relu6", "hardtanh", "hardtanh_", "elu", "elu_", "selu", "selu_", "celu", "celu_",
           "leaky_relu", "leaky_relu_", "prelu", "rrelu", "rrelu_", "glu", "gelu", "logsigmoid", "hardshrink",
           "tanhshrink", "softsign", "softplus", "softmin", "softmax", "log_softmax", "softshrink", "gumbel_softmax",
           "tanh", "sigmoid", "hardsigmoid", "silu", "mish", "hardswish", "threshold", "threshold_"]


def _maybe_inplace(name, input, inplace, *args, **kwargs):
    """``name`` applied to ``input``, in place when asked (ops without an in-place form copy the result back)."""
    if not inplace:
        return core(name)(input, *args, **kwargs)
    if registered(name).inplace:
        return core_(name)(input, *args, **kwargs)
    return input.copy_(core(name)(input, *args, **kwargs))


def relu(input, inplace=False):
    return _maybe_inplace("relu", input, inplace)


def relu_(input):
    return input.relu_()


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace("hardtanh", input, inplace, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace("elu", input, inplace, alpha)


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def selu(input, inplace=False):
    return _maybe_inplace("selu", input, inplace)


def selu_(input):
    return selu(input, True)


def celu(input, alpha=1.0, inplace=False):
    return _maybe_inplace("celu", input, inplace, alpha)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace("leaky_relu", input, inplace, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def prelu(input, weight):
    return core("prelu")(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _maybe_inplace("rrelu", input, inplace, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def glu(input, dim=-1):
    return core("glu")(input, dim)


def gelu(input, approximate="none"):
    return core("gelu")(input, approximate=approximate)


def logsigmoid(input):
    return core("log_sigmoid")(input)


def hardshrink(input, lambd=0.5):
    return core("hardshrink")(input, lambd)


def tanhshrink(input):
    return core("tanhshrink")(input)


def softsign(input):
    return core("softsign")(input)


def softplus(input, beta=1.0, threshold=20.0):
    return core("softplus")(input, beta, threshold)


def softshrink(input, lambd=0.5):
    return core("softshrink")(input, lambd)


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def hardsigmoid(input, inplace=False):
    return _maybe_inplace("hardsigmoid", input, inplace)


def silu(input, inplace=False):
    return _maybe_inplace("silu", input, inplace)


def mish(input, inplace=False):
    return _maybe_inplace("mish", input, inplace)


def hardswish(input, inplace=False):
    return _maybe_inplace("hardswish", input, inplace)


def threshold(input, threshold, value, inplace=False):
    return _maybe_inplace("threshold", input, inplace, threshold, value)


def threshold_(input, threshold, value):
    return _maybe_inplace("threshold", input, True, threshold, value)


def _softmax_dim(ndim):
    """The dim PyTorch's softmax family picks when none is given (deprecated)."""
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X as "
                  "an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return input.softmax(_softmax_dim(input.dim()) if dim is None else dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return (-input).softmax(_softmax_dim(input.dim()) if dim is None else dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return input.log_softmax(_softmax_dim(input.dim()) if dim is None else dim, dtype=dtype)


@tensor_parameters("logits")
def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """Softmax of ``(logits + Gumbel noise) / tau``; ``hard`` gives one-hot samples with the soft gradient."""
    gumbels = -ember.empty_like(logits).exponential_().log()
    y = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = ember.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y  # straight-through: forward one-hot, backward the soft sample's gradient
