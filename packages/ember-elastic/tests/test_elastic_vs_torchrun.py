"""emberrun side by side with torchrun (PyTorch 2.13): the same job under both, compared on what workers see (their
environment), exit codes, failure reports, restart counting, log folders, console prefixes, signals and options."""
import json
import os
import re
import signal

import pytest
import torch.distributed.run as torchrun
from elastic_helpers import failure_report, job_processes, kill_tree, launch, start, wait_for, worker_envs

import ember.distributed.run as emberrun

LIBS = ["ember", "torch"]
# the variables torchrun's workers get (besides the launcher's environment)
WORKER_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
               "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
               "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
               "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_SIGNALS_TO_HANDLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
               "OMP_NUM_THREADS"]


def _comparable(env):
    """A worker's variables with the per-run values (ids, ports, folders) replaced by their shape."""
    seen = {k: env.get(k) for k in WORKER_VARS}
    seen["MASTER_PORT"] = "<port>" if seen["MASTER_PORT"].isdigit() else seen["MASTER_PORT"]
    seen["TORCHELASTIC_RUN_ID"] = "<uuid>" if re.fullmatch(r"[0-9a-f-]{36}", seen["TORCHELASTIC_RUN_ID"]) else "?"
    error_file = re.fullmatch(r".*/torchelastic_\w+/[0-9a-f-]{36}_\w+/(attempt_\d+/\d+/error\.json)",
                              seen["TORCHELASTIC_ERROR_FILE"])
    seen["TORCHELASTIC_ERROR_FILE"] = error_file[1] if error_file else seen["TORCHELASTIC_ERROR_FILE"]
    return seen


@pytest.fixture(scope="module")
def env_runs(tmp_path_factory):
    runs = {}
    for lib in LIBS:
        out = tmp_path_factory.mktemp(f"env_{lib}")
        runs[lib] = (*launch(lib, ["--standalone", "--nproc-per-node", "2"], "env", out=out), out)
    return runs


def test_workers_see_torchruns_environment(env_runs):
    seen = {}
    for lib, (code, _, stderr, out) in env_runs.items():
        assert code == 0, stderr
        envs = worker_envs(out)
        assert sorted(envs) == [(0, 0), (1, 0)]
        assert envs[0, 0]["MASTER_PORT"] == envs[1, 0]["MASTER_PORT"]
        assert envs[0, 0]["TORCHELASTIC_RUN_ID"] == envs[1, 0]["TORCHELASTIC_RUN_ID"]
        seen[lib] = {key: _comparable(env) for key, env in envs.items()}
        # no other variable is added for the workers (ember adds its in-memory checkpoint store's address)
        extra = set(envs[0, 0]) - set(os.environ) - set(WORKER_VARS) - {"JOB_OUT", "EMBER_ELASTIC_STATE_STORE"}
        assert not extra, (lib, extra)
    assert seen["ember"] == seen["torch"]
    assert seen["ember"][1, 0]["LOCAL_RANK"] == "1" and seen["ember"][1, 0]["OMP_NUM_THREADS"] == "1"


def test_omp_warning_and_console_output(env_runs):
    for lib, (_, stdout, stderr, _) in env_runs.items():
        assert sorted(stdout.splitlines()) == ["out of rank 0", "out of rank 1"], lib
        assert "err of rank 0" in stderr and "err of rank 1" in stderr
        warning = re.search(r"W\d{4} [\d:.]+ \d+ (\S+)\] Setting OMP_NUM_THREADS environment variable for each "
                            r"process to be 1 in default", stderr)
        assert warning and warning[1].endswith(f"{lib}/distributed/run.py:" + warning[1].rsplit(":", 1)[1]), lib


def test_restart_count_log_folders_and_tee_prefixes(tmp_path):
    results = {}
    for lib in LIBS:
        out, logs = tmp_path / lib, tmp_path / f"logs_{lib}"
        code, stdout, stderr = launch(lib, ["--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                                            "--log-dir", str(logs), "--tee", "3"], "flaky", out=out)
        assert code == 0, stderr
        envs = worker_envs(out)
        runs = list(logs.iterdir())
        assert len(runs) == 1
        files = sorted(str(p.relative_to(runs[0])) for p in runs[0].rglob("*"))
        logged = (runs[0] / "attempt_1" / "1" / "stdout.log").read_text()
        results[lib] = (sorted(envs), {k: e["TORCHELASTIC_RESTART_COUNT"] for k, e in envs.items()}, files,
                        runs[0].name.startswith(envs[0, 0]["TORCHELASTIC_RUN_ID"] + "_"),
                        sorted(line for line in stdout.splitlines() if line.startswith("[default")), logged)
    assert results["ember"] == results["torch"]
    assert results["ember"][0] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert "attempt_1/1/stderr.log" in results["ember"][2]


def _reports(tmp_path, options, mode, *args, env=None):
    reports = {}
    for lib in LIBS:
        code, stdout, stderr = launch(lib, options, mode, *args, out=tmp_path / lib, env=env)
        assert code == 1, stderr
        reports[lib] = failure_report(stderr)
    return reports


def test_raise_report_and_launcher_error_file(tmp_path):
    """A worker's exception under @record: the report shows its rank, exit code, error file and traceback; the
    launcher's own error file (TORCHELASTIC_ERROR_FILE set for it) gets a copy with the exit code."""
    reports, copies = {}, {}
    for lib in LIBS:
        mine = tmp_path / f"launcher_{lib}.json"
        code, stdout, stderr = launch(lib, ["--standalone", "--nproc-per-node", "2"], "raise", out=tmp_path / lib,
                                      env={"TORCHELASTIC_ERROR_FILE": str(mine)})
        assert code == 1, stderr
        reports[lib] = failure_report(stderr)
        copy = json.loads(mine.read_text())["message"]
        copies[lib] = (copy["message"], copy["errorCode"], sorted(copy["extraInfo"]))
    assert reports["ember"] == reports["torch"]
    assert "rank      : 1 (local_rank: 1)" in reports["ember"] and "ValueError: boom from rank 1" in reports["ember"]
    assert copies["ember"] == copies["torch"] == ("ValueError: boom from rank 1", 1, ["py_callstack", "timestamp"])


def test_signal_death_report(tmp_path):
    reports = _reports(tmp_path, ["--standalone", "--nproc-per-node", "2"], "segv")
    assert reports["ember"] == reports["torch"]
    assert "exitcode  : -11 (pid: <P>)  (SIGSEGV)" in reports["ember"]
    assert "traceback : Signal 11 (SIGSEGV) received by PID <P>" in reports["ember"]


def test_exit_code_report(tmp_path):
    reports = _reports(tmp_path, ["--standalone", "--nproc-per-node", "2"], "exit", 7)
    assert reports["ember"] == reports["torch"]
    root = reports["ember"].split("Root Cause")[1]
    assert "exitcode  : 7 (pid: <P>) \n" in root and "rank      : 1" in root


def test_budget_exhausted(tmp_path):
    """A rank failing on every attempt: max_restarts + 1 attempts, then exit 1 reporting the last attempt."""
    results = {}
    for lib in LIBS:
        code, stdout, stderr = launch(lib, ["--standalone", "--nproc-per-node", "2", "--max-restarts", "1"],
                                      "always", out=tmp_path / lib)
        results[lib] = (code, sorted(worker_envs(tmp_path / lib)), failure_report(stderr))
        assert not job_processes(tmp_path / lib)
    assert results["ember"] == results["torch"]
    assert results["ember"][:2] == (1, [(0, 0), (0, 1), (1, 0), (1, 1)])
    assert "error_file: <N/A>" in results["ember"][2] and "exitcode  : 3" in results["ember"][2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_launcher_is_forwarded(tmp_path, sig):
    """The launcher passes the signal on to every worker (each in its own session), exits 1, leaves nothing."""
    results = {}
    for lib in LIBS if sig == signal.SIGTERM else ["ember"]:
        out = tmp_path / lib
        proc = start(lib, ["--standalone", "--nproc-per-node", "2"], "sleep", out=out)
        try:
            wait_for(lambda out=out: len(list(out.glob("ready_*"))) == 2, what="workers")
            pids = [int(p.name.split("_")[2]) for p in out.glob("ready_*")]
            assert all(os.getsid(pid) == pid for pid in pids)  # own sessions, as torchrun's
            proc.send_signal(sig)
            _, stderr = proc.communicate(timeout=30)
        except BaseException:
            kill_tree(proc, out)
            raise
        noted = sorted((out / f"signal_{r}").read_text() for r in (0, 1))
        results[lib] = (proc.returncode, tuple(noted), f"got signal: {int(sig)}" in stderr)
        wait_for(lambda out=out: not job_processes(out), timeout=5, what="no process left")
    assert results["ember"] == (1, (sig.name,) * 2, True)
    assert len(set(results.values())) == 1


def _options(parser):
    return {opt: (action.default if action.default is not None else None, action.nargs)
            for action in parser._actions for opt in action.option_strings}


def test_options_and_defaults_are_torchruns(monkeypatch):
    for key in list(os.environ):
        if key.startswith("PET_"):
            monkeypatch.delenv(key)
    mine, theirs = _options(emberrun.get_args_parser()), _options(torchrun.get_args_parser())
    # ember's own: the Ray path's options
    mine = {opt: v for opt, v in mine.items() if not opt.startswith(("--ray-", "--ray_"))}
    assert set(mine) == set(theirs)
    assert mine == theirs
    positional = [a.dest for a in emberrun.get_args_parser()._actions if not a.option_strings]
    assert positional == ["training_script", "training_script_args"]


def test_pet_variables_give_defaults(monkeypatch):
    monkeypatch.setenv("PET_NPROC_PER_NODE", "3")
    monkeypatch.setenv("PET_STANDALONE", "1")
    monkeypatch.setenv("PET_MAX_RESTARTS", "2")
    argv = ["--max-restarts", "5", "script.py", "--lr", "1"]
    for module in (emberrun, torchrun):
        args = module.parse_args(argv)
        assert (args.nproc_per_node, args.standalone, args.max_restarts, args.training_script_args) == \
            ("3", True, 5, ["--lr", "1"])


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit):
        emberrun.parse_args(["--help"])
    text = capsys.readouterr().out
    for opt in _options(torchrun.get_args_parser()):
        assert opt in text

