"""Custom differentiable functions: ``class F(ember.autograd.Function)`` with static forward/backward."""
import functools

from ember._tensor import Tensor

from . import grad_mode
from ._engine import Node, _flat_tensors, _modified


class FunctionCtx:
    """The ``ctx`` a Function's forward fills and its backward reads."""

    def __init__(self):
        self._saved = None
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self._saved = tuple((t, t._vc[0]) if isinstance(t, Tensor) else (t, None) for t in tensors)

    @property
    def saved_tensors(self):
        if self._saved is None:
            return ()
        for t, v in self._saved:
            if v is not None and t._vc[0] != v:
                raise RuntimeError(_modified(t._data, t._vc[0], v, t))
        return tuple(t for t, _ in self._saved)

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self._materialize = bool(value)


class Function:
    """Subclass with ``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs,
    output)``) and ``backward(ctx, *grad_outputs)`` returning one gradient per forward input."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    setup_context = None

    @classmethod
    def vjp(cls, ctx, *grad_outputs):
        return cls.backward(ctx, *grad_outputs)

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        with grad_mode.no_grad():
            if cls.setup_context is not None and _overrides(cls, "setup_context"):
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        out = _fresh_outputs(out, args, ctx._dirty)
        if not (grad_mode.MODE.enabled and any(ctx.needs_input_grad)):
            return out
        outputs = _flat_tensors(out)
        n_inputs = len(args)

        def vjp(saved, *grads):
            result = cls.vjp(ctx, *grads)
            result = result if isinstance(result, tuple) else (result,)
            if len(result) < n_inputs or any(g is not None for g in result[n_inputs:]):
                raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients "
                                   f"(expected {n_inputs}, got {len(result)})")
            return result[:n_inputs]

        node = _backward_type(cls)(vjp, args, kwargs, outputs)
        node.materialize = ctx._materialize
        skip = {id(t) for t in ctx._non_differentiable}
        from ._layer import attach
        for i, o in enumerate(outputs):
            if id(o) not in skip and (o.dtype.is_floating_point or o.dtype.is_complex):
                attach(o, node, i)
        return out


class BackwardCFunction(Node):
    """The base of the node classes of custom Functions: ``F``'s nodes are ``FBackward`` objects, as in PyTorch."""

    __slots__ = ()


def _backward_type(cls):
    """``<Name>Backward``, the node class of Function ``cls`` (one per class; ``_forward_cls`` names it back)."""
    node_cls = cls.__dict__.get("_backward_cls")
    if node_cls is None:
        node_cls = type(f"{cls.__name__}Backward", (BackwardCFunction,),
                        {"__slots__": (), "_name": f"{cls.__name__}Backward", "_forward_cls": cls,
                         "__module__": __name__})
        cls._backward_cls = node_cls
    return node_cls


def _overrides(cls, name):
    return any(name in vars(k) for k in cls.__mro__[:-1] if k is not Function)


def _fresh_outputs(out, args, dirty):
    """Outputs that are unmodified inputs become views, so the inputs keep their own history."""
    inputs = {id(a) for a in args if isinstance(a, Tensor)} - {id(t) for t in dirty}
    if isinstance(out, Tensor):
        return Tensor._wrap(out._data)._view_of(out) if id(out) in inputs else out
    if isinstance(out, tuple):
        return tuple(_fresh_outputs(o, args, dirty) for o in out)
    return out


def once_differentiable(backward):
    """Mark a backward as not itself differentiable: it runs without recording."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            return backward(ctx, *grads)
    return wrapper

