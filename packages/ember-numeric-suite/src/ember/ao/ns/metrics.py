"""Error metrics of a quantized result against the float one, defined as PyTorch's ``torch.ao.ns.fx.utils``
defines them: ``compute_sqnr``, ``compute_normalized_l2_error``, ``compute_cosine_similarity``.

Each takes the float result ``x`` first and the quantized one ``y`` (quantized tensors are dequantized), and returns
a tensor; given two tuples or two lists it returns a list of the metrics of their items, and ``None`` when either
tensor is not float32.
"""
import functools

import ember
import ember.nn.functional as F

__all__ = ["compute_sqnr", "compute_normalized_l2_error", "compute_cosine_similarity"]


def _pairwise_float32(metric):
    """``metric`` on two float32 tensors, mapped over paired tuples or lists; None for other dtypes."""

    @functools.wraps(metric)
    def apply(x, y, *args, **kwargs):
        if isinstance(x, tuple) and isinstance(y, tuple) or isinstance(x, list) and isinstance(y, list):
            return [apply(a, b, *args, **kwargs) for a, b in zip(x, y)]
        if isinstance(x, ember.Tensor) and isinstance(y, ember.Tensor):
            x = x.dequantize() if x.is_quantized else x
            y = y.dequantize() if y.is_quantized else y
        if x.dtype != ember.float32 or y.dtype != ember.float32:
            return None
        return metric(x, y, *args, **kwargs)

    return apply


@_pairwise_float32
def compute_sqnr(x, y):
    """Signal to quantization noise ratio in decibels: ``20 log10(||x|| / ||x - y||)`` (inf when equal)."""
    return 20 * ember.log10(ember.norm(x) / ember.norm(x - y))


@_pairwise_float32
def compute_normalized_l2_error(x, y):
    """``sqrt(sum((x - y)**2) / sum(x**2))``: the error's size relative to the float result's."""
    return ember.sqrt(((x - y) ** 2).sum() / (x ** 2).sum())


@_pairwise_float32
def compute_cosine_similarity(x, y):
    """The cosine of the angle between ``x`` and ``y``, both flattened (a tensor of shape (1,)); shapes may differ
    if the element counts agree."""
    return F.cosine_similarity(x.reshape(1, -1), y.reshape(1, -1))
