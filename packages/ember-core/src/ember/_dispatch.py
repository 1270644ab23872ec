"""The dispatcher: the layers an op call passes through before its array implementation.

Packages register layers (ember-amp registers "autocast" at order 100, ember-autograd "autograd" at
order 200); a call runs them in ascending order, each handing on to the next with ``call_next``,
and the implementation runs last. A call takes the fast path, straight to the implementation, unless
a layer has switched the slow path on (``force_slow``, e.g. while an autocast region is open) or an
input tensor requires grad. Nothing else is checked on the fast path.

Every layer but autograd's forces the slow path while it is active, so a call that is not forced and has an input
requiring grad meets no layer but autograd's. The registry then runs the implementation as on the fast path
and hands the result to ``RECORD[0]`` (ember-autograd's recorder), instead of going through the layers: that
saves the layered path's frames on every recorded call (a third of the cost of recording a tiny op).
"""
import bisect

from ._tensor import Tensor

# [count of reasons to take the slow path for every call]; a list so hot code reads one index
FORCED = [0]

_layers = []  # (order, name, handler), sorted


def _record_nothing(op, args, kwargs, result):
    return result


# [recorder(op, args, kwargs, result) -> result]: records the graph node of a call whose implementation has run
# (ember-autograd's; without it nothing is recorded)
RECORD = [_record_nothing]


class Call:
    """One op call as the layers see it: the op, its arguments, and how its result is written.

    ``mode`` is None for an out-of-place call, "inplace" for ``x.op_()`` and "out" for ``out=``.
    """

    __slots__ = ("op", "args", "kwargs", "mode", "out", "_found", "_found_for")

    def __init__(self, op, args, kwargs, mode=None, out=None):
        self.op, self.args, self.kwargs, self.mode, self.out, self._found_for = op, args, kwargs, mode, out, None

    def tensors(self):
        """The tensor arguments, in order, lists and tuples at the top level flattened (computed once for the
        current arguments: a layer may replace them, as autocast's casts do)."""
        if self._found_for is self.args:
            return self._found
        found = []
        for a in self.args:
            if isinstance(a, Tensor):
                found.append(a)
            elif type(a) in (list, tuple):
                found += [x for x in a if isinstance(x, Tensor)]
        if self.kwargs:
            found += [v for v in self.kwargs.values() if isinstance(v, Tensor)]
        self._found, self._found_for = found, self.args
        return found


def register_layer(name, order, handler):
    """Add a layer. ``handler(call, call_next)`` returns the call's result; it may change the call
    (autocast casts its arguments) and must hand on through ``call_next(call)`` to run the op. Any layer but
    autograd's must also force the slow path while it is registered (``force_slow``): see the module doc."""
    if any(n == name for _, n, _ in _layers):
        raise RuntimeError(f"dispatcher layer '{name}' is already registered")
    bisect.insort(_layers, (order, name, handler))
    _chains.clear()


def unregister_layer(name):
    _layers[:] = [entry for entry in _layers if entry[1] != name]
    _chains.clear()


def layers():
    return [name for _, name, _ in _layers]


def force_slow(on):
    """Make every call take the layered path (True) or release one such request (False)."""
    FORCED[0] += 1 if on else -1


_chains = {}  # implementation -> the layers composed in front of it (rebuilt when layers change)


def _compose(implementation):
    call_next = implementation
    for _, _, handler in reversed(_layers):
        call_next = _bind(handler, call_next)
    return call_next


def _bind(handler, call_next):
    return lambda call: handler(call, call_next)


def run_layers(call, implementation):
    """Run ``call`` through every registered layer, then ``implementation(call)``."""
    chain = _chains.get(implementation)
    if chain is None:
        chain = _chains[implementation] = _compose(implementation)
    return chain(call)
