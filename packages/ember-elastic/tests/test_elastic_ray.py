"""Elastic jobs on a real local Ray cluster (ray.cluster_utils.Cluster: several Ray nodes on this machine, loopback
only), run by emberrun --ray-address and by ray_launch, with real worker processes doing ember collectives: the
console and log files, a rank that raises, fails once, always fails, is SIGKILLed, dies of SIGSEGV; the coordinator
actor killed mid-job; a lost node replaced from the copies of its last commit; a lost node and the job going on with
fewer nodes, then growing back when a Ray node joins. One cluster serves the whole module (its nodes have one CPU
each: one node of a job per Ray node)."""
import json
import operator
import os
import signal
import sys
import threading

import pytest

# Ray on loopback (else it advertises the machine's external address); read when ray is imported
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")

from elastic_helpers import (  # noqa: E402
    JOB,
    job_processes,
    kill_tree,
    launch,
    start,
    started_workers,
    wait_for,
    worker_envs,
)
from ray.cluster_utils import Cluster  # noqa: E402

from ember.distributed.elastic.multiprocessing import DefaultLogsSpecs  # noqa: E402
from ember.distributed.elastic.multiprocessing.errors import ChildFailedError  # noqa: E402
from ember.distributed.elastic.ray import ray_launch  # noqa: E402
from ember.distributed.elastic.ray.coordinator import NAMESPACE, coordinator_name  # noqa: E402
from ember.distributed.launcher.api import LaunchConfig  # noqa: E402

# a lost Ray node is declared dead after ~1.5 s without health checks (Ray's default: 15 s)
FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}


@pytest.fixture(scope="module")
def cluster():
    # one GPU declared per node (Ray takes resources as declared: no device is needed to place GPU bundles)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1, "include_dashboard": False,
                                                      "_system_config": FAST_HEALTH})
    c.add_node(num_cpus=1, num_gpus=1)
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _config(run_id, nnodes=(2, 2), max_restarts=0, **kwargs):
    return LaunchConfig(min_nodes=nnodes[0], max_nodes=nnodes[1], nproc_per_node=1, run_id=run_id,
                        max_restarts=max_restarts, monitor_interval=0.05, shutdown_timeout=5,
                        logs_specs=DefaultLogsSpecs(), **kwargs)


def _launch(config, out, *job):
    out.mkdir(parents=True, exist_ok=True)
    return ray_launch(config, sys.executable, address="auto", env={"JOB_OUT": str(out)})("-u", JOB, "ember", *job)


class _in_background(threading.Thread):
    """A job run by ray_launch in a daemon thread (a failed test does not keep pytest waiting for it)."""

    def __init__(self, config, out, *job):
        super().__init__(daemon=True)
        self._job, self._outcome = (config, out, *job), None
        self.start()

    def run(self):
        try:
            self._outcome = (True, _launch(*self._job))
        except BaseException as e:
            self._outcome = (False, e)

    def result(self, timeout):
        self.join(timeout)
        if self._outcome is None:
            raise TimeoutError("the job did not end")
        ok, value = self._outcome
        if not ok:
            raise value
        return value


def _leftovers():
    """The job actors still alive and the placement groups not removed (there should be none)."""
    actors = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]
    groups = [g["name"] for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
    return actors + groups


def _assert_clean(out):
    wait_for(lambda: not _leftovers(), timeout=20, what="the job's actors and placement groups gone")
    assert not job_processes(out)


def _expected_total(steps, world):
    return float(sum(sum(r + step for r in range(world)) for step in range(steps)))


def _totals(out, prefix="total_"):
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"{prefix}*"))]


def _hold(out):
    out.mkdir(parents=True, exist_ok=True)
    (out / "slow").touch()


def _kill_worker(out, rank, restart):
    [pid] = [int(p.stem.split("_")[3]) for p in out.glob(f"env_{rank}_{restart}_*.json")]
    os.kill(pid, signal.SIGKILL)


def test_cli_environment_console_and_logs(cluster, tmp_path):
    logs = tmp_path / "logs"
    code, stdout, stderr = launch("ember", ["--ray-address", cluster.address, "--nnodes", "2", "--nproc-per-node",
                                            "1", "--tee", "3", "--log-dir", str(logs), "--rdzv-id", "cli-env"],
                                  "env", out=tmp_path / "out", timeout=120)
    assert code == 0, stderr
    envs = worker_envs(tmp_path / "out")
    assert sorted(envs) == [(0, 0), (1, 0)]
    for (rank, _), env in envs.items():
        assert (env["RANK"], env["GROUP_RANK"], env["LOCAL_RANK"]) == (str(rank), str(rank), "0")
        assert (env["WORLD_SIZE"], env["GROUP_WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("2", "2", "1")
        assert env["TORCHELASTIC_RUN_ID"] == "cli-env" and env["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True" and env["MASTER_ADDR"] == "127.0.0.1"
    # rank-prefixed console lines, each on its stream; per-rank log files on the nodes
    assert "[default0]:out of rank 0\n" in stdout and "[default1]:out of rank 1\n" in stdout
    assert "[default0]:err of rank 0\n" in stderr and "[default1]:err of rank 1\n" in stderr
    logged = sorted(p.read_text() for p in logs.rglob("stdout.log"))
    assert logged == ["out of rank 0\n", "out of rank 1\n"]
    _assert_clean(tmp_path / "out")


def test_cli_gpu_bundles(cluster, tmp_path):
    """--ray-gpus: each node's bundle is its workers' GPUs; Ray hands each node's actor its device, which the
    workers inherit."""
    code, _, stderr = launch("ember", ["--ray-address", cluster.address, "--ray-gpus", "--nnodes", "2",
                                       "--nproc-per-node", "1"], "env", out=tmp_path, timeout=120)
    assert code == 0, stderr
    envs = worker_envs(tmp_path)
    assert sorted(envs) == [(0, 0), (1, 0)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs.values()] == ["0", "0"]
    _assert_clean(tmp_path)


def test_cli_one_rank_raises(cluster, tmp_path):
    code, _, stderr = launch("ember", ["--ray-address", cluster.address, "--nnodes", "2", "--nproc-per-node", "1"],
                             "allreduce", 5, "raise1", out=tmp_path, timeout=120)
    assert code == 1
    root = stderr.split("Root Cause (first observed failure):")[1]
    assert "rank      : 1 (local_rank: 0)" in root and "RuntimeError: rank 1 fails at step 2" in root
    assert "(Ray node " in root  # the node the rank ran on
    _assert_clean(tmp_path)


def test_cli_sigterm_to_the_launcher(cluster, tmp_path):
    """SIGTERM to emberrun on Ray: every node's workers get SIGTERM, the job's actors go, emberrun exits 1."""
    proc = start("ember", ["--ray-address", cluster.address, "--nnodes", "2", "--nproc-per-node", "1"], "sleep",
                 out=tmp_path)
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready_*"))) == 2, timeout=60, what="both workers ready")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    except BaseException:
        kill_tree(proc, tmp_path)
        raise
    assert proc.returncode == 1, stderr
    assert "SignalException" in stderr
    assert [p.read_text() for p in sorted(tmp_path.glob("signal_*"))] == ["SIGTERM", "SIGTERM"]
    _assert_clean(tmp_path)


def test_function_entrypoint_returns_by_global_rank(cluster):
    """ray_launch with a function (any importable one): its return values by global rank."""
    assert ray_launch(_config("function"), operator.add, address="auto")(1, 2) == {0: 3, 1: 3}
    wait_for(lambda: not _leftovers(), timeout=20, what="the job's actors and placement groups gone")


def test_fails_only_on_first_attempt(cluster, tmp_path):
    assert _launch(_config("first", max_restarts=1), tmp_path, "allreduce", 6, "raise1") == {0: None, 1: None}
    assert sorted(worker_envs(tmp_path)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # the second attempt resumed from the last commit; every step's sum was checked
    for total in _totals(tmp_path):
        assert total == {"total": _expected_total(6, 2), "world": 2, "restart": 1}
    _assert_clean(tmp_path)


def test_always_fails_budget_exhausted(cluster, tmp_path):
    with pytest.raises(ChildFailedError) as info:
        _launch(_config("always", max_restarts=1), tmp_path, "always")
    rank, failure = info.value.get_first_failure()
    assert (rank, failure.exitcode) == (1, 3)
    # one budget for the job: two attempts in all, not two per node
    assert sorted(worker_envs(tmp_path)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    _assert_clean(tmp_path)


def test_sigkill_of_a_worker(cluster, tmp_path):
    assert _launch(_config("sigkill", max_restarts=1), tmp_path, "allreduce", 6, "kill1") == {0: None, 1: None}
    for total in _totals(tmp_path):
        assert total == {"total": _expected_total(6, 2), "world": 2, "restart": 1}
    _assert_clean(tmp_path)


def test_sigsegv_of_a_worker_is_reported_by_signal(cluster, tmp_path):
    with pytest.raises(ChildFailedError) as info:
        _launch(_config("segv"), tmp_path, "segv")
    rank, failure = info.value.get_first_failure()
    assert (rank, failure.exitcode, failure.signal_name()) == (1, -11, "SIGSEGV")
    assert "Signal 11 (SIGSEGV) received by PID" in info.value.format_msg()
    _assert_clean(tmp_path)


def test_coordinator_killed_mid_job(cluster, tmp_path):
    """The coordinator actor is killed between two failures: Ray restarts it with the job's state (the second
    failure is counted as the second restart, not the first again)."""
    _hold(tmp_path)
    job = _in_background(_config("coord", max_restarts=2), tmp_path, "allreduce", 200)
    wait_for(lambda: len(started_workers(tmp_path)) == 2, timeout=60, what="the first attempt")
    _kill_worker(tmp_path, 1, 0)
    wait_for(lambda: len(started_workers(tmp_path)) == 4, timeout=60, what="the second attempt")
    coordinator = ray.get_actor(coordinator_name("coord"), namespace=NAMESPACE)
    ray.kill(coordinator, no_restart=False)
    # restarted by Ray, its state read back (ray.kill is asynchronous: the old actor may answer once more)
    wait_for(lambda: ray.get(coordinator.state.remote())["lives"] == 2, timeout=30, what="the coordinator back")
    assert ray.get(coordinator.state.remote())["restarts"] == 1
    _kill_worker(tmp_path, 0, 1)
    wait_for(lambda: len(started_workers(tmp_path)) == 6, timeout=60, what="the third attempt")
    (tmp_path / "slow").unlink()
    assert job.result(timeout=120) == {0: None, 1: None}
    assert sorted(worker_envs(tmp_path)) == [(r, a) for r in (0, 1) for a in (0, 1, 2)]
    for total in _totals(tmp_path):
        assert total == {"total": _expected_total(200, 2), "world": 2, "restart": 2}
    _assert_clean(tmp_path)


def _attempts(out, restart, world):
    """The workers started with this restart count and world size."""
    return [env for _, _, env in started_workers(out)
            if (env["TORCHELASTIC_RESTART_COUNT"], env["WORLD_SIZE"]) == (str(restart), str(world))]


def _worker_node(cluster, exclude=()):
    return next(n for n in cluster.worker_nodes if n not in exclude)


def test_lost_node_replaced_from_its_copies(cluster, tmp_path):
    """A Ray node of the job is lost while a spare one is free: the job goes on at once on the spare, whose worker
    restores the lost worker's own last commit (its copy on the other node), so each rank's running sum is right."""
    _hold(tmp_path)
    job = _in_background(_config("replace", max_restarts=1), tmp_path, "ranksum", 200)
    wait_for(lambda: len(started_workers(tmp_path)) == 2, timeout=60, what="the first attempt")
    used = _worker_node(cluster)
    spare = cluster.add_node(num_cpus=1)
    cluster.remove_node(used, allow_graceful=False)
    wait_for(lambda: len(started_workers(tmp_path)) >= 4, timeout=60, what="the job on the spare node")
    (tmp_path / "slow").unlink()
    assert job.result(timeout=120) == {0: None, 1: None}
    assert {int(env["WORLD_SIZE"]) for _, _, env in started_workers(tmp_path)} == {2}
    for rank, mine in enumerate(_totals(tmp_path, "mine_")):
        assert mine == {"mine": sum(rank * 1000 + step for step in range(200)), "world": 2, "restart": 1}
    assert spare in cluster.worker_nodes
    _assert_clean(tmp_path)


def test_node_lost_scale_down_then_node_added_scale_up(cluster, tmp_path):
    """--nnodes 1:2: the job's second Ray node is lost and no other is free: the job goes on alone; a Ray node
    joins: the job grows back to two nodes (no restart of the budget used for that) and ends right."""
    _hold(tmp_path)
    job = _in_background(_config("scale", nnodes=(1, 2), max_restarts=1), tmp_path, "allreduce", 300)
    # (under load the job may start alone, before Ray placed its second node, and grow to two)
    wait_for(lambda: len(_attempts(tmp_path, restart=0, world=2)) == 2, timeout=60, what="a round of two nodes")
    cluster.remove_node(_worker_node(cluster), allow_graceful=False)
    wait_for(lambda: any(env["WORLD_SIZE"] == "1" for _, _, env in started_workers(tmp_path)), timeout=60,
             what="the job alone on the head node")
    cluster.add_node(num_cpus=1)
    wait_for(lambda: len(_attempts(tmp_path, restart=1, world=2)) == 2, timeout=60, what="the job back on two nodes")
    (tmp_path / "slow").unlink()
    assert job.result(timeout=120) == {0: None, 1: None}
    # one restart used (for the lost node), none for growing back
    seen = {(int(env["TORCHELASTIC_RESTART_COUNT"]), int(env["WORLD_SIZE"])) for _, _, env in started_workers(tmp_path)}
    seen.discard((0, 1))  # the start alone, if it happened
    assert seen == {(0, 2), (1, 1), (1, 2)}
    assert len(_attempts(tmp_path, restart=1, world=1)) == 1
    totals = _totals(tmp_path)
    assert totals[0] == totals[1] and totals[0]["world"] == 2
    assert _expected_total(300, 1) < totals[0]["total"] < _expected_total(300, 2)
    _assert_clean(tmp_path)
