"""The quantized modules of ``ember.ao.nn.quantized``, plus Quantize and DeQuantize."""
import ember
import ember.nn as nn

from .activation import ELU, Hardswish, LeakyReLU, PReLU, ReLU6, Sigmoid, Softmax
from .attention import MultiheadAttention
from .batchnorm import BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .dropout import Dropout
from .embedding_ops import Embedding, EmbeddingBag
from .functional_modules import FloatFunctional, FXFloatFunctional, QFunctional
from .linear import Linear
from .normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LayerNorm
from .rnn import LSTM

__all__ = ["BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "DeQuantize", "ELU", "Embedding", "EmbeddingBag", "GroupNorm", "Hardswish",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "LeakyReLU", "Linear", "LSTM",
           "MultiheadAttention", "PReLU",
           "Quantize", "ReLU6", "Sigmoid", "Softmax", "Dropout", "FloatFunctional", "FXFloatFunctional",
           "QFunctional"]


class Quantize(nn.Module):
    """Quantizes its float input with fixed ``scale``, ``zero_point`` (buffers) and ``dtype``."""

    def __init__(self, scale, zero_point, dtype, factory_kwargs=None):
        factory_kwargs = nn.factory_kwargs(factory_kwargs)
        super().__init__()
        self.register_buffer("scale", ember.tensor([scale], **factory_kwargs))
        self.register_buffer("zero_point", ember.tensor([zero_point], dtype=ember.long,
                                                        **{k: v for k, v in factory_kwargs.items() if k != "dtype"}))
        self.dtype = dtype

    def forward(self, X):
        return ember.quantize_per_tensor(X, float(self.scale), int(self.zero_point), self.dtype)

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        if not hasattr(mod, "activation_post_process"):
            raise AssertionError(f"Module {type(mod).__name__} must have activation_post_process attribute")
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        return Quantize(scale.float().item(), zero_point.long().item(), mod.activation_post_process.dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(nn.Module):
    """Dequantizes its quantized input to float32."""

    def forward(self, Xq):
        return Xq.dequantize()

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return DeQuantize()
