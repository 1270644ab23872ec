"""embedding_bag beyond the op table: gradients through the engine (max mode's arg-max rows, empty and padded bags,
per-sample weights to second order), sparse gradients of embedding and embedding_bag (with accumulation), and the
inputs on which torch's kernel crashes or reads past its arguments, which ember refuses."""
import numpy as np
import pytest
import torch

import ember

pytestmark = pytest.mark.autograd

RNG = np.random.default_rng(0)
W = RNG.standard_normal((7, 3))
IDX = np.array([0, 2, 5, 2, 2, 1, 4, 0, 6])
OFF = np.array([0, 3, 3, 6])


def _both(mode, padding_idx=None, psw=False, include_last_offset=False, offsets=OFF, scale=False, sparse=False):
    """(torch's, ember's) (output, weight grad, per-sample weights' grad) of one backward with the same gradient."""
    g = RNG.standard_normal((len(offsets) - include_last_offset, 3))
    p = RNG.standard_normal(len(IDX)) if psw else None
    out = []
    for lib in (torch, ember):
        w = lib.tensor(W, requires_grad=True)
        pw = lib.tensor(p, requires_grad=True) if psw else None
        r = lib.embedding_bag(w, lib.tensor(IDX), lib.tensor(offsets), scale, mode, sparse, pw, include_last_offset,
                              padding_idx)
        r[0].backward(lib.tensor(g))
        grad = w.grad.to_dense() if w.grad.is_sparse else w.grad
        out.append((r[0].detach().numpy(), grad.numpy(), pw.grad.numpy() if psw else None))
    return out


@pytest.fixture(params=["scipy", "no scipy"])
def products(request, monkeypatch):
    """Sums through SciPy's sparse products, and through the path for installs without SciPy."""
    import ember._sparse
    if request.param == "no scipy":
        monkeypatch.setattr(ember._sparse, "_scipy_sparse", [None])


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_gradients_match_torch(mode, padding_idx, products):
    t, e = _both(mode, padding_idx)
    np.testing.assert_allclose(e[0], t[0], rtol=1e-12)
    np.testing.assert_allclose(e[1], t[1], rtol=1e-12, atol=1e-15)


def test_max_mode_sends_each_column_to_its_first_maximum():
    w = ember.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], requires_grad=True)
    out, _, _, arg = ember.embedding_bag(w, ember.tensor([1, 0, 2]), ember.tensor([0, 3]), False, 2)
    assert arg.tolist() == [[1, 2], [0, 0]]  # ties: the first position's row; the empty bag: 0
    out.backward(ember.tensor([[1.0, 10.0], [100.0, 100.0]]))
    assert w.grad.tolist() == [[0.0, 0.0], [1.0, 0.0], [0.0, 10.0]]  # nothing from the empty bag


@pytest.mark.parametrize("padding_idx", [None, 7])
def test_large_inputs_match_torch(padding_idx):
    """Many bags of every length (empty ones, ones longer than max mode's blocks, ones of padding only)."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((50, 6)).astype(np.float32)
    w[3, 2] = w[4, 2]  # a tie
    idx = rng.integers(0, 50, 24000)
    idx[100:120] = 7
    off = np.unique(np.r_[0, rng.integers(0, 24000, 200), 100, 120, 5000, 22000])
    off = np.sort(np.r_[off, 120, 120])  # (empty bags)
    g = rng.standard_normal((len(off), 6)).astype(np.float32)
    for mode in range(3):
        res = []
        for lib in (torch, ember):
            wt = lib.tensor(w, requires_grad=True)
            r = lib.embedding_bag(wt, lib.tensor(idx), lib.tensor(off), False, mode, False, None, False, padding_idx)
            r[0].backward(lib.tensor(g))
            res.append([x.detach().numpy() for x in r] + [wt.grad.numpy()])
        np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(res[1][4], res[0][4], rtol=1e-4, atol=1e-4)
        for k in (1, 2, 3):
            np.testing.assert_array_equal(res[1][k], res[0][k])


@pytest.mark.parametrize("padding_idx", [None, 5])
def test_per_sample_weights_gradients(padding_idx, products):
    t, e = _both(0, padding_idx, psw=True)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_second_order_gradients():
    w = ember.tensor(W, requires_grad=True)
    p = ember.tensor(RNG.standard_normal(len(IDX)), requires_grad=True)
    for mode in range(3):
        assert ember.autograd.gradcheck(lambda w, mode=mode: ember.embedding_bag(
            w, ember.tensor(IDX), ember.tensor(OFF), False, mode)[0], (w,))
    assert ember.autograd.gradgradcheck(lambda w, p: ember.embedding_bag(
        w, ember.tensor(IDX), ember.tensor(OFF), False, 0, False, p)[0], (w, p))


def test_include_last_offset_ends_the_last_bag():
    """CSR offsets: the last one ends the last bag (torch's float32 sum kernel agrees without grad; its other paths
    read on to the input's end when the last offset says otherwise)."""
    off = [0, 3, 3, 7]
    t = torch.embedding_bag(torch.tensor(W, dtype=torch.float32), torch.tensor(IDX), torch.tensor(off), False, 0,
                            False, None, True)[0]
    w = ember.tensor(W, requires_grad=True)
    e = ember.embedding_bag(w.float(), ember.tensor(IDX), ember.tensor(off), False, 0, False, None, True)[0]
    np.testing.assert_allclose(e.detach().numpy(), t.numpy(), rtol=1e-6)
    e.sum().backward()
    assert w.grad.sum(1).tolist() == [3.0 * n for n in np.bincount(IDX[:7], minlength=7)]
    out, _, sizes, _ = ember.embedding_bag(ember.tensor(W), ember.tensor(IDX), ember.tensor(off), False, 1, False,
                                           None, True)
    np.testing.assert_allclose(out.numpy(), [W[IDX[:3]].mean(0), np.zeros(3), W[IDX[3:7]].mean(0)], rtol=1e-12)
    assert sizes.tolist() == [3, 0, 4]


def test_scale_grad_by_freq_divides_by_each_rows_count():
    """The gradient reaching a row is divided by how often that row occurs in the input. (torch's CPU backward
    divides by the count of another row unless all counts agree; the op table compares such inputs.)"""
    w = ember.tensor(W, requires_grad=True)
    g = RNG.standard_normal((4, 3))
    ember.embedding_bag(w, ember.tensor(IDX), ember.tensor(OFF), True, 0)[0].backward(ember.tensor(g))
    bag = np.searchsorted(OFF, np.arange(len(IDX)), side="right") - 1
    expected = np.zeros_like(W)
    np.add.at(expected, IDX, g[bag] / np.bincount(IDX)[IDX][:, None])
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_sparse_gradients_match_torch(mode, padding_idx):
    t, e = _both(mode, padding_idx, sparse=True)
    np.testing.assert_allclose(e[1], t[1], rtol=1e-12, atol=1e-15)
    w = ember.tensor(W, requires_grad=True)
    ember.embedding_bag(w, ember.tensor(IDX), ember.tensor(OFF), False, mode, True, None, False,
                        padding_idx)[0].sum().backward()
    assert w.grad.is_sparse and w.grad.layout is ember.sparse_coo and w.grad.shape == w.shape
    kept = IDX[IDX != padding_idx] if padding_idx is not None else IDX
    assert sorted(w.grad._indices()[0].tolist()) == sorted(kept.tolist())  # one entry per position, uncoalesced


@pytest.mark.parametrize("op", ["embedding", "embedding_bag"])
def test_sparse_gradients_refuse_scaling_by_frequency(op):
    for lib in (torch, ember):
        w, idx = lib.tensor(W, requires_grad=True), lib.tensor(IDX)
        out = lib.embedding(w, idx, -1, True, True) if op == "embedding" else lib.embedding_bag(
            w, idx, lib.tensor(OFF), True, 0, True)[0]
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
            out.sum().backward()


@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_sparse_embedding_gradients_accumulate(padding_idx):
    idx = np.array([[0, 3, 3], [5, 1, 3]])
    grads = []
    for lib in (torch, ember):
        w = lib.tensor(W, requires_grad=True)
        for k in range(2):
            (lib.embedding(w, lib.tensor(idx), padding_idx, False, True) * (k + 1)).sum().backward()
        assert w.grad.is_sparse
        grads.append(w.grad.to_dense().numpy())
        # a table used sparsely and densely gets a dense gradient
        (lib.embedding(w, lib.tensor(idx), padding_idx, False, True).sum() + w.sum()).backward()
        assert not w.grad.is_sparse
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[2], grads[0], rtol=1e-12)
    np.testing.assert_allclose(grads[3], grads[1], rtol=1e-12)


@pytest.mark.parametrize("offsets,message", [([0, 4, 2], "non-decreasing"), ([], None)])
def test_offsets_torch_reads_past(offsets, message):
    w, idx = ember.tensor(W), ember.tensor(IDX)
    if message is None:  # no bags: an empty result (torch's mean and max kernels crash)
        for mode in range(3):
            out = ember.embedding_bag(w, idx, ember.tensor(offsets, dtype=ember.int64), False, mode)
            assert out[0].shape == (0, 3) and out[1].tolist() == [-1] * len(IDX)
        return
    with pytest.raises(RuntimeError, match=message):
        ember.embedding_bag(w, idx, ember.tensor(offsets))


def test_two_dimensional_indices_refused():
    with pytest.raises(RuntimeError, match="1D"):
        ember.embedding_bag(ember.tensor(W), ember.tensor([[0, 1], [2, 3]]), ember.tensor([0]))
