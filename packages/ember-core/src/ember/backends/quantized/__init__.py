"""``ember.backends.quantized``: the quantized engine (``engine``: "x86", "fbgemm", "qnnpack" or "onednn", the ones
PyTorch's x86 CPU build supports). ember's quantized kernels compute PyTorch's x86 numerics; the engine is the
setting ember-quantization's modules and default qconfigs read (zero points and ``reduce_range`` differ by engine).
"""
import sys
import types

supported_engines = ["qnnpack", "onednn", "x86", "fbgemm"]
_ENGINE = ["x86"]
_NAMES = {"none": "NoQEngine", None: "NoQEngine"}


class _QuantizedModule(types.ModuleType):
    """This module, whose ``engine`` attribute checks what it is set to (as PyTorch's)."""

    @property
    def engine(self):
        return _ENGINE[0]

    @engine.setter
    def engine(self, value):
        if value in _NAMES:
            raise RuntimeError(f"quantized engine {_NAMES[value]} is not supported")
        if value not in supported_engines:
            raise RuntimeError(f"{value} is not a valid value for quantized engine")
        _ENGINE[0] = value


sys.modules[__name__].__class__ = _QuantizedModule
