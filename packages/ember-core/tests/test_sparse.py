"""Sparse COO and CSR tensors against PyTorch 2.13: values, dtypes, shapes, layouts, reprs, errors, gradients and
checkpoints."""
import copy
import io
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember import _sparse

pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")  # torch's beta and invariant-check notices

I = [[0, 1, 1, 0], [2, 0, 2, 2]]  # a duplicate at (0, 2)
V = [3.0, 4.0, 5.0, 1.0]


def both(fn):
    """``fn`` applied to ember and to torch."""
    return fn(ember), fn(torch)


def same(e, t, nnz=True):
    """ember's result is torch's: layout, dtype, shape, values (compared densely) and, for sparse ones, nnz."""
    if isinstance(t, torch.Tensor):
        assert str(e.layout) == str(t.layout).replace("torch.", "ember."), (e.layout, t.layout)
        assert str(e.dtype) == str(t.dtype).replace("torch.", "ember."), (e.dtype, t.dtype)
        assert tuple(e.shape) == tuple(t.shape)
        if t.layout != torch.strided:
            if nnz:
                assert e._nnz() == t._nnz()
            e, t = e.to_dense(), t.to_dense()
        np.testing.assert_allclose(np.asarray(e.detach()), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        assert e == t


def coo(lib, indices=I, values=V, size=(2, 3), **kwargs):
    return lib.sparse_coo_tensor(lib.tensor(indices), lib.tensor(values), size, **kwargs)


def csr(lib):
    return coo(lib).coalesce().to_sparse_csr()


def raises_like(fn, match=None):
    """ember raises the exception type torch raises (and, given ``match``, a message containing it)."""
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(type(te.value)) as ee:
        fn(ember)
    if match:
        assert match in str(te.value) and match in str(ee.value), (str(te.value), str(ee.value))


# ---- construction ------------------------------------------------------------------------------------------
CONSTRUCT = {
    "uncoalesced": lambda m: coo(m),
    "coalesced_flag": lambda m: coo(m, is_coalesced=True),
    "inferred_size": lambda m: m.sparse_coo_tensor(m.tensor(I), m.tensor(V)),
    "lists": lambda m: m.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], [2, 2]),
    "int_values": lambda m: m.sparse_coo_tensor(I, [1, 2, 3, 4]),
    "dtype_arg": lambda m: m.sparse_coo_tensor(I, [1, 2, 3, 4], dtype=m.float64),
    "int32_indices": lambda m: m.sparse_coo_tensor(m.tensor(I, dtype=m.int32), m.tensor(V), (2, 3)),
    "float_indices": lambda m: m.sparse_coo_tensor(m.tensor(I).float(), m.tensor(V), (2, 3)),
    "hybrid": lambda m: m.sparse_coo_tensor(m.tensor(I), m.ones(4, 2), (2, 3, 2)),
    "empty": lambda m: m.sparse_coo_tensor(m.zeros(2, 0, dtype=m.int64), m.zeros(0), (2, 3)),
    "empty_inferred": lambda m: m.sparse_coo_tensor(m.zeros(2, 0, dtype=m.int64), m.zeros(0)),
    "one_entry": lambda m: m.sparse_coo_tensor([[1], [2]], [7.0], (2, 3)),
    "legacy": lambda m: m.sparse.FloatTensor(m.tensor(I), m.tensor(V), m.Size([2, 3])),
    "csr": lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 3]), m.tensor([2, 0, 2]), m.tensor([1.0, 2.0, 3.0]), (2, 3)),
    "csr_inferred": lambda m: m.sparse_csr_tensor([0, 1, 3], [2, 0, 2], [1.0, 2.0, 3.0]),
    "csr_int32": lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([2, 0, 2], dtype=m.int32),
                                               m.tensor([1.0, 2.0, 3.0]), (2, 3)),
}


@pytest.mark.parametrize("case", CONSTRUCT)
def test_construction_matches_torch(case):
    e, t = both(CONSTRUCT[case])
    same(e, t)
    assert isinstance(e, ember.Tensor)
    assert (e.is_sparse, e.is_sparse_csr) == (t.is_sparse, t.is_sparse_csr)
    assert (e.sparse_dim(), e.dense_dim(), e._nnz(), e.numel(), e.dim()) == \
        (t.sparse_dim(), t.dense_dim(), t._nnz(), t.numel(), t.dim())
    assert e.size() == ember.Size(t.size()) and e.device == ember.device("cpu")
    if t.layout == torch.sparse_coo:
        assert e.is_coalesced() == t.is_coalesced()
        assert e._indices().tolist() == t._indices().tolist() and e._indices().dtype == ember.int64
        assert e._values().tolist() == t._values().tolist()
    else:
        for name in ("crow_indices", "col_indices", "values"):
            a, b = getattr(e, name)(), getattr(t, name)()
            assert a.tolist() == b.tolist() and str(a.dtype)[6:] == str(b.dtype)[6:]


ERRORS = {
    "indices_1d": (lambda m: m.sparse_coo_tensor(m.tensor([0, 1]), m.ones(2), (2, 3)), "indices must be sparse_dim"),
    "nnz_mismatch": (lambda m: m.sparse_coo_tensor(m.tensor(I), m.ones(3), (2, 3)), "must have same nnz"),
    "size_rank": (lambda m: m.sparse_coo_tensor(m.tensor(I), m.tensor(V), (2,)), "len(size) == sparse_dim"),
    "out_of_bounds": (lambda m: coo(m, size=(1, 3), check_invariants=True), "size is inconsistent with indices"),
    "negative": (lambda m: m.sparse_coo_tensor([[-1], [0]], [1.0], (2, 3), check_invariants=True),
                 "found negative index -1 for dim 0"),
    "int_requires_grad": (lambda m: m.sparse_coo_tensor(I, [1, 2, 3, 4], requires_grad=True), None),
    "csr_first": (lambda m: m.sparse_csr_tensor([1, 1, 3], [2, 0, 2], [1.0, 2.0, 3.0], (2, 3), check_invariants=True),
                  "`crow_indices[..., 0] == 0` is not satisfied."),
    "csr_last": (lambda m: m.sparse_csr_tensor([0, 1, 2], [2, 0, 2], [1.0, 2.0, 3.0], (2, 3), check_invariants=True),
                 "`crow_indices[..., -1] == nnz` is not satisfied."),
    "csr_col": (lambda m: m.sparse_csr_tensor([0, 1, 3], [2, 0, 5], [1.0, 2.0, 3.0], (2, 3), check_invariants=True),
                "`0 <= col_indices < ncols` is not satisfied."),
    "csr_unsorted": (lambda m: m.sparse_csr_tensor([0, 1, 3], [2, 2, 0], [1.0, 2.0, 3.0], (2, 3),
                                                   check_invariants=True), "are sorted and distinct"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_construction_errors_match_torch(case):
    if case == "int_requires_grad" and ember._extensions.hooks.get("set_requires_grad") is None:
        pytest.skip("requires_grad needs ember-autograd")
    fn, match = ERRORS[case]
    raises_like(fn, match)


def test_invariant_checks_follow_the_global_switch():
    with ember.sparse.check_sparse_tensor_invariants():
        assert ember.sparse.check_sparse_tensor_invariants.is_enabled()
        with pytest.raises(RuntimeError, match="size is inconsistent"):
            coo(ember, size=(1, 3))
    assert not ember.sparse.check_sparse_tensor_invariants.is_enabled()
    coo(ember, size=(1, 3))  # unchecked, as PyTorch's default


# ---- metadata, repr, refusals ---------------------------------------------------------------------------------
def test_layouts_and_dense_metadata():
    assert (repr(ember.strided), repr(ember.sparse_coo), repr(ember.sparse_csr)) == \
        ("ember.strided", "ember.sparse_coo", "ember.sparse_csr")
    assert isinstance(ember.sparse_coo, ember.layout) and ember.ones(2).layout is ember.strided
    d, t = ember.ones(2, 3), torch.ones(2, 3)
    assert (d.is_sparse, d.is_sparse_csr, d.sparse_dim(), d.dense_dim()) == \
        (t.is_sparse, t.is_sparse_csr, t.sparse_dim(), t.dense_dim())
    assert d.to_dense() is d
    assert pickle.loads(pickle.dumps(ember.sparse_csr)) is ember.sparse_csr


REPRS = {
    "coo": lambda m: coo(m),
    "coalesced": lambda m: coo(m).coalesce(),
    "float64": lambda m: coo(m, dtype=m.float64),
    "requires_grad": lambda m: coo(m, dtype=m.float64).requires_grad_(),
    "empty": lambda m: m.sparse_coo_tensor(m.zeros(1, 0, dtype=m.int64), m.zeros(0), (5,)),
    "hybrid": lambda m: m.sparse_coo_tensor(m.tensor(I), m.arange(8.0).reshape(4, 2), (2, 3, 2)),
    "ints": lambda m: m.sparse_coo_tensor(I, [1, 2, 3, 4]),
    "csr": lambda m: csr(m),
    "csr_wide": lambda m: m.sparse_csr_tensor([0, 10], list(range(10)), [1.5 * i for i in range(10)], (1, 10)),
}


@pytest.mark.parametrize("case", REPRS)
def test_repr_matches_torch(case):
    if case == "requires_grad" and ember._extensions.hooks.get("set_requires_grad") is None:
        pytest.skip("requires_grad needs ember-autograd")
    e, t = both(REPRS[case])
    assert repr(e) == repr(t).replace("torch.", "ember.")


def test_coalesced_accessors_and_layout_refusals():
    raises_like(lambda m: coo(m).indices(), "Cannot get indices on an uncoalesced tensor")
    raises_like(lambda m: coo(m).values(), "Cannot get values on an uncoalesced tensor")
    raises_like(lambda m: coo(m).crow_indices(), "crow_indices expected sparse row compressed tensor layout")
    raises_like(lambda m: csr(m).indices(), "indices expected sparse coordinate tensor layout but got SparseCsr")
    raises_like(lambda m: csr(m).coalesce(), "coalesce expected sparse coordinate tensor layout")
    raises_like(lambda m: m.ones(2).indices(), "but got Strided")
    raises_like(lambda m: m.ones(2).values(), "values expected sparse tensor layout but got Strided")
    assert csr(ember).values().tolist() == csr(torch).values().tolist()
    raises_like(lambda m: coo(m).numpy(), "can't convert Sparse layout tensor to numpy")
    raises_like(lambda m: csr(m).numpy(), "can't convert SparseCsr layout tensor to numpy")
    raises_like(lambda m: coo(m).data_ptr(), "doesn't have storage")
    raises_like(lambda m: csr(m).stride(), "Sparse CSR tensors do not have strides")
    raises_like(lambda m: coo(m).item(), "cannot be converted to Scalar")
    e, t = both(lambda m: coo(m).coalesce())
    assert e.indices().tolist() == t.indices().tolist() and e.values().tolist() == t.values().tolist()
    assert e.stride() == t.stride() and e.is_contiguous() == t.is_contiguous()


@pytest.mark.parametrize("name", ["exp", "sigmoid", "mean", "max", "softmax_method", "cumsum", "eq"])
def test_unsupported_ops_name_the_op_and_layout(name):
    call = {"softmax_method": lambda s: s.softmax(1), "cumsum": lambda s: s.cumsum(0), "eq": lambda s: s == s}.get(
        name, lambda s: getattr(s, name)())
    with pytest.raises(NotImplementedError) as t:
        call(coo(torch))
    with pytest.raises(NotImplementedError) as e:
        call(coo(ember))
    assert "SparseCPU" in str(e.value) and "sparse_coo" in str(e.value)
    if name in ("exp", "sigmoid"):
        assert f"'aten::{name}'" in str(e.value) and f"'aten::{name}'" in str(t.value)


def test_unsupported_csr_and_out_forms_refuse():
    with pytest.raises(NotImplementedError, match="SparseCsrCPU"):
        ember.exp(csr(ember))
    with pytest.raises(NotImplementedError, match="sum.out"):
        ember.sum(coo(ember), out=ember.zeros(()))
    with pytest.raises(NotImplementedError, match="sparse_csr"):
        csr(ember).t()


# ---- conversions -------------------------------------------------------------------------------------------
DENSE = np.array([[0.0, 1.5, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.5, 0.0]])

CONVERT = {
    "to_sparse": lambda m: m.tensor(DENSE).to_sparse(),
    "to_sparse_dim1": lambda m: m.tensor(DENSE).to_sparse(1),
    "to_sparse_3d": lambda m: m.tensor(DENSE.reshape(3, 2, 2)).to_sparse(),
    "to_sparse_coo": lambda m: m.tensor(DENSE).to_sparse_coo(),
    "to_sparse_csr": lambda m: m.tensor(DENSE).to_sparse_csr(),
    "to_sparse_layout": lambda m: m.tensor(DENSE).to_sparse(layout=m.sparse_csr),
    "coo_to_csr": lambda m: coo(m).to_sparse_csr(),
    "csr_to_coo": lambda m: csr(m).to_sparse_coo(),
    "csr_to_sparse": lambda m: csr(m).to_sparse(),
    "coo_to_sparse": lambda m: coo(m).to_sparse(),
    "to_dense": lambda m: coo(m).to_dense(),
    "csr_to_dense": lambda m: csr(m).to_dense(),
    "hybrid_to_dense": lambda m: m.sparse_coo_tensor(m.tensor(I), m.arange(8.0).reshape(4, 2), (2, 3, 2)).to_dense(),
    "to_float64": lambda m: coo(m).double(),
    "to_csr_float64": lambda m: csr(m).to(m.float64),
    "clone": lambda m: coo(m).clone(),
    "detach": lambda m: coo(m).detach(),
}


@pytest.mark.parametrize("case", CONVERT)
def test_conversions_match_torch(case):
    same(*both(CONVERT[case]))
    e, t = both(CONVERT[case])
    if t.layout == torch.sparse_coo:
        assert e.is_coalesced() == t.is_coalesced() and e._indices().tolist() == t._indices().tolist()


# ---- ops ---------------------------------------------------------------------------------------------------
D3 = np.arange(12.0, dtype=np.float32).reshape(3, 4)

OPS = {
    "t": lambda m: coo(m).t(),
    "transpose": lambda m: coo(m).transpose(0, 1),
    "T": lambda m: coo(m).T,
    "mul_scalar": lambda m: coo(m) * 2,
    "rmul_scalar": lambda m: 2 * coo(m),
    "mul_int": lambda m: coo(m).mul(2),
    "mul_zero_dim": lambda m: coo(m) * m.tensor(3.0),
    "mul_sparse": lambda m: coo(m) * coo(m, [[0, 1], [2, 1]], [2.0, 5.0]),
    "mul_dense": lambda m: coo(m) * m.arange(6.0).reshape(2, 3),
    "csr_mul": lambda m: csr(m) * 2,
    "div": lambda m: coo(m) / 2,
    "neg": lambda m: -coo(m),
    "sin": lambda m: coo(m).sin(),
    "abs_fn": lambda m: m.abs(-coo(m)),
    "csr_sin": lambda m: csr(m).sin(),
    "add": lambda m: coo(m) + coo(m, [[1], [1]], [7.0]),
    "add_coalesced": lambda m: coo(m).coalesce() + coo(m, [[1], [1]], [7.0]).coalesce(),
    "add_alpha": lambda m: m.add(coo(m), coo(m), alpha=2),
    "add_dtypes": lambda m: coo(m) + coo(m).double(),
    "sub": lambda m: coo(m).coalesce() - coo(m, [[1], [1]], [7.0]).coalesce(),
    "csr_add": lambda m: csr(m) + csr(m),
    "dense_add": lambda m: m.ones(2, 3) + coo(m),
    "dense_sub": lambda m: m.sub(m.ones(2, 3), coo(m), alpha=2),
    "sum": lambda m: coo(m).sum(),
    "sum_dtype": lambda m: coo(m).sum(dtype=m.float64),
    "sum_dim": lambda m: coo(m).sum(0),
    "sum_keepdim": lambda m: coo(m).sum(1, keepdim=True),
    "sum_all_dims": lambda m: coo(m).sum((0, 1)),
    "csr_sum": lambda m: csr(m).sum(),
    "sparse_sum": lambda m: m.sparse.sum(coo(m)),
    "sparse_sum_0": lambda m: m.sparse.sum(coo(m), 0),
    "sparse_sum_1": lambda m: m.sparse.sum(coo(m), 1),
    "sparse_sum_both": lambda m: m.sparse.sum(coo(m), (0, 1)),
    "sparse_sum_hybrid": lambda m: m.sparse.sum(m.sparse_coo_tensor(m.tensor(I), m.ones(4, 2), (2, 3, 2)), 2),
    "sparse_sum_hybrid_sparse": lambda m: m.sparse.sum(m.sparse_coo_tensor(m.tensor(I), m.ones(4, 2), (2, 3, 2)),
                                                       (0, 1)),
    "mm": lambda m: m.mm(coo(m), m.tensor(D3)),
    "matmul": lambda m: coo(m) @ m.tensor(D3),
    "matmul_vec": lambda m: coo(m) @ m.ones(3),
    "mv": lambda m: m.mv(coo(m), m.ones(3)),
    "spmm": lambda m: m.spmm(coo(m), m.tensor(D3)),
    "sparse_mm": lambda m: m.sparse.mm(coo(m), m.tensor(D3)),
    "sparse_mm_coalesced": lambda m: m.sparse.mm(coo(m).coalesce(), m.tensor(D3)),
    "csr_mm": lambda m: csr(m) @ m.tensor(D3),
    "csr_vec": lambda m: csr(m) @ m.ones(3),
    "csr_sparse_mm": lambda m: m.sparse.mm(csr(m), m.tensor(D3)),
    "dense_sparse": lambda m: m.mm(m.tensor(D3).T, coo(m).t()),
    "sparse_sparse": lambda m: m.sparse.mm(coo(m), coo(m).t()),
    "addmm": lambda m: m.addmm(m.ones(2, 4), coo(m), m.tensor(D3), beta=2, alpha=3),
    "sparse_addmm": lambda m: m.sparse.addmm(m.ones(2, 4), coo(m), m.tensor(D3), beta=2, alpha=3),
    "smm": lambda m: m.smm(coo(m), m.tensor(D3)),
    "hspmm": lambda m: m.hspmm(coo(m), m.tensor(D3)),
    "softmax": lambda m: m.sparse.softmax(coo(m), 1),
    "softmax_dim0": lambda m: m.sparse.softmax(coo(m), 0),
    "log_softmax": lambda m: m.sparse.log_softmax(coo(m), -1),
    "softmax_dense_dim": lambda m: m.sparse.softmax(m.sparse_coo_tensor(m.tensor(I), m.arange(8.0).reshape(4, 2),
                                                                        (2, 3, 2)), 2),
    "softmax_3d": lambda m: m.sparse.softmax(m.sparse_coo_tensor([[0, 0, 1, 0], [1, 1, 0, 0], [2, 0, 1, 1]],
                                                                 [1.0, 2.0, 3.0, 4.0], (2, 2, 3)), 1),
}


@pytest.mark.parametrize("case", OPS)
def test_ops_match_torch(case):
    e, t = both(OPS[case])
    # products and sums of sparse operands may keep different explicit entries than torch's; values must agree
    same(e, t, nnz=case not in ("mul_sparse", "sparse_sparse", "smm", "add", "sub"))
    if t.layout == torch.sparse_coo and case not in ("mul_sparse", "sparse_sparse", "smm"):
        assert e.is_coalesced() == t.is_coalesced()


def test_in_place_ops_write_the_sparse_tensor():
    e, t = both(lambda m: coo(m))
    for x in (e, t):
        x.mul_(3).add_(x)
    same(e, t)


OP_ERRORS = {
    "mm_size": (lambda m: m.mm(coo(m), m.ones(4, 3)), "addmm: Argument #3 (dense): Expected dim 0 size 3, got 4"),
    "sparse_mm_size": (lambda m: m.sparse.mm(coo(m), m.ones(4, 3)), "Expected dim 0 size 3, got 4"),
    "csr_mm_size": (lambda m: m.mm(csr(m), m.ones(4, 3)), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)"),
    "mm_dtype": (lambda m: m.mm(coo(m), m.ones(3, 4, dtype=m.float64)), "expected scalar type Float but found Double"),
    "dense_sparse_size": (lambda m: m.mm(m.ones(3, 4), coo(m)), "Expected dim 0 size 2, got 4"),
    "add_dense": (lambda m: coo(m) + m.ones(2, 3), "add(sparse, dense) is not supported"),
    "add_scalar": (lambda m: coo(m) + 1, "add(sparse, dense) is not supported"),
    "add_size": (lambda m: coo(m) + coo(m, [[1], [1]], [7.0], (3, 3)), "add: expected sizes of 'self' and 'other'"),
    "t_3d": (lambda m: m.sparse_coo_tensor(m.zeros(3, 1, dtype=m.int64), [1.0], (2, 2, 2)).t(),
             "t() expects a tensor with <= 2 sparse and 0 dense dimensions"),
    "transpose_dense": (lambda m: m.sparse_coo_tensor(m.zeros(1, 1, dtype=m.int64), [[1.0, 2.0]],
                                                      (2, 2)).transpose(0, 1), "transposed dimensions must be sparse"),
    "softmax_dense": (lambda m: m.sparse.softmax(m.ones(2, 2), 1), "_sparse_softmax"),
    "softmax_csr": (lambda m: m.sparse.softmax(csr(m), 1), "SparseCsrCPU"),
}


@pytest.mark.parametrize("case", OP_ERRORS)
def test_op_errors_match_torch(case):
    raises_like(*OP_ERRORS[case])


# ---- the product's kernels ------------------------------------------------------------------------------------
def _random(rng, n, m, nnz, dtype):
    idx = rng.integers(0, [[n], [m]], (2, nnz))
    return idx, rng.standard_normal(nnz).astype(dtype)


@pytest.mark.parametrize("scipy", [True, False], ids=["scipy", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16", "complex64"])
@pytest.mark.parametrize("coalesced", [True, False])
def test_product_kernels_match_torch(monkeypatch, scipy, dtype, coalesced):
    if not scipy:
        monkeypatch.setattr(_sparse, "_scipy_sparse", [None])
    elif _sparse._scipy() is None:
        pytest.skip("SciPy is not installed")
    rng = np.random.default_rng(0)
    idx, vals = _random(rng, 50, 40, 300, np.float64)
    dense = rng.standard_normal((40, 7))
    if dtype == "int64":
        vals, dense = np.round(vals * 3), np.round(dense * 3)
    if dtype == "complex64":
        vals, dense = vals + 1j * vals[::-1], dense - 0.5j * dense

    def product(m):
        dt = getattr(m, dtype)
        s = m.sparse_coo_tensor(m.tensor(idx), m.tensor(vals).to(dt), (50, 40))
        s = s.coalesce() if coalesced else s
        d = m.tensor(dense).to(dt)
        # (torch has no CSR product of integers or float16)
        return [s @ d, s @ d[:, 0]] + ([s.to_sparse_csr() @ d] if dtype not in ("int64", "float16") else [])
    for e, t in zip(*both(product)):
        assert e.dtype == getattr(ember, dtype) and tuple(e.shape) == tuple(t.shape)
        tol = 2e-2 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(np.asarray(e.to(ember.complex128)), t.to(torch.complex128).numpy(), rtol=tol,
                                   atol=tol)


def test_import_does_not_load_scipy():
    code = "import sys, ember; s = ember.ones(2, 2).to_sparse(); print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- gradients ---------------------------------------------------------------------------------------------
W = np.arange(8.0, dtype=np.float32).reshape(2, 4)
W6 = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def _leaf(m, layout="coo"):
    s = coo(m) if layout == "coo" else csr(m)
    return s.requires_grad_()


GRADS = {  # (function of (lib, sparse leaf, dense leaf) -> scalar, layout of the sparse leaf)
    "sparse_mm": (lambda m, s, d: (m.sparse.mm(s, d) * m.tensor(W)).sum(), "coo"),
    "mm": (lambda m, s, d: (m.mm(s, d) * m.tensor(W)).sum(), "coo"),
    "matmul": (lambda m, s, d: ((s @ d) * m.tensor(W)).sum(), "coo"),
    "spmm": (lambda m, s, d: (m.spmm(s, d) * m.tensor(W)).sum(), "coo"),
    "mv": (lambda m, s, d: (m.mv(s, d[:, 1]) * m.tensor(W)[:, 1]).sum(), "coo"),
    "addmm": (lambda m, s, d: (m.addmm(m.ones(2, 4), s, d) * m.tensor(W)).sum(), "coo"),
    "csr_matmul": (lambda m, s, d: ((s @ d) * m.tensor(W)).sum(), "csr"),
    "csr_sparse_mm": (lambda m, s, d: (m.sparse.mm(s, d) * m.tensor(W)).sum(), "csr"),
    "to_dense": (lambda m, s, d: (s.to_dense() * m.tensor(W6)).sum(), "coo"),
    "sum": (lambda m, s, d: s.sum(), "coo"),
    "sparse_sum_dim": (lambda m, s, d: m.sparse.sum(s, 1).to_dense().sum(), "coo"),
    "mul_add": (lambda m, s, d: (s * 2 + s).to_dense().sum(), "coo"),
    "t": (lambda m, s, d: (s.t().to_dense() * m.tensor(W6).T).sum(), "coo"),
    "softmax": (lambda m, s, d: (m.sparse.softmax(s, 1).to_dense() * m.tensor(W6)).sum(), "coo"),
    "log_softmax": (lambda m, s, d: (m.sparse.log_softmax(s, 0).to_dense() * m.tensor(W6)).sum(), "coo"),
    "coalesce": (lambda m, s, d: (s.coalesce().values() * m.tensor([1.0, 2.0, 3.0])).sum(), "coo"),
}


@needs_autograd
@pytest.mark.parametrize("case", GRADS)
def test_gradients_of_a_sparse_leaf_match_torch(case):
    fn, layout = GRADS[case]
    grads = []
    for m in (ember, torch):
        s, d = _leaf(m, layout), m.tensor(D3).requires_grad_()
        fn(m, s, d).backward()
        grads.append((s.grad, d.grad))
    (es, ed), (ts, td) = grads
    same(es, ts, nnz=False)
    if td is None:
        assert ed is None
    else:
        same(ed, td)


@needs_autograd
@pytest.mark.parametrize("op", ["sparse_mm", "matmul", "to_dense", "csr"])
def test_gradients_reach_values_that_require_grad(op):
    grads = []
    for m in (ember, torch):
        v = m.tensor(V).requires_grad_()
        s = m.sparse_coo_tensor(m.tensor(I), v, (2, 3))
        assert (s.is_leaf, s.requires_grad) == (False, True)
        assert s.grad_fn.name().startswith("SparseCooTensorWithDimsAndTensorsBackward")
        if op == "csr":
            v = m.tensor(V[:3]).requires_grad_()
            s = m.sparse_csr_tensor(m.tensor([0, 1, 3]), m.tensor([2, 0, 2]), v, (2, 3))
        out = s.to_dense() * m.tensor(W6) if op == "to_dense" else \
            (m.sparse.mm(s, m.tensor(D3)) if op == "sparse_mm" else s @ m.tensor(D3)) * m.tensor(W)
        out.sum().backward()
        grads.append(v.grad)
    same(*grads)


@needs_autograd
def test_gradient_accumulates_over_backward_calls_and_clears():
    s = _leaf(ember)
    for _ in range(2):
        (ember.sparse.mm(s, ember.tensor(D3)) * ember.tensor(W)).sum().backward()
    t = _leaf(torch)
    for _ in range(2):
        (torch.sparse.mm(t, torch.tensor(D3)) * torch.tensor(W)).sum().backward()
    same(s.grad, t.grad, nnz=False)
    s.grad = None
    assert s.grad is None
    ember.mm(s, ember.tensor(D3)).sum().backward()  # a dense gradient after a sparse one
    (ember.sparse.mm(s, ember.tensor(D3))).sum().backward()
    t.grad = None
    torch.mm(t, torch.tensor(D3)).sum().backward()
    torch.sparse.mm(t, torch.tensor(D3)).sum().backward()
    same(s.grad, t.grad)


@needs_autograd
def test_product_second_order_gradients():
    from ember.autograd import gradcheck, gradgradcheck
    rng = np.random.default_rng(1)
    idx, vals = _random(rng, 5, 4, 9, np.float64)
    rows, cols = ember.tensor(idx[0]), ember.tensor(idx[1])

    def f(v, d):
        return _sparse._sparse_mm.fn(v, d, rows, cols, 5)
    v = ember.tensor(vals).requires_grad_()
    d = ember.tensor(rng.standard_normal((4, 3))).requires_grad_()
    assert gradcheck(f, (v, d))
    assert gradgradcheck(f, (v, d))


@needs_autograd
def test_gcn_layer_trains_like_torch():
    """Two steps of a graph convolution with a sparse normalised adjacency matrix, written once for both."""
    rng = np.random.default_rng(0)
    n, f, h = 30, 8, 4
    edges = np.unique(rng.integers(0, n, (2, 90)), axis=1)
    edges = np.concatenate([edges, np.stack([np.arange(n)] * 2)], axis=1)
    deg = np.bincount(edges[0], minlength=n).astype(np.float64)
    weight = (1 / np.sqrt(deg[edges[0]] * deg[edges[1]])).astype(np.float32)
    x0 = rng.standard_normal((n, f)).astype(np.float32)
    w0 = rng.standard_normal((f, h)).astype(np.float32)

    def train(m):
        adj = m.sparse_coo_tensor(m.tensor(edges), m.tensor(weight), (n, n)).coalesce()
        x, w = m.tensor(x0), m.nn.Parameter(m.tensor(w0))
        opt = m.optim.SGD([w], lr=0.1)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = m.sparse.mm(adj, x @ w).relu().pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, w.detach()
    pytest.importorskip("ember.nn")
    (le, we), (lt, wt) = both(train)
    np.testing.assert_allclose(le, lt, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(we), wt.numpy(), rtol=1e-5, atol=1e-6)


# ---- checkpoints and copies --------------------------------------------------------------------------------
SAVED = {"coo": lambda m: coo(m), "coalesced": lambda m: coo(m).coalesce(), "csr": lambda m: csr(m),
         "hybrid": lambda m: m.sparse_coo_tensor(m.tensor(I), m.arange(8.0).reshape(4, 2), (2, 3, 2))}


@pytest.mark.parametrize("case", SAVED)
@pytest.mark.parametrize("direction", ["ember_to_torch", "torch_to_ember"])
def test_checkpoints_round_trip_with_torch(case, direction):
    e, t = both(SAVED[case])
    buf = io.BytesIO()
    if direction == "ember_to_torch":
        ember.save({"adj": e}, buf)
        buf.seek(0)
        loaded = torch.load(buf)["adj"]
        same(e, loaded)
        assert loaded.layout == t.layout
    else:
        torch.save({"adj": t}, buf)
        buf.seek(0)
        loaded = ember.load(buf)["adj"]
        same(loaded, t)
    if t.layout == torch.sparse_coo:
        assert (loaded.is_coalesced(), loaded._indices().tolist()) == (t.is_coalesced(), t._indices().tolist())


def test_pickle_and_deepcopy_keep_the_sparse_tensor():
    s = coo(ember)
    for c in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert c.layout is ember.sparse_coo and not c.is_coalesced()
        assert c._indices().tolist() == s._indices().tolist() and c._values().tolist() == s._values().tolist()
        assert c._values()._data is not s._values()._data
