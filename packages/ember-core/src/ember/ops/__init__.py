"""``ember.ops``: the operator namespaces PyTorch keeps under ``torch.ops`` that ember offers: ``ember.ops.quantized``
(PyTorch's quantized kernels: ``add(qa, qb, scale, zero_point)``, ``mul``, ``cat``, ``relu6``, ...)."""
from . import quantized  # noqa: F401
