"""ember.utils.checkpoint: gradients equal the plain run's, randomness replays, intermediates are
not kept (non-reentrant), and the argument checks; values compared with torch.utils.checkpoint."""
import gc
import weakref

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import ember
from ember.autograd.graph import saved_tensors_hooks
from ember.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

RNG = np.random.default_rng(0)
X, W = RNG.random((3, 4)), RNG.random((4, 4))


def _dropout(lib, t):
    return t * (lib.rand(*t.shape) > 0.5).to(t.dtype) * 2


def block(lib, w):
    def run(x):
        return _dropout(lib, (x @ w).tanh()).sin()
    return run


def _grads(lib, use_reentrant, seed):
    x = lib.tensor(X).requires_grad_()
    w = lib.tensor(W).requires_grad_()
    lib.manual_seed(seed)
    if use_reentrant is None:
        out = block(lib, w)(x)
    else:
        out = (checkpoint if lib is ember else tcp.checkpoint)(block(lib, w), x, use_reentrant=use_reentrant)
    lib.rand(7)  # the generator moves on before backward: the recomputation must not see this
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_gradients_and_randomness_match_the_plain_run(use_reentrant):
    plain = _grads(ember, None, 3)
    for got, want in zip(_grads(ember, use_reentrant, 3), plain):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    state = ember.random.get_rng_state()
    _grads(ember, use_reentrant, 4)
    assert not np.array_equal(ember.random.get_rng_state().numpy(), state.numpy())


def test_deterministic_values_match_torch():
    def f(lib):
        return lambda x: (x @ x.T).tanh().exp()

    for use_reentrant in (True, False):
        xs = [lib.tensor(X).requires_grad_() for lib in (ember, torch)]
        outs = [checkpoint(f(ember), xs[0], use_reentrant=use_reentrant),
                tcp.checkpoint(f(torch), xs[1], use_reentrant=use_reentrant)]
        for o in outs:
            o.sum().backward()
        np.testing.assert_allclose(outs[0].detach().numpy(), outs[1].detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-12)


def test_non_reentrant_features():
    x = ember.tensor(X).requires_grad_()
    w = ember.tensor(W).requires_grad_()
    kept = []

    def f(t, scale=1.0):
        inner = (t @ w).exp()
        kept.append(weakref.ref(inner))
        return (inner * scale).sin()

    out = checkpoint(f, ember.tensor(X), use_reentrant=False, scale=2.0)  # input needs no grad
    gc.collect()
    assert kept[0]() is None  # the intermediate was dropped after the forward run
    gw, = ember.autograd.grad(out.sum(), w)
    w2 = ember.tensor(W).requires_grad_()
    plain = ((ember.tensor(X) @ w2).exp() * 2.0).sin().sum()
    np.testing.assert_allclose(gw.numpy(), ember.autograd.grad(plain, w2)[0].numpy(), rtol=1e-12)

    y = checkpoint(lambda t: (t ** 3).sum(), x, use_reentrant=False)  # double backward
    g, = ember.autograd.grad(y, x, create_graph=True)
    h, = ember.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * X, rtol=1e-12)

    calls = []

    def varying(t):
        calls.append(1)
        return t.exp() if len(calls) == 1 else t.exp().exp()

    with pytest.raises(CheckpointError, match="recomputation"):
        checkpoint(varying, x, use_reentrant=False).sum().backward()

    entered = []

    class Mark:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            pass

    checkpoint(lambda t: t.sin(), x, use_reentrant=False,
               context_fn=lambda: (Mark("forward"), Mark("recompute"))).sum().backward()
    assert entered == ["forward", "recompute"]


def test_hooks_are_used_by_the_non_reentrant_version_only_inside():
    packed = []
    x = ember.tensor(X).requires_grad_()
    with saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False).sum().backward()
    assert packed  # the outer hooks still saw the ops outside the checkpoint (the sum)


def test_checkpoint_sequential_and_argument_checks():
    x = ember.tensor(X).requires_grad_()
    w = ember.tensor(W).requires_grad_()
    fs = [lambda t: t.sin(), lambda t: t @ w, lambda t: t.tanh(), lambda t: t * 3, lambda t: t.exp()]
    for use_reentrant in (True, False):
        out = checkpoint_sequential(fs, 3, x, use_reentrant=use_reentrant).sum()
        got = ember.autograd.grad(out, [x, w]) if not use_reentrant else None
        t = x
        for fn in fs:
            t = fn(t)
        want = ember.autograd.grad(t.sum(), [x, w])
        if got is None:
            x.grad = w.grad = None
            out.backward()
            got = (x.grad, w.grad)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)

    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda t: t * 2, x)
    with pytest.raises(ValueError, match="Unexpected keyword"):
        checkpoint(lambda t, k: t * k, x, use_reentrant=True, k=2)
    with pytest.warns(UserWarning, match="None of the inputs"):
        checkpoint(lambda t: t * 2, ember.tensor(X), use_reentrant=True)
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lambda t: t, x, use_reentrant=False, determinism_check="strict")
