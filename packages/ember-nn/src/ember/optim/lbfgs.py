"""L-BFGS with an optional strong-Wolfe line search (cubic interpolation), on all parameters as one
flat vector. ``step(closure)`` needs a closure that re-evaluates the loss and its gradients."""
import math

from ember._tensor import Tensor

from ._common import xp
from .optimizer import Optimizer, _value

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds`` (the
    interval between the points by default); its midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        m = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        m = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(m, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Find ``t`` meeting the strong Wolfe conditions along ``d``: a bracketing phase, then zoom.
    Returns (loss, flat gradient, t, evaluations)."""
    d_norm = float(abs(d).max())
    f_new, g_new = evaluate(t)
    evals, it = 1, 0
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g.copy(), gtd
    done = False
    while it < max_ls:
        armijo_fails = f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev)
        if not armijo_fails and abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g, br_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if armijo_fails or gtd_new >= 0:
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.copy(), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
    if it == max_ls:
        br, br_f, br_g, br_gtd = [0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    stalled = False
    lo, hi = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        # keep away from the bracket's ends unless progress stalled twice
        eps = 0.1 * (max(br) - min(br))
        if min(max(br) - t, t - min(br)) < eps:
            if stalled or t >= max(br) or t <= min(br):
                t = max(br) - eps if abs(t - max(br)) < abs(t - min(br)) else min(br) + eps
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[lo]:
            br[hi], br_f[hi], br_g[hi], br_gtd[hi] = t, f_new, g_new.copy(), gtd_new
            lo, hi = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[hi] - br[lo]) >= 0:
                br[hi], br_f[hi], br_g[hi], br_gtd[hi] = br[lo], br_f[lo], br_g[lo], br_gtd[lo]
            br[lo], br_f[lo], br_g[lo], br_gtd[lo] = t, f_new, g_new.copy(), gtd_new
    return br_f[lo], br_g[lo], br[lo], evals


def _arr(v):
    return v._data if isinstance(v, Tensor) else v


class LBFGS(Optimizer):
    """Limited-memory BFGS over one parameter group; ``line_search_fn`` is None (fixed step ``lr``) or
    'strong_wolfe'."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if _value(lr) < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        np_ = xp(self._params[0]._data)
        return np_.concatenate([np_.zeros(p._data.size, p._data.dtype) if p.grad is None
                                else (p.grad.to_dense() if p.grad.is_sparse else p.grad)._data.reshape(-1)
                                for p in self._params])

    def _add(self, t, d):
        offset = 0
        for p in self._params:
            n = p._data.size
            p._data += (t * d[offset:offset + n]).reshape(p._data.shape)
            p._bump()
            offset += n

    def _set(self, values):
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._bump()

    def _evaluate(self, closure, x, d):
        def evaluate(t):
            self._add(t, d)
            loss = float(self._closure_loss(closure))
            g = self._flat_grad()
            self._set(x)
            return loss, g
        return evaluate

    def step(self, closure):
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that reevaluates the model")
        group = self.param_groups[0]
        lr, max_iter, max_eval = _value(group["lr"]), group["max_iter"], group["max_eval"]
        tol_grad, tol_change, history = group["tolerance_grad"], group["tolerance_change"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._closure_loss(closure)
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if float(abs(g).max()) <= tol_grad:
            return orig_loss

        d, t = _arr(state.get("d")), _value(state.get("t"))
        old_dirs = [_arr(v) for v in state.get("old_dirs", [])]
        old_stps = [_arr(v) for v in state.get("old_stps", [])]
        ro = [float(_value(v)) for v in state.get("ro", [])]
        h_diag = _value(state.get("H_diag"))
        prev_g, prev_loss = _arr(state.get("prev_flat_grad")), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -g, [], [], [], 1
            else:
                y, s = g - prev_g, d * t
                ys = float(y @ s)
                if ys > 1e-10:  # curvature condition: only then is the pair a useful Hessian sample
                    if len(old_dirs) == history:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y), old_stps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                # two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = -g
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * float(h_diag)
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_g = g.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(abs(g).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(g @ d)
            if gtd > -tol_change:  # not a descent direction
                break

            ls_evals = 0
            if group["line_search_fn"] is not None:
                if group["line_search_fn"] != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x = [p._data.copy() for p in self._params]
                loss, g, t, ls_evals = _strong_wolfe(self._evaluate(closure, x, d), t, d, loss, g, gtd)
                self._add(t, d)
                converged = float(abs(g).max()) <= tol_grad
            else:
                self._add(t, d)
                converged = False
                if n_iter != max_iter:
                    loss = float(self._closure_loss(closure))
                    g = self._flat_grad()
                    converged = float(abs(g).max()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if float(abs(d * t).max()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        wrap = Tensor._wrap
        state.update(d=wrap(d), t=t, old_dirs=[wrap(v) for v in old_dirs], old_stps=[wrap(v) for v in old_stps],
                     ro=ro, H_diag=h_diag, prev_flat_grad=wrap(prev_g), prev_loss=prev_loss)
        return orig_loss
