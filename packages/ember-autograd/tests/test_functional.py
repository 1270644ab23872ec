"""ember.autograd.functional against torch.autograd.functional: values and result structure."""
import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import ember
import ember.autograd.functional as F

RNG = np.random.default_rng(0)
A, B, V3, VA = RNG.random((3, 2)), RNG.random(2), RNG.random(3), RNG.random((3, 2))


def f(x, y):
    return (x.exp() * y).sum(1).tanh()


def g(x, y):
    return ((x.sin() @ y) ** 2).sum()


def pair(x):
    return x.sin(), (x * x).sum()


def cube(x):
    return x.pow(3).sum()


def _e(*arrays):
    return tuple(ember.tensor(a) for a in arrays)


def _t(*arrays):
    return tuple(torch.tensor(a) for a in arrays)


def same(got, want):
    """Equal values and the same nesting of tuples and tensors (torch's vectorized forward mode gives
    lists where its documentation and ember give tuples)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for a, b in zip(got, want):
            same(a, b)
        return
    assert isinstance(got, ember.Tensor), type(got)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("func, arrays, single", [(f, (A, B), False), (pair, (A,), True), (cube, (A,), True),
                                                  (lambda x: x.sin(), (A,), True)])
def test_jacobian(func, arrays, single, strategy):
    e_in, t_in = (_e(*arrays)[0], _t(*arrays)[0]) if single else (_e(*arrays), _t(*arrays))
    same(F.jacobian(func, e_in, strategy=strategy),
         TF.jacobian(func, t_in, strategy=strategy, vectorize=strategy == "forward-mode"))


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_hessian(strategy):
    kw = {"outer_jacobian_strategy": strategy, "vectorize": strategy == "forward-mode"}
    same(F.hessian(g, _e(A, B), outer_jacobian_strategy=strategy), TF.hessian(g, _t(A, B), **kw))
    same(F.hessian(cube, _e(A)[0], outer_jacobian_strategy=strategy), TF.hessian(cube, _t(A)[0], **kw))


def test_products():
    same(F.vjp(f, _e(A, B), _e(V3)[0]), TF.vjp(f, _t(A, B), _t(V3)[0]))
    same(F.vjp(cube, _e(A)[0]), TF.vjp(cube, _t(A)[0]))
    same(F.jvp(f, _e(A, B), _e(VA, B)), TF.jvp(f, _t(A, B), _t(VA, B)))
    same(F.jvp(pair, _e(A)[0], _e(VA)[0]), TF.jvp(pair, _t(A)[0], _t(VA)[0]))
    same(F.vhp(g, _e(A, B), _e(VA, B)), TF.vhp(g, _t(A, B), _t(VA, B)))
    same(F.hvp(g, _e(A, B), _e(VA, B)), TF.hvp(g, _t(A, B), _t(VA, B)))
    same(F.hvp(cube, _e(A)[0], _e(VA)[0]), TF.hvp(cube, _t(A)[0], _t(VA)[0]))


def test_create_graph_keeps_results_differentiable():
    x = ember.tensor(A).requires_grad_()
    xt = torch.tensor(A).requires_grad_()
    jac = F.jacobian(cube, x, create_graph=True)
    jac_t = TF.jacobian(cube, xt, create_graph=True)
    assert jac.requires_grad
    same(ember.autograd.grad(jac.sum(), x)[0], torch.autograd.grad(jac_t.sum(), xt)[0])
    _, v = F.vjp(cube, x, create_graph=True)
    assert v.requires_grad
    out, v = F.vjp(cube, x)
    assert not out.requires_grad and not v.requires_grad and x.grad is None


def test_strict_and_errors():
    x = ember.tensor(A)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (x, x), strict=True)
    same(F.jacobian(lambda a, b: a * 2, (x, x))[1], torch.zeros(3, 2, 3, 2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="does not require gradients"):
        F.vjp(lambda a: a.detach(), x, ember.tensor(VA), strict=True)
    with pytest.raises(RuntimeError, match="single element"):
        F.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="invalid size"):
        F.jvp(lambda a: a * 2, x, ember.tensor(V3))
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        F.jacobian(lambda a: [a], x)
    with pytest.raises(RuntimeError, match="single Tensor"):
        F.hessian(lambda a: (a.sum(), a.sum()), x)
    with pytest.raises(ValueError, match="strategy"):
        F.jacobian(cube, x, strategy="sideways")
    with pytest.raises(NotImplementedError, match="create_graph"):
        F.jacobian(cube, x, create_graph=True, strategy="forward-mode")
