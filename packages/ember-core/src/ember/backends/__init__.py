"""``ember.backends``: switches for the libraries ember's CUDA path calls (cuBLAS, cuDNN); MPS, oneDNN and OpenMP, which
ember does not use."""
from . import cuda, cudnn, mkldnn, mps, openmp, quantized  # noqa: F401
