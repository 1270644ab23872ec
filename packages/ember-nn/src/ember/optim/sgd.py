"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""
from ember._tensor import Tensor

from ._common import check, done, grad_of, lr_of
from .optimizer import Optimizer, _value

__all__ = ["SGD"]


class SGD(Optimizer):
    """``p -= lr * d`` where ``d`` is the gradient (plus ``weight_decay * p``), optionally passed through a
    momentum buffer ``b = momentum * b + (1 - dampening) * d`` (Nesterov: ``d + momentum * b``)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(momentum >= 0.0, "momentum value", momentum)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum, dampening = lr_of(group), group["momentum"], group["dampening"]
            for p, g in self._grads(group):
                d = grad_of(g, p, group)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = Tensor._wrap(d.copy())
                    else:
                        b = buf._data
                        b *= momentum
                        b += d if dampening == 0 else (1 - dampening) * d
                    d = d + momentum * buf._data if group["nesterov"] else buf._data
                if lr:
                    p._data -= lr * d if lr != 1 else d
                done(p)
        return loss
