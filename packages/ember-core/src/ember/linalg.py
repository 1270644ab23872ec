"""``ember.linalg``: PyTorch's linear-algebra namespace. The ops live in the registry (``ember._ops``);
this module gives them their ``torch.linalg`` names."""
from ._ops.decompositions import LinAlgError  # noqa: F401 - part of the namespace
from ._registry import REGISTRY, write_out

# sentences PyTorch's linalg docs share; kept for code that reads them
common_notes = {
    "experimental_warning": "This function is \"experimental\" and it may change in a future release.",
    "sync_note": "When inputs are on a CUDA device, this function synchronizes that device with the CPU.",
    "sync_note_ex": "When the inputs are on a CUDA device, this function synchronizes only when "
                    ":attr:`check_errors`\\ `= True`.",
    "sync_note_has_ex": "When inputs are on a CUDA device, this function synchronizes that device with the CPU. "
                        "For a version of this function that does not synchronize, see :func:`{}`.",
}

# linalg names whose op is the torch-namespace one
_SHARED = {"matmul": "matmul"}

_NAMES = ("cholesky", "cholesky_ex", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
          "householder_product", "inv", "inv_ex", "ldl_factor", "ldl_factor_ex", "ldl_solve", "lstsq", "lu",
          "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power",
          "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
          "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm")

for _name in _NAMES:
    _op = REGISTRY.get(_SHARED.get(_name, "linalg_" + _name))
    if _op is not None:
        globals()[_name] = _op.fn
del _name, _op


def cond(A, p=None, *, out=None):
    """Condition number of ``A`` in the ``p`` norm: by default the ratio of its extreme singular values."""
    if p in (None, 2, -2):
        s = svdvals(A)  # noqa: F821 - installed above from the registry
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    elif p == "nuc":
        r = svdvals(A).sum(-1) * svdvals(inv(A)).sum(-1)  # noqa: F821
    else:
        r = matrix_norm(A, p) * matrix_norm(inv(A), p)  # noqa: F821
    return r if out is None else write_out(out, r._data)  # (as a registry op's out=)
