"""``python many_workers.py N PORT``: N RPC workers on this host, forked from this process (which imported ember
once); each calls the next one and shuts down. Exits 0 when every worker did, else 1 (stragglers killed)."""
import os
import signal
import sys
import time

import ember
import ember.distributed.rpc as rpc


def worker(rank, n):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=n,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(num_worker_threads=2, rpc_timeout=60))
    got = rpc.rpc_sync(f"worker{(rank + 1) % n}", ember.add, args=(ember.ones(2), rank))
    rpc.shutdown()
    return 0 if float(got[0]) == rank + 1 else 3


def main():
    n, port = int(sys.argv[1]), sys.argv[2]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    pids = []
    for rank in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = worker(rank, n)
            finally:
                os._exit(code)
        pids.append(pid)
    failed, end = 0, time.monotonic() + 90
    left = set(pids)
    while left and time.monotonic() < end:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            continue
        left.discard(pid)
        failed += os.waitstatus_to_exitcode(status) != 0
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(f"{n - failed - len(left)} of {n} workers finished")
    sys.exit(1 if failed or left else 0)


if __name__ == "__main__":
    main()
