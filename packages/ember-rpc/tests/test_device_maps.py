"""Device maps: the checks of init_rpc, inverse maps, the errors for tensors on unmapped devices (PyTorch's
messages), tensors moved by a map through real workers (a CPU map here; CUDA maps on a GPU)."""
import os

import numpy as np
import pytest

import ember
import ember.distributed.rpc as rpc
from ember.distributed.rpc import _devmap

d = ember.device
_NO_MAP = ("TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before "
           "sending them over RPC, or call `set_device_map` on `TensorPipeRpcBackendOptions` to explicitly configure "
           "device mapping. ")


def test_target_and_errors():
    m = {d("cuda:0"): d("cuda:1"), d("cpu"): d("cuda:0")}
    assert _devmap.target(d("cuda:0"), m, "w1") == d("cuda:1")
    assert _devmap.target(d("cpu"), m, "w1") == d("cuda:0")
    assert _devmap.target(d("cpu"), {d("cuda:0"): d("cuda:1")}, "w1") is None  # CPU tensors stay without "cpu"
    assert _devmap.target(d("cpu"), None, "w1") is None
    with pytest.raises(RuntimeError) as e:
        _devmap.target(d("cuda:1"), {d("cuda:0"): d("cuda:1")}, "w1")
    assert str(e.value) == (f"{_NO_MAP}Request device mapping is not available for destination w1 for device cuda:1 "
                            "but received a tensor on that device.")
    with pytest.raises(RuntimeError) as e:
        _devmap.target(d("cuda:0"), None, "w1")
    assert "Request device mapping is not available for destination w1 for device cuda:0" in str(e.value)
    with pytest.raises(RuntimeError) as e:
        _devmap.target(d("cuda:0"), None, "w0", response=True)
    assert str(e.value) == (f"{_NO_MAP}Response device mapping is not available for destination w0, but found "
                            "tensor on device: cuda:0")
    with pytest.raises(RuntimeError) as e:
        _devmap.target(d("cuda:0"), {d("cuda:1"): d("cuda:0")}, "w0", response=True)
    assert str(e.value) == ("TensorPipe RPC backend only supports CPU tensors by default. Response device mapping is "
                            "not available for destination w0 for device cuda:0 but received a tensor on that device.")


def test_inverse_maps_and_device_lists():
    maps = {"w0": {"w1": {d("cuda:0"): d("cuda:1"), d("cuda:1"): d("cuda:0")}},
            "w1": {"w0": {d("cuda:1"): d("cuda:1")}},
            "w2": {"w1": {d("cuda:2"): d("cuda:3")}}}
    back = _devmap.reverse_maps("w1", maps)
    assert back == {"w0": {d("cuda:1"): d("cuda:0"), d("cuda:0"): d("cuda:1")}, "w2": {d("cuda:3"): d("cuda:2")}}
    assert _devmap.reverse_maps("w0", maps) == {"w1": {d("cuda:1"): d("cuda:1")}}
    # a request mapped there and its response mapped back land where they started
    for dev in maps["w0"]["w1"]:
        assert _devmap.target(_devmap.target(dev, maps["w0"]["w1"], "w1"), back["w0"], "w0", True) == dev
    assert _devmap.device_list([], maps["w1"], back) == [d("cuda:0"), d("cuda:1"), d("cuda:3")]
    assert _devmap.device_list([d("cuda:2")], maps["w1"], back) == [d("cuda:2")]
    assert _devmap.device_list([], {"w0": {d("cpu"): d("cuda:0")}}, {}) == []


def test_init_checks():
    names = ["w0", "w1"]
    counts = {"w0": 2, "w1": 2}
    ok = {"w0": {"w1": {d("cuda:0"): d("cuda:0")}}, "w1": {}}
    _devmap.check_all(names, counts, ok, {"w0": [], "w1": []})
    cases = [
        ({"w0": {"w9": {d("cuda:0"): d("cuda:0")}}, "w1": {}}, {"w0": [], "w1": []}, "invalid target node names"),
        ({"w0": {"w1": {d("cuda:0"): d("cuda:0"), d("cuda:1"): d("cuda:0")}}, "w1": {}}, {"w0": [], "w1": []},
         "duplicated target devices"),
        ({"w0": {"w1": {d("cuda:5"): d("cuda:0")}}, "w1": {}}, {"w0": [], "w1": []},
         "source devices with invalid indices"),
        ({"w0": {"w1": {d("cuda:0"): d("cuda:5")}}, "w1": {}}, {"w0": [], "w1": []},
         "target devices with invalid indices"),
        (ok, {"w0": [d("cuda:1")], "w1": []}, "unexpected source devices"),
        ({"w0": {"w1": {d("cuda:1"): d("cuda:1")}}, "w1": {}}, {"w0": [], "w1": [d("cuda:0")]},
         "unexpected target devices"),
        (ok, {"w0": [d("cuda:0"), d("cuda:0")], "w1": []}, "duplicated devices"),
        (ok, {"w0": [], "w1": [d("cuda:3")]}, "devices with invalid indices"),
    ]
    for maps, devices, match in cases:
        with pytest.raises(ValueError, match=match):
            _devmap.check_all(names, counts, maps, devices)


def test_mapping_pickler_only_when_needed():
    import sys

    if "cupy" not in sys.modules:  # (no CUDA tensor can exist: the plain pickle path)
        assert not _devmap.needed(None) and not _devmap.needed({d("cuda:0"): d("cuda:1")})
    assert _devmap.needed({d("cpu"): d("cuda:0")})


def echo_info(t):
    return t, t.requires_grad, t.device.type


def _cpu_map(rank, world):
    # a failed init_rpc fails on every worker with the same error (rank 0, whose store it is, waits until all have
    # read what they check before it may close the store): duplicate names, then invalid maps
    try:
        rpc.init_rpc("twin", rank=rank, world_size=world, rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
            init_method=f"tcp://127.0.0.1:{os.environ['PORT_C']}"))
        twins = None
    except RuntimeError as e:
        twins = str(e)
    bad = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{os.environ['PORT_A']}",
                                          device_maps={"worker1": {"cpu": "cpu"}, "nobody": {"cpu": "cpu"}})
    try:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world,
                     rpc_backend_options=bad if rank == 0 else rpc.TensorPipeRpcBackendOptions(
                         init_method=bad.init_method))
        failed = None
    except ValueError as e:
        failed = str(e)
    # a map naming the CPU sends CPU tensors through the mapping pickler (CUDA tensors take the same path)
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{os.environ['PORT_B']}")
    if rank == 0:
        opts.set_device_map("worker1", {"cpu": "cpu"})
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
    out = None
    if rank == 0:
        x = ember.arange(6.0, requires_grad=True)
        big = ember.ones(1 << 20)  # out-of-band buffer
        back, rg, dev = rpc.rpc_sync("worker1", echo_info, args=(x,))
        out = (back.detach().numpy(), rg, dev, back.requires_grad, float(rpc.rpc_sync("worker1", ember.sum,
                                                                                      args=(big,))))
    rpc.shutdown()
    return twins, failed, out


def test_cpu_device_map_through_workers(workers):
    from ember.distributed._testing import free_port

    res = workers(2).run(_cpu_map, env={f"PORT_{c}": str(free_port()) for c in "ABC"})
    for twins, failed, _ in res:
        assert twins is not None and "must be unique: ['twin']" in twins
        assert failed is not None and "invalid target node names" in failed
    values, rg_there, dev, rg_back, total = res[0][2]
    np.testing.assert_array_equal(values, np.arange(6.0))
    assert rg_there and dev == "cpu" and total == float(1 << 20)
    assert rg_back  # (unmapped: worker 1 has no map toward worker 0; requires_grad travels as ever)


def cuda_info(t):
    return t, str(t.device)


def make_cuda():
    return ember.ones(2, device="cuda:0")


def _cuda_map(rank, world):
    opts = rpc.TensorPipeRpcBackendOptions()
    if rank == 0:
        opts.set_device_map("worker1", {"cuda:0": "cuda:0"})
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
    out = {}
    if rank == 0:
        x = ember.arange(4.0, device="cuda:0")
        back, there = rpc.rpc_sync("worker1", cuda_info, args=(x,))
        out["mapped"] = (back.cpu().numpy(), there, str(back.device))
        rref = rpc.remote("worker1", cuda_info, args=(x,))
        out["remote"] = rref.to_here()[1]
    else:
        try:  # worker 1 has no map toward worker 0
            rpc.rpc_sync("worker0", cuda_info, args=(ember.ones(1, device="cuda:0"),))
        except RuntimeError as e:
            out["no_map"] = str(e)
    rpc.shutdown()
    return out


@pytest.mark.gpu
def test_cuda_tensors_move_by_the_map(workers):
    out0, out1 = workers(2).run(_cuda_map)
    values, there, back = out0["mapped"]
    np.testing.assert_array_equal(values, np.arange(4.0))
    assert there == "cuda:0" and back == "cuda:0" and out0["remote"] == "cuda:0"
    assert out1["no_map"].startswith(_NO_MAP + "Request device mapping is not available for destination worker0")


def _cuda_response_without_map(rank, world):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    out = None
    if rank == 0:
        try:
            rpc.rpc_sync("worker1", make_cuda)
        except RuntimeError as e:
            out = str(e)
    rpc.shutdown()
    return out


@pytest.mark.gpu
def test_cuda_response_without_map_fails_the_call(workers):
    err = workers(2).run(_cuda_response_without_map)[0]
    assert "Response device mapping is not available for destination worker0" in err
