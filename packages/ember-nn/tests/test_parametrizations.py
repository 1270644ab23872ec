"""nn.utils.parametrizations (orthogonal, weight_norm, spectral_norm) against PyTorch: the parametrized weights,
their buffers and state_dicts, gradients to the originals, assignment, and errors. Both libraries draw the same
random numbers for a seed, so random initial states (spectral norm's vectors, orthogonal's completion) agree."""
import numpy as np
import pytest
import torch
from _torch_compare import assert_same

import ember

LIBS = (("ember", ember), ("torch", torch))


def _same_weights(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})


def _made(build, make, seed=0):
    """The module ``make(lib)`` in both libraries with torch's initial weights, parametrized by ``build``."""
    torch.manual_seed(seed)
    t = make(torch).double()
    e = make(ember).double()
    _same_weights(e, t)
    out = {}
    for name, lib, mod in (("ember", ember, e), ("torch", torch, t)):
        lib.manual_seed(seed + 1)
        out[name] = build(lib, mod)
    return out


def _compare(made, x, rtol=1e-9, atol=1e-11):
    e, t = made["ember"], made["torch"]
    es, ts = e.state_dict(), t.state_dict()
    assert list(es) == list(ts)
    for k in ts:
        assert_same(es[k], ts[k], rtol, atol)
    assert_same(e.weight, t.weight, rtol, atol)
    e_out, t_out = e(ember.tensor(x)), t(torch.tensor(x))
    assert_same(e_out, t_out, rtol, atol)
    g = np.random.default_rng(5).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(g)).sum().backward()
    (e_out * ember.tensor(g)).sum().backward()
    e_grads, t_grads = dict(e.named_parameters()), dict(t.named_parameters())
    assert list(e_grads) == list(t_grads)
    for k in t_grads:
        assert_same(e_grads[k].grad, t_grads[k].grad, rtol, atol)


def _x(shape=(3, 5)):
    return np.random.default_rng(1).standard_normal(shape)


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm(dim):
    made = _made(lambda lib, m: lib.nn.utils.parametrizations.weight_norm(m, dim=dim), lambda lib: lib.nn.Linear(5, 4))
    assert type(made["ember"]).__name__ == "ParametrizedLinear"
    _compare(made, _x())


def test_weight_norm_conv_and_old_state_dict():
    made = _made(lambda lib, m: lib.nn.utils.parametrizations.weight_norm(m, name="weight", dim=1),
                 lambda lib: lib.nn.Conv2d(2, 3, 3))
    _compare(made, _x((1, 2, 5, 5)))
    # a state_dict of the old weight_norm (weight_g/weight_v) loads into the parametrized module
    old = torch.nn.utils.weight_norm(torch.nn.Linear(5, 4).double())
    sd = {k: ember.tensor(v.detach().numpy()) for k, v in old.state_dict().items()}
    assert {"weight_g", "weight_v"} <= set(sd)
    e = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(5, 4).double())
    e.load_state_dict(sd)
    np.testing.assert_allclose(e.weight.detach().numpy(), old.weight.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("make,dim", [(lambda lib: lib.nn.Linear(5, 4), None),
                                      (lambda lib: lib.nn.ConvTranspose2d(2, 3, 3), None),
                                      (lambda lib: lib.nn.Conv1d(2, 3, 3), 1)])
def test_spectral_norm(make, dim):
    def build(lib, m):
        return lib.nn.utils.parametrizations.spectral_norm(m, n_power_iterations=2, dim=dim)

    made = _made(build, make)
    shape = {2: (3, 5), 3: (1, 2, 6), 4: (1, 2, 4, 4)}[made["torch"].parametrizations.weight.original.dim()]
    assert {"parametrizations.weight.0._u", "parametrizations.weight.0._v"} <= set(made["ember"].state_dict())
    for _ in range(2):  # training forwards advance the power iteration
        _compare(made, _x(shape))
    for m in made.values():
        m.eval()
    _compare(made, _x(shape))
    w, d = made["ember"].weight.detach().numpy(), made["ember"].parametrizations.weight[0].dim
    assert d == (0 if dim is None and w.ndim == 2 else 1)  # transposed convolutions default to dim 1
    sigma = np.linalg.svd(np.moveaxis(w, d, 0).reshape(w.shape[d], -1), compute_uv=False)[0]
    assert sigma == pytest.approx(1.0, rel=0.2)


def test_spectral_norm_1d_and_errors():
    for _name, lib in LIBS:
        m = lib.nn.Linear(3, 2)
        lib.nn.utils.parametrizations.spectral_norm(m, name="bias")
        assert float(m.bias.detach().norm()) == pytest.approx(1.0)
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 2), name="nothing")
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 2), n_power_iterations=0)
        with pytest.raises(IndexError):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 2), dim=2)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder", None])
@pytest.mark.parametrize("trivial", [True, False])
def test_orthogonal(shape, orth_map, trivial):
    def make(lib):
        m = lib.nn.Module()
        m.weight = lib.nn.Parameter(lib.randn(*shape))
        m.forward = lambda x: x @ m.weight.reshape(-1, shape[-1]).mT
        return m

    def build(lib, m):
        return lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orth_map, use_trivialization=trivial)

    torch.manual_seed(0)
    t = make(torch).double()
    e = make(ember).double()
    _same_weights(e, t)
    made = {}
    for name, lib, mod in (("ember", ember, e), ("torch", torch, t)):
        lib.manual_seed(1)
        made[name] = build(lib, mod)
    w = made["ember"].weight.detach().numpy()
    n, k = shape[-2:]
    gram = w.swapaxes(-1, -2) @ w if n >= k else w @ w.swapaxes(-1, -2)
    assert np.allclose(gram, np.eye(min(n, k)), atol=1e-10)
    _compare(made, _x((3, shape[-1])), rtol=1e-8, atol=1e-10)


def test_orthogonal_assignment_and_errors():
    made = {}
    q = np.linalg.qr(np.random.default_rng(2).standard_normal((5, 5)))[0][:, :3]
    for name, lib in LIBS:
        lib.manual_seed(3)
        m = lib.nn.Linear(3, 5).double()
        lib.nn.utils.parametrizations.orthogonal(m)
        m.weight = lib.tensor(q)
        made[name] = m.weight.detach().numpy()
        with pytest.raises(ValueError):
            m.weight = lib.zeros(3, 5, dtype=lib.float64)
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), orthogonal_map="qr")
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), name="bias")
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), name="nothing")
        c = lib.nn.Linear(3, 5).to(lib.complex128)
        with pytest.raises(ValueError):
            lib.nn.utils.parametrizations.orthogonal(c, orthogonal_map="householder")
        s = lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), use_trivialization=False)
        with pytest.raises(NotImplementedError):
            s.weight = lib.eye(3)
    np.testing.assert_allclose(made["ember"], made["torch"], atol=1e-12)
    np.testing.assert_allclose(made["ember"], q, atol=1e-12)
