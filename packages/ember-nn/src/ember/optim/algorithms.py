"""Adagrad, RMSprop, Adadelta, Adafactor, ASGD and Rprop."""
import math

import numpy as np

from ember._tensor import Tensor

from ._common import check, done, grad_of, lr_of, next_step, scalar_tensor, sparse_entries, xp, zeros_state
from .optimizer import Optimizer, _value

__all__ = ["Adagrad", "RMSprop", "Adadelta", "Adafactor", "ASGD", "Rprop"]


def _flags(**kw):
    return {k: kw.get(k, v) for k, v in dict(foreach=None, maximize=False, differentiable=False).items()}


class Adagrad(Optimizer):
    """Per-coordinate steps ``lr_t / (sqrt(sum of g^2) + eps)`` with ``lr_t = lr / (1 + (t - 1) lr_decay)``."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(lr_decay >= 0.0, "lr_decay value", lr_decay)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        check(initial_accumulator_value >= 0.0, "initial_accumulator_value value", initial_accumulator_value)
        check(eps >= 0.0, "epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:  # PyTorch creates Adagrad's state eagerly
            for p in group["params"]:
                self.state[p]["step"] = scalar_tensor(0.0, p)
                self.state[p]["sum"] = zeros_state(p, group["initial_accumulator_value"])

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = lr_of(group), group["eps"]
            for p, g in self._grads(group, sparse_ok=True):
                state = self.state[p]
                step = next_step(state, p)
                clr = lr / (1 + (step - 1) * group["lr_decay"])
                s = state["sum"]._data
                if p.grad.is_sparse:  # only the rows the gradient names move
                    if group["weight_decay"]:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    at, g = sparse_entries(p.grad, group)
                    s[at] += g * g
                    p._data[at] -= clr * (g / (xp(s).sqrt(s[at]) + eps))
                    done(p)
                    continue
                g = grad_of(g, p, group)
                s += g * g
                std = xp(s).sqrt(s)
                std += eps
                p._data -= clr * (g / std)
                done(p)
        return loss


class RMSprop(Optimizer):
    """Steps scaled by a running root mean square of the gradient (``centered`` subtracts the squared
    running mean), optionally with momentum."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(eps >= 0.0, "epsilon value", eps)
        check(momentum >= 0.0, "momentum value", momentum)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        check(alpha >= 0.0, "alpha value", alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps, momentum = lr_of(group), group["alpha"], group["eps"], group["momentum"]
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["square_avg"] = zeros_state(p)
                    if momentum > 0:
                        state["momentum_buffer"] = zeros_state(p)
                    if group["centered"]:
                        state["grad_avg"] = zeros_state(p)
                next_step(state, p)
                g = grad_of(g, p, group)
                sq = state["square_avg"]._data
                sq *= alpha
                sq += (1 - alpha) * (g * g)
                if group["centered"]:
                    ga = state["grad_avg"]._data
                    ga += (1 - alpha) * (g - ga)
                    avg = xp(sq).sqrt(sq - ga * ga)
                else:
                    avg = xp(sq).sqrt(sq)
                avg += eps
                if momentum > 0:
                    buf = state["momentum_buffer"]._data
                    buf *= momentum
                    buf += g / avg
                    p._data -= lr * buf
                else:
                    p._data -= lr * (g / avg)
                done(p)
        return loss


class Adadelta(Optimizer):
    """Steps ``sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g`` from running averages of the squared
    gradients and squared updates, scaled by ``lr``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(0.0 <= rho <= 1.0, "rho value", rho)
        check(eps >= 0.0, "epsilon value", eps)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps = lr_of(group), group["rho"], group["eps"]
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["square_avg"], state["acc_delta"] = zeros_state(p), zeros_state(p)
                next_step(state, p)
                g = grad_of(g, p, group)
                sq, acc = state["square_avg"]._data, state["acc_delta"]._data
                sq *= rho
                sq += (1 - rho) * (g * g)
                np_ = xp(g)
                delta = np_.sqrt(acc + eps) / np_.sqrt(sq + eps) * g
                acc *= rho
                acc += (1 - rho) * (delta * delta)
                p._data -= lr * delta
                done(p)
        return loss


class Adafactor(Optimizer):
    """Adafactor without momentum: the second moment of a matrix gradient is kept factored as row and
    column averages; relative step sizes ``max(eps2, rms(p)) * min(lr, 1/sqrt(t))``; updates are
    clipped to RMS ``d``."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(beta2_decay <= 0.0, "beta2_decay value", beta2_decay)
        check(eps[0] is None or eps[0] >= 0.0, "epsilon1 value", eps[0])
        check(eps[1] >= 0.0, "epsilon2 value", eps[1])
        check(d >= 1.0, "clipping threshold d value", d)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, decay, (eps1, eps2), d, wd = (lr_of(group), group["beta2_decay"], group["eps"], group["d"],
                                              group["weight_decay"])
            for p, g in self._grads(group):
                state = self.state[p]
                np_ = xp(g)
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    if g.ndim > 1:
                        state["row_var"] = _zeros(np_, g.shape[:-1] + (1,), g.dtype)
                        state["col_var"] = _zeros(np_, g.shape[:-2] + (1, g.shape[-1]), g.dtype)
                    else:
                        state["variance"] = zeros_state(p)
                step = next_step(state, p)
                if group["maximize"]:
                    g = -g
                e1 = np.finfo(p._data.dtype).eps if eps1 is None else eps1
                beta2_t = step ** decay
                rho = min(lr, 1 / step ** 0.5)
                alpha = max(eps2, float(np_.linalg.norm(p._data.ravel())) / math.sqrt(max(p._data.size, 1))) * rho
                if wd:
                    p._data *= 1 - lr * wd
                if g.ndim > 1:
                    rv, cv = state["row_var"]._data, state["col_var"]._data
                    rv += beta2_t * ((g * g).mean(axis=-1, keepdims=True) - rv)
                    cv += beta2_t * ((g * g).mean(axis=-2, keepdims=True) - cv)
                    var = np_.matmul(rv, cv)
                    var /= np_.maximum(rv.mean(axis=-2, keepdims=True), e1)
                else:
                    v = state["variance"]._data
                    v += beta2_t * (g * g - v)
                    var = v.copy()
                update = 1 / np_.sqrt(np_.maximum(var, e1 * e1))
                update *= g
                denom = max(1.0, float(np_.linalg.norm(update.ravel())) / (math.sqrt(max(update.size, 1)) * d))
                p._data -= (alpha / denom) * update
                done(p)
        return loss


def _zeros(np_, shape, dtype):
    return Tensor._wrap(np_.zeros(shape, dtype=dtype))


class ASGD(Optimizer):
    """Averaged SGD: SGD with a decaying step ``eta`` and a running average ``ax`` of the iterates that
    starts after ``t0`` steps."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = lr_of(group), group["lambd"], group["alpha"], group["t0"]
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["eta"] = scalar_tensor(lr, p)  # eta and mu are single-precision 0-d tensors
                    state["mu"] = scalar_tensor(1.0, p)
                    state["ax"] = zeros_state(p)
                step = next_step(state, p)
                g = grad_of(g, p, group)
                eta, mu = float(state["eta"]._data), float(state["mu"]._data)
                p._data *= 1 - lambd * eta
                p._data -= eta * g
                ax = state["ax"]._data
                if mu != 1:
                    ax += (p._data - ax) * mu
                else:
                    ax[...] = p._data
                state["eta"]._data[...] = lr / ((1 + lambd * lr * step) ** alpha)
                state["mu"]._data[...] = 1 / max(1, step - t0)
                done(p)
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation: per-coordinate step sizes grow by ``etas[1]`` while the gradient's
    sign holds and shrink by ``etas[0]`` when it flips (that step is then skipped)."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        check(_value(lr) >= 0.0, "learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            (etaminus, etaplus), (smin, smax) = group["etas"], group["step_sizes"]
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["prev"] = zeros_state(p)
                    state["step_size"] = zeros_state(p, lr_of(group))
                next_step(state, p)
                g = grad_of(g, p, group, 0)
                np_ = xp(g)
                prev, size = state["prev"]._data, state["step_size"]._data
                sign = np_.sign(g * prev)
                factor = np_.where(sign > 0, etaplus, np_.where(sign < 0, etaminus, 1.0)).astype(g.dtype)
                size *= factor
                np_.clip(size, smin, smax, out=size)
                g = np_.where(sign < 0, 0, g).astype(g.dtype)
                p._data -= np_.sign(g) * size
                prev[...] = g
                done(p)
        return loss
