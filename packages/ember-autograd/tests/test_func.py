"""ember.func (grad, grad_and_value, vjp, jvp, linearize) against torch.func: values, gradients, errors."""
import numpy as np
import pytest
import torch
import torch.func as TF

import ember
import ember.func as F

RNG = np.random.default_rng(0)
X, Y = RNG.random(4) + 0.5, RNG.random(4) + 0.5


def f(x):
    return (x.sin() * x.exp()).sum()


def g(x, y):
    return (x * y.tanh()).pow(2).sum()


def h(x, y):
    return x.sin() * y, (x * x).sum()


def aux(x):
    return x.cos().sum(), x * 2


def close(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for a, b in zip(got, want):
            close(a, b)
        return
    assert isinstance(got, ember.Tensor) and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


def e(*a):
    return tuple(ember.tensor(v) for v in a)


def t(*a):
    return tuple(torch.tensor(v) for v in a)


@pytest.mark.parametrize("func, arrays, argnums", [(f, (X,), 0), (g, (X, Y), 0), (g, (X, Y), 1), (g, (X, Y), (0, 1)),
                                                   (g, (X, Y), -1)])
def test_grad_and_value(func, arrays, argnums):
    got = F.grad_and_value(func, argnums)(*e(*arrays))
    close(got, TF.grad_and_value(func, argnums)(*t(*arrays)))
    close(F.grad(func, argnums)(*e(*arrays)), TF.grad(func, argnums)(*t(*arrays)))
    assert not (got[0] if isinstance(argnums, int) else got[0][0]).requires_grad  # a plain tensor at top level


def test_has_aux_and_pytree_argument():
    close(F.grad(aux, has_aux=True)(*e(X)), TF.grad(aux, has_aux=True)(*t(X)))
    close(F.grad_and_value(aux, has_aux=True)(*e(X)), TF.grad_and_value(aux, has_aux=True)(*t(X)))
    got = F.grad(lambda p: g(p["a"], p["b"][0]))({"a": ember.tensor(X), "b": (ember.tensor(Y),)})
    want = TF.grad(lambda p: g(p["a"], p["b"][0]))({"a": torch.tensor(X), "b": (torch.tensor(Y),)})
    close((got["a"], got["b"][0]), (want["a"], want["b"][0]))


def test_unused_input_gets_zeros():
    close(F.grad(lambda x, y: (x * 3).sum(), (0, 1))(*e(X, Y)), TF.grad(lambda x, y: (x * 3).sum(), (0, 1))(*t(X, Y)))


def test_second_order():
    def third(x):
        return (x ** 3).sum()

    close(F.grad(lambda x: F.grad(third)(x).sum())(*e(X)), TF.grad(lambda x: TF.grad(third)(x).sum())(*t(X)))
    # a closed-over outer input inside the inner transform
    inner = lambda x: F.grad(lambda y: (x.sin() * y).sum())(ember.tensor(Y)).pow(2).sum()  # noqa: E731
    tinner = lambda x: TF.grad(lambda y: (x.sin() * y).sum())(torch.tensor(Y)).pow(2).sum()  # noqa: E731
    close(F.grad(inner)(*e(X)), TF.grad(tinner)(*t(X)))


def test_grad_connects_to_outer_autograd():
    x, tx = ember.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    F.grad(f)(x).sum().backward()
    TF.grad(f)(tx).sum().backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("call, error", [
    (lambda G, T: G(lambda x: x.sin())(T(X)), "scalar Tensor"),
    (lambda G, T: G(lambda x: (x.sum(),))(T(1.0)), "return a Tensor"),
    (lambda G, T: G(f, argnums=1)(T(X)), "Got argnum=1"),
    (lambda G, T: G(f, argnums=())(T(X)), "non-empty"),
    (lambda G, T: G(f, has_aux=True)(T(X)), "(output, aux)"),
])
def test_grad_errors(call, error):
    for G, T in ((F.grad, ember.tensor), (TF.grad, torch.tensor)):  # the same type and message as torch
        with pytest.raises(RuntimeError, match=error.replace("(", r"\(").replace(")", r"\)")):
            call(G, T)
    with pytest.raises(ValueError, match="must be Tensor"):
        F.grad(f)(3.0)


def test_vjp():
    cot = RNG.random(4)
    out, fn = F.vjp(h, *e(X, Y))
    tout, tfn = TF.vjp(h, *t(X, Y))
    close(out, tout)
    cots = (ember.tensor(cot), ember.tensor(2.0))
    tcots = (torch.tensor(cot), torch.tensor(2.0, dtype=torch.float64))
    close(fn(cots), tfn(tcots))
    close(fn(cots), tfn(tcots))  # callable again
    out, fn, a = F.vjp(aux, *e(X), has_aux=True)
    tout, tfn, ta = TF.vjp(aux, *t(X), has_aux=True)
    close((out, a, fn(ember.tensor(1.5))), (tout, ta, tfn(torch.tensor(1.5, dtype=torch.float64))))
    with pytest.raises(RuntimeError):
        F.vjp(lambda x: x.sin(), *e(X))[1](ember.ones(3, dtype=ember.float64))


def test_jvp_and_linearize():
    tan = (RNG.random(4), RNG.random(4))
    close(F.jvp(h, e(X, Y), e(*tan)), TF.jvp(h, t(X, Y), t(*tan)))
    close(F.jvp(aux, e(X), e(tan[0]), has_aux=True), TF.jvp(aux, t(X), t(tan[0]), has_aux=True))
    out, fn = F.linearize(lambda x: x.exp() * x, *e(X))
    tout, tfn = TF.linearize(lambda x: x.exp() * x, *t(X))
    close((out, fn(*e(tan[0]))), (tout, tfn(*t(tan[0]))))


def test_namespace():
    assert ember.func.grad is F.grad


def test_jvp_errors():
    with pytest.raises(RuntimeError, match="forward gradient is of size \\[3\\]"):
        F.jvp(lambda x: x.sin(), e(X), (ember.ones(3, dtype=ember.float64),))
    with pytest.raises(ValueError, match="must be Tensor"):
        F.jvp(lambda x: x.sin(), (1.0,), (1.0,))
