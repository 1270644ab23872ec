"""Running emberrun and torchrun on the test job (elastic_job.py) and reading what its workers left behind."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

JOB = str(Path(__file__).resolve().with_name("elastic_job.py"))
# torchrun as its console script runs it (under -m its loggers would be __main__'s, without torchrun's format)
LAUNCHERS = {"ember": [sys.executable, "-m", "ember.distributed.run"],
             "torch": [sys.executable, "-c", "import sys; from torch.distributed.run import main; sys.exit(main())"]}


def command(lib, options, mode, *args):
    return [*LAUNCHERS[lib], *options, JOB, lib, mode, *map(str, args)]


def environment(out, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "PET_"))}
    env.update(JOB_OUT=str(out), **(extra or {}))
    env.pop("OMP_NUM_THREADS", None)
    return env


def start(lib, options, mode, *args, out, env=None):
    """The launcher as a running process (its output in pipes)."""
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(command(lib, options, mode, *args), env=environment(out, env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def launch(lib, options, mode, *args, out, env=None, timeout=90):
    """Run the launcher to its end: (exit code, stdout, stderr)."""
    proc = start(lib, options, mode, *args, out=out, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc, out)
        raise
    return proc.returncode, stdout, stderr


def kill_tree(proc, out):
    """SIGKILL a launcher and every process of its job (a failing test must not leave workers behind)."""
    for pid in [proc.pid, *job_processes(out)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate()


def job_processes(out):
    """Pids of live processes (workers, launchers, orphans included) whose environment names this job's folder."""
    mark = f"JOB_OUT={out}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(entry))
        except OSError:
            continue
    return found


def wait_for(predicate, timeout=30, what="condition"):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def started_workers(out):
    """[(rank, restart count, environment)] of every worker that started (in no particular order)."""
    found = []
    for path in Path(out).glob("env_*.json"):
        _, rank, restart, _ = path.stem.split("_")
        found.append((int(rank), int(restart), json.loads(path.read_text())))
    return found


def worker_envs(out):
    """{(rank, restart count): environment} of the workers that started (for jobs where each pair is unique)."""
    found = {}
    for rank, restart, env in started_workers(out):
        assert (rank, restart) not in found, f"two workers of rank {rank} in attempt {restart}"
        found[rank, restart] = env
    return found


_REPORT_NOISE = [(re.compile(r"time      : \S+"), "time      : <T>"),
                 (re.compile(r"\(pid: \d+\)"), "(pid: <P>)"),
                 (re.compile(r"PID \d+"), "PID <P>"),
                 (re.compile(r"error_file: \S*(attempt_\d+/\d+/error\.json)"), r"error_file: .../\1")]


def failure_report(stderr):
    """The ChildFailedError report in a launcher's stderr, without times, pids and folder names; tracebacks are
    reduced to their last line."""
    start = stderr.index("ChildFailedError: \n") + len("ChildFailedError: \n")
    lines = stderr[start:].rstrip("\n").split("\n")
    end = max(i for i, line in enumerate(lines) if line.startswith("=" * 20))
    text = "\n".join(lines[:end + 1])
    for pattern, repl in _REPORT_NOISE:
        text = pattern.sub(repl, text)
    # a traceback is the lines after "traceback : Traceback"; keep only its exception line
    text = re.sub(r"traceback : Traceback \(most recent call last\):\n(?:  .*\n)*?  (\w+Error: .*)\n(?:  \n)?",
                  r"traceback : \1\n", text)
    return text
