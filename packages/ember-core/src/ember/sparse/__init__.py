"""``ember.sparse``: products, sums and softmaxes of sparse tensors, and the invariant-check switch."""
from .._sparse import check_sparse_tensor_invariants
from .._sparse import sparse_addmm as addmm
from .._sparse import sparse_log_softmax as log_softmax
from .._sparse import sparse_mm as mm
from .._sparse import sparse_softmax as softmax
from .._sparse import sparse_sum as sum

__all__ = ["addmm", "check_sparse_tensor_invariants", "log_softmax", "mm", "softmax", "sum"]
