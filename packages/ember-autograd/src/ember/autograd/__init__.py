"""ember.autograd: reverse-mode automatic differentiation (the engine; derivative rules live with the ops)."""

import ember
from ember._tensor import Tensor

from . import grad_mode  # noqa: F401  (ember.autograd.grad_mode, as in PyTorch)
from ._engine import ones_like, run_backward, scalar_backward
from ._version import __version__  # noqa: F401
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function
from .grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled, set_multithreading_enabled
from .gradcheck import gradcheck, gradgradcheck  # the functions shadow their module's name, as in PyTorch

Variable = Tensor

__all__ = ["Function", "Variable", "backward", "detect_anomaly", "enable_grad", "grad", "gradcheck", "gradgradcheck",
           "inference_mode", "no_grad", "set_detect_anomaly", "set_grad_enabled", "set_multithreading_enabled",
           "variable"]


def variable(data, requires_grad=False):
    """Legacy spelling of ``ember.tensor(data, requires_grad=...)``."""
    return ember.tensor(data, requires_grad=requires_grad)


def _as_tuple(x):
    if x is None:
        return None
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _default_grads(outputs, grads):
    grads = _as_tuple(grads) or (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got {len(grads)} gradients for "
                           f"{len(outputs)} outputs")
    filled = []
    for out, g in zip(outputs, grads):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            data = out._data
            g = ones_like(data)
        elif not isinstance(g, Tensor):
            g = ember.full_like(out, g)
        elif tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {g.shape} and output[0] has a shape "
                               f"of {out.shape}.")
        filled.append(g)
    return filled


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate into the leaves' ``.grad`` the gradients of ``tensors`` (weighted by ``grad_tensors``)."""
    if type(tensors) is Tensor and grad_tensors is None and grad_variables is None and inputs is None:
        return scalar_backward(tensors, retain_graph, create_graph)  # the usual loss.backward()
    tensors = _as_tuple(tensors)
    grads = _default_grads(tensors, grad_tensors if grad_tensors is not None else grad_variables)
    inputs = _as_tuple(inputs)
    if inputs is not None and not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    run_backward(tensors, grads, create_graph if retain_graph is None else retain_graph, create_graph,
                 inputs=inputs, allow_unused=True, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned instead of accumulated."""
    outputs, inputs = _as_tuple(outputs), _as_tuple(inputs)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    allow_unused = bool(allow_unused or materialize_grads)
    retain = create_graph if retain_graph is None else retain_graph
    if is_grads_batched:
        # one backward per leading index of the gradients (what vmap over them computes)
        batch = _as_tuple(grad_outputs)
        per_item = [grad(outputs, inputs, [g[i] for g in batch], True, create_graph, allow_unused=allow_unused,
                         materialize_grads=materialize_grads) for i in range(batch[0].shape[0])]
        return tuple(None if parts[0] is None else ember.stack(list(parts)) for parts in zip(*per_item))
    grads = _default_grads(outputs, grad_outputs)
    result = run_backward(outputs, grads, retain, create_graph, inputs=inputs, allow_unused=allow_unused,
                          accumulate=False)
    if materialize_grads:
        result = [ember.zeros_like(x) if g is None else g for g, x in zip(result, inputs)]
    return tuple(result)


def __getattr__(name):
    import importlib
    if name in ("functional", "forward_ad", "profiler", "graph"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'ember.autograd' has no attribute '{name}'")
