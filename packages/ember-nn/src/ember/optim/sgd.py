"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""
from ember._tensor import Tensor

from ._common import check, done, grad_of, lr_of, operand
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
        state = self.state
        for group in self.param_groups:
            lr, momentum, dampening, nesterov = lr_of(group), group["momentum"], group["dampening"], group["nesterov"]
            adjust = group["maximize"] or group["weight_decay"]
            lrs, moms = {}, {}  # the numbers as operands of each dtype met
            grads = self._grads(group)
            if not (momentum or adjust):  # plain SGD: one in-place update per parameter, nothing else
                _plain_step(grads, lr, lrs)
                continue
            for p, d in grads:
                if adjust:
                    d = grad_of(d, p, group)
                if momentum != 0:
                    s = state[p]
                    buf = s.get("momentum_buffer")
                    if buf is None:
                        b = d.copy()
                        s["momentum_buffer"] = Tensor._wrap(b)
                    else:
                        b = buf._data
                        b *= operand(momentum, b, moms)
                        b += d if dampening == 0 else (1 - dampening) * d
                    d = d + momentum * b if nesterov else b
                if lr:
                    p._data -= operand(lr, d, lrs) * d if lr != 1 else d
                done(p)
        return loss


def _plain_step(grads, lr, lrs):
    """``p -= lr * d`` over [(param, gradient array)], the operand looked up again only when the dtype changes."""
    dtype = lr_d = None
    for p, d in grads:
        if lr:
            if d.dtype is not dtype:
                dtype, lr_d = d.dtype, operand(lr, d, lrs)
            p._data -= lr_d * d if lr != 1 else d
        p._version[0] += 1  # (done(p), inlined)
