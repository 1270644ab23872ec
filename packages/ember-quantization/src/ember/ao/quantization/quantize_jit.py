"""TorchScript-based quantization (``prepare_jit``, ``convert_jit``, ...): ember has no TorchScript, so these
raise, naming the eager-mode functions to use instead."""

__all__ = ["script_qconfig", "script_qconfig_dict", "fuse_conv_bn_jit", "prepare_jit", "prepare_dynamic_jit",
           "convert_jit", "convert_dynamic_jit", "quantize_jit", "quantize_dynamic_jit"]


def _no_torchscript(name, instead):
    def function(*args, **kwargs):
        raise NotImplementedError(f"{name} quantizes TorchScript models, which ember does not have: use {instead} "
                                  "on the eager model")
    function.__name__ = name
    function.__doc__ = f"Unsupported (TorchScript): use ``{instead}``."
    return function


script_qconfig = _no_torchscript("script_qconfig", "the qconfig itself")
script_qconfig_dict = _no_torchscript("script_qconfig_dict", "the qconfig dict itself")
fuse_conv_bn_jit = _no_torchscript("fuse_conv_bn_jit", "ember.ao.quantization.fuse_modules")
prepare_jit = _no_torchscript("prepare_jit", "ember.ao.quantization.prepare")
prepare_dynamic_jit = _no_torchscript("prepare_dynamic_jit", "ember.ao.quantization.quantize_dynamic")
convert_jit = _no_torchscript("convert_jit", "ember.ao.quantization.convert")
convert_dynamic_jit = _no_torchscript("convert_dynamic_jit", "ember.ao.quantization.quantize_dynamic")
quantize_jit = _no_torchscript("quantize_jit", "ember.ao.quantization.quantize")
quantize_dynamic_jit = _no_torchscript("quantize_dynamic_jit", "ember.ao.quantization.quantize_dynamic")
