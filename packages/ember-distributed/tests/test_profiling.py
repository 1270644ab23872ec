"""Collectives in profiles: the same events as torch's (``c10d::allreduce_`` around ``gloo:all_reduce``, and the
record_comm name), compared in one process (world size 1) under torch and ember."""
import warnings

import pytest
from oracle import needs_torch, torch_module

import ember
import ember.distributed as edist
from ember.distributed import _profiling

torch = torch_module("torch")

CALLS = {
    "all_reduce": lambda lib, d, x: d.all_reduce(x),
    "all_reduce async": lambda lib, d, x: d.all_reduce(x, async_op=True).wait(),
    "broadcast": lambda lib, d, x: d.broadcast(x, 0),
    "reduce": lambda lib, d, x: d.reduce(x, 0),
    "all_gather": lambda lib, d, x: d.all_gather([lib.empty(4)], x),
    "all_gather_into_tensor": lambda lib, d, x: d.all_gather_into_tensor(lib.empty(4), x),
    "reduce_scatter": lambda lib, d, x: d.reduce_scatter(lib.empty(4), [x]),
    "reduce_scatter_tensor": lambda lib, d, x: d.reduce_scatter_tensor(lib.empty(4), x),
    "all_to_all": lambda lib, d, x: d.all_to_all([lib.empty(4)], [x]),
    "all_to_all_single": lambda lib, d, x: d.all_to_all_single(lib.empty(4), x),
    "gather": lambda lib, d, x: d.gather(x, [lib.empty(4)], 0),
    "scatter": lambda lib, d, x: d.scatter(lib.empty(4), [x], 0),
    "barrier": lambda lib, d, x: d.barrier(),
    "monitored_barrier": lambda lib, d, x: d.monitored_barrier(),
    "broadcast_object_list": lambda lib, d, x: d.broadcast_object_list([1], 0),
    "record_comm": lambda lib, d, x: _named(d, lambda: d.all_reduce(x)),
}


def _named(dist, call):
    with dist.record_comm("FSDP::all_gather (layer1)"):
        call()


def _events(lib, dist):
    """{call: the names of its profiled events that are not tensor ops}."""
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    try:
        out = {}
        for name, call in CALLS.items():
            with lib.profiler.profile() as prof, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call(lib, dist, lib.ones(4))
            out[name] = [e.name for e in prof.events() if e.name.startswith(("c10d::", "gloo:", "FSDP"))]
        return out
    finally:
        dist.destroy_process_group()


@needs_torch
def test_collective_events_match_torch():
    expected = _events(torch, torch.distributed)
    got = _events(ember, edist)
    assert got == expected
    assert got["record_comm"] == ["c10d::allreduce_", "FSDP::all_gather (layer1)", "gloo:all_reduce"]


def test_no_stand_in_without_a_profiler():
    backend = object()
    assert _profiling.observed(backend) is backend


@pytest.mark.parametrize("fail", [False, True])
def test_events_close_when_the_backend_raises(fail):
    class Backend:
        def name(self):
            return "gloo"

        def allreduce(self, tensors, op, async_op):
            if fail:
                raise RuntimeError("peer gone")
            return None

    with ember.profiler.profile() as prof:
        stand_in = _profiling.observed(Backend())
        if fail:
            with pytest.raises(RuntimeError, match="peer gone"):
                stand_in.allreduce([], None, False)
        else:
            stand_in.allreduce([], None, False)
    events = [e for e in prof.events() if e.name.startswith(("c10d::", "gloo:"))]
    assert [e.name for e in events] == ["c10d::allreduce_", "gloo:all_reduce"]
    assert all(e.cpu_time_total >= 0 for e in events)
