"""EmbeddingBag and nn.functional.embedding_bag against torch (modes, offsets, 2-D inputs, per-sample weights,
padding, from_pretrained, errors), sparse embedding gradients, and SparseAdam's trajectories, state and errors."""
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
import ember.nn.functional as F
import ember.optim as optim

RNG = np.random.default_rng(3)
TABLE = RNG.standard_normal((9, 4)).astype(np.float32)


def _same(e, t, tol=1e-6):
    assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


CALLS = [
    ([[1, 2, 4], [4, 3, 8]], None, dict(mode="sum")),
    ([[1, 2, 4], [4, 3, 8]], None, dict(mode="max")),
    ([1, 2, 4, 5, 4, 3, 2, 8], [0, 4, 4], dict()),
    ([1, 2, 4, 5, 4, 3, 2, 8], [0, 4, 4, 8], dict(mode="sum", include_last_offset=True)),
    ([1, 2, 4, 5, 4, 3, 2, 8], [0, 3, 5], dict(mode="max", padding_idx=4)),
    ([1, 2, 4, 5, 4, 3, 2, 8], [0, 3, 5], dict(mode="mean", padding_idx=-5)),
    ([[1, 2, 4], [4, 3, 8]], None, dict(mode="sum", include_last_offset=True)),  # (2-D input: ignored)
    ([1, 2, 4, 5], [0, 2], dict(mode="sum", scale_grad_by_freq=True)),
]


@pytest.mark.parametrize("input,offsets,kwargs", CALLS)
def test_functional_matches_torch(input, offsets, kwargs):
    out, grads = [], []
    for lib, fn in ((torch, torch.nn.functional), (ember, F)):
        w = lib.tensor(TABLE, requires_grad=True)
        r = fn.embedding_bag(lib.tensor(input), w, None if offsets is None else lib.tensor(offsets), **kwargs)
        (r * lib.arange(r.numel(), dtype=r.dtype).reshape(r.shape)).sum().backward()
        out.append(r)
        grads.append(w.grad)
    _same(out[1], out[0])
    _same(grads[1], grads[0])


def test_per_sample_weights_match_torch():
    res = []
    for lib, fn in ((torch, torch.nn.functional), (ember, F)):
        w = lib.tensor(TABLE, requires_grad=True)
        psw = lib.tensor(RNG.random((2, 3)).astype(np.float32) if lib is torch else res[0][2].detach().numpy(),
                         requires_grad=True)
        r = fn.embedding_bag(lib.tensor([[1, 2, 4], [4, 3, 8]]), w, mode="sum", per_sample_weights=psw)
        r.pow(2).sum().backward()
        res.append((r, w.grad, psw, psw.grad))
    for e, t in zip(res[1], res[0]):
        _same(e, t, 1e-5)


@pytest.mark.parametrize("args,kwargs", [
    (([[1, 2]], [0]), {}),                                             # offsets with a 2-D input
    (([1, 2], None), {}),                                              # no offsets for a 1-D input
    (([1, 2], [[0]]), {}),
    (([[[1]]], None), {}),
    (([1, 2], [0]), {"mode": "median"}),
    (([1, 2], [0]), {"mode": "max", "scale_grad_by_freq": True}),
    (([1, 2], [0]), {"mode": "max", "sparse": True}),
    (([1, 2], [0]), {"mode": "mean", "per_sample_weights": [1.0, 2.0]}),
    (([1, 2], [0]), {"per_sample_weights": [1.0, 2.0, 3.0]}),
    (([1, 2], [0]), {"padding_idx": 9}),
    (([1, 9], [0]), {}),
])
def test_functional_errors_match_torch(args, kwargs):
    def call(lib, fn):
        kw = {k: lib.tensor(v) if isinstance(v, list) else v for k, v in kwargs.items()}
        return fn.embedding_bag(lib.tensor(args[0]), lib.tensor(TABLE), None if args[1] is None else
                                lib.tensor(args[1]), **kw)
    with pytest.raises(Exception) as expected:
        call(torch, torch.nn.functional)
    with pytest.raises(expected.type):
        call(ember, F)


def test_swapped_arguments_warn_and_work():
    with pytest.warns(UserWarning, match="Argument order"):
        r = F.embedding_bag(ember.tensor(TABLE), ember.tensor([[1, 2]]))
    _same(r, torch.nn.functional.embedding_bag(torch.tensor([[1, 2]]), torch.tensor(TABLE)))


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", padding_idx=2), dict(mode="sum", max_norm=1.0),
                                    dict(mode="sum", include_last_offset=True)])
def test_module_matches_torch(kwargs):
    torch.manual_seed(0)
    t = torch.nn.EmbeddingBag(9, 4, **kwargs)
    e = nn.EmbeddingBag(9, 4, **kwargs)
    assert repr(e) == repr(t)
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    idx, off = [1, 2, 4, 5, 4, 3, 2, 8], [0, 4, 4, 8] if kwargs.get("include_last_offset") else [0, 4, 4]
    _same(e(ember.tensor(idx), ember.tensor(off)), t(torch.tensor(idx), torch.tensor(off)))
    _same(e.weight, t.weight)  # (max_norm renormalised the looked-up rows in both)


def test_from_pretrained():
    for freeze in (True, False):
        t = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(TABLE), freeze=freeze, mode="max", padding_idx=1)
        e = nn.EmbeddingBag.from_pretrained(ember.tensor(TABLE), freeze=freeze, mode="max", padding_idx=1)
        assert e.weight.requires_grad == t.weight.requires_grad == (not freeze)
        _same(e(ember.tensor([[1, 2], [0, 1]])), t(torch.tensor([[1, 2], [0, 1]])))
    with pytest.raises(AssertionError):
        nn.EmbeddingBag.from_pretrained(ember.tensor(TABLE[0]))


def _sparse_model(lib, table):
    mod = lib.nn
    emb = mod.EmbeddingBag.from_pretrained(lib.tensor(table), freeze=False, mode="sum", sparse=True)
    head = mod.Embedding.from_pretrained(lib.tensor(table[:5]), freeze=False, sparse=True)
    return emb, head


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6), dict(lr=0.01, maximize=True)])
def test_sparse_adam_follows_torch(kwargs):
    params, states = [], []
    for lib in (torch, ember):
        emb, head = _sparse_model(lib, TABLE)
        opt = lib.optim.SparseAdam(list(emb.parameters()) + list(head.parameters()), **kwargs)
        rng = np.random.default_rng(1)
        for _ in range(6):
            idx = lib.tensor(rng.integers(0, 9, (3, 4)))
            tgt = lib.tensor(rng.integers(0, 5, (3,)))
            opt.zero_grad()
            loss = (emb(idx) * head(tgt)).sum().pow(2)
            loss.backward()
            assert emb.weight.grad.is_sparse and head.weight.grad.is_sparse
            opt.step()
        params.append([emb.weight.detach().numpy(), head.weight.detach().numpy()])
        states.append(opt.state_dict()["state"])
    for e, t in zip(params[1], params[0]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)
    assert states[1][0]["step"] == states[0][0]["step"] == 6
    np.testing.assert_allclose(states[1][0]["exp_avg_sq"].numpy(), states[0][0]["exp_avg_sq"].numpy(), rtol=1e-5)


def test_sparse_adam_state_dict_round_trip():
    emb, _ = _sparse_model(ember, TABLE)
    opt = optim.SparseAdam(emb.parameters(), lr=0.1)
    emb(ember.tensor([[1, 2]])).sum().backward()
    opt.step()
    again = optim.SparseAdam(emb.parameters(), lr=0.1)
    again.load_state_dict(opt.state_dict())
    emb.weight.grad = None
    emb(ember.tensor([[1, 3]])).sum().backward()
    before = emb.weight.detach().clone()
    again.step()
    changed = (emb.weight.detach() != before).any(1).tolist()
    assert changed == [i in (1, 3) for i in range(9)]  # only the rows the gradient names move
    assert again.state[emb.weight]["step"] == 2


def test_sparse_adam_errors_match_torch():
    for kwargs in (dict(lr=0.0), dict(eps=0.0), dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1))):
        with pytest.raises(ValueError, match="Invalid"):
            optim.SparseAdam([ember.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.SparseAdam([ember.zeros(2, requires_grad=True)], lr=ember.ones(2))
    with pytest.raises(ValueError, match=r"Complex params at indices \[\[0, 1\]\]"):
        optim.SparseAdam([ember.zeros(2, requires_grad=True), ember.zeros(2, dtype=ember.complex64,
                                                                          requires_grad=True)])
    with pytest.raises(ValueError, match=r"Sparse params at indices \[\[0, 0\]\]"):
        optim.SparseAdam([ember.zeros(3, 2).to_sparse().requires_grad_()])
    w = ember.zeros(3, 2, requires_grad=True)
    opt = optim.SparseAdam([w])
    w.sum().backward()
    with pytest.raises(RuntimeError, match="does not support dense gradients"):
        opt.step()


def test_zero_grad_without_none_empties_a_sparse_gradient():
    emb, _ = _sparse_model(ember, TABLE)
    emb(ember.tensor([[1, 2]])).sum().backward()
    opt = optim.SparseAdam(emb.parameters())
    opt.zero_grad(set_to_none=False)
    g = emb.weight.grad
    assert g.is_sparse and g._nnz() == 0 and g.shape == (9, 4) and not g.to_dense().any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emb(ember.tensor([[4, 4]])).sum().backward()  # accumulates onto the empty one
    assert emb.weight.grad.to_dense()[4].tolist() == [2.0] * 4


def _train(lib, name, kwargs):
    emb, head = _sparse_model(lib, TABLE)
    opt = getattr(lib.optim, name)(list(emb.parameters()) + list(head.parameters()), **kwargs)
    rng = np.random.default_rng(2)
    for _ in range(4):
        idx, tgt = lib.tensor(rng.integers(0, 9, (3, 4))), lib.tensor(rng.integers(0, 5, (3,)))

        def closure(idx=idx, tgt=tgt):
            opt.zero_grad()
            loss = (emb(idx) * head(tgt)).sum().pow(2) / 100
            loss.backward()
            return loss
        opt.step(closure)
        assert emb.weight.grad.is_sparse
    return [emb.weight.detach().numpy(), head.weight.detach().numpy()]


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, maximize=True)), ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.5)),
    ("Adagrad", dict(lr=0.1)), ("Adagrad", dict(lr=0.1, lr_decay=0.1, maximize=True, initial_accumulator_value=0.2)),
    ("LBFGS", dict(lr=0.5, max_iter=3)),
])
def test_optimizers_taking_sparse_gradients_follow_torch(name, kwargs):
    """SGD, Adagrad and LBFGS accept sparse gradients in PyTorch (the others refuse them, as here)."""
    params = [_train(lib, name, kwargs) for lib in (torch, ember)]
    for e, t in zip(params[1], params[0]):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kwargs,message", [
    ("SGD", dict(lr=0.1, weight_decay=0.1), "add\\(sparse, dense\\) is not supported"),
    ("Adagrad", dict(weight_decay=0.1), "weight_decay option is not compatible with sparse gradients"),
    ("Adam", dict(), "sparse gradients"), ("RMSprop", dict(), "sparse gradients")])
def test_sparse_gradient_refusals(name, kwargs, message):
    for lib in (torch, ember):
        emb, _ = _sparse_model(lib, TABLE)
        opt = getattr(lib.optim, name)(emb.parameters(), **kwargs)
        emb(lib.tensor([[1, 2]])).sum().backward()
        with pytest.raises(RuntimeError, match=message):
            opt.step()
