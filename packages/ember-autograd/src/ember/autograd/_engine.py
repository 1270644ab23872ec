"""The autograd graph and the backward engine.

Every differentiable op call that has an input requiring grad gets a ``Node`` holding the op's VJP
and what the call saw (``SavedContext``). ``backward`` walks the graph from the roots with
dependency counts, so a node runs once all the gradients flowing into it are summed.
"""
import heapq
import itertools
import traceback
import weakref

import ember
from ember._tensor import Tensor

from . import anomaly_mode, grad_mode

_seq = itertools.count()
_EMPTY = {}  # the gradients of a node none reached (never written)
_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
          "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
          "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
          "you need to access saved tensors after calling backward.")


class SavedContext:
    """What a VJP sees: the call's arguments and result, checked against in-place changes on access."""

    __slots__ = ("_args", "kwargs", "_out", "_versions", "_node", "_pargs", "_pout")

    def __init__(self, args, kwargs, out, node, inputs, outputs):
        self._args, self.kwargs, self._out, self._node = args, kwargs, out, node
        self._pargs = self._pout = None  # args and out cut from the graph, made once (when read) for VJPs run
        # without create_graph
        self._versions = ([(t, t._version[0]) for t in inputs], [(t, t._version[0]) for t in outputs])

    def _check(self, which):
        if self._versions is None:
            raise RuntimeError(_FREED)
        for t, v in self._versions[which]:
            if t._version[0] != v:
                kind = _LEGACY.get(t.dtype, str(t.dtype))
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{kind} {list(t.shape)}], which is output 0 of {self._node.name()}, is at version "
                    f"{t._version[0]}; expected version {v} instead. Hint: enable anomaly detection to find the "
                    "operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).")

    @property
    def args(self):
        """The call's arguments (checked: none changed in place since the call)."""
        self._check(0)
        if grad_mode.MODE.enabled:
            return self._args
        if self._pargs is None:
            self._pargs = _detached(self._args)
        return self._pargs

    @property
    def out(self):
        """The call's result (checked: not changed in place since the call)."""
        self._check(1)
        if grad_mode.MODE.enabled:
            return self._out
        if self._pout is None:
            self._pout = _detached(self._out)
        return self._pout

    def free(self):
        self._args = self._out = self._versions = self._pargs = self._pout = None


_LEGACY = {ember.float32: "torch.FloatTensor", ember.float64: "torch.DoubleTensor", ember.float16: "torch.HalfTensor",
           ember.bfloat16: "torch.BFloat16Tensor", ember.complex64: "torch.ComplexFloatTensor",
           ember.complex128: "torch.ComplexDoubleTensor"}


def _detached(x):
    """``x`` with its tensors cut from the graph: without create_graph, VJP ops then take the fast path."""
    if isinstance(x, Tensor):
        return Tensor._wrap(x._data) if x._rg else x
    if type(x) is tuple:
        return tuple([Tensor._wrap(v._data) if type(v) is Tensor and v._rg else v if type(v) is not list
                      and type(v) is not tuple and not isinstance(v, Tensor) else _detached(v) for v in x])
    if isinstance(x, (list, tuple)):
        return type(x)(_detached(v) for v in x)
    return x


def _flat_tensors(x):
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_tensors(v)]
    return []


class Node:
    """A backward function: turns gradients of its outputs into gradients of its inputs."""

    __slots__ = ("_vjp", "_name", "_ctx", "next_functions", "_in_meta", "_out_meta", "_structure", "_pos",
                 "_pre_hooks", "_hooks", "seq", "metadata", "_trace", "materialize", "__weakref__")

    def __init__(self, name, vjp, args, kwargs, outputs, as_tuple=False, inputs=None):
        self._vjp, self._name = vjp, name
        self.seq = next(_seq)
        self._pre_hooks = self._hooks = self._trace = None
        self.metadata = {}
        self.materialize = True  # unused float outputs get zero gradients (custom Functions may opt out)
        if inputs is None:
            inputs = _flat_tensors(args)
        edges, in_meta = [], []
        for t in inputs:
            if t._rg:
                edges.append(edge_of(t))
                in_meta.append((t._data.shape, t.dtype, t.device))
            else:
                edges.append((None, 0))
                in_meta.append(None)
        self.next_functions, self._in_meta = tuple(edges), in_meta
        self._structure = args
        # where the tensor arguments are, when none is inside a list (apply then picks their gradients directly)
        pos = []
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                pos.append(i)
            elif isinstance(a, (list, tuple)):
                pos = None
                break
        self._pos = pos
        self._out_meta = [(o._data.shape, o.dtype, o.device) for o in outputs]
        # ctx.out: one tensor, or a tuple when several (or the op returned a tuple, even of one)
        out = outputs[0] if len(outputs) == 1 and not as_tuple else tuple(outputs)
        self._ctx = SavedContext(args, kwargs, out, self, inputs, outputs)

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object at {hex(id(self))}>"

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node runs; may return new grad_inputs."""
        self._hooks = (self._hooks or []) + [fn]
        return _Handle(self, "_hooks", fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, index, fn):
        entry = (index, fn)
        self._pre_hooks = (self._pre_hooks or []) + [entry]
        return _Handle(self, "_pre_hooks", entry)

    def apply(self, grads):
        """Gradients for each edge in ``next_functions`` from the gradients of each output."""
        ctx = self._ctx
        if ctx._versions is None:
            raise RuntimeError(_FREED)
        result = self._vjp(ctx, *grads)
        if type(result) is not tuple and not isinstance(result, (tuple, list)):
            result = (result,)
        if self._structure is None:  # the VJP already returns one gradient per edge
            return [_fit(g, m) for g, m in zip(result, self._in_meta)]
        if self._pos is not None:
            n = len(result)
            return [_fit(result[i] if i < n else None, m) for i, m in zip(self._pos, self._in_meta)]
        flat = []
        for i, arg in enumerate(self._structure):
            g = result[i] if i < len(result) else None
            if isinstance(arg, Tensor):
                flat.append(g)
            elif isinstance(arg, (list, tuple)):
                gs = list(g) if g is not None else []
                flat += [gs[j] if j < len(gs) else None for j, a in enumerate(arg) if isinstance(a, Tensor)]
        return [_fit(g, m) for g, m in zip(flat, self._in_meta)]

    def release(self):
        self._ctx.free()


class AccumulateGrad(Node):
    """The sink of a leaf tensor that requires grad: adds arriving gradients into ``variable.grad``."""

    __slots__ = ("variable", "_post_hooks")

    def __init__(self, variable):
        self._name = "AccumulateGrad"
        self.variable = variable
        self.seq = -1
        self.next_functions = ()
        self._pre_hooks = self._hooks = self._post_hooks = None
        self.metadata = {}
        self._trace = None
        self.materialize = True
        self._out_meta = [(variable._data.shape, variable.dtype, variable.device)]

    def accumulate(self, g, create_graph):
        v = self.variable
        if v.grad is None:
            # a VJP may hand the same tensor to several inputs: own a copy unless building a graph
            v.grad = g if create_graph else Tensor._wrap(g._data.copy())
        else:
            v.grad = v.grad + g if create_graph else Tensor._wrap(v.grad._data + g._data)
        for hook in self._post_hooks or ():
            hook(v)

    def release(self):
        pass


class _Handle:
    """Removes a hook again (``handle.remove()``)."""

    def __init__(self, owner, attr, item):
        self.owner, self.attr, self.item = weakref.ref(owner), attr, item

    def remove(self):
        owner = self.owner()
        if owner is not None:
            setattr(owner, self.attr, [h for h in getattr(owner, self.attr) or () if h is not self.item] or None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def accumulator(t):
    """The (cached) AccumulateGrad node of a leaf that requires grad."""
    ext = t._ext if t._ext is not None else {}
    ref = ext.get("acc")
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        ext["acc"] = weakref.ref(acc)
        t._ext = ext
    return acc


def edge_of(t):
    """(node, output index) through which gradient reaches ``t``."""
    fn = t.grad_fn
    if fn is not None:
        return fn, t._ext.get("out_idx", 0) if t._ext is not None else 0
    return accumulator(t), 0


def _fit(g, meta):
    """A gradient summed back to its input's shape (undoing broadcasting) and cast to its dtype."""
    if g is None or meta is None:
        return None
    shape, dtype, _ = meta
    if g._data.shape != shape:
        g = g.sum_to_size(shape)
    if g.dtype is not dtype:
        g = (g.real if g.dtype.is_complex and not dtype.is_complex else g).to(dtype)
    return g


def _zeros(meta):
    shape, dtype, device = meta
    return ember.zeros(shape, dtype=dtype, device=device)


def run_backward(roots, grad_roots, retain_graph=False, create_graph=False, inputs=None, allow_unused=False,
                 accumulate=True):
    """Backpropagate ``grad_roots`` from the ``roots`` tensors.

    With ``accumulate`` the leaves' ``.grad`` are updated (``inputs`` limits which); without it the
    gradients reaching ``inputs`` are returned instead (``autograd.grad``).
    """
    root_edges = []
    for t, g in zip(roots, grad_roots):
        if not t._rg:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        root_edges.append((edge_of(t), g))
    targets = {}
    if inputs is not None:
        for i, t in enumerate(inputs):
            if not t._rg:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets.setdefault(edge_of(t), []).append(i)
    # dependency counts of every node reachable from the roots
    deps, order, stack = {}, [], list(dict.fromkeys(e[0] for e, _ in root_edges))
    seen = set(stack)
    while stack:
        node = stack.pop()
        order.append(node)
        for nxt, _ in node.next_functions:
            if nxt is not None:
                deps[nxt] = deps.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    needed = _needed(order, {e[0] for e in targets}) if inputs is not None else None
    buffers = {}
    for (node, idx), g in root_edges:
        _add(buffers, node, idx, g)
    captured = [None] * (len(inputs) if inputs is not None else 0)
    ready = [(-n.seq, id(n), n) for n in {e[0][0] for e in root_edges} if deps.get(n, 0) == 0]
    heapq.heapify(ready)
    with grad_mode.set_grad_enabled(create_graph):
        while ready:
            node = heapq.heappop(ready)[2]
            grads = buffers.pop(node, _EMPTY)
            n_out = len(node._out_meta)
            outs = [grads.get(0)] if n_out == 1 else [grads.get(i) for i in range(n_out)]
            if node._pre_hooks:
                outs = _run_pre_hooks(node, outs)
            if targets:
                for k, g in enumerate(outs):
                    for pos in targets.get((node, k), ()):
                        captured[pos] = g
            if type(node) is AccumulateGrad:
                if accumulate and outs[0] is not None and (inputs is None or (node, 0) in targets):
                    node.accumulate(outs[0], create_graph)
                continue
            if needed is not None and node not in needed:
                continue
            if outs[0] is not None if n_out == 1 else all(g is not None for g in outs):
                next_grads = _apply(node, outs)  # (`None in outs` would call Tensor.__eq__)
            elif n_out == 1 or all(g is None for g in outs):
                next_grads = [None] * len(node.next_functions)
            else:
                if node.materialize:
                    outs = [g if g is not None or not (m[1].is_floating_point or m[1].is_complex) else _zeros(m)
                            for g, m in zip(outs, node._out_meta)]
                next_grads = _apply(node, outs)
            if not retain_graph:
                node.release()
            for (nxt, idx), g in zip(node.next_functions, next_grads):
                if nxt is None:
                    continue
                if g is not None:
                    _add(buffers, nxt, idx, g)
                left = deps[nxt] = deps[nxt] - 1
                if not left:
                    heapq.heappush(ready, (-nxt.seq, id(nxt), nxt))
    if inputs is not None:
        if not allow_unused and any(g is None for g in captured):
            raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                               "Set allow_unused=True if this is the desired behavior.")
        return captured
    return None


def _apply(node, outs):
    grads = node.apply(outs) if not anomaly_mode._STATE.enabled else anomaly_mode.checked_apply(node, outs)
    for hook in node._hooks or ():
        new = hook(grads, outs)
        if new is not None:
            grads = list(new)
    return grads


def _run_pre_hooks(node, outs):
    for index, fn in node._pre_hooks or ():
        if index is None:
            new = fn(tuple(outs))
            if new is not None:
                outs = list(new)
        elif outs[index] is not None:
            new = fn(outs[index])
            if new is not None:
                outs[index] = new
    return outs


def _add(buffers, node, idx, g):
    slot = buffers.get(node)
    if slot is None:
        buffers[node] = {idx: g}
    else:
        slot[idx] = g if idx not in slot else slot[idx] + g


def _needed(order, target_nodes):
    """Nodes from which some target node is reachable (only those must run for autograd.grad)."""
    needed = set(target_nodes)
    changed = True
    while changed:
        changed = False
        for node in order:
            if node not in needed and any(n in needed for n, _ in node.next_functions if n is not None):
                needed.add(node)
                changed = True
    return needed


def current_traceback():
    return "".join(traceback.format_stack()[:-3])
