"""ember.nn.utils.parametrize against PyTorch: values, gradients, state_dicts, right_inverse, removal, caching."""
import copy
import pickle

import numpy as np
import pytest
import torch
from _torch_compare import assert_same

import ember

LIBS = {"ember": ember, "torch": torch}


def _classes(lib):
    nn = lib.nn

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Scale(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, X):
            return X * self.k

        def right_inverse(self, A):
            return A / self.k

    class Product(nn.Module):  # parametrized by two tensors
        def forward(self, A, B):
            return A @ B

        def right_inverse(self, X):
            return X, lib.eye(X.shape[1], dtype=X.dtype)

    class Rows(nn.Module):  # changes the shape: needs unsafe=True
        def forward(self, X):
            return X[:2]

    class NoInverse(nn.Module):
        def forward(self, X):
            return X.exp()

    return Symmetric, Scale, Product, Rows, NoInverse


def _linear(lib, n=3):
    lib.manual_seed(0)
    return lib.nn.Linear(n, n)


def _grads(lib, model, x):
    out = model(lib.tensor(x))
    out.pow(2).sum().backward()
    return out, {n: p.grad for n, p in model.named_parameters()}


def _x():
    return np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)


def _both(build):
    return {name: build(lib, *_classes(lib)) for name, lib in LIBS.items()}


def _compare(made, x=None, rtol=1e-5, atol=1e-6):
    e, t = made["ember"], made["torch"]
    es, ts = e.state_dict(), t.state_dict()
    assert list(es) == list(ts)
    for k in ts:
        assert_same(es[k], ts[k], rtol, atol)
    if x is not None:
        e_out, e_g = _grads(ember, e, x)
        t_out, t_g = _grads(torch, t, x)
        assert_same(e_out, t_out, rtol, atol)
        assert list(e_g) == list(t_g)
        for k in t_g:
            assert_same(e_g[k], t_g[k], rtol, atol)


def test_single_parametrization_values_grads_and_class():
    def build(lib, Symmetric, *_):
        m = _linear(lib)
        lib.nn.utils.parametrize.register_parametrization(m, "weight", Symmetric())
        return m

    made = _both(build)
    e = made["ember"]
    P = ember.nn.utils.parametrize
    assert type(e).__name__ == "ParametrizedLinear" and isinstance(e, ember.nn.Linear)
    assert P.type_before_parametrizations(e) is ember.nn.Linear
    assert P.type_before_parametrizations(ember.nn.ReLU()) is ember.nn.ReLU
    assert P.is_parametrized(e) and P.is_parametrized(e, "weight") and not P.is_parametrized(e, "bias")
    assert isinstance(e.parametrizations.weight, P.ParametrizationList)
    assert "weight" not in dict(e.named_parameters())
    w = e.weight
    assert np.array_equal(w.detach().numpy(), w.detach().numpy().T)
    _compare(made, _x())
    # the class is the module's own: another Linear is untouched
    assert type(ember.nn.Linear(2, 2)) is ember.nn.Linear and not hasattr(ember.nn.Linear, "weight")


def test_chain_assignment_and_optimizer_step():
    def build(lib, Symmetric, Scale, *_):
        m = _linear(lib)
        P = lib.nn.utils.parametrize
        P.register_parametrization(m, "weight", Symmetric())
        P.register_parametrization(m, "weight", Scale(2.0))
        assert len(m.parametrizations.weight) == 2
        m.weight = lib.tensor([[1.0, 2.0, 3.0], [2.0, 5.0, 6.0], [3.0, 6.0, 9.0]])  # through both right_inverses
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        m(lib.tensor(_x())).sum().backward()
        opt.step()
        return m

    made = _both(build)
    assert_same(made["ember"].weight, made["torch"].weight)
    _compare(made, _x())


def test_sequence_right_inverse_and_removal():
    def build(lib, Symmetric, Scale, Product, *_):
        m = _linear(lib)
        lib.nn.utils.parametrize.register_parametrization(m, "weight", Product())
        return m

    made = _both(build)
    assert set(dict(made["ember"].parametrizations.weight.named_parameters())) == {"original0", "original1"}
    assert made["ember"].parametrizations.weight.ntensors == 2
    _compare(made, _x())
    made["ember"].weight = ember.ones(3, 3)
    made["torch"].weight = torch.ones(3, 3)
    _compare(made)
    for name, lib in LIBS.items():
        P = lib.nn.utils.parametrize
        with pytest.raises(ValueError):
            P.remove_parametrizations(made[name], "weight", leave_parametrized=False)
        P.remove_parametrizations(made[name], "weight")
        assert type(made[name]) is lib.nn.Linear and not hasattr(made[name], "parametrizations")
    _compare(made, _x())


@pytest.mark.parametrize("leave", [True, False])
def test_remove_keeps_the_parameter_object(leave):
    def build(lib, Symmetric, *_):
        m = _linear(lib)
        P = lib.nn.utils.parametrize
        P.register_parametrization(m, "weight", Symmetric())
        P.register_parametrization(m, "bias", lib.nn.Identity())
        original = m.parametrizations.weight.original
        P.remove_parametrizations(m, "weight", leave_parametrized=leave)
        assert m.weight is original and P.is_parametrized(m) and type(m).__name__ == "ParametrizedLinear"
        P.remove_parametrizations(m, "bias", leave_parametrized=leave)
        assert type(m) is lib.nn.Linear
        return m

    _compare(_both(build), _x())


def test_unsafe_shape_change_and_errors():
    for lib in LIBS.values():
        Symmetric, Scale, Product, Rows, NoInverse = _classes(lib)
        P = lib.nn.utils.parametrize
        m = _linear(lib)
        with pytest.raises(ValueError):
            P.register_parametrization(m, "weight", Rows())
        with pytest.raises(ValueError):
            P.register_parametrization(m, "nothing", Scale(2.0))
        with pytest.raises(ValueError):
            P.remove_parametrizations(m, "weight")
        assert not P.is_parametrized(m)
        P.register_parametrization(m, "weight", NoInverse())
        with pytest.raises(ValueError):  # appending must keep the shape too
            P.register_parametrization(m, "weight", Rows())
        P.register_parametrization(m, "weight", Rows(), unsafe=True)
        assert m.parametrizations.weight.unsafe and tuple(m.weight.shape) == (2, 3)
        with pytest.raises(RuntimeError):  # NoInverse has no right_inverse
            m.weight = lib.zeros(3, 3)
        with pytest.raises(RuntimeError):
            pickle.dumps(m)
        with pytest.raises(KeyError):  # a Parameter can't replace the property
            m.weight = lib.nn.Parameter(lib.zeros(3, 3))
        clone = copy.deepcopy(m)
        assert type(clone).__name__ == "ParametrizedLinear"
        assert clone.parametrizations.weight.original is not m.parametrizations.weight.original
        assert np.allclose(clone.weight.detach().numpy(), m.weight.detach().numpy())
        with pytest.raises(ValueError):
            P.ParametrizationList([], lib.zeros(2))


def test_cached_computes_once():
    calls = []

    class Counted(ember.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    P = ember.nn.utils.parametrize
    m = P.register_parametrization(ember.nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
        with P.cached():
            assert m.weight is a
    assert a is b and len(calls) == 1
    assert m.weight is not m.weight and len(calls) == 3


def test_buffer_parametrization_and_transfer():
    def build(lib, Symmetric, Scale, *_):
        P = lib.nn.utils.parametrize
        src = _linear(lib)
        src.register_buffer("mask", lib.ones(3, 3))
        P.register_parametrization(src, "weight", Symmetric())
        P.register_parametrization(src, "mask", Scale(3.0))
        assert "parametrizations.mask.original" in dict(src.named_buffers())
        dst = lib.nn.Linear(3, 3)
        P.transfer_parametrizations_and_params(src, dst, "weight")
        assert dst.parametrizations.weight.original is src.parametrizations.weight.original
        assert P.transfer_parametrizations_and_params(lib.nn.ReLU(), dst) is dst
        # a buffer's parametrization lands on a new Parameter, which refuses the source's plain tensor
        with pytest.raises(TypeError):
            P.transfer_parametrizations_and_params(src, lib.nn.Linear(3, 3), "mask")
        return src, dst

    made = _both(build)
    for i in range(2):
        _compare({k: v[i] for k, v in made.items()}, _x())


def test_training_flag_follows_module():
    m = ember.nn.Linear(2, 2).eval()
    p = ember.nn.Identity()
    ember.nn.utils.parametrize.register_parametrization(m, "weight", p)
    assert p.training is False
