"""``ember.backends``: switches for the libraries ember's CUDA path calls (cuBLAS, cuDNN); MPS, which ember lacks."""
from . import cuda, cudnn, mps  # noqa: F401
