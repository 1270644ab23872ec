"""Faults: a worker that dies, a dead owner, shutdown beside a dead peer, 32 workers on one host."""
import operator
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import ember.distributed.rpc as rpc
from ember.distributed._testing import free_port

_never = threading.Event()


def wait_forever():
    _never.wait(30)
    return "released"


def die_soon():
    threading.Timer(0.2, os._exit, (1,)).start()  # after the answer is sent
    return "dying"


def _dead_worker(rank, world):
    # a long RPC timeout: the calls below can only fail because the connection to worker 1 closed
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(rpc_timeout=120))
    if rank == 1:
        _never.wait(60)  # dies in die_soon
        return None
    if rank == 2:
        rpc.shutdown()
        return None
    pending = [rpc.rpc_async("worker1", wait_forever) for _ in range(3)]
    rref = rpc.remote("worker1", wait_forever)
    on_third = rpc.rpc_async("worker2", operator.add, args=(1, 2))
    assert rpc.rpc_sync("worker1", die_soon) == "dying"
    errors = []
    for f in pending:
        try:
            f.wait()
        except RuntimeError as e:
            errors.append(str(e))
    try:
        rref.to_here()
    except RuntimeError as e:
        errors.append(str(e))
    try:
        rpc.rpc_sync("worker1", operator.add, args=(1, 2))  # a new call to the dead worker fails at once
    except RuntimeError as e:
        errors.append(str(e))
    third = on_third.wait()
    rpc.shutdown()  # returns although worker 1 never calls it
    return errors, third


def test_dead_worker_fails_its_calls_and_shutdown_returns(workers):
    out = workers(3).run(_dead_worker, expect_failure=(1,), timeout=60)
    errors, third = out[0]
    assert third == 3
    assert len(errors) == 5
    for e in errors:
        assert "worker1" in e and "gone" in e, e


def test_32_workers_on_one_host():
    script = Path(__file__).with_name("many_workers.py")
    proc = subprocess.Popen([sys.executable, str(script), "32", str(free_port())], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out + err
    assert "32 of 32 workers finished" in out
