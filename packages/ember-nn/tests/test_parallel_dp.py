"""ember.nn.parallel: DataParallel (without an accelerator it calls its module, as PyTorch's; over several devices it
scatters, replicates, applies in threads and gathers), its parts, data_parallel, and DistributedDataParallel, which
ember-distributed provides (resolved on first access)."""
import collections
import importlib
import sys
import types

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
import ember.nn.parallel as parallel

dp_module = importlib.import_module("ember.nn.parallel.data_parallel")  # (the function of that name hides it)

pytestmark = pytest.mark.autograd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 5), nn.Linear(5, 3)
        self.register_buffer("scale", ember.tensor([2.0]))

    def forward(self, x, shift=0.0):
        return self.fc2(self.fc1(x).tanh()) * self.scale + shift


def _grads(module):
    return {k: p.grad.numpy().copy() for k, p in module.named_parameters()}


def test_without_accelerator_it_calls_the_module_as_torch():
    t_dp = torch.nn.DataParallel(torch.nn.Linear(4, 3))
    e_net = Net()
    dp = nn.DataParallel(e_net)
    assert dp.module is e_net and dp.device_ids == t_dp.device_ids == []
    assert repr(nn.DataParallel(nn.Linear(4, 3))) == repr(t_dp)
    assert list(dp.state_dict()) == ["module." + k for k in e_net.state_dict()]
    assert list(nn.DataParallel(nn.Linear(4, 3)).state_dict()) == list(t_dp.state_dict())
    x = ember.randn(6, 4)
    out = dp(x, shift=1.0)
    np.testing.assert_array_equal(out.detach().numpy(), e_net(x, shift=1.0).detach().numpy())
    out.sum().backward()
    assert all(p.grad is not None for p in e_net.parameters())
    dp.eval()
    assert not e_net.training


def test_state_dict_of_torch_data_parallel_loads(tmp_path):
    t_dp = torch.nn.DataParallel(torch.nn.Linear(4, 3))
    torch.save(t_dp.state_dict(), tmp_path / "dp.pt")
    e_dp = nn.DataParallel(nn.Linear(4, 3))
    e_dp.load_state_dict(ember.load(tmp_path / "dp.pt"))
    np.testing.assert_array_equal(e_dp.module.weight.detach().numpy(), t_dp.module.weight.detach().numpy())
    ember.save(e_dp.state_dict(), tmp_path / "back.pt")
    t_dp.load_state_dict(torch.load(tmp_path / "back.pt"))


def test_data_parallel_function_without_accelerator():
    net, x = Net(), ember.randn(6, 4)
    expected = net(x, shift=2.0).detach().numpy()
    np.testing.assert_array_equal(parallel.data_parallel(net, x, module_kwargs={"shift": 2.0}).detach().numpy(),
                                  expected)
    np.testing.assert_array_equal(parallel.data_parallel(net, (x, 2.0)).detach().numpy(), expected)


# ---- the parts, on CPU devices ---------------------------------------------------------------------------------
CPUS = [ember.device("cpu", 0), ember.device("cpu", 1)]
Pair = collections.namedtuple("Pair", "a b")


def test_scatter_and_gather_structures():
    x = ember.arange(10.0).reshape(5, 2)
    pieces = parallel.scatter((x, Pair(x, 3), [x], {"k": x}, "tag"), CPUS)
    assert len(pieces) == 2
    first = pieces[0]
    assert first[0].shape == (3, 2) and pieces[1][0].shape == (2, 2)
    assert isinstance(first[1], Pair) and first[1].b == 3 and isinstance(first[2], list)
    assert first[3]["k"].shape == (3, 2) and first[4] == "tag"
    joined = parallel.gather([Pair(p[0], p[3]["k"]) for p in pieces], -1)
    assert isinstance(joined, Pair)
    np.testing.assert_array_equal(joined.a.numpy(), x.numpy())
    np.testing.assert_array_equal(parallel.gather([{"k": p[3]["k"]} for p in pieces], "cpu")["k"].numpy(), x.numpy())
    assert len(parallel.scatter(ember.arange(1.0), CPUS)) == 1  # fewer rows than devices: fewer pieces
    with pytest.warns(UserWarning, match="all input tensors were scalars"):
        assert parallel.gather([ember.tensor(1.0), ember.tensor(2.0)], -1).shape == (2,)
    with pytest.raises(ValueError, match="same number of keys"):
        parallel.gather([{"a": x}, {"a": x, "b": x}], -1)


def test_scatter_kwargs_pads():
    inputs, kwargs = dp_module.scatter_kwargs((ember.ones(4, 2),), {"shift": 1.0}, CPUS)  # (as PyTorch's, there)
    assert len(inputs) == len(kwargs) == 2 and kwargs[1] == {"shift": 1.0}
    inputs, kwargs = dp_module.scatter_kwargs((), {"x": ember.ones(4, 2)}, CPUS)
    assert inputs == ((), ()) and kwargs[0]["x"].shape == (2, 2)


def test_replicas_send_gradients_to_the_original():
    net, x = Net(), ember.randn(8, 4)
    net(x).pow(2).sum().backward()
    expected = _grads(net)
    net.zero_grad()
    replicas = parallel.replicate(net, CPUS)
    for r in replicas:
        assert r is not net and r.fc1 is not net.fc1 and r.fc1.weight is not net.fc1.weight
        assert not r.fc1.weight.is_leaf
    pieces = parallel.scatter((x,), CPUS)
    outputs = parallel.parallel_apply(replicas, pieces, None, CPUS)
    parallel.gather(outputs, -1).pow(2).sum().backward()
    for k, g in _grads(net).items():
        np.testing.assert_allclose(g, expected[k], rtol=1e-5, atol=1e-6)
    detached = parallel.replicate(net, CPUS[:1], detach=True)[0]
    assert not detached.fc1.weight.requires_grad


def test_parallel_apply_grad_mode_and_errors():
    net = Net()
    replicas = parallel.replicate(net, CPUS)
    with ember.no_grad():
        outs = parallel.parallel_apply(replicas, [ember.randn(2, 4), ember.randn(3, 4)])
    assert not any(o.requires_grad for o in outs)
    with pytest.raises(RuntimeError, match="Caught RuntimeError in replica 1"):
        parallel.parallel_apply(replicas, [ember.randn(2, 4), ember.randn(3, 7)], devices=CPUS)
    with pytest.raises(AssertionError):
        parallel.parallel_apply(replicas, [ember.randn(2, 4)])


@pytest.fixture
def two_devices(monkeypatch):
    """Pretend the accelerator is the CPU with two devices: DataParallel's multi-device path, runnable here."""
    monkeypatch.setattr(dp_module, "_device_type", lambda: "cpu")
    monkeypatch.setattr(dp_module, "_all_device_indices", lambda: [0, 1])


def test_data_parallel_over_two_devices(two_devices):
    net, x = Net(), ember.randn(7, 4)
    expected = net(x, shift=0.5)
    expected.sum().backward()
    grads = _grads(net)
    net.zero_grad()
    dp = nn.DataParallel(net)
    assert dp.device_ids == [0, 1] and dp.output_device == 0 and dp.dim == 0
    out = dp(x, shift=0.5)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    out.sum().backward()
    for k, g in _grads(net).items():
        np.testing.assert_allclose(g, grads[k], rtol=1e-5, atol=1e-6)
    functional = parallel.data_parallel(net, x, module_kwargs={"shift": 0.5})
    np.testing.assert_allclose(functional.detach().numpy(), expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    single = nn.DataParallel(Net(), device_ids=["cpu:0"], output_device=1)  # one device: the module itself runs
    assert single.device_ids == [0] and single.output_device == 1
    assert single(x).shape == (7, 3)


def test_data_parallel_checks_the_module_placement(two_devices):
    dp = nn.DataParallel(Net())
    dp.src_device_obj = ember.device("cpu", 1)
    with pytest.raises(RuntimeError, match="module must have its parameters and buffers on device cpu:1"):
        dp(ember.randn(4, 4))


# ---- DistributedDataParallel ---------------------------------------------------------------------------------
@pytest.fixture
def no_cached_ddp(monkeypatch):
    monkeypatch.delitem(vars(parallel), "DistributedDataParallel", raising=False)
    monkeypatch.setitem(sys.modules, "ember.nn.parallel.distributed", None)  # (None: "not installed" to import)
    yield monkeypatch
    vars(parallel).pop("DistributedDataParallel", None)  # (the resolution is cached: forget what the test saw)


def test_distributed_data_parallel_without_ember_distributed(no_cached_ddp):
    no_cached_ddp.setitem(sys.modules, "ember.distributed", None)
    from ember.nn.parallel import DistributedDataParallel
    assert "DistributedDataParallel" in parallel.__all__
    with pytest.raises(AttributeError, match="ember-distributed: pip install ember-distributed"):
        DistributedDataParallel(Net())


def test_distributed_data_parallel_of_an_ember_distributed_without_it(no_cached_ddp):
    no_cached_ddp.setitem(sys.modules, "ember.distributed", types.ModuleType("ember.distributed"))
    with pytest.raises(NotImplementedError, match="does not provide DistributedDataParallel yet"):
        parallel.DistributedDataParallel(Net())


def test_distributed_data_parallel_resolved_from_ember_distributed(no_cached_ddp):
    class FakeDDP(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    fake = types.ModuleType("ember.distributed")
    no_cached_ddp.setitem(sys.modules, "ember.distributed", fake)
    placeholder = parallel.DistributedDataParallel  # (imported before ember-distributed provides it)
    fake.DistributedDataParallel = FakeDDP
    assert isinstance(placeholder(Net()), FakeDDP)  # (the placeholder looks again when constructed)
    assert parallel.DistributedDataParallel is FakeDDP
    assert isinstance(parallel.DistributedDataParallel(Net()).module, Net)


def test_package_is_extensible():
    assert len(parallel.__path__) >= 1 and list(parallel.__path__) == list(
        __import__("pkgutil").extend_path(parallel.__path__, "ember.nn.parallel"))
