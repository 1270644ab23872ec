"""The agent's request that CPUs not idle deeply while messages flow (``_cpu_latency``): held from a call until
``IDLE`` seconds without a message, withdrawn at shutdown; nothing where the device cannot be opened."""
import os
import struct
import time

import pytest

import ember.distributed.rpc as rpc
from ember.distributed.rpc import _cpu_latency


def _system_limit():
    """The latency limit the kernel applies now (all requests combined), in microseconds."""
    fd = os.open(_cpu_latency.DEVICE, os.O_RDONLY)
    try:
        return struct.unpack("i", os.read(fd, 4))[0]
    finally:
        os.close(fd)


def _permitted():
    try:
        os.close(os.open(_cpu_latency.DEVICE, os.O_WRONLY))
    except OSError:
        return False
    return True


def test_turned_off_by_environment(monkeypatch):
    monkeypatch.setenv("EMBER_RPC_CPU_LATENCY", "off")
    holder = _cpu_latency.Holder()
    holder.touch()
    assert not holder.enabled and not holder.held


def test_unavailable_device_is_a_no_op(monkeypatch):
    monkeypatch.setattr(_cpu_latency, "DEVICE", "/nonexistent/cpu_dma_latency")
    holder = _cpu_latency.Holder()
    holder.touch()
    holder.check(time.monotonic() + 1)
    holder.close()
    assert not holder.enabled and not holder.held


@pytest.mark.skipif(not _permitted(), reason=f"{_cpu_latency.DEVICE} cannot be opened for writing here")
def test_held_while_active_then_withdrawn():
    before = _system_limit()
    holder = _cpu_latency.Holder()
    assert holder.enabled and not holder.held and _system_limit() == before
    holder.touch()
    assert holder.held and _system_limit() == 0
    holder.check(holder.last + _cpu_latency.IDLE / 2)
    assert holder.held  # (a message not long ago)
    holder.check(holder.last + _cpu_latency.IDLE)
    assert not holder.held and _system_limit() == before
    holder.touch()
    holder.close()
    assert not holder.held and _system_limit() == before


def _agent_states(rank, world):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    agent = rpc.api._agent
    states = None
    if rank == 0:
        rpc.rpc_sync("worker1", max, args=(1, 2))
        held = agent._awake.held
        time.sleep(_cpu_latency.IDLE + 0.2)  # (the dispatcher looks every 50 ms)
        states = (agent._awake.enabled, held, agent._awake.held)
    rpc.shutdown()
    return states, agent._awake.enabled


def test_agent_holds_during_calls_and_releases(workers):
    ((enabled, during, after), closed0), (_, closed1) = workers(2).run(_agent_states)
    assert enabled == _permitted() and during == enabled and not after
    assert not closed0 and not closed1  # shutdown gave the device back


@pytest.mark.skipif(not _permitted() or not hasattr(os, "fork"), reason="needs the device and fork")
def test_forked_child_lets_go():
    before = _system_limit()
    holder = _cpu_latency.Holder()
    holder.touch()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the file closed, its holder off
        os._exit(0 if not holder.enabled and not holder.held else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert holder.held and _system_limit() == 0  # (the parent's request stands)
    holder.close()
    assert _system_limit() == before
