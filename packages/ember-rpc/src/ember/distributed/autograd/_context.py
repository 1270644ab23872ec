"""Distributed autograd contexts: what each worker recorded of the RPCs made in a context, and the backward pass.

Forward: an RPC made inside a context carries the context's id. The tensors requiring grad that a worker sends
(arguments, or results it returns) are kept in the context under a *send id*; the receiver's copies are leaves
requiring grad, recorded as *received* from that (sender, send id, position).

Backward (FAST mode): a worker computes, with ember's local engine, the gradients of its roots with respect to
every leaf its graph reaches. A leaf's gradient is accumulated in the context, except for a received tensor's:
that one goes back to the sender, which continues from the tensors it sent with those gradients, and so on.
Graphs are kept until the context ends (a worker may be reached several times in one backward pass: gradients
arriving separately add up). ``backward`` returns once every worker reached has finished.
"""
import itertools
import threading
from contextlib import contextmanager

from ember._tensor import Tensor
from ember.futures import Future, collect_all

_contexts = {}
_lock = threading.Lock()
_local = threading.local()
_ids = itertools.count(1)


class DistContext:
    __slots__ = ("id", "sends", "recvs", "grads", "peers", "lock", "_send_ids")

    def __init__(self, context_id):
        self.id = context_id
        self.sends = {}  # send id -> tensors sent
        self.recvs = {}  # id(tensor) -> (tensor, sender, send id, position)
        self.grads = {}  # leaf -> accumulated gradient
        self.peers = set()
        self.lock = threading.RLock()
        self._send_ids = itertools.count()

    def _context_id(self):
        return self.id


def _agent():
    from ember.distributed.rpc import api

    return api._require_agent()


def new_context():
    rank = _agent().rank
    if getattr(_local, "ctx", None) is not None:
        raise RuntimeError("Already have an autograd context id for this thread.")
    ctx = DistContext((rank << 48) + next(_ids))
    with _lock:
        _contexts[ctx.id] = ctx
    _local.ctx = ctx
    return ctx


def current():
    return getattr(_local, "ctx", None)


def lookup(context_id):
    with _lock:
        ctx = _contexts.get(context_id)
    if ctx is None:
        raise RuntimeError(f"Could not find autograd context with id: {context_id}")
    return ctx


def _get_or_create(context_id):
    with _lock:
        ctx = _contexts.get(context_id)
        if ctx is None:
            ctx = _contexts[context_id] = DistContext(context_id)
        return ctx


@contextmanager
def _entered(ctx):
    prev = getattr(_local, "ctx", None)
    _local.ctx = ctx
    try:
        yield
    finally:
        _local.ctx = prev


def release(ctx, notify=True):
    """Forget ``ctx`` here and (``notify``) on every worker it reached."""
    with _lock:
        _contexts.pop(ctx.id, None)
    if getattr(_local, "ctx", None) is ctx:
        _local.ctx = None
    if notify:
        agent = _agent()
        for p in ctx.peers:
            if p != agent.rank:
                agent.oneway(p, (_release_remote, (ctx.id,)))


def _release_remote(agent, src, context_id):
    with _lock:
        ctx = _contexts.pop(context_id, None)
    if ctx is not None:
        for p in ctx.peers - {src, agent.rank}:
            agent.oneway(p, (_release_remote, (context_id,)))


def clear():
    with _lock:
        _contexts.clear()
    _local.ctx = None


def _grad_tensors(obj, seen=None):
    """The distinct tensors requiring grad inside ``obj`` (lists, tuples, dicts), in a fixed order."""
    out, seen = [], set() if seen is None else seen
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            if x.requires_grad and id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
    return out


def _record_send(ctx, tensors):
    if not tensors:
        return None
    with ctx.lock:
        send_id = next(ctx._send_ids)
        ctx.sends[send_id] = tensors
    return send_id


def _record_recv(ctx, src, send_id, tensors):
    with ctx.lock:
        for i, t in enumerate(tensors):
            ctx.recvs[id(t)] = (t, src, send_id, i)


# ---- hooks of the agent ----------------------------------------------------------------------------------------
def on_send(dst, args, kwargs):
    """The context's part of a request made in a context (None outside one)."""
    ctx = current()
    if ctx is None:
        return None
    ctx.peers.add(dst)
    return ctx.id, _record_send(ctx, _grad_tensors((args, kwargs)))


def on_request(src, meta, args, kwargs):
    context_id, send_id = meta
    ctx = _get_or_create(context_id)
    ctx.peers.add(src)
    if send_id is not None:
        _record_recv(ctx, src, send_id, _grad_tensors((args, kwargs)))
    return ctx, args, kwargs


def on_reply(dst, ctx, value):
    send_id = _record_send(ctx, _grad_tensors(value))
    return (None if send_id is None else (ctx.id, send_id)), value


def on_response(src, meta, value):
    context_id, send_id = meta
    with _lock:
        ctx = _contexts.get(context_id)
    if ctx is not None:
        _record_recv(ctx, src, send_id, _grad_tensors(value))
    return value


# ---- the backward pass -----------------------------------------------------------------------------------------
def _leaves(roots):
    """The leaves requiring grad that the graphs of ``roots`` reach (roots that are leaves included)."""
    leaves, seen, stack = {}, set(), []
    for r in roots:
        if r.grad_fn is None:
            leaves[id(r)] = r
        else:
            stack.append(r.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None and not node.next_functions:
            leaves[id(var)] = var
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return list(leaves.values())


def local_pass(ctx, roots, grads):
    """Backpropagate ``grads`` of ``roots`` here, send received tensors' gradients to their senders; a Future
    done when every worker reached is done."""
    import ember.autograd
    from ember.distributed.rpc._agent import _CALL

    pairs = [(r, g) for r, g in zip(roots, grads) if isinstance(r, Tensor) and r.requires_grad and g is not None]
    if not pairs:
        return collect_all([])
    roots, grads = [r for r, _ in pairs], [g for _, g in pairs]
    outgoing = {}
    with ctx.lock:
        leaves = _leaves(roots)
        with _entered(None):
            found = ember.autograd.grad(roots, leaves, grads, retain_graph=True, allow_unused=True)
        for leaf, g in zip(leaves, found):
            if g is None:
                continue
            rec = ctx.recvs.get(id(leaf))
            if rec is not None and rec[0] is leaf:
                outgoing.setdefault((rec[1], rec[2]), {})[rec[3]] = g
            else:
                have = ctx.grads.get(leaf)
                ctx.grads[leaf] = g if have is None else have + g
    agent = _agent()
    futures = [agent.call(src, _CALL, (_backward_step, (ctx.id, send_id, gs), {}), 0)
               for (src, send_id), gs in outgoing.items()]
    return _all_ok(futures)


def _all_ok(futures):
    out = Future()

    def done(all_done):
        for f in all_done.value():
            try:
                f.wait()
            except BaseException as e:  # noqa: BLE001 - the first error fails the pass
                out.set_exception(e)
                return
        out.set_result(None)
    collect_all(futures).add_done_callback(done)
    return out


def _backward_step(context_id, send_id, grads):
    """On the sender of ``send_id``: continue the backward pass from the tensors it sent."""
    ctx = lookup(context_id)
    tensors = ctx.sends[send_id]
    idx = sorted(grads)
    return local_pass(ctx, [tensors[i] for i in idx], [grads[i] for i in idx])


_backward_step._wrapped_async_rpc_function = _backward_step
