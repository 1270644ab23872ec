"""PyTorch's ``convert_conv2d_weight_memory_format``/``convert_conv3d_weight_memory_format``. ember tensors carry
no memory-format tag (there is no ``ember.channels_last``; kernels see the array as its strides lay it out), so
these walk the module as PyTorch's do and leave the convolution weights as they are: values and results are the
same in either layout."""
__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def convert_conv2d_weight_memory_format(module, memory_format):
    """Returns ``module``; the 2-d convolution weights keep their layout (see the module docstring)."""
    return module


def convert_conv3d_weight_memory_format(module, memory_format):
    """Returns ``module``; the 3-d convolution weights keep their layout (see the module docstring)."""
    return module
