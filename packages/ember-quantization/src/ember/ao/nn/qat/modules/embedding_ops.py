"""QAT Embedding and EmbeddingBag: float lookups of a fake-quantized weight (per-row float qparams)."""
import ember
import ember.nn as nn
import ember.nn.functional as F

__all__ = ["Embedding", "EmbeddingBag"]


def _check_qscheme(qconfig, what):
    scheme = qconfig.weight().qscheme
    if scheme != ember.per_channel_affine_float_qparams:
        raise AssertionError(f"{what} weights requires a qscheme of torch.per_channel_affine_float_qparams Got "
                             + str(scheme))


def _checked_qconfig(cls, mod, what):
    if type(mod) is not cls._FLOAT_MODULE:
        raise AssertionError(" qat." + cls.__name__ + ".from_float only works for " + cls._FLOAT_MODULE.__name__)
    if not hasattr(mod, "qconfig"):
        raise AssertionError("Input float module must have qconfig defined")
    if not mod.qconfig:
        raise AssertionError("Input float module must have a valid qconfig")
    _check_qscheme(mod.qconfig, what)
    return mod.qconfig


class Embedding(nn.Embedding):
    """nn.Embedding with ``weight_fake_quant`` applied to the weight in forward."""

    _FLOAT_MODULE = nn.Embedding

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None, qconfig=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, device=device, dtype=dtype)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        _check_qscheme(qconfig, "Embedding")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight(factory_kwargs={"device": device, "dtype": dtype})

    def forward(self, input):
        return F.embedding(input, self.weight_fake_quant(self.weight), self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        qconfig = _checked_qconfig(cls, mod, "Embedding")
        return cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, mod.max_norm, mod.norm_type,
                   mod.scale_grad_by_freq, mod.sparse, mod.weight, qconfig=qconfig)

    def to_float(self):
        emb = nn.Embedding(self.num_embeddings, self.embedding_dim, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse, None)
        emb.weight = nn.Parameter(self.weight.detach())
        emb.train(self.training)
        return emb


class EmbeddingBag(nn.EmbeddingBag):
    """nn.EmbeddingBag with ``weight_fake_quant`` applied to the weight in forward."""

    _FLOAT_MODULE = nn.EmbeddingBag

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, qconfig=None,
                 device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                         _weight, include_last_offset, padding_idx, device=device, dtype=dtype)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        _check_qscheme(qconfig, "Embedding Bag")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight(factory_kwargs={"device": device, "dtype": dtype})

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight_fake_quant(self.weight), offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        qconfig = _checked_qconfig(cls, mod, "Embedding Bag")
        return cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type, mod.scale_grad_by_freq,
                   mod.mode, mod.sparse, mod.weight, mod.include_last_offset, mod.padding_idx, qconfig=qconfig)

    def to_float(self):
        bag = nn.EmbeddingBag(self.num_embeddings, self.embedding_dim, self.max_norm, self.norm_type,
                              self.scale_grad_by_freq, self.mode, self.sparse, None, self.include_last_offset,
                              self.padding_idx)
        bag.weight = nn.Parameter(self.weight.detach())
        bag.train(self.training)
        return bag
