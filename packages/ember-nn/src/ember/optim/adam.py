"""The Adam family: Adam (optionally AMSGrad, decoupled weight decay), AdamW, Adamax, NAdam, RAdam."""
import math

import numpy as np

from ._common import check, check_betas, done, grad_of, lr_of, next_step, scalar_tensor, xp, zeros_state
from .optimizer import Optimizer, _value

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


def _moments(state, g, beta1, beta2, m=None, v=None):
    """m <- m + (1 - beta1)(g - m); v <- beta2 v + (1 - beta2) g^2 (``m``, ``v``: the state's moment arrays
    unless given); returns the arrays (m, v, scratch), the scratch one of their shape for the caller to reuse."""
    if m is None:
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
    np_ = xp(g)
    t = np_.subtract(g, m, out=np_.empty_like(m))  # (out=: an array even for 0-d parameters)
    t *= 1 - beta1
    m += t
    v *= beta2
    np_.multiply(g, g, out=t)
    t *= 1 - beta2
    v += t
    return m, v, t


def _update(m, v, denom, step, lr, beta1, beta2, eps):
    """Adam's bias-corrected step ``lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)``, into ``denom``."""
    bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
    np_ = xp(m)
    np_.sqrt(v, out=denom)
    denom /= math.sqrt(bc2)
    denom += eps
    np_.divide(m, denom, out=denom)
    denom *= lr / bc1
    return denom


def _check_common(lr, eps, betas, weight_decay):
    check(_value(lr) >= 0.0, "learning rate", lr)
    check(eps >= 0.0, "epsilon value", eps)
    check_betas(betas)
    check(weight_decay >= 0.0, "weight_decay value", weight_decay)


class Adam(Optimizer):
    """Adaptive moment estimation: bias-corrected first and second moment averages of the gradient;
    ``amsgrad`` keeps the running maximum of the second moment; ``decoupled_weight_decay`` is AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_common(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for index, group in enumerate(self.param_groups):
            lr, eps, wd = lr_of(group), group["eps"], group["weight_decay"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            decoupled, amsgrad = group["decoupled_weight_decay"], group["amsgrad"]
            l2 = 0 if decoupled else wd
            adjust = group["maximize"] or l2
            grads = self._grads(group)
            for p, _ in grads:
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["exp_avg"], state["exp_avg_sq"] = zeros_state(p), zeros_state(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_state(p)
            if not (amsgrad or adjust or wd and not decoupled) and self._fused(
                    index, grads, lr, beta1, beta2, eps, lr * wd if decoupled else 0):
                continue
            for p, g in grads:
                state = self.state[p]
                step = next_step(state, p)
                if decoupled and wd:
                    p._data *= 1 - lr * wd
                if adjust:
                    g = grad_of(g, p, group, l2)
                m, v, denom = _moments(state, g, beta1, beta2)
                if amsgrad:
                    vmax = state["max_exp_avg_sq"]._data
                    xp(v).maximum(vmax, v, out=vmax)
                    v = vmax
                p._data -= _update(m, v, denom, step, lr, beta1, beta2, eps)
                done(p)
        return loss

    def _fused(self, index, grads, lr, beta1, beta2, eps, decay):
        """The plain Adam step of all of ``grads``' parameters (group ``index``) at once, each update one pass over
        their moments kept in two flat arrays (the state tensors are views into them; re-made when the state was
        replaced, as by ``load_state_dict``) and the gradients copied into a third: fewer, longer ufunc calls, the
        same values as the step per parameter; ``decay``: AdamW's ``lr * weight_decay``, each parameter scaled by
        ``1 - decay`` first. Returns False, having done nothing, unless all are NumPy arrays of one float dtype at
        one step."""
        if not grads:
            return False
        dtype, states = grads[0][0]._data.dtype, [self.state[p] for p, _ in grads]
        if dtype.kind != "f" or any(type(a) is not np.ndarray or a.dtype != dtype for p, g in grads
                                    for a in (p._data, g)):
            return False
        if any(type(a) is not np.ndarray or a.dtype != dtype for st in states
               for a in (st["exp_avg"]._data, st["exp_avg_sq"]._data)) or len({float(st["step"]) for st in states}) > 1:
            return False
        key, flat = [id(p) for p, _ in grads], self.__dict__.setdefault("_flat", {}).get(index)
        if flat is None or flat[0] != key or any(st["exp_avg"]._data.base is not flat[1]
                                                 or st["exp_avg_sq"]._data.base is not flat[2] for st in states):
            flat = key, *(np.concatenate([st[name]._data.reshape(-1) for st in states])
                          for name in ("exp_avg", "exp_avg_sq"))
            at = 0
            for (p, _), st in zip(grads, states):
                n = p._data.size
                for name, a in zip(("exp_avg", "exp_avg_sq"), flat[1:]):
                    st[name]._data = a[at:at + n].reshape(p._data.shape)
                at += n
            self._flat[index] = flat
        for (p, _), st in zip(grads, states):
            step = next_step(st, p)
        m, v, denom = _moments(None, np.concatenate([g.reshape(-1) for _, g in grads]), beta1, beta2, *flat[1:])
        u, at = _update(m, v, denom, step, lr, beta1, beta2, eps), 0
        for p, _ in grads:
            a = p._data
            if decay:
                a *= 1 - decay
            a -= u[at:at + a.size].reshape(a.shape)
            at += a.size
            done(p)
        return True


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class Adamax(Optimizer):
    """Adam with the infinity norm: ``u = max(beta2 u, |g| + eps)``, ``p -= lr / (1 - beta1^t) * m / u``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_common(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = lr_of(group), group["eps"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["exp_avg"], state["exp_inf"] = zeros_state(p), zeros_state(p)
                step = next_step(state, p)
                g = grad_of(g, p, group)
                m, u = state["exp_avg"]._data, state["exp_inf"]._data
                m += (1 - beta1) * (g - m)
                u *= beta2
                np_ = xp(g)
                a = np_.abs(g)
                a += eps
                np_.maximum(u, a, out=u)
                p._data -= (lr / (1 - beta1 ** step)) * (m / u)
                done(p)
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum and the momentum-decay schedule ``mu_t = beta1 (1 - 0.5 * 0.96^(t psi))``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_common(lr, eps, betas, weight_decay)
        check(momentum_decay >= 0.0, "momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps, wd, psi = lr_of(group), group["eps"], group["weight_decay"], group["momentum_decay"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            decoupled = group["decoupled_weight_decay"]
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["mu_product"] = scalar_tensor(1.0, p)
                    state["exp_avg"], state["exp_avg_sq"] = zeros_state(p), zeros_state(p)
                step = next_step(state, p)
                if decoupled and wd:
                    p._data *= 1 - lr * wd
                g = grad_of(g, p, group, 0 if decoupled else wd)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
                mu_prod = state["mu_product"]._data
                mu_prod *= mu  # in the state's (single) precision, as PyTorch keeps it
                mu_product = float(mu_prod)
                m, v, _ = _moments(state, g, beta1, beta2)
                denom = xp(v).sqrt(v / (1 - beta2 ** step))
                denom += eps
                p._data -= (lr * (1.0 - mu) / (1.0 - mu_product)) * (g / denom)
                p._data -= (lr * mu_next / (1.0 - mu_product * mu_next)) * (m / denom)
                done(p)
        return loss


class RAdam(Optimizer):
    """Rectified Adam: the adaptive step is used once the variance of the adaptive learning rate is
    tractable (``rho_t > 5``), plain bias-corrected momentum before that."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_common(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps, wd = lr_of(group), group["eps"], group["weight_decay"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            decoupled = group["decoupled_weight_decay"]
            rho_inf = 2 / (1 - beta2) - 1
            for p, g in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = scalar_tensor(0.0, p)
                    state["exp_avg"], state["exp_avg_sq"] = zeros_state(p), zeros_state(p)
                step = next_step(state, p)
                if decoupled and wd:
                    p._data *= 1 - lr * wd
                g = grad_of(g, p, group, 0 if decoupled else wd)
                m, v, _ = _moments(state, g, beta1, beta2)
                bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
                m_hat = m / bc1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2
                if rho_t > 5.0:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    s = xp(v).sqrt(v)
                    s += eps
                    p._data -= m_hat * lr * (math.sqrt(bc2) / s) * rect
                else:
                    p._data -= m_hat * lr
                done(p)
        return loss

