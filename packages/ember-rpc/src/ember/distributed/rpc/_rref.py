"""Remote references and their reference counting.

The owner of a value keeps it in its ``OwnerTable`` with the set of *forks* that refer to it: every ``RRef``
object, on any worker (the owner's own included), is one fork with an id of its own. The value goes when its last
fork goes. The protocol keeps the set from emptying while a reference is in flight:

* ``remote()``: the caller's fork is registered by the owner's dispatcher as the request arrives (before the
  function runs), so a deletion, which travels after it on the same connection, always finds it.
* sharing an RRef in a message: the message carries a new fork id. To the owner: the owner's dispatcher registers
  the fork while unpickling the message, in order with the sender's deletions. From the owner: registered when
  pickled. Between two users: the sender holds its own RRef (a *pending child*) until the owner has registered the
  receiver's fork (the receiver asks, the owner tells the sender), so the count never drops to zero meanwhile.
* a deleted ``RRef`` queues its fork's deletion; the dispatcher sends queued deletions to the owners in batches.
  A worker that is lost takes its forks with it.
"""
import itertools
import threading
import weakref
from collections import defaultdict, deque

from ember.futures import Future

SER = threading.local()  # dst: the worker a message is being pickled for


def _agent():
    from . import api

    return api._require_agent()


def _current():
    from . import api

    return api._agent


class _Owned:
    """A value owned here: its future (set when the creating call returns) and the forks referring to it."""

    __slots__ = ("future", "forks")

    def __init__(self):
        self.future = Future()
        self.forks = {}  # fork id -> the rank holding it

    def settle(self, value, error):
        if error is not None:
            self.future.set_exception(error.exception())
        else:
            self.future.set_result(value)


class OwnerTable:
    """The values this worker owns, the pending children of its RRefs, its queued deletions."""

    def __init__(self, agent):
        self.agent = agent
        self.rank = agent.rank
        self.entries = {}
        self.children = {}  # fork id -> (the RRef kept alive, the worker it was sent to)
        self.users = weakref.WeakValueDictionary()  # fork id -> RRef: forks of other owners' values held here
        self.deleted = deque()
        self.lock = threading.Lock()
        self._ids = itertools.count(1)

    def new_id(self):
        return (self.rank, next(self._ids))

    def create(self, rref_id, holder, fork_id):
        with self.lock:
            entry = self.entries[rref_id] = _Owned()
            entry.forks[fork_id] = holder
        return entry

    def add_fork(self, rref_id, fork_id, holder):
        with self.lock:
            entry = self.entries.get(rref_id)
            if entry is not None:
                entry.forks[fork_id] = holder
            return entry

    def remove_fork(self, rref_id, fork_id):
        with self.lock:
            entry = self.entries.get(rref_id)
            if entry is not None:
                entry.forks.pop(fork_id, None)
                if not entry.forks:
                    del self.entries[rref_id]

    def get(self, rref_id):
        with self.lock:
            return self.entries.get(rref_id)

    def count(self):
        with self.lock:
            return len(self.entries)

    def peer_gone(self, peer):
        with self.lock:
            for rref_id, entry in list(self.entries.items()):
                for f in [f for f, h in entry.forks.items() if h == peer]:
                    del entry.forks[f]
                if not entry.forks:
                    del self.entries[rref_id]
            for f in [f for f, (_, dst) in self.children.items() if dst == peer]:
                del self.children[f]

    def flush_deletes(self):
        """Send the queued deletions (run by the dispatcher)."""
        if not self.deleted:
            return
        batches = defaultdict(list)
        while self.deleted:
            owner, rref_id, fork_id = self.deleted.popleft()
            batches[owner].append((rref_id, fork_id))
        for owner, items in batches.items():
            if owner == self.rank:
                _delete_forks(self.agent, owner, items)
            else:
                self.agent.oneway(owner, (_delete_forks, (items,)))

    def clear(self):
        with self.lock:
            self.entries.clear()
            self.children.clear()
            self.users.clear()
            self.deleted.clear()


# ---- one-way messages, run by the receiver's dispatcher (agent, sender rank, *args) -------------------------
def _delete_forks(agent, src, items):
    for rref_id, fork_id in items:
        agent.owner_table.remove_fork(rref_id, fork_id)


def _fork_request(agent, src, rref_id, fork_id, parent):
    """A user received a fork from another user (``parent``): the owner registers it, tells both."""
    entry = agent.owner_table.add_fork(rref_id, fork_id, src)
    agent.oneway(src, (_fork_confirmed, (fork_id, entry is not None)))
    if parent == agent.rank:
        _child_accepted(agent, src, fork_id)
    else:
        agent.oneway(parent, (_child_accepted, (fork_id,)))


def _child_accepted(agent, src, fork_id):
    agent.owner_table.children.pop(fork_id, None)


def _fork_confirmed(agent, src, fork_id, ok):
    rref = agent.owner_table.users.get(fork_id)
    if rref is not None:
        rref._confirmed = True if ok else None


# ---- requests run on the owner -------------------------------------------------------------------------------
def _fetch(rref_id):
    entry = _agent().owner_table.get(rref_id)
    if entry is None:
        fut = Future()
        fut.set_exception(RuntimeError(f"RRef {rref_id} does not exist on its owner (deleted or never created)"))
        return fut
    return entry.future


_fetch._wrapped_async_rpc_function = _fetch
_fetch._rpc_inline = True  # (returns a future at once)


def _value_type(rref):
    return type(rref.local_value())


def _call_method(name, rref, *args, **kwargs):
    return getattr(rref.local_value(), name)(*args, **kwargs)


def _call_async_method(name, rref, *args, **kwargs):
    return getattr(rref.local_value(), name)(*args, **kwargs)


_call_async_method._wrapped_async_rpc_function = _call_async_method


class RRef:
    """A reference to a value owned by a worker (this one or another). ``RRef(value)`` makes one owned here."""

    def __init__(self, value=None, type_hint=None):
        agent = _agent()
        table = agent.owner_table
        rref_id = table.new_id()
        entry = table.create(rref_id, agent.rank, rref_id)
        entry.future.set_result(value)
        self._init(agent.info, rref_id, rref_id, True, type(value) if type_hint is None else type_hint)

    def _init(self, owner, rref_id, fork_id, confirmed, type_=None, created=None, created_rid=None):
        self._owner, self._id, self._fork = owner, rref_id, fork_id
        self._confirmed, self._type, self._created, self._created_rid = confirmed, type_, created, created_rid
        self._live = True
        agent = _current()
        if agent is not None and owner.id != agent.rank:
            agent.owner_table.users[fork_id] = self

    @classmethod
    def _make(cls, owner, rref_id, fork_id, confirmed, type_=None, created=None, created_rid=None):
        rref = cls.__new__(cls)
        rref._init(owner, rref_id, fork_id, confirmed, type_, created, created_rid)
        return rref

    # ---- lifetime ----------------------------------------------------------------------------------------
    def _release(self):
        if getattr(self, "_live", False):
            self._live = False
            agent = _current()
            if agent is not None and not agent._stop:
                table = agent.owner_table
                table.users.pop(self._fork, None)
                table.deleted.append((self._owner.id, self._id, self._fork))

    def __del__(self):
        try:
            self._release()
        except Exception:  # noqa: BLE001 - at interpreter exit the agent's modules may be gone already
            pass

    # ---- pickling into an RPC message: a new fork for the receiver ---------------------------------------
    def __reduce__(self):
        dst = getattr(SER, "dst", None)
        agent = _current()
        if dst is None or agent is None:
            raise RuntimeError("RRef can only be pickled into an RPC message (rpc_sync, rpc_async or remote)")
        if not self._live:
            raise RuntimeError("this RRef was already released")
        table = agent.owner_table
        fork = table.new_id()
        owner = self._owner.id
        if owner == agent.rank:  # (to itself too: the message may arrive after this RRef is gone)
            table.add_fork(self._id, fork, dst)
        elif owner != agent.rank and dst != owner:
            table.children[fork] = (self, dst)
        return _unpickle_rref, (self._owner, self._id, fork, agent.rank, self._type)

    # ---- the value ---------------------------------------------------------------------------------------
    def owner(self):
        """The WorkerInfo of the owner."""
        return self._owner

    def owner_name(self):
        return self._owner.name

    def is_owner(self):
        agent = _current()
        return agent is not None and agent.rank == self._owner.id

    def confirmed_by_owner(self):
        """Whether the owner has registered this reference (always true on the owner)."""
        if self.is_owner():
            return True
        if self._created is not None:
            return self._created.done() and self._created._exc is None
        return bool(self._confirmed)

    def local_value(self):
        """The value, on the owner (raises its creation error); RuntimeError elsewhere."""
        if not self.is_owner():
            raise RuntimeError(f"Call it on owner {self._owner}: local_value() is only available on the owner of "
                               f"an RRef, this is {_agent().info}")
        entry = _agent().owner_table.get(self._id)
        if entry is None:
            raise RuntimeError(f"RRef {self._id} no longer exists on its owner")
        return entry.future.wait()

    def to_here(self, timeout=-1.0):
        """The value, copied here from the owner (waits for it to be created); raises if creating it failed."""
        if self.is_owner():
            return self.local_value()
        created = self._created
        after = None
        if created is not None:
            if created.done():
                if created._exc is not None:
                    raise created._exc
            else:
                after = self._created_rid  # the creation's failure (its timeout, say) fails the fetch too
        from . import api

        dst, args = self._owner.id, (self._id,)
        ctx = api._autograd_meta(dst, args, {})
        return api._require_agent().call_sync(dst, api._CALL, (_fetch, args, {}), timeout,
                                              None if ctx is None else (ctx,), after)

    def _get_future(self):
        """The future of the call that created this RRef (done on the owner or for a forked reference)."""
        if self._created is not None:
            return self._created
        fut = Future()
        fut.set_result(None)
        return fut

    def _get_type(self, timeout=-1.0, blocking=True):
        if self._type is None:
            if self.is_owner():
                self._type = type(self.local_value())
            else:
                from . import api

                self._type = api.rpc_sync(self._owner, _value_type, args=(self,), timeout=timeout)
        if blocking:
            return self._type
        fut = Future()
        fut.set_result(self._type)
        return fut

    def backward(self, dist_autograd_ctx_id=-1, retain_graph=False):
        """Backpropagate from the value (a scalar tensor) on its owner: with ember's local autograd when
        ``dist_autograd_ctx_id`` is -1, else a distributed backward pass of that context."""
        if self.is_owner():
            _backward_here(self, dist_autograd_ctx_id, retain_graph)
        else:
            from . import api

            api.rpc_sync(self._owner, _backward_here, args=(self, dist_autograd_ctx_id, retain_graph))

    # ---- proxies -----------------------------------------------------------------------------------------
    def rpc_sync(self, timeout=-1.0):
        """``rref.rpc_sync().method(*args)``: runs ``method`` on the value at its owner; its result."""
        return _Proxy(self, "rpc_sync", timeout)

    def rpc_async(self, timeout=-1.0):
        return _Proxy(self, "rpc_async", timeout)

    def remote(self, timeout=-1.0):
        return _Proxy(self, "remote", timeout)

    def __repr__(self):
        kind = "OwnerRRef" if self.is_owner() else "UserRRef"
        return f"{kind}(RRefId = {self._id}, ForkId = {self._fork})"


def _backward_here(rref, context_id, retain_graph):
    value = rref.local_value()
    if context_id == -1:
        value.backward(retain_graph=retain_graph)
    else:
        import ember.distributed.autograd as dist_autograd

        dist_autograd.backward(context_id, [value], retain_graph)


def _unpickle_rref(owner, rref_id, fork, sender, type_):
    agent = _agent()
    table = agent.owner_table
    if owner.id == agent.rank:
        if sender != agent.rank:  # (the owner's own messages registered the fork when pickled)
            table.add_fork(rref_id, fork, agent.rank)
        return RRef._make(owner, rref_id, fork, True, type_)
    rref = RRef._make(owner, rref_id, fork, sender == owner.id, type_)
    if sender != owner.id:
        agent.oneway(owner.id, (_fork_request, (rref_id, fork, sender)))
    return rref


class _Proxy:
    def __init__(self, rref, mode, timeout):
        self._rref, self._mode, self._timeout = rref, mode, timeout

    def __getattr__(self, name):
        rref, mode, timeout = self._rref, self._mode, self._timeout
        target = getattr(rref._get_type(timeout), name, None)
        fn = _call_async_method if getattr(target, "_wrapped_async_rpc_function", None) is not None else _call_method
        from . import api

        def call(*args, **kwargs):
            return getattr(api, mode)(rref.owner(), fn, args=(name, rref, *args), kwargs=kwargs, timeout=timeout)
        return call
