"""Tensor printing as PyTorch prints (placeholder until the full formatter lands)."""
import numpy as np


def tensor_repr(t):
    return f"tensor({np.array2string(t._host(), separator=', ')})"


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    pass
