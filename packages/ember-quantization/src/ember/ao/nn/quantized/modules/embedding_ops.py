"""Quantized Embedding and EmbeddingBag: rows of 8-bit (quint8) or 4-bit (quint4x2) integers with a float scale
and zero point each; outputs are float."""
import ember
import ember.nn as nn

from .. import _kernels, _qarray
from .utils import _hide_packed_params_repr, _quantize_weight

__all__ = ["EmbeddingPackedParams", "Embedding", "EmbeddingBag"]


def _empty_rows(num_embeddings, embedding_dim, dtype):
    ints = ember.zeros(num_embeddings, embedding_dim, dtype=ember.uint8)
    q = ember._make_per_channel_quantized_tensor(ints, ember.ones(num_embeddings), ember.zeros(num_embeddings), 0)
    return q if dtype == ember.quint8 else ember.quantize_per_channel(
        q.dequantize(), ember.ones(num_embeddings), ember.zeros(num_embeddings), 0, dtype)


class EmbeddingPackedParams(nn.Module):
    """Holds a quantized embedding weight (per-row float qparams); saved as ``dtype`` and ``_packed_weight``."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, dtype=ember.quint8):
        super().__init__()
        self.dtype = dtype
        if dtype not in (ember.quint8, ember.quint4x2):
            raise NotImplementedError("Unsupported dtype on quantized embedding! Supports quint8 and quint4x2. Got "
                                      f"dtype: {dtype}")
        self.set_weight(_empty_rows(num_embeddings, embedding_dim, dtype))

    def set_weight(self, weight):
        if self.dtype not in (ember.quint8, ember.quint4x2):
            raise NotImplementedError("Unsupported dtype for quantized embedding prepack! Supports quint8 and "
                                      "quint4x2.")
        if not getattr(weight, "is_quantized", False):
            raise _qarray.not_implemented("quantized::embedding_bag_prepack")
        if weight.dtype not in (ember.quint8, ember.quint4x2):
            raise RuntimeError("qembedding_bag_prepack currently only supports quint8 and quint4x2 weights")
        if weight.qscheme() != ember.per_channel_affine_float_qparams:
            raise RuntimeError("Expect embedding_bag weights to be quantized using kPerChannelAffineFloatQParams")
        if weight.q_per_channel_axis() != 0:  # (PyTorch reads the parameters per row whatever the axis)
            raise RuntimeError("quantized embedding weights are quantized per row: expected axis 0, got axis "
                               f"{weight.q_per_channel_axis()}")
        self._packed_weight = weight

    def _weight(self):
        return self._packed_weight

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_weight"] = self._weight()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.dtype = state_dict.pop(prefix + "dtype")
        self.set_weight(state_dict.pop(prefix + "_packed_weight"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def __repr__(self):
        return repr(self._weight())


def _float_qparams_observer(mod, name, float_cls, qat_cls):
    """The weight observer ``from_float`` quantizes an embedding with (float qparams, quint8 or quint4x2)."""
    from ember.ao.quantization.qconfig import float_qparams_weight_only_qconfig
    if hasattr(mod, "weight_fake_quant"):
        if qat_cls is not None and type(mod) is not qat_cls:
            raise AssertionError(f"nnq.{name}.from_float with fake quant only works for {qat_cls.__name__}")
        observer = mod.weight_fake_quant
    else:
        if type(mod) is not float_cls:
            raise AssertionError(f"nnq.{name}.from_float only works for {float_cls.__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError(f"{name} input float module must have qconfig defined")
        if mod.qconfig is not None and mod.qconfig.weight is not None:
            observer = mod.qconfig.weight()
        else:
            observer = float_qparams_weight_only_qconfig.weight()
    if observer.qscheme != ember.per_channel_affine_float_qparams:
        raise AssertionError(f"{name} quantization is only supported with float_qparams_weight_only_qconfig.")
    if observer.dtype not in (ember.quint8, ember.quint4x2):
        raise AssertionError(f"The only supported dtype for nnq.{name} is torch.quint8 and torch.quint4x2, got "
                             f"{observer.dtype}")
    return observer


class Embedding(nn.Module):
    """Looks up quantized rows; returns them dequantized (float32)."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, dtype=ember.quint8):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.dtype = num_embeddings, embedding_dim, dtype
        if _weight is None:
            qweight = _empty_rows(num_embeddings, embedding_dim, ember.quint8)
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim: expected "
                                     f"{[num_embeddings, embedding_dim]}, got {list(_weight.shape)}")
            qweight = _weight
        self._packed_params = EmbeddingPackedParams(num_embeddings, embedding_dim, dtype)
        self._packed_params.set_weight(qweight)

    def forward(self, indices):
        return _kernels.embedding(self._packed_params._packed_weight, indices)

    def _get_name(self):
        return "QuantizedEmbedding"

    def __repr__(self):
        return _hide_packed_params_repr(self, EmbeddingPackedParams)

    def extra_repr(self):
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype={self._packed_params.dtype}, qscheme={self.weight().qscheme()}")

    def set_weight(self, w):
        self._packed_params.set_weight(w)

    def weight(self):
        return self._packed_params._weight()

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import qat as nnqat
        observer = _float_qparams_observer(mod, "Embedding", nn.Embedding, nnqat.Embedding)
        observer(mod.weight)
        qembedding = Embedding(mod.num_embeddings, mod.embedding_dim)
        qembedding.set_weight(_quantize_weight(mod.weight.float(), observer))
        return qembedding

    @classmethod
    def from_reference(cls, ref_embedding):
        return cls(ref_embedding.num_embeddings, ref_embedding.embedding_dim, ref_embedding.padding_idx,
                   ref_embedding.max_norm, ref_embedding.norm_type, ref_embedding.scale_grad_by_freq,
                   ref_embedding.sparse, ref_embedding.get_quantized_weight(), ref_embedding.weight_dtype)


class EmbeddingBag(Embedding):
    """Sums of bags of quantized rows (``offsets``, or the rows of 2-d ``indices``), float32. As in PyTorch the
    quantized kernel sums whatever ``mode`` says."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="sum", sparse=False, _weight=None, include_last_offset=False, dtype=ember.quint8):
        super().__init__(num_embeddings, embedding_dim, _weight=_weight, dtype=dtype)
        self.mode, self.pruned_weights, self.include_last_offset = mode, False, include_last_offset

    def forward(self, indices, offsets=None, per_sample_weights=None, compressed_indices_mapping=None):
        return _kernels.embedding_bag(self._packed_params._packed_weight, indices, offsets, per_sample_weights,
                                      self.include_last_offset)

    def _get_name(self):
        return "QuantizedEmbeddingBag"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        observer = _float_qparams_observer(mod, "EmbeddingBag", nn.EmbeddingBag, None)
        observer(mod.weight)
        qbag = EmbeddingBag(mod.num_embeddings, mod.embedding_dim, max_norm=mod.max_norm, norm_type=mod.norm_type,
                            scale_grad_by_freq=mod.scale_grad_by_freq, mode=mod.mode, sparse=mod.sparse,
                            include_last_offset=mod.include_last_offset, dtype=observer.dtype)
        qbag.set_weight(_quantize_weight(mod.weight.float(), observer))
        return qbag

    @classmethod
    def from_reference(cls, ref_embedding_bag):
        r = ref_embedding_bag
        return cls(r.num_embeddings, r.embedding_dim, r.max_norm, r.norm_type, r.scale_grad_by_freq, r.mode,
                   r.sparse, r.get_quantized_weight(), r.include_last_offset, r.weight_dtype)
