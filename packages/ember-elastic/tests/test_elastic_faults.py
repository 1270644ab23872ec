"""Faults of an elastic job run by emberrun, with real worker processes doing ember collectives on loopback: a rank
that raises, fails once, is killed (SIGKILL) or hangs past its timer; a node (agent) killed mid-job; a node added
mid-job. After each recovery the workers check every all_reduce result and resume from their in-memory commit."""
import json
import signal
import socket

import pytest
from elastic_helpers import job_processes, kill_tree, launch, start, started_workers, wait_for, worker_envs

pytestmark = pytest.mark.slow  # (whole jobs of processes: Python 3.11's session runs them)

STANDALONE = ["--standalone", "--nproc-per-node", "2"]
# a fast dynamic rendezvous: dead nodes are dropped after 1 s without heartbeats, rounds close 1 s after the minimum
FAST_RDZV = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=2,join_timeout=60"


def _totals(out):
    """What each worker of ``out``'s node wrote at the end, by global rank."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("total_*"))]


def _expected_total(steps, world):
    return float(sum(sum(r + step for r in range(world)) for step in range(steps)))


def test_one_rank_raises(tmp_path):
    code, _, stderr = launch("ember", STANDALONE, "allreduce", 5, "raise1", out=tmp_path)
    assert code == 1
    root = stderr.split("Root Cause (first observed failure):")[1]
    assert "rank      : 1 (local_rank: 1)" in root and "RuntimeError: rank 1 fails at step 2" in root
    assert not job_processes(tmp_path)


def test_fails_only_on_first_attempt(tmp_path):
    code, _, stderr = launch("ember", [*STANDALONE, "--max-restarts", "1"], "allreduce", 6, "raise1", out=tmp_path)
    assert code == 0, stderr
    assert sorted(worker_envs(tmp_path)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # the second attempt resumed from step 2 (the last commit) and every step's sum was right
    for total in _totals(tmp_path):
        assert total == {"total": _expected_total(6, 2), "world": 2, "restart": 1}


def test_sigkill_of_a_worker(tmp_path):
    code, _, stderr = launch("ember", [*STANDALONE, "--max-restarts", "1"], "allreduce", 6, "kill1", out=tmp_path)
    assert code == 0, stderr
    assert "failed (exitcode: -9) local_rank: 1" in stderr
    for total in _totals(tmp_path):
        assert total == {"total": _expected_total(6, 2), "world": 2, "restart": 1}


def test_hung_worker_is_killed_by_the_watchdog(tmp_path):
    """Rank 1 overstays its 1 s timer: the agent's watchdog kills it (SIGKILL), the group restarts, the job ends
    well (torchrun's watchdog would kill the agent as well)."""
    code, _, stderr = launch("ember", [*STANDALONE, "--max-restarts", "1"], "hang", out=tmp_path,
                             env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})
    assert code == 0, stderr
    assert "failed (exitcode: -9) local_rank: 1" in stderr
    envs = worker_envs(tmp_path)
    assert sorted(envs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # each attempt's workers were told the watchdog's pipe (a new one per attempt, as torchrun's)
    assert all(env["TORCHELASTIC_TIMER_FILE"].startswith("/") for env in envs.values())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_options(port, max_restarts):
    return ["--nnodes", "1:2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"localhost:{port}", "--rdzv-id", "faults", "--rdzv-conf", FAST_RDZV, "--max-restarts",
            str(max_restarts), "--monitor-interval", "0.05"]


def _hold(*outs):
    """Slow the jobs of these nodes down (50 ms per step) until the test removes their "slow" file."""
    for out in outs:
        out.mkdir(parents=True, exist_ok=True)
        (out / "slow").touch()


def _worlds(out):
    """{(world size, restart count)} of the workers started on a node."""
    return {(int(env["WORLD_SIZE"]), env["TORCHELASTIC_RESTART_COUNT"]) for _, _, env in started_workers(out)}


def test_node_killed_mid_job_scale_down(tmp_path):
    """Two agents (nodes) with --nnodes 1:2; the second is SIGKILLed mid-job: its worker dies with it, and the first
    node restarts its worker (on the lost peer's error, or on missing the dead node's heartbeats, whichever comes
    first) in a round of one."""
    port, a_out, b_out = _free_port(), tmp_path / "a", tmp_path / "b"
    opts = _node_options(port, max_restarts=2)
    _hold(a_out, b_out)
    a = start("ember", opts, "allreduce", 200, out=a_out)
    b = None
    try:
        wait_for(lambda: started_workers(a_out), what="node a's worker")
        b = start("ember", opts, "allreduce", 200, out=b_out)
        wait_for(lambda: any(w == 2 for w, _ in _worlds(b_out)), what="a round of two nodes")
        b.send_signal(signal.SIGKILL)
        b.communicate()
        wait_for(lambda: not job_processes(b_out), timeout=10, what="node b's worker gone with its agent")
        # a's third worker: alone, then with b, then alone again
        wait_for(lambda: len(started_workers(a_out)) >= 3, timeout=60, what="node a's worker restarted alone")
        (a_out / "slow").unlink()
        _, stderr = a.communicate(timeout=120)
    except BaseException:
        kill_tree(a, a_out)
        if b is not None:
            kill_tree(b, b_out)
        raise
    assert a.returncode == 0, stderr
    # the job ended on the survivor alone, every step's sum checked in the world of its round
    [final] = _totals(a_out)
    assert final["world"] == 1
    assert {w for w, _ in _worlds(a_out)} == {1, 2}


def test_node_added_mid_job_scale_up(tmp_path):
    """A second agent joins a running one-node job: the first restarts its workers for a round of two (no restart
    of the budget is used: --max-restarts 0), and the new node's worker receives the committed state."""
    port, a_out, b_out = _free_port(), tmp_path / "a", tmp_path / "b"
    opts = _node_options(port, max_restarts=0)
    _hold(a_out, b_out)
    a = start("ember", opts, "allreduce", 200, out=a_out)
    b = None
    try:
        # (a step done alone first: else the whole job may run in the round of two)
        wait_for(lambda: (a_out / "progress_0").exists(), timeout=60, what="a step of node a's worker alone")
        b = start("ember", opts, "allreduce", 200, out=b_out)
        wait_for(lambda: any(w == 2 for w, _ in _worlds(a_out)) and any(w == 2 for w, _ in _worlds(b_out)),
                 timeout=60, what="a round of two nodes")
        for out in (a_out, b_out):
            (out / "slow").unlink()
        _, b_err = b.communicate(timeout=120)
        _, a_err = a.communicate(timeout=120)
    except BaseException:
        kill_tree(a, a_out)
        if b is not None:
            kill_tree(b, b_out)
        raise
    assert a.returncode == 0 and b.returncode == 0, a_err + b_err
    assert _worlds(a_out) == {(1, "0"), (2, "0")}
    totals = _totals(a_out) + _totals(b_out)
    assert totals[0] == totals[1] and totals[0]["world"] == 2
    # steps done alone added one rank's sums; the rest two ranks' (the exact split depends on timing)
    assert _expected_total(200, 1) < totals[0]["total"] < _expected_total(200, 2)
