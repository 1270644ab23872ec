"""``ember.sparse``: products, sums and softmaxes of sparse tensors, the invariant-check switch, and the legacy
typed constructors (``ember.sparse.FloatTensor(indices, values, size)``)."""
from .. import _dtype as D
from .._sparse import check_sparse_tensor_invariants, sparse_coo_tensor
from .._sparse import sparse_addmm as addmm
from .._sparse import sparse_log_softmax as log_softmax
from .._sparse import sparse_mm as mm
from .._sparse import sparse_softmax as softmax
from .._sparse import sparse_sum as sum


def _legacy(name, dtype):
    def construct(indices, values, size=None):
        return sparse_coo_tensor(indices, values, size, dtype=dtype)
    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"A sparse COO tensor of {dtype} values (PyTorch's legacy ``torch.sparse.{name}``)."
    return construct


FloatTensor, DoubleTensor, LongTensor = (_legacy(n, d) for n, d in (("FloatTensor", D.float32),
                                                                   ("DoubleTensor", D.float64),
                                                                   ("LongTensor", D.int64)))

__all__ = ["DoubleTensor", "FloatTensor", "LongTensor", "addmm", "check_sparse_tensor_invariants", "log_softmax",
           "mm", "softmax", "sum"]
