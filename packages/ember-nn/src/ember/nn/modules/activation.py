"""Activation layers (each calls its ``nn.functional`` form) and MultiheadAttention."""
import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._utils import factory, inplace_str
from .linear import NonDynamicallyQuantizableLinear
from .module import Module

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
           "MultiheadAttention"]


class _Plain(Module):
    """An activation without arguments: ``forward`` applies ``F.<fn>``."""

    fn = None

    def forward(self, input):
        return getattr(F, self.fn)(input)


class _InplaceOnly(Module):
    """An activation whose only argument is ``inplace``."""

    fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self.fn)(input, inplace=self.inplace)

    def extra_repr(self):
        return inplace_str(self.inplace, first=True)


class ReLU(_InplaceOnly):
    """max(0, x)."""
    fn = "relu"


class SELU(_InplaceOnly):
    """Scaled ELU with the self-normalising constants."""
    fn = "selu"


class SiLU(_InplaceOnly):
    """x * sigmoid(x)."""
    fn = "silu"


class Mish(_InplaceOnly):
    """x * tanh(softplus(x))."""
    fn = "mish"


class Hardsigmoid(_InplaceOnly):
    """Piecewise-linear sigmoid: clamp(x / 6 + 1 / 2, 0, 1)."""
    fn = "hardsigmoid"


class Hardswish(_InplaceOnly):
    """x * hardsigmoid(x)."""
    fn = "hardswish"


class Sigmoid(_Plain):
    """1 / (1 + exp(-x))."""
    fn = "sigmoid"


class Tanh(_Plain):
    """Hyperbolic tangent."""
    fn = "tanh"


class LogSigmoid(_Plain):
    """log(sigmoid(x))."""
    fn = "logsigmoid"


class Softsign(_Plain):
    """x / (1 + |x|)."""
    fn = "softsign"


class Tanhshrink(_Plain):
    """x - tanh(x)."""
    fn = "tanhshrink"


class Threshold(Module):
    """x where x > threshold, else ``value``."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{inplace_str(self.inplace)}"


class RReLU(Module):
    """Leaky ReLU with a random slope in [lower, upper] while training (their mean otherwise)."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{inplace_str(self.inplace)}"


class Hardtanh(Module):
    """clamp(x, min_val, max_val)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if max_val <= min_val:
            raise AssertionError("max_val must be greater than min_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace_str(self.inplace)}"


class ReLU6(Hardtanh):
    """clamp(x, 0, 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return inplace_str(self.inplace, first=True)


class _Alpha(Module):
    fn = None

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return getattr(F, self.fn)(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{inplace_str(self.inplace)}"


class ELU(_Alpha):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    fn = "elu"


class CELU(_Alpha):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    fn = "celu"


class GLU(Module):
    """First half of ``dim`` times the sigmoid of the second half."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GELU(Module):
    """x * Phi(x) (``approximate='tanh'`` for the tanh approximation)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class _Lambd(Module):
    fn = None

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return getattr(F, self.fn)(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Hardshrink(_Lambd):
    """x where |x| > lambd, else 0."""
    fn = "hardshrink"


class Softshrink(_Lambd):
    """x shrunk towards 0 by lambd (0 inside [-lambd, lambd])."""
    fn = "softshrink"


class LeakyReLU(Module):
    """x for x >= 0, negative_slope * x otherwise."""

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{inplace_str(self.inplace)}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """Leaky ReLU with a learnt slope (one, or one per channel)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(ember.empty(num_parameters, **factory(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _SoftmaxFamily(Module):
    fn = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return getattr(F, self.fn)(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("dim", None)


class Softmax(_SoftmaxFamily):
    """exp(x) normalised to sum to one along ``dim``."""
    fn = "softmax"


class Softmin(_SoftmaxFamily):
    """softmax(-x) along ``dim``."""
    fn = "softmin"


class LogSoftmax(_SoftmaxFamily):
    """log(softmax(x)) along ``dim``."""
    fn = "log_softmax"


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads; inputs (L, N, E) or, with ``batch_first``, (N, L, E)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        fk = factory(device, dtype)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(ember.empty((3 * embed_dim, embed_dim), **fk))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(ember.empty((embed_dim, embed_dim), **fk))
            self.k_proj_weight = Parameter(ember.empty((embed_dim, self.kdim), **fk))
            self.v_proj_weight = Parameter(ember.empty((embed_dim, self.vdim), **fk))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(ember.empty(3 * embed_dim, **fk))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = Parameter(ember.empty((1, 1, embed_dim), **fk))
            self.bias_v = Parameter(ember.empty((1, 1, embed_dim), **fk))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if self.batch_first and query.dim() == 3:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and query.dim() == 3:
            out = out.transpose(0, 1)
        return out, weights
