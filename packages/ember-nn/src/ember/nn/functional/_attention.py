"""Scaled dot-product attention and the multi-head attention forward pass."""
import math

import ember
from ember.nn.attention import _check_kernels

from ._layers import dropout, linear, pad

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q @ k^T * scale + mask) @ v``; a bool mask marks the pairs that take part (True = attend)."""
    _check_kernels()
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        # grouped-query attention: each key/value head serves a group of query heads
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], -3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], -3)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = ember.ones(L, S, dtype=ember.bool, device=query.device).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == ember.bool else scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, True)
    return weights.matmul(value)


def _additive(mask, name, like):
    """A float mask to add to attention scores (a bool mask's True entries become -inf)."""
    if mask is None:
        return None
    if mask.dtype == ember.bool:
        return ember.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill(mask, -math.inf)
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention over (L, N, E) query and (S, N, E) key/value (or unbatched (L, E)); returns the
    output and, with ``need_weights``, the attention weights (averaged over heads when asked)."""
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    head_dim = E // num_heads
    if head_dim * num_heads != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                           "`generate_square_subsequent_mask` to create this mask.")
    key_padding_mask = _additive(key_padding_mask, "key_padding_mask", query)
    attn_mask = _additive(attn_mask, "attn_mask", query)
    b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
    if use_separate_proj_weight:
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (L, key.shape[0]):
                raise RuntimeError(f"The shape of the 2D attn_mask is {_size(attn_mask)}, but should be "
                                   f"{(L, key.shape[0])}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() != 3:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        k = ember.cat([k, bias_k.repeat(1, N, 1)])
        v = ember.cat([v, bias_v.repeat(1, N, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    q = q.reshape(L, N * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], N * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], N * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    if add_zero_attn:
        k = ember.cat([k, k.new_zeros((N * num_heads, 1, head_dim))], 1)
        v = ember.cat([v, v.new_zeros((N * num_heads, 1, head_dim))], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    S = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, S):
            raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                 f"{_size(key_padding_mask)}")
        kpm = key_padding_mask.reshape(N, 1, 1, S).expand(-1, num_heads, -1, -1).reshape(N * num_heads, 1, S)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    scores = (q * math.sqrt(1.0 / head_dim)).matmul(k.transpose(1, 2))
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = scores.softmax(-1)
    if training and dropout_p > 0:
        weights = dropout(weights, dropout_p, True)
    out = weights.matmul(v).transpose(0, 1).reshape(L * N, E)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(L, N, E)
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(N, num_heads, L, S)
    if average_attn_weights:
        weights = weights.mean(1)
    return out, weights if batched else weights.squeeze(0)


def _size(t):
    return f"torch.Size({list(t.shape)})"
