"""The quantizable MultiheadAttention: ``nn.MultiheadAttention`` with its query, key and value projections as
separate ``nn.Linear`` layers and the query scaling as a ``FloatFunctional``, so that eager-mode quantization can
observe and quantize them; the attention itself (products, masks, softmax) runs in float between DeQuantStubs and
QuantStubs. ``prepare`` puts it in place of an ``nn.MultiheadAttention`` that has a qconfig;
``ao.nn.quantized.MultiheadAttention`` is its converted form."""
import warnings

import ember
import ember.nn as nn
import ember.nn.functional as F

__all__ = ["MultiheadAttention"]


class MultiheadAttention(nn.MultiheadAttention):
    """``nn.MultiheadAttention``'s arguments and call; ``linear_Q``, ``linear_K``, ``linear_V`` and ``out_proj``
    hold the weights (the inherited ``in_proj_*`` parameters are unused)."""

    _FLOAT_MODULE = nn.MultiheadAttention

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        # (imported here: ao.nn.quantized and ao.quantization import this package)
        from ember.ao.nn.quantized import FloatFunctional
        from ember.ao.quantization import DeQuantStub, QuantStub
        super().__init__(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim, batch_first,
                         device=device, dtype=dtype)
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.linear_Q = nn.Linear(self.embed_dim, self.embed_dim, **kw)
        self.linear_K = nn.Linear(self.kdim, self.embed_dim, **kw)
        self.linear_V = nn.Linear(self.vdim, self.embed_dim, **kw)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, **kw)
        self.q_scaling_product = FloatFunctional()
        self.quant_attn_output, self.quant_attn_output_weights = QuantStub(), QuantStub()
        self.dequant_q, self.dequant_k, self.dequant_v = DeQuantStub(), DeQuantStub(), DeQuantStub()

    def _get_name(self):
        return "QuantizableMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        """The observed (prepared) quantizable attention of float ``other`` (its weights shared)."""
        from ember.ao.quantization import prepare
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls(other.embed_dim, other.num_heads, other.dropout, other.in_proj_bias is not None,
                       other.bias_k is not None, other.add_zero_attn, other.kdim, other.vdim, other.batch_first)
        observed.bias_k, observed.bias_v = other.bias_k, other.bias_v
        observed.qconfig = other.qconfig
        observed.out_proj.weight, observed.out_proj.bias = other.out_proj.weight, other.out_proj.bias
        e = other.embed_dim
        weights = ((other.in_proj_weight[:e], other.in_proj_weight[e:2 * e], other.in_proj_weight[2 * e:])
                   if other._qkv_same_embed_dim else (other.q_proj_weight, other.k_proj_weight, other.v_proj_weight))
        bias = other.in_proj_bias
        for k, (layer, weight) in enumerate(zip((observed.linear_Q, observed.linear_K, observed.linear_V), weights)):
            layer.weight = nn.Parameter(weight.detach(), weight.requires_grad)
            layer.bias = None if bias is None else nn.Parameter(bias[k * e:(k + 1) * e].detach(),
                                                                bias.requires_grad)
        observed.eval()
        return prepare(observed, inplace=True)

    def dequantize(self):
        """The float ``nn.MultiheadAttention`` of this (converted) attention's dequantized weights (PyTorch makes
        its ``_FLOAT_MODULE``, for the quantized attention a quantizable one, which ignores the weights it sets)."""
        fp = nn.MultiheadAttention(self.embed_dim, self.num_heads, self.dropout,
                                self.linear_Q._weight_bias()[1] is not None, self.bias_k is not None,
                                self.add_zero_attn, self.kdim, self.vdim, self.batch_first)
        if self.bias_k is not None:
            fp.bias_k = nn.Parameter(self.bias_k.dequantize())
        if self.bias_v is not None:
            fp.bias_v = nn.Parameter(self.bias_v.dequantize())
        w, b = self.out_proj._weight_bias()
        fp.out_proj.weight = nn.Parameter(w.dequantize())
        if b is not None:
            fp.out_proj.bias = nn.Parameter(b)
        (wq, bq), (wk, bk), (wv, bv) = (m._weight_bias() for m in (self.linear_Q, self.linear_K, self.linear_V))
        wq, wk, wv = wq.dequantize(), wk.dequantize(), wv.dequantize()
        with ember.no_grad():
            if fp._qkv_same_embed_dim:
                fp.in_proj_weight.copy_(ember.cat([wq, wk, wv]))
            else:
                fp.q_proj_weight, fp.k_proj_weight, fp.v_proj_weight = (nn.Parameter(w) for w in (wq, wk, wv))
            if fp.in_proj_bias is not None:
                fp.in_proj_bias.copy_(ember.cat([bq, bk, bv]))
        return fp

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to prepare an MHA module. Please, see the examples "
                                  "on quantizable MHAs.")

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(attention output, attention weights averaged over the heads, or per head, or None)."""
        if attn_mask is not None and is_causal:
            raise AssertionError("Only allow causal mask or attn_mask")
        if is_causal:
            raise AssertionError("causal mask not supported by AO MHA module")
        if self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        tgt_len, bsz, embed_dim = query.size()
        if self.embed_dim != embed_dim:
            raise AssertionError(f"embed_dim mismatch: {self.embed_dim} != {embed_dim}")
        if key.size(0) != value.size(0) or key.size(1) != value.size(1):
            raise AssertionError(f"key and value size mismatch: key.size()={key.size()}, value.size()={value.size()}")
        heads = self.num_heads
        head_dim = self.embed_dim // heads
        if head_dim * heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        q = self.q_scaling_product.mul_scalar(self.linear_Q(query), float(head_dim) ** -0.5)
        k, v = self.linear_K(key), self.linear_V(value)
        attn_mask = _checked_attn_mask(attn_mask, bsz * heads, tgt_len, key.size(0))
        if key_padding_mask is not None and key_padding_mask.dtype == ember.uint8:
            warnings.warn("Byte tensor for `key_padding_mask` in `nn.MultiheadAttention` is deprecated. Use bool "
                          "tensor instead.", stacklevel=2)
            key_padding_mask = key_padding_mask.to(ember.bool)
        if self.bias_k is not None and self.bias_v is not None:
            k = ember.cat([k, self.bias_k.repeat(1, bsz, 1)])
            v = ember.cat([v, self.bias_v.repeat(1, bsz, 1)])
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        elif self.bias_k is not None or self.bias_v is not None:
            raise AssertionError("bias_k and bias_v must be both None or both set")
        q = q.contiguous().view(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        src_len = k.size(1)
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"key_padding_mask must be of size {(bsz, src_len)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
        if self.add_zero_attn:
            src_len += 1
            k, v = _with_zero_step(k), _with_zero_step(v)
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        q, k, v = self.dequant_q(q), self.dequant_k(k), self.dequant_v(v)
        weights = ember.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            weights = weights.masked_fill(attn_mask, float("-inf")) if attn_mask.dtype == ember.bool else \
                weights + attn_mask
        if key_padding_mask is not None:
            weights = weights.view(bsz, heads, tgt_len, src_len).masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf")).view(bsz * heads, tgt_len, src_len)
        weights = F.dropout(F.softmax(weights, dim=-1), p=self.dropout, training=self.training)
        out = ember.bmm(weights, v)  # (batch * heads, target, head_dim)
        out = out.transpose(0, 1).contiguous().view(tgt_len, bsz, self.embed_dim)
        out = self.out_proj(self.quant_attn_output(out))
        if self.batch_first:
            out = out.transpose(0, 1)
        weights = self.quant_attn_output_weights(weights)
        if not need_weights:
            return out, None
        weights = weights.view(bsz, heads, tgt_len, src_len)
        return out, weights.mean(dim=1) if average_attn_weights else weights


def _checked_attn_mask(mask, batch_heads, tgt_len, src_len):
    """``attn_mask`` as (1 or batch * heads, target, source), bool or float; PyTorch's errors otherwise."""
    if mask is None:
        return None
    if mask.dtype == ember.uint8:
        warnings.warn("Byte tensor for `attn_mask` in `nn.MultiheadAttention` is deprecated. Use bool tensor "
                      "instead.", stacklevel=3)
        mask = mask.to(ember.bool)
    if not mask.is_floating_point() and mask.dtype != ember.bool:
        raise AssertionError(f"Only float and bool types are supported for attn_mask, not {mask.dtype}")
    if mask.dim() == 2:
        mask = mask.unsqueeze(0)
        if list(mask.size()) != [1, tgt_len, src_len]:
            raise RuntimeError("The size of the 2D attn_mask is not correct.")
    elif mask.dim() == 3:
        if list(mask.size()) != [batch_heads, tgt_len, src_len]:
            raise RuntimeError("The size of the 3D attn_mask is not correct.")
    else:
        raise RuntimeError(f"attn_mask's dimension {mask.dim()} is not supported")
    return mask


def _with_zero_step(x):
    """(batch * heads, source + 1, head_dim): a zero key or value appended, quantized as ``x`` if it is."""
    zeros = ember.zeros((x.size(0), 1) + tuple(x.shape[2:]))
    if x.is_quantized:
        zeros = ember.quantize_per_tensor(zeros, x.q_scale(), x.q_zero_point(), x.dtype)
    return ember.cat([x, zeros], dim=1)
