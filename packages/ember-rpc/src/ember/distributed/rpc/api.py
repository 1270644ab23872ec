"""The RPC API: ``init_rpc``, ``shutdown``, ``rpc_sync``, ``rpc_async``, ``remote``, ``get_worker_info``."""
import numbers
import sys
import threading
from datetime import timedelta

from ember.distributed import PrefixStore, Store
from ember.distributed.rendezvous import rendezvous

from . import _options
from ._agent import _CALL, _REMOTE, WorkerInfo
from ._rref import RRef

__all__ = ["init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info", "AllGatherStates",
           "method_factory", "new_method"]

_agent = None
_store = None  # the rendezvous store (released at shutdown: rank 0 serves it)
_init_lock = threading.Lock()


def _require_agent():
    if _agent is None:
        raise RuntimeError("RPC has not been initialized. Call ember.distributed.rpc.init_rpc first.")
    return _agent


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None):
    """Join ``world_size`` workers as ``name`` (rank ``rank``), meeting through ``rpc_backend_options.init_method``
    (default ``env://``: MASTER_ADDR, MASTER_PORT); returns once every worker has joined."""
    global _agent, _store
    if backend is not None and not isinstance(backend, _options.BackendType):
        raise TypeError("Argument backend must be a member of BackendType")
    if rpc_backend_options is not None and not isinstance(rpc_backend_options, _options.RpcBackendOptions):
        raise TypeError("Argument rpc_backend_options must be an instance of RpcBackendOptions")
    if backend is None:
        backend = _options.BackendType.TENSORPIPE
    if rpc_backend_options is None:
        rpc_backend_options = _options.construct_rpc_backend_options(backend)
    for arg, kind in ((name, str), (rank, numbers.Integral), (world_size, (numbers.Integral, type(None)))):
        if not isinstance(arg, kind):
            raise RuntimeError(f"Argument {arg} must be of type {kind} but got type {type(arg)}")
    if not name or len(name) > 128 or not all(c.isalnum() or c in "_-:" for c in name):
        raise RuntimeError(f"Worker name must match ^[A-Za-z0-9-_:]*$ and be at most 128 characters, got {name!r}")
    if not world_size:
        raise RuntimeError("ember's RPC needs a world_size: groups that workers join and leave dynamically are "
                           "not supported")
    with _init_lock:
        if _agent is not None:
            raise RuntimeError("RPC is already initialized")
        store, rank, world_size = next(rendezvous(rpc_backend_options.init_method, rank=rank, world_size=world_size,
                                                  timeout=timedelta(seconds=max(rpc_backend_options.rpc_timeout, 1))))
        if not isinstance(store, Store):
            raise TypeError(f"`store` must be a Store. {store}")
        try:
            agent = _options.init_backend(backend, PrefixStore("rpc", store), name, rank, world_size,
                                          rpc_backend_options)
        except BaseException:
            _release(store)
            raise
        _agent, _store = agent, store
        agent.start()


def _release(store):
    release = getattr(store, "_release", None)
    if release is not None:
        release()


def shutdown(graceful=True, timeout=0):
    """Stop this worker's agent. ``graceful``: first wait until no worker has calls outstanding (workers that
    are lost excepted; at most ``timeout`` seconds, or the RPC timeout when 0); else close at once."""
    global _agent, _store
    with _init_lock:
        agent, store = _agent, _store
        if agent is None:
            raise RuntimeError("RPC has not been initialized. Call ember.distributed.rpc.init_rpc first.")
        try:
            agent.shutdown(graceful, timeout if timeout and timeout > 0 else None)
        finally:
            _agent = _store = None
            ag = sys.modules.get("ember.distributed.autograd._context")
            if ag is not None:
                ag.clear()
            _release(store)


def get_worker_info(worker_name=None):
    """The WorkerInfo of ``worker_name`` (this worker's when None)."""
    agent = _require_agent()
    if worker_name is None:
        return agent.info
    w = agent.by_name.get(worker_name) if isinstance(worker_name, str) else None
    if w is None:
        raise RuntimeError(f"Unknown destination worker {worker_name}")
    return w


def _check(func):
    if not callable(func):
        raise TypeError("function should be callable.")


def _autograd_meta(dst, args, kwargs):
    ag = sys.modules.get("ember.distributed.autograd._context")
    return None if ag is None else ag.on_send(dst, args, kwargs)


def _invoke(to, func, args, kwargs, timeout):
    agent = _require_agent()
    dst = agent.worker(to).id
    ctx = _autograd_meta(dst, args, kwargs)
    return agent.call(dst, _CALL, (func, args, kwargs), timeout, None if ctx is None else (ctx,))


def rpc_async(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run ``func(*args, **kwargs)`` on worker ``to`` (name, rank or WorkerInfo); a Future of its result.
    ``timeout`` in seconds (0: none; default: the agent's ``rpc_timeout``)."""
    _check(func)
    return _invoke(to, func, tuple(args) if args else (), dict(kwargs) if kwargs else {}, timeout)


def rpc_sync(to, func, args=None, kwargs=None, timeout=-1.0):
    """``rpc_async(...).wait()``: the result of ``func`` run on ``to``; its error re-raised here."""
    _check(func)
    agent = _require_agent()
    dst = agent.worker(to).id
    args, kwargs = tuple(args) if args else (), dict(kwargs) if kwargs else {}
    ctx = _autograd_meta(dst, args, kwargs)
    return agent.call_sync(dst, _CALL, (func, args, kwargs), timeout, None if ctx is None else (ctx,))


def remote(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run ``func`` on ``to`` and keep the result there; an RRef to it."""
    _check(func)
    agent = _require_agent()
    owner = agent.worker(to)
    args, kwargs = tuple(args) if args else (), dict(kwargs) if kwargs else {}
    rref_id = agent.owner_table.new_id()
    if owner.id == agent.rank:
        agent.owner_table.create(rref_id, agent.rank, rref_id)
    ctx = _autograd_meta(owner.id, args, kwargs)
    created, rid = agent.call_with_id(owner.id, _REMOTE, (func, args, kwargs), timeout, (rref_id, rref_id, ctx))
    return RRef._make(owner, rref_id, rref_id, False, None, created, rid)


def _owned_count():
    """How many values this worker owns for RRefs (for tests of the reference counting)."""
    return _require_agent().owner_table.count()


__all__ += ["WorkerInfo"]


# ---- torch.distributed.rpc helpers that torch's namespace exports ----------------------------------------------------
class AllGatherStates:
    """The state of one round of torch's RPC-based all-gather (its graceful shutdown uses it): the objects gathered
    so far by worker name, and the event the workers wait on until all are in. ember's agent agrees on shutdown
    through its own messages and does not use it; it is here because torch.distributed.rpc exports it."""

    def __init__(self):
        self.gathered_objects = {}
        self.proceed_signal = threading.Event()


def method_factory(method_name, docstring):
    """A function ``method(rref, *args, **kwargs)`` calling RRef's own ``method_name`` (torch builds RRef's public
    methods with it, over its C++ implementation class; as there, ``docstring`` is not applied: ``__doc__`` stays
    None). One difference: torch's raise TypeError on the RRefs ``rpc.remote`` returns (its C++ class, not the
    Python RRef); ember has one RRef class, on which they always work."""
    def method(self, *args, **kwargs):
        return getattr(RRef, method_name)(self, *args, **kwargs)

    return method


# the last method torch's loop made with method_factory, left in its namespace: RRef.to_here's
new_method = method_factory("to_here", RRef.to_here.__doc__)
