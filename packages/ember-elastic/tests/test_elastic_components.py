"""The elastic package's parts on their own: process contexts, error files, timers and the watchdog, metrics,
events, the in-memory State, and agents used from Python (the local agent with function workers, and a custom
agent filling in the steps)."""
import io
import json
import logging
import multiprocessing
import os
import signal
import sys
import time
from datetime import timedelta

import pytest

import ember
from ember.distributed import TCPStore
from ember.distributed.elastic import events, metrics, timer
from ember.distributed.elastic.agent.server import (
    LocalElasticAgent,
    RunResult,
    SimpleElasticAgent,
    WorkerSpec,
    WorkerState,
)
from ember.distributed.elastic.multiprocessing import (
    DefaultLogsSpecs,
    MultiprocessContext,
    Std,
    SubprocessContext,
    start_processes,
    to_map,
)
from ember.distributed.elastic.multiprocessing.errors import ChildFailedError, ErrorHandler, ProcessFailure, record
from ember.distributed.elastic.rendezvous import RendezvousParameters, registry
from ember.distributed.elastic.state import State

# ------------------------------------------------------------------------------------------- process contexts

def echo_env(a, b):
    print(f"out {os.environ['LOCAL_RANK']}", flush=True)
    return (a + b, os.environ["LOCAL_RANK"])


def fails(message):
    raise ValueError(message)


def _specs(tmp_path, **kw):
    return DefaultLogsSpecs(log_dir=str(tmp_path / "logs"), **kw)


def _envs(n):
    return {r: {"LOCAL_RANK": str(r), "TORCHELASTIC_RUN_ID": "t", "TORCHELASTIC_RESTART_COUNT": "0"}
            for r in range(n)}


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_function_workers_return_values(tmp_path, method):
    ctx = start_processes("trainer", echo_env, {0: (1, 2), 1: (3, 4)}, _envs(2), _specs(tmp_path, redirects=Std.OUT),
                          start_method=method)
    assert isinstance(ctx, MultiprocessContext)
    result = ctx.wait(30)
    assert not result.is_failed()
    assert result.return_values == {0: (3, "0"), 1: (7, "1")}
    assert open(result.stdouts[1]).read() == "out 1\n" and result.stderrs[1] == ""


def test_function_failure_writes_the_error_file(tmp_path):
    ctx = start_processes("trainer", fails, {0: ("boom",)}, _envs(1), _specs(tmp_path, redirects=Std.ERR))
    result = ctx.wait(30)
    failure = result.failures[0]
    assert failure.exitcode == 1 and failure.message["message"] == "ValueError: boom"
    assert "Traceback" in failure.message["extraInfo"]["py_callstack"]
    assert "ValueError: boom" in open(result.stderrs[0]).read()


def test_binary_workers_tee_and_filter(tmp_path, capfd):
    code = "import os, sys; print('hi', sys.argv[1:], os.environ['LOCAL_RANK'], flush=True)"
    ctx = start_processes("echo", sys.executable, {0: ("-c", code, 1, [2]), 1: ("-c", code, 3, [4])}, _envs(2),
                          DefaultLogsSpecs(log_dir=str(tmp_path / "logs"), tee=Std.OUT, local_ranks_filter={0}))
    assert isinstance(ctx, SubprocessContext)
    result = ctx.wait(30)
    assert result.return_values == {0: None, 1: None}
    assert open(result.stdouts[1]).read() == "hi ['3', '[4]'] 1\n"  # arguments made strings
    assert open(result.stdouts[0]).read() == "hi ['1', '[2]'] 0\n"
    shown = capfd.readouterr().out
    assert "[echo0]:hi ['1', '[2]'] 0" in shown and "[echo1]" not in shown


def test_close_escalates_to_sigkill(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
           "time.sleep(60)"
    ctx = start_processes("stubborn", sys.executable, {0: ("-c", code)}, _envs(1), _specs(tmp_path, redirects=Std.OUT))
    path = ctx.stdouts[0]
    deadline = time.monotonic() + 30
    while "ready" not in open(path).read() and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = ctx.pids()[0]
    ctx.close(timeout=0.3)
    assert ctx.subprocess_handlers[0].proc.returncode == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failed_binary_stops_its_peers(tmp_path):
    ctx = start_processes("w", sys.executable, {0: ("-c", "import time; time.sleep(60)"),
                                                1: ("-c", "import sys; sys.exit(5)")}, _envs(2), _specs(tmp_path))
    result = ctx.wait(30)
    assert {r: f.exitcode for r, f in result.failures.items()} == {1: 5, 0: -signal.SIGTERM}
    assert list(result.failures) == [1, 0]  # the first failure first: it is the root cause
    assert result.failures[0].message == f"Signal 15 (SIGTERM) received by PID {result.failures[0].pid}"


def test_std_and_logs_specs(tmp_path):
    assert Std.from_str("3") == Std.ALL and Std.from_str("0:1,1:2") == {0: Std.OUT, 1: Std.ERR}
    with pytest.raises(ValueError):
        Std.from_str("4")
    assert to_map({1: Std.ERR}, 3) == {0: Std.NONE, 1: Std.ERR, 2: Std.NONE}
    specs = DefaultLogsSpecs(log_dir=str(tmp_path / "base"))
    envs = _envs(2)
    first = specs.reify(envs)
    assert first.error_files[1].endswith("/attempt_0/1/error.json") and envs[1]["TORCHELASTIC_ERROR_FILE"]
    assert os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(first.error_files[1])))).startswith("t_")
    assert DefaultLogsSpecs(log_dir=os.devnull).reify(_envs(1)).error_files == {0: os.devnull}
    with pytest.raises(NotADirectoryError):
        DefaultLogsSpecs(log_dir=__file__)


# ------------------------------------------------------------------------------------------------------ errors

def test_record_and_error_handler(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    with pytest.raises(KeyError):
        record(lambda: {}["missing"])()
    data = json.loads(path.read_text())["message"]
    assert data["message"] == "KeyError: 'missing'" and int(data["extraInfo"]["timestamp"]) <= time.time()
    assert record(lambda: sys.exit(0))() is None
    with pytest.raises(SystemExit):
        record(lambda: sys.exit(3))()
    # a parent's copy of its child's error file carries the exit code
    parent = tmp_path / "parent.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(parent))
    ErrorHandler().dump_error_file(str(path), error_code=7)
    assert json.loads(parent.read_text())["message"]["errorCode"] == 7
    failure = ProcessFailure(local_rank=0, pid=12, exitcode=-9, error_file="")
    assert (failure.signal_name(), failure.error_file) == ("SIGKILL", "<N/A>")
    err = ChildFailedError("job.py", {3: failure})
    assert err.get_first_failure() == (3, failure) and "SIGKILL" in str(err)


# ---------------------------------------------------------------------------------------------------- timers

def _timed_worker(queue, after, hold):
    timer.configure(timer.LocalTimerClient(queue))
    with timer.expires(after=after):
        time.sleep(hold)


def test_local_timer_server_reaps_expired_workers():
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    server = timer.LocalTimerServer(queue, max_interval=0.05)
    server.start()
    try:
        late, early = (ctx.Process(target=_timed_worker, args=(queue, 0.2, h)) for h in (30, 0))
        late.start()
        early.start()
        late.join(20)
        early.join(20)
    finally:
        server.stop()
    assert (late.exitcode, early.exitcode) == (-signal.SIGKILL, 0)


def _file_timed_worker(path, after, hold):
    timer.configure(timer.FileTimerClient(path))
    with timer.expires(after=after):
        time.sleep(hold)


def test_file_timer_server_reaps_only_the_worker(tmp_path):
    seen = []
    server = timer.FileTimerServer(str(tmp_path / "pipe"), run_id="r", max_interval=0.1,
                                   log_event=lambda name, request: seen.append(name))
    server.start()
    ctx = multiprocessing.get_context("fork")
    try:
        late, early = (ctx.Process(target=_file_timed_worker, args=(str(tmp_path / "pipe"), 0.2, h))
                       for h in (30, 0))
        late.start()
        early.start()
        late.join(20)
        early.join(20)
    finally:
        server.stop()
    assert (late.exitcode, early.exitcode) == (-signal.SIGKILL, 0)
    assert seen[0] == "watchdog started" and {"timer expired", "kill worker process"} <= set(seen)
    assert seen[-1] == "watchdog stopped" and not (tmp_path / "pipe").exists()


def test_expires_needs_a_client_and_names_its_scope():
    class Recorder(timer.TimerClient):
        def __init__(self):
            self.calls = []

        def acquire(self, scope_id, expiration_time):
            self.calls.append(("acquire", scope_id, expiration_time > time.time()))

        def release(self, scope_id):
            self.calls.append(("release", scope_id))
    timer.api._timer_client = None
    with pytest.raises(RuntimeError, match="Configure timer client"):
        with timer.expires(after=1):
            pass
    client = Recorder()
    with timer.expires(after=5, client=client):
        line = sys._getframe().f_lineno - 1
    scope = f"{__file__}#{line}"
    assert client.calls == [("acquire", scope, True), ("release", scope)]


# ------------------------------------------------------------------------------------------ metrics and events

class _Sink(metrics.MetricHandler):
    def __init__(self):
        self.data = []

    def emit(self, metric_data):
        self.data.append(metric_data)


def test_metrics_groups_and_prof(capsys):
    sink, other = _Sink(), _Sink()
    metrics.configure(sink, "mine")
    metrics.configure(other)
    try:
        metrics.put_metric("m", 3, "mine")
        metrics.put_metric("n", 4, "elsewhere")

        @metrics.prof(group="mine")
        def work(fail):
            if fail:
                raise ValueError
        work(False)
        with pytest.raises(ValueError):
            work(True)
        metrics.ConsoleMetricHandler().emit(metrics.MetricData(1.5, "g", "name", 2))
    finally:
        metrics.configure(metrics.NullMetricHandler())
        metrics.api._handlers.pop("mine")
    names = [(d.group_name, d.name) for d in sink.data]
    qual = "test_metrics_groups_and_prof.<locals>.work"
    assert names == [("mine", "m"), ("mine", f"{qual}.success"), ("mine", f"{qual}.duration.ms"),
                     ("mine", f"{qual}.failure"), ("mine", f"{qual}.duration.ms")]
    assert [(d.group_name, d.name, d.value) for d in other.data] == [("elsewhere", "n", 4)]
    assert capsys.readouterr().out == "[1.5][g]: name=2\n"


def test_events_serialise_and_log(caplog):
    event = events.Event("e", events.EventSource.WORKER, 5, {"k": 1, "x": None})
    assert events.Event.deserialize(event.serialize()) == event
    handler = logging.StreamHandler(io.StringIO())
    events.handlers._log_handlers["dynamic_rendezvous"] = handler
    try:
        events.construct_and_record_rdzv_event("run", "hello", events.NodeState.RUNNING, rank=2)
    finally:
        events.handlers._log_handlers["dynamic_rendezvous"] = logging.NullHandler()
        events._loggers.pop("dynamic_rendezvous")
    got = events.RdzvEvent.deserialize(handler.stream.getvalue().strip())
    assert (got.run_id, got.message, got.rank, got.node_state) == ("run", "hello", 2, events.NodeState.RUNNING)
    assert got.name == "test_elastic_components.py:test_events_serialise_and_log"


# ------------------------------------------------------------------------------------------- in-memory State

def test_state_commit_survives_a_new_process_state(monkeypatch):
    server = TCPStore("localhost", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    monkeypatch.setenv("EMBER_ELASTIC_STATE_STORE", f"localhost:{server.port}")
    monkeypatch.setenv("LOCAL_RANK", "0")
    model = ember.nn.Linear(3, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(ember.ones(4, 3)).sum().backward()
    opt.step()
    state = State(model=model, optimizer=opt, epoch=3)
    assert not state.restore() and state.version == -1
    for epoch in (4, 5, 6):
        state.epoch = epoch
        state.commit()
    assert server.check(["0/v2", "0/v1"]) and not server.check(["0/v0"])  # the last two commits are kept
    fresh_model = ember.nn.Linear(3, 2)
    fresh_opt = ember.optim.SGD(fresh_model.parameters(), lr=0.1, momentum=0.9)
    again = State(model=fresh_model, optimizer=fresh_opt, epoch=0)
    assert again.restore() and again.epoch == 6 and again.version == 2
    assert ember.equal(fresh_model.weight, model.weight)
    assert fresh_opt.state_dict()["state"].keys() == opt.state_dict()["state"].keys()
    with pytest.raises(AttributeError):
        again.missing  # noqa: B018 (the attribute access is what raises)


# ------------------------------------------------------------------------------------------------- agents

def trainer(path, fail_once):
    rank = int(os.environ["RANK"])
    if fail_once and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and rank == 1:
        raise RuntimeError("first attempt")
    return (rank, int(os.environ["WORLD_SIZE"]), os.environ["TORCHELASTIC_RESTART_COUNT"], path)


def _handler(run_id):
    return registry.get_rendezvous_handler(RendezvousParameters("c10d", "localhost:0", run_id, 1, 1))


@pytest.mark.parametrize("fail_once", [False, True])
def test_local_agent_runs_functions(tmp_path, fail_once):
    spec = WorkerSpec(role="trainer", local_world_size=2, entrypoint=trainer, args=("p", fail_once),
                      rdzv_handler=_handler(f"agent{fail_once}"), max_restarts=1, monitor_interval=0.05)
    result = LocalElasticAgent(spec, DefaultLogsSpecs(log_dir=str(tmp_path)), start_method="fork").run()
    restart = "1" if fail_once else "0"
    assert result == RunResult(WorkerState.SUCCEEDED, {0: (0, 2, restart, "p"), 1: (1, 2, restart, "p")})
    spec.rdzv_handler.shutdown()


class ScriptedAgent(SimpleElasticAgent):
    """An agent whose workers are a script of states: the steps a Ray agent fills in differently."""

    def __init__(self, spec, states):
        super().__init__(spec)
        self.states, self.calls = list(states), []

    def _start_workers(self, worker_group):
        self.calls.append(("start", self._restart_count()))
        return {w.local_rank: f"id{w.global_rank}" for w in worker_group.workers}

    def _stop_workers(self, worker_group):
        self.calls.append(("stop",))

    def _monitor_workers(self, worker_group):
        state = self.states.pop(0)
        failures = {0: ProcessFailure(0, 1, 3, "")} if state == WorkerState.FAILED else {}
        values = {w.global_rank: w.global_rank for w in worker_group.workers} if state == WorkerState.SUCCEEDED \
            else {}
        return RunResult(state, values, failures)

    def _shutdown(self, death_sig=signal.SIGTERM, timeout=30):
        self.calls.append(("shutdown",))

    def _wait_workers(self, worker_group, timeout):
        pass


def test_custom_agent_steps_and_policies():
    spec = WorkerSpec(role="r", local_world_size=2, entrypoint="x", rdzv_handler=_handler("scripted"),
                      max_restarts=2)
    agent = ScriptedAgent(spec, [WorkerState.HEALTHY, WorkerState.FAILED, WorkerState.FAILED,
                                 WorkerState.SUCCEEDED])
    result = agent.run()
    assert result.return_values == {0: 0, 1: 1} and not result.is_failed()
    assert agent.calls == [("start", 0), ("stop",), ("start", 1), ("stop",), ("start", 2), ("shutdown",)]
    assert [w.id for w in agent.get_worker_group().workers] == ["id0", "id1"]

    exhausted = ScriptedAgent(WorkerSpec(role="r", local_world_size=1, entrypoint="x",
                                         rdzv_handler=_handler("scripted2"), max_restarts=0), [WorkerState.FAILED])
    assert exhausted.run().is_failed() and exhausted.get_worker_group().state == WorkerState.FAILED
    assert spec.get_entrypoint_name() == "x"


def test_launcher_does_not_import_ray():
    """Ray is imported only on the Ray path (emberrun --ray-address, ember.distributed.elastic.ray)."""
    import subprocess
    code = ("import sys, ember, ember.distributed.run, ember.distributed.elastic.agent.server; "
            "sys.exit('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_failure_report_names_the_host_given():
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=-9, error_file="")
    failure.host = "node-b (Ray node 1234)"
    assert "host      : node-b (Ray node 1234)" in str(ChildFailedError("job", {3: failure}))
