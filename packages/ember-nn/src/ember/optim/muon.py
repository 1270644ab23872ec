"""Muon: momentum whose update for each 2-D parameter is orthogonalised by a Newton–Schulz iteration, plus
decoupled weight decay. The iteration runs in bfloat16, as PyTorch's does, so small matrices give its
results bit for bit; for large ones the iteration amplifies the roundings of each matmul's summation order
and the two agree to a few bfloat16 units."""
import math

import ember
from ember._tensor import Tensor

from ._common import lr_of
from .optimizer import Optimizer, _value

__all__ = ["Muon"]

_ADJUST_LR = (None, "original", "match_rms_adamw")


class Muon(Optimizer):
    """For each 2-D parameter with gradient ``g``: the buffer ``b = momentum * b + (1 - momentum) * g``, the
    direction ``d = b`` (Nesterov: ``(1 - momentum) * g + momentum * b``) orthogonalised by ``ns_steps``
    quintic Newton–Schulz steps with ``ns_coefficients``, then ``p *= 1 - lr * weight_decay`` and
    ``p -= lr' * O(d)``; ``lr'`` is ``lr * sqrt(max(1, rows / cols))`` ("original", the default) or
    ``0.2 * lr * sqrt(max(rows, cols))`` ("match_rms_adamw")."""

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for what, value in (("Learning rate", lr), ("momentum", momentum), ("weight decay", weight_decay)):
            if not _value(value) >= 0.0:
                raise ValueError(f"{what} should be >= 0 but is: {value}")
        if adjust_lr_fn not in _ADJUST_LR:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                                      adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:  # (as PyTorch, groups added later are not checked here)
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.size()}")

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with ember.no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                for p in params:  # the whole group is checked, and its buffers made, before any update
                    if p.is_complex():
                        raise RuntimeError("Muon does not support complex parameters")
                    if p.grad.is_sparse:
                        raise RuntimeError("Muon does not support sparse gradients")
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = ember.zeros_like(p.grad)
                lr, decay, momentum = lr_of(group), group["weight_decay"], group["momentum"]
                for p in params:
                    g = p.grad
                    buf = self.state[p]["momentum_buffer"]
                    buf.lerp_(g, 1 - momentum)
                    d = g.lerp(buf, momentum) if group["nesterov"] else buf
                    d = orthogonalise(d, group["ns_coefficients"], group["ns_steps"], group["eps"])
                    p.mul_(1 - lr * decay)
                    p.add_(d, alpha=-lr * _lr_ratio(group["adjust_lr_fn"], *p.shape))
        return loss


def orthogonalise(g, coefficients, steps, eps):
    """``g`` (2-D) mapped to roughly ``U V^T`` of its SVD ``U S V^T``, in bfloat16: scaled to Frobenius norm at
    most 1, then ``steps`` times ``X <- a X + (b X X^T + c (X X^T)^2) X``, on the wide orientation so the Gram
    matrices are the smaller ones. (These coefficients push small singular values up fast rather than converge:
    the result's singular values end up near, not at, 1.)"""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if g.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = g.shape[0] > g.shape[1]
    x = g.bfloat16()
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = ember.addmm(x, ember.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn, rows, cols):
    """The factor on ``lr`` that evens out the update's RMS across matrix shapes (1 for a name a group was given
    later that neither rule knows, as in PyTorch)."""
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return 1.0
