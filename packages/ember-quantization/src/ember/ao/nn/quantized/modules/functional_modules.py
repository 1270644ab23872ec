"""FloatFunctional (float ops whose outputs an observer watches), its graph-mode form FXFloatFunctional, and
QFunctional (the quantized ops ``convert`` swaps them for)."""
import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.ops import quantized as qops

from .. import _kernels

__all__ = ["FloatFunctional", "FXFloatFunctional", "QFunctional"]


class FloatFunctional(nn.Module):
    """Float add/mul/cat/add_relu/matmul whose outputs pass through ``activation_post_process`` (an observer after
    ``prepare``); add_scalar and mul_scalar are not observed (their quantized forms need no output qparams)."""

    def __init__(self):
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(ember.add(x, y))

    def add_scalar(self, x, y):
        return ember.add(x, y)

    def mul(self, x, y):
        return self.activation_post_process(ember.mul(x, y))

    def mul_scalar(self, x, y):
        return ember.mul(x, y)

    def cat(self, x, dim=0):
        return self.activation_post_process(ember.cat(x, dim=dim))

    def add_relu(self, x, y):
        return self.activation_post_process(F.relu(ember.add(x, y)))

    def matmul(self, x, y):
        return self.activation_post_process(ember.matmul(x, y))


class FXFloatFunctional(nn.Module):
    """FloatFunctional for graph-mode quantization: the float ops, observed by the graph instead."""

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return ember.add(x, y)

    def add_scalar(self, x, y):
        return ember.add(x, y)

    def mul(self, x, y):
        return ember.mul(x, y)

    def mul_scalar(self, x, y):
        return ember.mul(x, y)

    def cat(self, x, dim=0):
        return ember.cat(x, dim=dim)

    def add_relu(self, x, y):
        return F.relu(ember.add(x, y))

    def matmul(self, x, y):
        return ember.matmul(x, y)


class QFunctional(nn.Module):
    """The quantized ops of FloatFunctional: outputs requantized to ``scale``/``zero_point`` (saved in the
    state_dict), add_scalar/mul_scalar with the qparams their kernels choose."""

    def __init__(self):
        super().__init__()
        self.scale = 1.0
        self.zero_point = 0
        self.activation_post_process = nn.Identity()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = ember.tensor(self.scale)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.scale = float(state_dict.pop(prefix + "scale"))
        self.zero_point = int(state_dict.pop(prefix + "zero_point"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def _get_name(self):
        return "QFunctional"

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}"

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(qops.add(x, y, self.scale, self.zero_point))

    def add_scalar(self, x, y):
        return qops.add_scalar(x, y)

    def mul(self, x, y):
        return self.activation_post_process(qops.mul(x, y, self.scale, self.zero_point))

    def mul_scalar(self, x, y):
        return qops.mul_scalar(x, y)

    def cat(self, x, dim=0):
        return self.activation_post_process(qops.cat(x, dim, self.scale, self.zero_point))

    def add_relu(self, x, y):
        return self.activation_post_process(qops.add_relu(x, y, self.scale, self.zero_point))

    def matmul(self, x, y):
        return self.activation_post_process(_kernels.matmul(x, y, self.scale, self.zero_point))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) is not FloatFunctional:
            raise AssertionError("QFunctional.from_float expects an instance of FloatFunctional")
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        new_mod = QFunctional()
        new_mod.scale, new_mod.zero_point = float(scale), int(zero_point)
        return new_mod
