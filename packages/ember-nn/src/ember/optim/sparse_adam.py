"""SparseAdam: Adam whose moments and parameters change only at the rows a sparse gradient names."""
import math

from ember._tensor import Tensor

from ._common import check, check_betas, done, lr_of, sparse_entries, xp
from .optimizer import Optimizer, _value, zeros_state

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """Adam for sparse COO gradients (``nn.Embedding(sparse=True)``'s): at the positions the (coalesced) gradient
    holds, the moments are updated and the parameter takes Adam's bias-corrected step; elsewhere nothing changes.
    Dense gradients are refused, as in PyTorch (use Adam)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        check(0.0 < _value(lr), "learning rate", lr)
        check(0.0 < eps, "epsilon value", eps)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        places = [[i, j] for i, group in enumerate(self.param_groups) for j, p in enumerate(group["params"])]
        sparse = [at for at in places if self._param(at).is_sparse]
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")
        complex_ = [at for at in places if self._param(at).is_complex()]
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not support complex parameters")

    def _param(self, at):
        return self.param_groups[at[0]]["params"][at[1]]

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = lr_of(group), group["eps"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if not state:
                    state["step"] = 0  # (a Python int, as PyTorch keeps it here)
                    state["exp_avg"], state["exp_avg_sq"] = zeros_state(p), zeros_state(p)
                state["step"] += 1
                at, values = sparse_entries(p.grad, group)
                m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
                m_old, v_old = m[at], v[at]
                m_new = (values - m_old) * (1 - beta1) + m_old
                v_new = (values * values - v_old) * (1 - beta2) + v_old
                m[at], v[at] = m_new, v_new
                step = state["step"]
                step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
                p._data[at] += -step_size * (m_new / (xp(v).sqrt(v_new) + eps))
                for t in (p, state["exp_avg"], state["exp_avg_sq"]):
                    done(t)
        return loss
