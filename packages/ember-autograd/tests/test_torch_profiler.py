"""ember.profiler against torch.profiler: schedules, the step state machine, traces, tables, memory, stacks."""
import gzip
import json
import warnings

import numpy as np
import pytest
import torch
import torch.profiler as TP

import ember
import ember.profiler as P
from ember import _dispatch


def _inputs(lib):
    rng = np.random.default_rng(0)
    return lib.tensor(rng.random((8, 5))).requires_grad_(), lib.tensor(rng.random((5, 3)))


def _train_step(lib, prof_module, x, w):
    with prof_module.record_function("forward"):
        loss = (x @ w).relu().sum()
    loss.backward()


@pytest.mark.parametrize("kwargs", [dict(wait=1, warmup=1, active=2), dict(wait=2, warmup=0, active=1, repeat=2),
                                    dict(wait=1, warmup=2, active=3, repeat=1, skip_first=3),
                                    dict(wait=4, warmup=1, active=1, skip_first=2, skip_first_wait=1)])
def test_schedule_matches_torch(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = P.schedule(**kwargs), TP.schedule(**kwargs)
    assert [ours(s).name for s in range(30)] == [theirs(s).name for s in range(30)]
    with pytest.raises(AssertionError):
        ours(-1)


def test_schedule_errors_and_warning():
    for lib in (P, TP):
        for bad in (dict(wait=-1, warmup=1, active=1), dict(wait=0, warmup=1, active=0),
                    dict(wait=0, warmup=1, active=1, repeat=-1), dict(wait=0, warmup=1, active=1, skip_first=-2)):
            with pytest.raises(AssertionError, match="Invalid profiler schedule"):
                lib.schedule(**bad)
        with pytest.warns(UserWarning, match="warmup"):
            lib.schedule(wait=1, warmup=0, active=1)


def test_enums_and_availability():
    for name in ("ProfilerActivity", "DeviceType", "ProfilerAction"):
        ours, theirs = getattr(P, name), getattr(TP, name)
        assert {k: v.value for k, v in ours.__members__.items()} == {k: v.value for k, v in theirs.__members__.items()}
    assert P.kineto_available() is False
    assert P.supported_activities() == ({P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA}
                                        if ember.cuda.is_available() else {P.ProfilerActivity.CPU})
    assert P.record_function is ember.autograd.profiler.record_function
    assert ember.profiler is P


def _scheduled_run(lib, prof_module, steps=9, **kwargs):
    x, w = _inputs(lib)
    ready, recorded = [], []

    def on_ready(prof):
        ready.append(prof.step_num)
        recorded.append(sorted({e.name for e in prof.events() if e.name.startswith("ProfilerStep")}))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = prof_module.schedule(wait=1, warmup=1, active=2, repeat=2)
        with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU], schedule=sched,
                                 on_trace_ready=on_ready, **kwargs) as prof:
            for _ in range(steps):
                _train_step(lib, prof_module, x, w)
                prof.step()
    return ready, recorded, prof


def test_scheduled_profile_hands_over_the_same_steps_as_torch():
    layers, forced = _dispatch.layers(), _dispatch.FORCED[0]
    ready, recorded, prof = _scheduled_run(ember, P)
    t_ready, t_recorded, _ = _scheduled_run(torch, TP)
    assert ready == t_ready == [4, 8]
    assert recorded == t_recorded == [["ProfilerStep*"], ["ProfilerStep*"]]
    assert _dispatch.layers() == layers and _dispatch.FORCED[0] == forced  # nothing left switched on
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["forward"].count == 2 and avg["ember::matmul"].count == 2 * 2  # forward and backward, 2 steps
    assert prof.current_action == P.ProfilerAction.NONE and prof.step_num == 9


def test_unscheduled_profile_table_and_chrome_trace(tmp_path):
    x, w = _inputs(ember)
    with P.profile(record_shapes=True) as prof:
        _train_step(ember, P, x, w)
    names = {e.name for e in prof.events()}
    assert {"forward", "ember::matmul", "ember::relu", "ember::sum"} <= names
    assert not any(n.startswith("ProfilerStep") for n in names)  # no schedule, no step markers
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1] and len(lines) == 5 + 5
    totals = [e.cpu_time_total for e in prof.key_averages()]
    assert lines[3].split()[0] == max(prof.key_averages(), key=lambda e: e.cpu_time_total).key
    assert max(totals) > 0
    prof.add_metadata("run", "unit-test")
    prof.add_metadata_json("config", '{"lr": 0.1}')
    for name, opener in (("trace.json", open), ("trace.json.gz", gzip.open)):
        prof.export_chrome_trace(str(tmp_path / name))
        with opener(tmp_path / name, "rt") as f:
            doc = json.load(f)
        assert doc["run"] == "unit-test" and doc["config"] == {"lr": 0.1}
        events = doc["traceEvents"]
        assert {"forward", "ember::matmul"} <= {e["name"] for e in events}
        assert all(e["ph"] == "X" and e["dur"] >= 0 and isinstance(e["ts"], float) for e in events)
        assert [[8, 5], [5, 3]] in [e["args"]["Input Dims"] for e in events if e["name"] == "ember::matmul"]


def test_tensorboard_trace_handler(tmp_path):
    x, w = _inputs(ember)
    for gz in (False, True):
        out = tmp_path / f"tb{int(gz)}"
        handler = P.tensorboard_trace_handler(str(out), worker_name="worker0", use_gzip=gz)
        with P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=2), on_trace_ready=handler) as prof:
            for _ in range(4):
                _train_step(ember, P, x, w)
                prof.step()
        files = sorted(out.iterdir())
        assert len(files) == 2 and all(f.name.startswith("worker0.") for f in files)
        assert all(f.name.endswith(".pt.trace.json.gz" if gz else ".pt.trace.json") for f in files)
        with (gzip.open if gz else open)(files[0], "rt") as f:
            assert {"ember::matmul", "ProfilerStep#1"} <= {e["name"] for e in json.load(f)["traceEvents"]}


def test_profile_memory_matches_torch():
    def run(lib, prof_module):
        x, w = (t.detach() for t in _inputs(lib))
        with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU], profile_memory=True) as prof:
            with prof_module.record_function("block"):
                y = x @ w
                z = y + 1
                z.t()
                z.add_(1)
        return {e.key.split("::")[-1]: e.cpu_memory_usage for e in prof.key_averages()}, prof

    ours, prof = run(ember, P)
    theirs, _ = run(torch, TP)
    for name in ("matmul", "add", "t", "add_"):
        assert ours[name] == theirs[name], name
    assert ours["block"] == ours["matmul"] + ours["add"] == 2 * 8 * 3 * 8
    assert "CPU Mem" in prof.key_averages().table(sort_by="self_cpu_memory_usage")


def test_with_stack_and_export_stacks(tmp_path):
    x, w = _inputs(ember)
    with P.profile(with_stack=True) as prof:
        _train_step(ember, P, x, w)
    matmul = next(e for e in prof.events() if e.name == "ember::matmul")
    assert "test_torch_profiler.py" in matmul.stack[0] and "_train_step" in matmul.stack[0]
    grouped = prof.key_averages(group_by_stack_n=1)
    assert len([e for e in grouped if e.key == "ember::matmul"]) == 2  # the forward and the backward call sites
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    lines = path.read_text().splitlines()
    assert lines and all(int(line.rsplit(" ", 1)[1]) > 0 for line in lines)
    assert any(line.split(" ")[0].endswith("_train_step") for line in lines)
    with pytest.raises(ValueError):
        prof.export_stacks(str(path), metric="cpu_time")
    with P.profile() as plain:
        ember.ones(2) + 1
    assert all(e.stack == [] for e in plain.events())


def test_argument_errors():
    for lib in (P, TP):
        cpu = lib.ProfilerActivity.CPU
        with pytest.raises(ValueError, match="more than once"):
            lib.profile(activities=[cpu, cpu])
        with pytest.raises(TypeError):
            lib.profile(activities=[cpu, "cuda"])
        for nothing in ([], ["cpu"]):
            with pytest.raises(AssertionError):
                lib.profile(activities=nothing)
        with pytest.warns(FutureWarning, match="use_cuda"):
            lib.profile(use_cuda=False)
    with pytest.raises(AssertionError, match="initialized"):
        P.profile().events()
    with pytest.raises(ValueError, match="DEVICE_STOPPED"):
        P.profile(schedule=lambda step: P.ProfilerAction.DEVICE_STOPPED)


def test_incorrect_schedule_warns():
    with pytest.warns(UserWarning, match="RECORD followed by NONE"):
        with P.profile(schedule=lambda s: P.ProfilerAction.RECORD if s == 0 else P.ProfilerAction.NONE) as prof:
            ember.ones(2) + 1
            prof.step()


def _traced(lib, prof_module, path):
    et = prof_module.ExecutionTraceObserver()
    assert not et.is_registered and et.get_output_file_path() is None
    et.register_callback(str(path))
    assert et.is_registered and not et.is_running() and et.get_output_file_path() == str(path)
    x = lib.ones(2, 3)
    lib.ones(1) + 1  # before start(): not captured
    et.start()
    assert et.is_running()
    with prof_module.record_function("block"):
        y = (x + 1).sum(0)
    et.stop()
    y * 2  # after stop(): not captured
    et.unregister_callback()
    assert not et.is_registered and not et.is_running()
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["et.json", "et.json.gz"])
def test_execution_trace_observer(tmp_path, name):
    ours = _traced(ember, P, tmp_path / name)
    theirs = _traced(torch, TP, tmp_path / f"torch_{name}")
    assert set(ours) == set(theirs) and ours["schema"] == theirs["schema"]
    assert ours["start_ts"] <= ours["finish_ts"]
    nodes = {n["name"]: n for n in ours["nodes"]}
    t_nodes = {n["name"]: n for n in theirs["nodes"]}
    assert {"ember::add", "ember::sum", "block"} <= set(nodes) and {"aten::add", "aten::sum", "block"} <= set(t_nodes)
    assert "ember::mul" not in nodes and "aten::mul" not in t_nodes
    for trace, prefix in ((nodes, "ember"), (t_nodes, "aten")):
        thread = trace["[pytorch|profiler|execution_trace|thread]"]
        add, total = trace[f"{prefix}::add"], trace[f"{prefix}::sum"]
        assert trace["block"]["ctrl_deps"] == thread["id"]
        assert add["ctrl_deps"] == total["ctrl_deps"] == trace["block"]["id"]
        assert set(add) == set(t_nodes["aten::add"]) and set(add["inputs"]) == {"values", "shapes", "types", "strides"}
        assert add["inputs"]["shapes"][0] == [2, 3] and add["inputs"]["types"][0] == "Tensor(float)"
        assert add["outputs"]["strides"] == [[3, 1]] and total["outputs"]["shapes"] == [[3]]
        # the data flow: the sum reads the tensor the add wrote (same tensor id, storage, offset, size, itemsize)
        assert total["inputs"]["values"][0] == add["outputs"]["values"][0]
        assert add["outputs"]["values"][0][3:] == [6, 4, "cpu"]
    assert {a["name"] for a in nodes["block"]["attrs"]} == {a["name"] for a in t_nodes["block"]["attrs"]}


def test_execution_trace_with_profile(tmp_path):
    x, w = _inputs(ember)
    et = P.ExecutionTraceObserver().register_callback(str(tmp_path / "et.json"))
    with P.profile(schedule=P.schedule(wait=1, warmup=1, active=1), execution_trace_observer=et) as prof:
        for _ in range(3):
            _train_step(ember, P, x, w)
            prof.step()
    assert not et.is_registered  # the profiler finalised the trace on exit
    names = [n["name"] for n in json.loads((tmp_path / "et.json").read_text())["nodes"]]
    assert names.count("forward") == 1 and "ember::matmul" in names  # only the recorded step
