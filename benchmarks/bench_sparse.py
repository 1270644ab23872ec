"""Sparse matrix products against PyTorch: a 10k x 10k matrix with 50k nonzeros times a dense 10k x 64 matrix,
as a coalesced COO tensor (torch.sparse.mm) and as CSR (``@``), and the training-step shape of a GCN layer."""
import numpy as np
from _harness import benchmark, best

N, NNZ, K = 10_000, 50_000, 64


def _operands(lib, layout, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, N, (2, NNZ))
    s = lib.sparse_coo_tensor(lib.tensor(idx), lib.tensor(rng.standard_normal(NNZ).astype(np.float32)),
                              (N, N)).coalesce()
    d = lib.tensor(rng.standard_normal((N, K)).astype(np.float32))
    return (s.to_sparse_csr() if layout == "csr" else s), d


@benchmark("sparse COO (10k x 10k, 50k nnz) @ dense 10k x 64: sparse.mm", goal=2.0)
def coo_mm():
    import torch

    import ember
    return {name: best("lib.sparse.mm(s, d)", lib=lib, **dict(zip("sd", _operands(lib, "coo"))))
            for name, lib in (("ember", ember), ("torch", torch))}


@benchmark("sparse CSR (10k x 10k, 50k nnz) @ dense 10k x 64", goal=2.0)
def csr_mm():
    import torch

    import ember
    return {name: best("s @ d", **dict(zip("sd", _operands(lib, "csr"))))
            for name, lib in (("ember", ember), ("torch", torch))}


@benchmark("GCN layer step: sparse.mm(adj, x @ w) forward and backward (10k nodes, 50k edges, 64 -> 64)", goal=2.0)
def gcn_step():
    import torch

    import ember

    def step_of(lib):
        adj, x = _operands(lib, "coo")
        w = lib.randn(K, K, requires_grad=True)

        def step():
            w.grad = None
            lib.sparse.mm(adj, x @ w).relu().sum().backward()
        return step
    return {name: best("step()", step=step_of(lib)) for name, lib in (("ember", ember), ("torch", torch))}
