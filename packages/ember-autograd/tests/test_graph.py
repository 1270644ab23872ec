"""ember.autograd.graph: saved-tensor hooks (pack/unpack, double backward, version check, nesting,
disabling), save_on_cpu, gradient edges."""
import numpy as np
import pytest
import torch

import ember
from ember import _dispatch
from ember.autograd import graph as G

X = np.random.default_rng(0).random(5)


def f(lib, x):
    return (x.sin() * x).exp().sum()


def test_hooks_see_saved_tensors_and_results_match():
    x = ember.tensor(X).requires_grad_()
    packed, unpacked = [], []

    def pack(t):
        packed.append(t)
        return t.detach().clone()

    def unpack(t):
        unpacked.append(t)
        return t

    layers = _dispatch.layers()
    with G.saved_tensors_hooks(pack, unpack):
        assert "saved_tensors_hooks" in _dispatch.layers()
        y = f(ember, x)
    assert _dispatch.layers() == layers
    assert packed and any(t is x for t in packed) and not unpacked
    g, = ember.autograd.grad(y, x, create_graph=True)
    assert unpacked
    h, = ember.autograd.grad(g.sum(), x)  # unpacked values still lead into the graph

    xt = torch.tensor(X).requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        gt, = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12)


def test_unpack_is_what_backward_uses_and_innermost_wins():
    x = ember.tensor(X).requires_grad_()
    outer = []
    with G.saved_tensors_hooks(lambda t: outer.append(t) or t, lambda t: t):
        with G.saved_tensors_hooks(lambda t: None, lambda _: ember.ones(5, dtype=ember.float64)):
            y = (x * x).sum()
    assert outer == []
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones(5))  # x * x saw x as ones


def test_version_check_disable_and_save_on_cpu():
    a = ember.tensor(X).requires_grad_()
    with G.saved_tensors_hooks(lambda t: t, lambda t: t):
        b = a * 2
        c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()

    with G.disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with G.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass

    with G.save_on_cpu():
        y = f(ember, a)
    g, = ember.autograd.grad(y, a)
    np.testing.assert_allclose(g.numpy(), ember.autograd.grad(f(ember, a), a)[0].numpy(), rtol=1e-12)


def test_gradient_edge_and_increment_version():
    x = ember.tensor(X).requires_grad_()
    y = x.exp()
    edge = G.get_gradient_edge(y)
    assert edge.node is y.grad_fn and edge.output_nr == 0 and isinstance(edge.node, G.Node)
    assert G.get_gradient_edge(x).node.name() == "AccumulateGrad"
    with pytest.raises(RuntimeError):
        G.get_gradient_edge(ember.ones(2))
    v = y._version
    G.increment_version(y)
    assert y._version == v + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
