"""The autograd profiler (events, averages, table, chrome trace) and the global operator callbacks."""
import json

import numpy as np
import pytest
import torch

import ember
from ember import _dispatch
from ember.autograd import profiler as P


def program(lib, x, w):
    with (P if lib is ember else torch.autograd.profiler).record_function("block"):
        y = (x @ w).sin()
    return y.sum()


def _inputs(lib):
    rng = np.random.default_rng(0)
    return lib.tensor(rng.random((8, 5))).requires_grad_(), lib.tensor(rng.random((5, 3)))


def test_ops_and_blocks_are_recorded_like_torch():
    x, w = _inputs(ember)
    layers, forced = _dispatch.layers(), _dispatch.FORCED[0]
    with P.profile(record_shapes=True) as prof:
        program(ember, x, w).backward()
    assert _dispatch.layers() == layers and _dispatch.FORCED[0] == forced
    with torch.autograd.profiler.profile(record_shapes=True) as tprof:
        program(torch, *_inputs(torch))
    keys = {e.key for e in prof.key_averages()}
    torch_keys = {e.key for e in tprof.key_averages()}
    for name in ("matmul", "sin", "sum"):
        assert f"ember::{name}" in keys and f"aten::{name}" in torch_keys
    assert "block" in keys and "ember::cos" in keys  # the backward pass runs sin's VJP
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["ember::sin"].count == 1 and avg["ember::matmul"].count >= 2  # forward + backward
    by_shape = {(e.key, str(e.input_shapes)): e for e in prof.key_averages(group_by_input_shape=True)}
    assert ("ember::matmul", "[[8, 5], [5, 3]]") in by_shape
    torch_block = [e for e in tprof.function_events if e.name == "block"][0]
    block = [e for e in prof.function_events if e.name == "block"][0]
    assert {c.name for c in block.cpu_children} == {"ember::matmul", "ember::sin"}
    assert {c.name for c in torch_block.cpu_children} >= {"aten::matmul", "aten::sin"}
    assert block.self_cpu_time_total == pytest.approx(
        block.cpu_time_total - sum(c.cpu_time_total for c in block.cpu_children))
    assert 0 < block.self_cpu_time_total < block.cpu_time_total
    assert prof.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in prof.function_events))


def test_table_and_trace(tmp_path):
    x, w = _inputs(ember)
    with P.profile(record_shapes=True) as prof:
        program(ember, x, w)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=2)
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    assert len(lines) == 2 + 3 + 2 and lines[-1].startswith("Self CPU time total:")
    by_self = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    assert lines[3].split()[0] == by_self[0].key
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    assert "ember::sin" in str(prof)
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert {"block", "ember::matmul"} <= {e["name"] for e in events}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_disabled_and_decorator():
    with P.profile(enabled=False) as prof:
        ember.ones(2) + 1
    assert prof.function_events == []

    @P.record_function("decorated")
    def work(t):
        return t * 2

    with P.profile() as prof:
        work(ember.ones(2))
        work(ember.ones(2))
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["decorated"].count == 2 and avg["ember::mul"].count == 2
    with P.profile() as running:
        with pytest.raises(RuntimeError, match="didn't finish"):
            running.key_averages()


def test_global_callbacks_sampling_inputs_and_debug_info():
    seen, ended = [], []
    forced = _dispatch.FORCED[0]

    def start(rec):
        seen.append((rec.name, rec.inputs, rec.debug_info.get("model")))
        return len(seen)

    handle = P.add_global_callback(start, lambda rec, ctx: ended.append((rec.name, ctx)), needs_inputs=True)
    try:
        assert P.has_global_callbacks() and "profiler" in _dispatch.layers()
        x = ember.ones(3, requires_grad=True)
        with P.debug_info(model="m1"):
            y = (x * 2).sum()
            y.backward()
        with P.record_function("user"):
            pass
    finally:
        P.remove_global_callback(handle)
    assert "profiler" not in _dispatch.layers() and _dispatch.FORCED[0] == forced
    names = [n for n, _, _ in seen]
    assert names[:2] == ["ember::mul", "ember::sum"] and "user" in names
    assert seen[0][1][0] is x and seen[0][1][1] == 2
    assert all(model == "m1" for name, _, model in seen if name != "user")  # backward ops too
    assert len(seen) > 2 and ended[0] == ("ember::mul", 1)
    with pytest.raises(ValueError):
        P.remove_global_callback(handle)

    counts = []
    P._sampler.seed(0)
    for prob in (0.0, 0.25, 1.0):
        counts.append(0)
        h = P.add_global_callback(lambda rec: counts.__setitem__(-1, counts[-1] + 1), sampling_prob=prob)
        for _ in range(400):
            ember.ones(1) + 1
        P.remove_global_callback(h)
    assert counts[0] == 0 and 50 < counts[1] < 150 and counts[2] == 400
    with pytest.raises(ValueError, match="sampling_prob"):
        P.add_global_callback(print, sampling_prob=1.5)


def test_callbacks_without_inputs_and_profiler_together():
    seen = []
    h = P.add_global_callback(None, lambda rec, ctx: seen.append(rec.inputs))
    try:
        with P.profile() as prof:
            ember.ones(2).exp()
    finally:
        P.clear_global_callbacks()
    assert seen == [None] and [e.name for e in prof.function_events] == ["ember::exp"]
    assert not P.has_global_callbacks() and h not in P._callbacks
