"""The worker script of the launcher tests: ``python elastic_job.py <lib> <mode> [args]``, run by emberrun (lib
"ember") or torchrun (lib "torch"). Only modes that need it import the library (importing torch costs a second).

Every mode first writes its environment to ``$JOB_OUT/env_<rank>_<restart count>_<pid>.json`` (the test reads which
attempts ran and what the workers saw). Modes:

env                   print a line on stdout and on stderr, exit 0
flaky                 rank 1 exits 3 on the first attempt, once rank 0 has started
always                rank 1 exits 3 on every attempt once rank 0 has started, while rank 0 still runs
raise                 rank 1 raises ValueError under the library's @record
exit N                rank 1 exits N after rank 0 started sleeping
segv                  rank 1 dies of SIGSEGV after rank 0 started sleeping
sleep                 sleep until a signal; note the signal's name in $JOB_OUT/signal_<rank>
allreduce STEPS MODE  ember: STEPS all_reduce steps checked against their expected sums, the running total
                      committed with the in-memory State after each step; MODE "kill1": rank 1 SIGKILLs itself
                      at step 2 of the first attempt; "raise1": rank 1 raises at step 2 of the first attempt;
                      "" none. Steps take 50 ms more while $JOB_OUT/slow exists. Writes the final total to
                      $JOB_OUT/total_<rank>.
ranksum STEPS         ember: each rank adds rank * 1000 + step to its own running sum, committed with the
                      in-memory State after each step (a barrier between steps); writes the sum to
                      $JOB_OUT/mine_<rank> (right only if every restart restored each rank's own commit)
hang                  ember: rank 1 hangs inside timer.expires(1) on the first attempt (the agent's watchdog
                      kills it)
"""
import glob
import json
import os
import signal
import sys
import time


def _out(name):
    return os.path.join(os.environ["JOB_OUT"], name)


def _write(name, text):
    tmp = _out(name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, _out(name))  # readers never see a half-written file


RANK = int(os.environ["RANK"])
RESTART = int(os.environ["TORCHELASTIC_RESTART_COUNT"])


def _wait_for_rank_0():
    """Until rank 0 of this attempt has started (written its environment), however slow the machine: a test that
    counts the attempts' workers must not see rank 0 stopped before it began."""
    end = time.monotonic() + 30
    while not glob.glob(_out(f"env_0_{RESTART}_*.json")) and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(0.05)  # and is past writing it, into its sleep


def record_from(lib):
    if lib == "torch":
        from torch.distributed.elastic.multiprocessing.errors import record
    else:
        from ember.distributed.elastic.multiprocessing.errors import record
    return record


def allreduce(steps, mode):
    import ember
    import ember.distributed as dist
    from ember.distributed.elastic.state import State

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    state = State(step=0, total=0.0)
    state.restore()
    for step in range(state.step, steps):
        if step == 2 and RESTART == 0 and rank == 1:
            if mode == "kill1":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "raise1":
                raise RuntimeError("rank 1 fails at step 2")
        t = ember.full((3,), float(rank + step))
        dist.all_reduce(t)
        expected = sum(r + step for r in range(world))
        if t.tolist() != [expected] * 3:
            raise AssertionError(f"step {step}: {t.tolist()} != {expected}")
        state.total = state.total + expected
        state.step = step + 1
        state.commit()
        if os.path.exists(_out("slow")):  # the test holds the job back while it arranges a fault
            _write(f"progress_{rank}", str(state.step))  # (and may wait for steps done in a round)
            time.sleep(0.05)
    dist.barrier()
    _write(f"total_{rank}", json.dumps({"total": state.total, "world": world, "restart": RESTART}))
    dist.destroy_process_group()


def ranksum(steps):
    import ember.distributed as dist
    from ember.distributed.elastic.state import State

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    state = State(step=0, mine=0)
    state.restore()
    for step in range(state.step, steps):
        state.mine = state.mine + rank * 1000 + step
        state.step = step + 1
        state.commit()
        dist.barrier()
        if os.path.exists(_out("slow")):
            time.sleep(0.05)
    _write(f"mine_{rank}", json.dumps({"mine": state.mine, "world": dist.get_world_size(), "restart": RESTART}))
    dist.destroy_process_group()


def hang():
    from ember.distributed.elastic import timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    with timer.expires(after=1):
        if RANK == 1 and RESTART == 0:
            time.sleep(60)


def sleep_until_signal():
    def noted(signum, frame):
        _write(f"signal_{RANK}", signal.Signals(signum).name)
        sys.exit(0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, noted)
    _write(f"ready_{RANK}_{os.getpid()}", "")
    time.sleep(60)


def main():
    lib, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    _write(f"env_{RANK}_{RESTART}_{os.getpid()}.json", json.dumps(dict(os.environ)))
    if mode == "env":
        # one write() each: the ranks share the launcher's pipes, and print() may write the line and its end apart
        os.write(1, f"out of rank {RANK}\n".encode())
        os.write(2, f"err of rank {RANK}\n".encode())
    elif mode == "flaky" and RANK == 1 and RESTART == 0:
        _wait_for_rank_0()
        sys.exit(3)
    elif mode == "always":
        if RANK == 1:
            _wait_for_rank_0()
        else:
            time.sleep(30)  # rank 0 is still running when rank 1 fails: stopped by SIGTERM
        sys.exit(3)
    elif mode == "raise":
        @record_from(lib)
        def trainer():
            if RANK == 1:
                raise ValueError("boom from rank 1")
            time.sleep(0.5)
        trainer()
    elif mode == "exit":
        if RANK == 1:
            _wait_for_rank_0()
            sys.exit(int(args[0]))
        time.sleep(30)
    elif mode == "segv":
        if RANK == 1:
            _wait_for_rank_0()
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(30)
    elif mode == "sleep":
        sleep_until_signal()
    elif mode == "allreduce":
        record_from("ember")(allreduce)(int(args[0]), args[1] if len(args) > 1 else "")
    elif mode == "ranksum":
        record_from("ember")(ranksum)(int(args[0]))
    elif mode == "hang":
        hang()


if __name__ == "__main__":
    main()
