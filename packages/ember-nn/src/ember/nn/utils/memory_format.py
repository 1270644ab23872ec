"""PyTorch's ``convert_conv2d_weight_memory_format``/``convert_conv3d_weight_memory_format``: the weights of a
module's (transposed) convolutions copied into a memory format, e.g. ``ember.channels_last``."""
__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """``module``, with the weights of its Conv2d and ConvTranspose2d modules (at any depth) in ``memory_format``."""
    from ..modules.conv import Conv2d, ConvTranspose2d
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """``module``, with the weights of its Conv3d and ConvTranspose3d modules (at any depth) in ``memory_format``."""
    from ..modules.conv import Conv3d, ConvTranspose3d
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
