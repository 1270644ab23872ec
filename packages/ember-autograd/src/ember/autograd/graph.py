"""``ember.autograd.graph``: the graph's ``Node``, gradient edges and saved-tensor hooks.

``with saved_tensors_hooks(pack, unpack):`` makes every op recorded in the block hand each tensor its
backward keeps (the call's tensor arguments and results) to ``pack(tensor)`` and keep only what pack
returns; the backward pass gets ``unpack(packed)`` back, each time it reads it. Hooks are thread-local
and the innermost pair wins. ``save_on_cpu()`` is such a pair (device tensors are parked in host
memory).

ember's VJPs see all of a call's tensors, so pack runs for each of them (PyTorch's ops save a subset).
The hooks apply to ops; tensors a custom ``Function`` saves with ``ctx.save_for_backward`` are not
packed. They are installed as the dispatcher layer "saved_tensors_hooks" (order 190, just in front of
autograd), registered while some thread has hooks: it hands the context of each node autograd records
to a packing context.
"""
import collections
import threading
import weakref

import numpy as np

from ember import _dispatch
from ember._tensor import Tensor

from . import grad_mode
from ._engine import Node, _detached, edge_of

__all__ = ["GradientEdge", "Node", "disable_saved_tensors_hooks", "get_gradient_edge", "increment_version",
           "save_on_cpu", "saved_tensors_hooks"]

GradientEdge = collections.namedtuple("GradientEdge", ["node", "output_nr"])


def get_gradient_edge(tensor):
    """The (node, output index) through which gradient reaches ``tensor``."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require "
                           "gradients")
    return GradientEdge(*edge_of(tensor))


def increment_version(tensor):
    """Mark ``tensor`` as modified in place (for changes made behind autograd's back)."""
    tensor._vc[0] += 1


class _Local(threading.local):
    def __init__(self):
        self.hooks = []  # (pack, unpack), innermost last
        self.disabled = None  # error message while hooks are disabled


_tls = _Local()
_users = [0]  # threads' open saved_tensors_hooks blocks; the layer is registered while nonzero


class saved_tensors_hooks:
    """Context manager: pack/unpack the tensors that recorded ops save for backward (see module doc)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if _tls.disabled is not None:
            raise RuntimeError(_tls.disabled)
        _tls.hooks.append((self.pack_hook, self.unpack_hook))
        _users[0] += 1
        if _users[0] == 1:
            _dispatch.register_layer("saved_tensors_hooks", 190, _layer)
            _dispatch.force_slow(True)  # (recorded calls must meet this layer: see _dispatch)
        return self

    def __exit__(self, *exc):
        _tls.hooks.pop()
        _users[0] -= 1
        if _users[0] == 0:
            _dispatch.unregister_layer("saved_tensors_hooks")
            _dispatch.force_slow(False)
        return False


class disable_saved_tensors_hooks:
    """Context manager in which entering ``saved_tensors_hooks`` raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self.prev = _tls.disabled
        _tls.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _tls.disabled = self.prev
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live in host memory until backward needs them back on their device."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            if t.is_cpu:
                return t.device, t
            return t.device, t.to("cpu", copy=True)

        def unpack(packed):
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)


def _layer(call, call_next):
    if not _tls.hooks:
        return call_next(call)
    pack, unpack = _tls.hooks[-1]
    target = call.args[0] if call.mode == "inplace" else None
    before = target.grad_fn if isinstance(target, Tensor) else None
    result = call_next(call)
    for t in result if isinstance(result, (tuple, list)) else (result,):
        node = t.grad_fn if isinstance(t, Tensor) else None
        if node is not None and node is not before and node._ctx is None:
            node._ctx = _PackedContext(node, pack, unpack)
    return result


def _stand_in(data):
    """An array of ``data``'s shape and dtype that holds no memory: what the version check's message reads."""
    return np.broadcast_to(np.empty((), data.dtype), data.shape)


class _Meta:
    """What the version check reads of a saved tensor, without keeping the tensor alive."""

    __slots__ = ("_vc", "_data")

    def __init__(self, t):
        self._vc, self._data = t._vc, _stand_in(t._data)


class _Packed:
    """A packed saved tensor and the graph edge it stood for (so unpacked values join the graph)."""

    __slots__ = ("value", "edge")

    def __init__(self, t, pack):
        self.edge = edge_of(t) if t.requires_grad else None
        with grad_mode.no_grad():
            self.value = pack(t)

    def get(self, unpack):
        t = unpack(self.value)
        if not isinstance(t, Tensor):
            raise TypeError(f"unpack_hook should return a Tensor, but got {type(t).__name__}")
        if self.edge is None:
            return t
        node, index = self.edge
        if type(node) is weakref.ref:  # an output of the node itself (held weakly: no reference cycle)
            node = node()
        proxy = Tensor._wrap(t._data)  # leads into the original graph (a leaf's edge is its accumulator)
        proxy._rg = True
        proxy.grad_fn = node
        if index:
            proxy._ext = {"out_idx": index}
        return proxy


def _map(x, fn, cls):
    if isinstance(x, cls):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(v, fn, cls) for v in x)
    return x


class _PackedContext:
    """Stands in for a node as its VJP's context: the node keeps the packed values (and does its in-place
    version check, on metadata instead of tensors); each access unpacks them. The node holds this stand-in,
    which refers back to it weakly (no reference cycle)."""

    __slots__ = ("_node", "kwargs", "_unpack", "_out")

    def __init__(self, node, pack, unpack):
        self._node, self.kwargs, self._unpack = weakref.ref(node), node.kwargs, unpack
        with grad_mode.enable_grad():
            out = node.out if node._outs else None
        self._out = _map(out, lambda t: _Packed(t, pack), Tensor)
        for p in self._out if isinstance(self._out, tuple) else (self._out,):
            if isinstance(p, _Packed) and p.edge is not None:
                p.edge = (self._node, p.edge[1])
        node._args = _map(node._args, lambda t: _Packed(t, pack), Tensor)
        node._inputs = [_Meta(t) for t in node._inputs]
        node._outs = [(_stand_in(data), version) for data, version in node._outs]

    @property
    def _versions(self):
        return self._node()._versions

    @property
    def needs_input_grad(self):
        return self._node().needs_input_grad

    def _unpacked(self, packed):
        value = _map(packed, lambda p: p.get(self._unpack), _Packed)
        return value if grad_mode.MODE.enabled else _detached(value)

    @property
    def args(self):
        return self._unpacked(self._node().args)

    @property
    def out(self):
        self._node()._check_out()
        return self._unpacked(self._out)

    def free(self):
        self._node().free()
