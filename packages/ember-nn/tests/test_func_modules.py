"""ember.func.functional_call and stack_module_state on nn modules, against torch.func."""
import numpy as np
import pytest
import torch
import torch.func as TF

import ember
import ember.func as F
from ember import nn

RNG = np.random.default_rng(1)


def mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)).double()


def state(seed):
    rng = np.random.default_rng(seed)
    shapes = {"0.weight": (4, 3), "0.bias": (4,), "2.weight": (2, 4), "2.bias": (2,)}
    return {k: rng.standard_normal(s) for k, s in shapes.items()}


def test_functional_call_matches_torch():
    m, tm = mlp(ember), mlp(torch)
    x = RNG.standard_normal((5, 3))
    arrays = state(2)
    p = {k: ember.tensor(v, requires_grad=True) for k, v in arrays.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    before = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
    out = F.functional_call(m, p, (ember.tensor(x),))
    tout = TF.functional_call(tm, tp, (torch.tensor(x),))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    for k in p:
        np.testing.assert_allclose(p[k].grad.numpy(), tp[k].grad.numpy(), rtol=1e-10)
    for k, v in m.state_dict().items():  # restored
        np.testing.assert_array_equal(v.numpy(), before[k])
        assert m.get_parameter(k).grad is None


def test_functional_call_with_grad_transform_and_tuple_of_dicts():
    m, tm = mlp(ember), mlp(torch)
    x = RNG.standard_normal((5, 3))
    arrays = state(3)
    w = {k: v for k, v in arrays.items() if k.endswith("weight")}
    b = {k: v for k, v in arrays.items() if k.endswith("bias")}

    def loss(weights, lib_call, mod, biases, inp):
        return lib_call(mod, (weights, biases), (inp,)).sin().sum()

    got = F.grad(loss)({k: ember.tensor(v) for k, v in w.items()}, F.functional_call, m,
                       {k: ember.tensor(v) for k, v in b.items()}, ember.tensor(x))
    want = TF.grad(loss)({k: torch.tensor(v) for k, v in w.items()}, TF.functional_call, tm,
                         {k: torch.tensor(v) for k, v in b.items()}, torch.tensor(x))
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-10)


def test_functional_call_restores_on_error_and_buffers():
    bn = nn.BatchNorm1d(3)
    mean = ember.full((3,), 5.0)
    F.functional_call(bn, {"running_mean": mean}, ember.ones(4, 3))
    assert bn.running_mean.abs().sum().item() == 0 and mean[0].item() != 5.0  # the given buffer was updated
    lin = nn.Linear(3, 2)
    weight = lin.weight
    with pytest.raises(RuntimeError):
        F.functional_call(lin, {"weight": ember.ones(5, 5)}, (ember.ones(1, 3),))
    assert lin.weight is weight


def test_functional_call_errors_and_ties():
    lin, tlin = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    for call, lib, L in ((F.functional_call, ember, lin), (TF.functional_call, torch, tlin)):
        with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'bogus'.\n\tMissing key\\(s\\): 'bias'"):
            call(L, {"weight": lib.ones(2, 2), "bogus": lib.ones(1)}, (lib.ones(2),), strict=True)
        with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
            call(L, ({"weight": lib.ones(2, 2)}, {"weight": lib.ones(2, 2)}), (lib.ones(2),))
    tied = nn.Module()
    tied.a, tied.b = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    tied.b.weight = tied.a.weight
    tied.forward = lambda x: tied.b(tied.a(x))
    out = F.functional_call(tied, {"a.weight": 2 * ember.eye(2)}, (ember.ones(2),))
    np.testing.assert_array_equal(out.numpy(), [4.0, 4.0])  # b follows a's tied weight
    out = F.functional_call(tied, {"a.weight": 2 * ember.eye(2)}, (ember.ones(2),), tie_weights=False)
    np.testing.assert_allclose(out.detach().numpy(), (tied.a.weight @ ember.full((2,), 2.0)).detach().numpy())


def test_stack_module_state():
    models = [nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)) for _ in range(3)]
    tmodels = [torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)) for _ in range(3)]
    params, buffers = F.stack_module_state(models)
    tparams, tbuffers = TF.stack_module_state(tmodels)
    for got, want in ((params, tparams), (buffers, tbuffers)):
        assert list(got) == list(want)
        for k in want:
            assert tuple(got[k].shape) == tuple(want[k].shape)
            assert got[k].requires_grad == want[k].requires_grad and got[k].grad_fn is None
    for i, m in enumerate(models):
        np.testing.assert_array_equal(params["0.weight"][i].detach().numpy(), m[0].weight.detach().numpy())
    assert params["0.weight"].requires_grad and not buffers["1.running_var"].requires_grad
