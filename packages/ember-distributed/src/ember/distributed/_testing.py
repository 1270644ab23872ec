"""Test support of ember-distributed and ember-rpc: a test function run on several real processes (ranks) on
loopback, as torchrun would start them.

``RankPool(world_size)`` keeps ``world_size`` spawned processes; ``pool.run(fn, *args)`` calls
``fn(rank, world_size, *args)`` in each with torchrun's environment (MASTER_ADDR=127.0.0.1, a fresh free
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and returns the per-rank results in rank order.
Processes are reused between calls (a spawn that imports ember and torch costs seconds); after each call an RPC
agent or a process group left running (ember's or torch's) is shut down at once, and a process that died is
replaced.

``fn`` must be a module-level function of an importable module (spawned children import it by name). A rank that
raises fails the call with that rank's traceback; a rank that hangs past ``timeout`` is killed and the call fails
naming it. Results cross the process boundary by pickle: return NumPy arrays or plain values, not tensors.
``pools()``: the pools of a test session, by size.
"""
import contextlib
import multiprocessing as mp
import os
import socket
import sys
import traceback
from multiprocessing.connection import wait

_CTX = mp.get_context("spawn")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cleanup():
    """Stop an RPC agent and destroy a default process group a job left behind (ember's or torch's), so the next
    job can initialise."""
    ember_rpc = sys.modules.get("ember.distributed.rpc.api")
    torch_rpc = sys.modules.get("torch.distributed.rpc")
    try:
        if ember_rpc is not None and ember_rpc._agent is not None:
            ember_rpc.shutdown(graceful=False)
    except Exception:  # noqa: BLE001 - best effort: a broken agent must not take the worker down
        pass
    try:
        if torch_rpc is not None and torch_rpc.api._is_current_rpc_agent_set():
            torch_rpc.shutdown(graceful=False)
    except Exception:  # noqa: BLE001 - best effort
        pass
    for name in ("ember.distributed", "torch.distributed"):
        dist = sys.modules.get(name)
        try:
            if dist is not None and dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - best effort: a broken group must not take the worker down
            pass


def _worker(rank, conn):
    base = dict(os.environ)
    while True:
        job = conn.recv()
        if job is None:  # done: skip the interpreter's teardown (seconds with torch loaded on a busy machine)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        fn, world_size, args, env = job
        os.environ.clear()
        os.environ.update(base, **env, RANK=str(rank), LOCAL_RANK=str(rank))
        try:
            reply = (True, fn(rank, world_size, *args))
        except BaseException:  # noqa: BLE001 - every failure is reported to the parent
            reply = (False, traceback.format_exc())
        _cleanup()
        conn.send(reply)


class RankPool:
    def __init__(self, world_size):
        self.world_size = world_size
        self._procs = [None] * world_size
        self._conns = [None] * world_size
        for r in range(world_size):
            self._start(r)

    def _start(self, r):
        parent, child = _CTX.Pipe()
        p = _CTX.Process(target=_worker, args=(r, child), daemon=True)
        p.start()
        child.close()
        self._procs[r], self._conns[r] = p, parent

    def _replace(self, r):
        p = self._procs[r]
        if p.is_alive():
            p.kill()
        p.join()
        self._conns[r].close()
        self._start(r)

    def run(self, fn, *args, env=None, timeout=120, expect_failure=()):
        """``fn(rank, world_size, *args)`` on every rank; the results in rank order.

        ``expect_failure``: ranks allowed to die or raise (their result is the traceback text, or None if they
        died without reporting), for tests of failure handling."""
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(self.world_size),
               "LOCAL_WORLD_SIZE": str(self.world_size), **(env or {})}
        for conn in self._conns:
            conn.send((fn, self.world_size, args, env))
        results, failures, pending = {}, {}, dict(enumerate(self._conns))
        while pending:
            ready = wait(list(pending.values()), timeout=timeout)
            if not ready:
                for r in pending:
                    self._replace(r)
                raise AssertionError(f"ranks {sorted(pending)} did not finish within {timeout} s")
            for r in [r for r, c in pending.items() if c in ready]:
                del pending[r]
                try:
                    ok, value = self._conns[r].recv()
                except EOFError:  # the process died
                    ok, value = False, None
                    self._replace(r)
                (results if ok else failures)[r] = value
        unexpected = {r: tb for r, tb in failures.items() if r not in expect_failure}
        if unexpected:
            raise AssertionError("\n".join(f"rank {r} failed:\n{tb}" for r, tb in sorted(unexpected.items())))
        return [results.get(r, failures.get(r)) for r in range(self.world_size)]

    def close(self):
        for conn in self._conns:  # all told first: the processes exit together
            try:
                conn.send(None)
            except OSError:
                pass
        for p in self._procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()


@contextlib.contextmanager
def pools():
    """``get(n)``: a ``RankPool`` of ``n`` processes, made at the first ask and kept until the context exits (a
    test session's fixture)."""
    made = {}

    def get(n):
        if n not in made:
            made[n] = RankPool(n)
        return made[n]
    try:
        yield get
    finally:
        for pool in made.values():
            pool.close()
