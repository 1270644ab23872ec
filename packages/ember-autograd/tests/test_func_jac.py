"""ember.func.jacrev / jacfwd / hessian against torch.func: values and shapes for several argnums, pytree outputs,
has_aux, inside vmap."""
import numpy as np
import pytest
import torch
import torch.func as TF

import ember
import ember.func as F

RNG = np.random.default_rng(1)
X, Y = RNG.standard_normal(4), RNG.standard_normal((3, 4))


def close(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for a, b in zip(got, want):
            close(a, b)
        return
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            close(got[k], want[k])
        return
    assert type(got) is ember.Tensor, type(got)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-11)


def f(x):
    return x.sin() * x.exp()


def g(x, w):
    return (w @ x).tanh()


def scalar(x, w):
    return (w @ x.sin()).pow(2).sum() + (x * x).sum() * x[0]


def pair(x, w):
    return {"a": w @ x, "b": (x.cos(), x.sum())}


def with_aux(x, w):
    return g(x, w), x.sum() * 2


CASES = [
    (f, (X,), {}),
    (g, (X, Y), {}),
    (g, (X, Y), {"argnums": 1}),
    (g, (X, Y), {"argnums": (0, 1)}),
    (pair, (X, Y), {}),
    (with_aux, (X, Y), {"has_aux": True}),
]


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_jacobians_match_torch(kind, case):
    fn, arrays, kwargs = CASES[case]
    want = getattr(TF, kind)(fn, **kwargs)(*[torch.tensor(a) for a in arrays])
    got = getattr(F, kind)(fn, **kwargs)(*[ember.tensor(a) for a in arrays])
    close(got, want)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_hessian_matches_torch(argnums):
    want = TF.hessian(scalar, argnums)(torch.tensor(X), torch.tensor(Y))
    got = F.hessian(scalar, argnums)(ember.tensor(X), ember.tensor(Y))
    close(got, want)


def test_jacobians_inside_vmap():
    xs = RNG.standard_normal((5, 4))
    w = ember.tensor(Y)
    tw = torch.tensor(Y)
    close(F.vmap(F.jacrev(g), in_dims=(0, None))(ember.tensor(xs), w),
          TF.vmap(TF.jacrev(g), in_dims=(0, None))(torch.tensor(xs), tw))
    close(F.vmap(F.jacfwd(g), in_dims=(0, None))(ember.tensor(xs), w),
          TF.vmap(TF.jacfwd(g), in_dims=(0, None))(torch.tensor(xs), tw))
    close(F.vmap(F.hessian(lambda x: scalar(x, w)))(ember.tensor(xs)),
          TF.vmap(TF.hessian(lambda x: scalar(x, tw)))(torch.tensor(xs)))


def test_vmap_of_vjp_fn_built_outside():
    """The Jacobians recipe: vjp once, then its vjp_fn vmapped over the rows of the identity."""
    x = ember.tensor(X)
    _, vjp_fn = F.vjp(f, x)
    (jac,) = F.vmap(vjp_fn)(ember.eye(4, dtype=ember.float64))
    tx = torch.tensor(X)
    _, tvjp_fn = TF.vjp(f, tx)
    (want,) = TF.vmap(tvjp_fn)(torch.eye(4, dtype=torch.float64))
    close(jac, want)


def test_jacrev_chunks_and_errors():
    close(F.jacrev(g, chunk_size=2)(ember.tensor(X), ember.tensor(Y)),
          TF.jacrev(g, chunk_size=2)(torch.tensor(X), torch.tensor(Y)))
    with pytest.raises(RuntimeError, match="argnums"):
        F.jacrev(g, argnums=2)(ember.tensor(X), ember.tensor(Y))
    with pytest.raises(RuntimeError, match="tuple"):
        F.jacrev(f, has_aux=True)(ember.tensor(X))


def _tutorial(M, mod):
    """PyTorch's Jacobians-and-Hessians recipe."""
    D = 6
    rng = np.random.default_rng(2)
    weight, bias = M.tensor(rng.standard_normal((D, D))), M.tensor(rng.standard_normal(D))
    x, xs = M.tensor(rng.standard_normal(D)), M.tensor(rng.standard_normal((3, D)))

    def predict(weight, bias, x):
        return M.nn.functional.linear(x, weight, bias).tanh()

    _, vjp_fn = mod.vjp(lambda x: predict(weight, bias, x), x)
    return [mod.jacrev(predict, argnums=2)(weight, bias, x), mod.vmap(vjp_fn)(M.eye(D, dtype=x.dtype))[0],
            mod.jacfwd(predict, argnums=2)(weight, bias, x), *mod.jacrev(predict, argnums=(0, 1))(weight, bias, x),
            mod.hessian(predict, argnums=2)(weight, bias, x),
            mod.jacfwd(mod.jacfwd(predict, argnums=2), argnums=2)(weight, bias, x),
            mod.jacrev(mod.jacrev(predict, argnums=2), argnums=2)(weight, bias, x),
            mod.vmap(mod.jacrev(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs),
            mod.jacrev(lambda w, b, x: predict(w, b, x).sum(0), argnums=2)(weight, bias, xs).movedim(1, 0),
            mod.vmap(mod.hessian(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs),
            mod.jvp(mod.grad(lambda x: x.tanh().exp().sum()), (x,), (M.ones_like(x),))[1]]


@pytest.mark.nn
def test_jacobians_hessians_tutorial():
    import ember.nn.functional  # noqa: F401
    close(_tutorial(ember, F), _tutorial(torch, TF))
