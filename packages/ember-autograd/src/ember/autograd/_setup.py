"""Entry point of ember-autograd (group ``ember.extensions``): plugs the engine into ember-core."""
import weakref

from ember import _dispatch, _extensions
from ember._tensor import Tensor

from . import grad_mode
from ._engine import ExecutionEngine, accumulator, scalar_backward
from ._layer import autograd_layer, mark_inference, record


def install(ember):
    import ember.autograd as autograd
    _dispatch.register_layer("autograd", 200, autograd_layer)
    _dispatch.RECORD[0] = record
    _extensions.hooks["set_requires_grad"] = _set_requires_grad
    for name in ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
                 "is_inference_mode_enabled"):
        setattr(ember, name, getattr(grad_mode, name))
    ember.autograd = autograd
    ember.is_anomaly_enabled = autograd.anomaly_mode.is_anomaly_enabled
    ember.is_anomaly_check_nan_enabled = autograd.anomaly_mode.is_anomaly_check_nan_enabled
    ember.set_anomaly_enabled = autograd.anomaly_mode.set_detect_anomaly
    for name, fn in _TENSOR_METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.retains_grad = property(lambda self: bool(self._ext and self._ext.get("retains_grad")))
    grad_mode.on_inference_change = _inference_changed
    ember.vmap = _vmap


def _vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``ember.vmap``: ``ember.func.vmap`` (imported on first use: ``import ember`` stays light)."""
    from ember.func import vmap
    return vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size)


def _inference_changed(entering):
    """Inside inference mode every op and factory result is marked, so it can't join autograd later."""
    _dispatch.force_slow(entering)
    if entering:
        _extensions.hooks["created"] = mark_inference
    elif not grad_mode.MODE.inference:
        _extensions.hooks.pop("created", None)


def _set_requires_grad(t, value):
    if t.grad_fn is not None:
        if value:
            return
        raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a computed "
                           "variable in a subgraph that doesn't require differentiation use var_no_grad = "
                           "var.detach().")
    if value and not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
    if value and t._ext is not None and t._ext.get("inference") and not grad_mode.MODE.inference:
        raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
    t._rg = value


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradient of this tensor into the leaves of its graph."""
    if gradient is None and inputs is None and type(self) is Tensor:
        return scalar_backward(self, retain_graph, create_graph)  # the usual loss.backward()
    import ember.autograd as autograd
    autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def register_hook(self, hook):
    """``hook(grad)`` runs when this tensor's gradient is computed; it may return a replacement."""
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is None:
        return accumulator(self)._add_pre_hook(0, hook)
    return self.grad_fn._add_pre_hook((self._ext or {}).get("out_idx", 0), hook)


def register_post_accumulate_grad_hook(self, hook):
    """``hook(tensor)`` runs after a gradient was accumulated into this leaf's ``.grad``."""
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    acc = accumulator(self)
    acc._post_hooks = (acc._post_hooks or []) + [hook]
    from ._engine import _Handle
    return _Handle(acc, "_post_hooks", hook)


def retain_grad(self):
    """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
    if not self._rg:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or (self._ext and self._ext.get("retains_grad")):
        return
    ref = weakref.ref(self)

    def store(g):
        t = ref()
        if t is not None:
            t.grad = g.detach() if t.grad is None else t.grad + g.detach()

    register_hook(self, store)
    self._ext = {**(self._ext or {}), "retains_grad": True}


def is_inference(self):
    return bool(self._ext and self._ext.get("inference"))


_TENSOR_METHODS = {"backward": backward, "register_hook": register_hook, "retain_grad": retain_grad,
                   "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
                   "is_inference": is_inference, "_execution_engine": ExecutionEngine()}
