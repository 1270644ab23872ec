"""``ember.backends``: switches for the libraries ember's CUDA path calls (cuBLAS, cuDNN)."""
from . import cuda, cudnn  # noqa: F401
