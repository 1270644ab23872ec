"""``breakpoint()``: a debugger on one rank while the others wait for it at a barrier."""
import pdb
import sys
import traceback
from datetime import timedelta

from . import distributed_c10d as c10d

_skipped = {}  # call site (the traceback being handled) -> calls seen, for ``skip``


class _DistributedPdb(pdb.Pdb):
    """pdb reading the terminal: a launcher's worker processes have their stdin closed or redirected."""

    def interaction(self, *args, **kwargs):
        stdin = sys.stdin
        try:
            with open("/dev/stdin") as sys.stdin:
                super().interaction(*args, **kwargs)
        finally:
            sys.stdin = stdin


def _make_distributed_pdb():
    return _DistributedPdb()


def breakpoint(rank=0, skip=0, timeout_s=3600):  # noqa: A001 - torch.distributed's name
    """Stop in the debugger on rank ``rank`` only (after ``skip`` calls from the same place); the other ranks wait
    at a barrier until it continues. Every group's timeout becomes ``timeout_s`` seconds (None: unchanged), so that
    the session is not cut short."""
    if skip > 0:
        key = hash(str(traceback.format_exc()))
        _skipped[key] = _skipped.get(key, 0) + 1
        if _skipped[key] <= skip:
            c10d.log.warning("Skip the breakpoint, counter=%d", _skipped[key])
            return
    if timeout_s is not None:
        for group in list(c10d._world.pg_map):
            c10d._set_pg_timeout(timedelta(seconds=timeout_s), group)
    if c10d.get_rank() == rank:
        debugger = _make_distributed_pdb()
        debugger.message(f"\n!!! ATTENTION !!!\n\nType 'up' to get to the frame that called "
                         f"dist.breakpoint(rank={rank})\n")
        debugger.set_trace()
    c10d.barrier()
