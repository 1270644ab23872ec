"""The older hook-based nn.utils.weight_norm / spectral_norm against PyTorch (outputs, gradients, buffers,
state_dict keys, remove, errors), and skip_init, stateless.functional_call and the conv weight memory-format
converters. Both libraries draw the same normal numbers for a seed, so spectral norm's u and v start equal."""
import pytest
import torch
from _torch_compare import assert_same, to_ember

import ember


def _pair(make, seed=0):
    torch.manual_seed(seed)
    t = make(torch).double()
    e = make(ember).double()
    e.load_state_dict(to_ember(t.state_dict()))
    return e, t


MAKERS = {
    "linear": (lambda lib: lib.nn.Linear(5, 4), (3, 5)),
    "conv2d": (lambda lib: lib.nn.Conv2d(3, 4, 3), (2, 3, 5, 5)),
    "convT2d": (lambda lib: lib.nn.ConvTranspose2d(3, 4, 2), (2, 3, 3, 3)),
}


def _step(e, t, shape, n=2):
    """``n`` forwards and backwards in both; the outputs and the gradients of every parameter agree."""
    for _ in range(n):
        x = torch.randn(shape, dtype=torch.float64)
        out_t, out_e = t(x), e(to_ember(x))
        assert_same(out_e, out_t, rtol=1e-9, atol=1e-10)
        out_t.square().sum().backward()
        out_e.square().sum().backward()
    for (name_e, p_e), (name_t, p_t) in zip(e.named_parameters(), t.named_parameters()):
        assert name_e == name_t
        assert_same(p_e.grad, p_t.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm(kind, dim):
    make, shape = MAKERS[kind]
    e, t = _pair(make)
    for lib, m in ((ember, e), (torch, t)):
        with pytest.warns(FutureWarning):
            assert lib.nn.utils.weight_norm(m, dim=dim) is m
    assert list(e.state_dict()) == list(t.state_dict())
    assert_same(e.weight_g, t.weight_g)
    _step(e, t, shape)
    for lib, m in ((ember, e), (torch, t)):
        assert lib.nn.utils.remove_weight_norm(m) is m
    assert list(e.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    assert isinstance(e.weight, ember.nn.Parameter) and not e._forward_pre_hooks
    assert_same(e.weight, t.weight, rtol=1e-12)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_spectral_norm(kind):
    make, shape = MAKERS[kind]
    e, t = _pair(make)
    for lib, m in ((ember, e), (torch, t)):
        lib.manual_seed(3)
        assert lib.nn.utils.spectral_norm(m, n_power_iterations=2) is m
    assert list(e.state_dict()) == list(t.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert_same(e.weight_u, t.weight_u, rtol=1e-12)
    assert_same(e.weight_v, t.weight_v, rtol=1e-12)
    _step(e, t, shape)  # training: the power iteration advances the buffers
    assert_same(e.weight_u, t.weight_u, rtol=1e-9)
    e.eval()
    t.eval()
    u = e.weight_u.clone()
    _step(e, t, shape, n=1)
    assert ember.equal(u, e.weight_u)
    for lib, m in ((ember, e), (torch, t)):
        assert lib.nn.utils.remove_spectral_norm(m) is m
    assert list(e.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    assert_same(e.weight, t.weight, rtol=1e-9)


def test_norm_errors():
    for lib in (ember, torch):
        m = lib.nn.Linear(3, 2)
        with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
            lib.nn.utils.remove_weight_norm(m)
        with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
            lib.nn.utils.remove_spectral_norm(m)
        with pytest.raises(ValueError, match="n_power_iterations=0"):
            lib.nn.utils.spectral_norm(m, n_power_iterations=0)
        with pytest.warns(FutureWarning):
            lib.nn.utils.weight_norm(m)
        with pytest.raises(RuntimeError, match="two weight_norm hooks"), pytest.warns(FutureWarning):
            lib.nn.utils.weight_norm(m)
        lib.nn.utils.spectral_norm(m, name="bias")
        with pytest.raises(RuntimeError, match="two spectral_norm hooks"):
            lib.nn.utils.spectral_norm(m, name="bias")


def test_skip_init_functional_call_memory_format():
    class NoDevice(ember.nn.Module):
        pass

    m = ember.nn.utils.skip_init(ember.nn.Linear, 3, 2, bias=False)
    assert m.weight.device.type == "cpu" and m.weight.shape == (2, 3) and m.bias is None
    with pytest.raises(RuntimeError, match="'device' arg"):
        ember.nn.utils.skip_init(NoDevice)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        ember.nn.utils.skip_init(int)

    e, t = _pair(MAKERS["linear"][0])
    x = torch.randn(2, 5, dtype=torch.float64)
    w = torch.randn(4, 5, dtype=torch.float64)
    with pytest.warns(FutureWarning):
        out_e = ember.nn.utils.stateless.functional_call(e, {"weight": to_ember(w)}, (to_ember(x),))
    with pytest.warns(FutureWarning):
        out_t = torch.nn.utils.stateless.functional_call(t, {"weight": w}, (x,))
    assert_same(out_e, out_t)


def test_convert_conv_weight_memory_format():
    nets = {lib: lib.nn.Sequential(lib.nn.Conv2d(2, 3, 2), lib.nn.Sequential(lib.nn.ConvTranspose2d(3, 2, 2)),
                                   lib.nn.Conv3d(3, 3, 2), lib.nn.Linear(2, 2)) for lib in (ember, torch)}
    before = [p.clone() for p in nets[ember].parameters()]
    for lib, net in nets.items():
        assert lib.nn.utils.convert_conv2d_weight_memory_format(net, lib.channels_last) is net
        assert lib.nn.utils.convert_conv3d_weight_memory_format(net, lib.channels_last_3d) is net
    assert [p.stride() for p in nets[ember].parameters()] == [p.stride() for p in nets[torch].parameters()]
    assert nets[ember][0].weight.is_contiguous(memory_format=ember.channels_last)
    assert all(ember.equal(a, b) for a, b in zip(before, nets[ember].parameters()))


def test_module_to_memory_format():
    nets = {lib: lib.nn.Sequential(lib.nn.Conv2d(2, 3, 2), lib.nn.BatchNorm2d(3), lib.nn.Linear(2, 2))
            for lib in (ember, torch)}
    for lib, net in nets.items():
        assert net.to(memory_format=lib.channels_last) is net
    assert [p.stride() for p in nets[ember].parameters()] == [p.stride() for p in nets[torch].parameters()]
    with pytest.raises(RuntimeError, match="required rank 5"):
        nets[torch].to(memory_format=torch.channels_last_3d)
    with pytest.raises(RuntimeError, match="required rank 5"):
        nets[ember].to(memory_format=ember.channels_last_3d)
    x = ember.randn(2, 2, 3, 3)
    cl = x.to(memory_format=ember.channels_last)
    assert cl.is_contiguous(memory_format=ember.channels_last)
    assert ember.allclose(nets[ember](cl), nets[ember](x))
