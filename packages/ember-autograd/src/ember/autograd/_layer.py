"""The autograd dispatcher layer: records a graph node for every differentiable call that has an
input requiring grad, and handles in-place ops (including in-place changes through views)."""
import inspect
import weakref

from ember._tensor import Tensor

from . import anomaly_mode, grad_mode
from ._engine import _flat_tensors, accumulator, edge_of
from ._names import node_type, node_type_of

_OUT_ERROR = ("{}(): functions with out=... arguments don't support automatic differentiation, but one of the "
              "arguments requires grad.")
_node_types = {}  # op -> the class of its nodes, for the ops whose node name does not depend on the call


def _missing_vjp(op):
    def vjp(ctx, *grads):
        raise RuntimeError(f"derivative for {op.name} is not implemented")
    return vjp


_INFERENCE_ERROR = ("Inference tensors cannot be saved for backward. To work around you can make a clone to get a "
                    "normal tensor and use it in autograd.")


def mark_inference(result):
    for t in _flat_tensors(result):
        t._ext = {**(t._ext or {}), "inference": True}
    return result


_MODE, _ANOMALY = grad_mode.MODE, anomaly_mode._STATE  # (thread-local states, read once per call)


def autograd_layer(call, call_next):
    mode = _MODE
    if mode.inference:
        return mark_inference(call_next(call))
    if not mode.enabled:
        return call_next(call)
    tensors = call.tensors()
    for t in tensors:
        if t._rg:
            break
    else:
        return call_next(call)
    _refuse_inference(tensors)
    op, kwargs, call_mode = call.op, call.kwargs, call.mode
    args, inputs = call.args, tensors
    target = before = None
    if call_mode is not None:
        if call_mode == "out":
            raise RuntimeError(_OUT_ERROR.format(op.name))
        target = args[0]
        if target.grad_fn is None and target._rg:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        base = target._base
        if base is not None and base.grad_fn is None and base._rg:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        # the versions of what the call reads, before it writes (an input may share the target's counter: y.mul_(y))
        before = {id(t._vc): t._vc[0] for t in tensors}
    if kwargs:
        args, kwargs, inputs = _bind_tensor_kwargs(op, args, kwargs)
        call.args, call.kwargs = args, kwargs
    if target is not None:
        args = (_snapshot(target),) + tuple(args[1:])
        inputs = [args[0]] + inputs[1:] if inputs is not None else None
    return record(op, args, kwargs, call_next(call), _flat_tensors(args) if inputs is None else inputs, target,
                  before)


def record(op, args, kwargs, result, inputs=None, target=None, before=None):
    """Make the node of a call that has run and join its outputs to it. The layer above passes the call's tensors
    ``inputs`` (``target``: what an in-place call wrote, ``before``: the version of each counter before it wrote);
    without them this is the dispatcher's recorder
    (``_dispatch.RECORD``) for an out-of-place call, which finds them (inference mode, which would mark the result,
    forces the layers, so it is not met here)."""
    if inputs is None:
        if not _MODE.enabled:
            return result
        if kwargs:
            args, kwargs, inputs = _bind_tensor_kwargs(op, args, kwargs)
            if inputs is None:
                inputs = _flat_tensors(args)
            _refuse_inference(inputs)
        else:
            inputs = []  # (the tensors of a flat argument tuple, the usual case, found inline)
            for a in args:
                if isinstance(a, Tensor):
                    if a._ext is not None and a._ext.get("inference"):
                        raise RuntimeError(_INFERENCE_ERROR)
                    inputs.append(a)
                elif type(a) in (list, tuple):
                    inputs = _flat_tensors(args)
                    _refuse_inference(inputs)
                    break
    if not op.differentiable:
        return result
    if not op.complex_grad and type(result) is Tensor and result.dtype.is_complex:
        raise RuntimeError(f"{op.name} does not support automatic differentiation for outputs with complex dtype.")
    cls = _node_types.get(op)
    if cls is None:
        cls = node_type_of(op, args, kwargs, result, _node_types)
    if type(result) is Tensor:
        node = cls(op.vjp_fn or _missing_vjp(op), args, kwargs, (result,), False, inputs)
        outputs = None
    else:
        outputs = _flat_tensors(result)
        node = cls(op.vjp_fn or _missing_vjp(op), args, kwargs, outputs, isinstance(result, tuple), inputs)
    if _ANOMALY.enabled:
        node._trace = anomaly_mode.forward_trace()
    if target is not None:
        _record_in_place(node, target, before)
        return result
    if outputs is None and op.constant_outputs is None:  # one result: a float one joins the graph
        if result._data.dtype.kind in "fcV":
            result._rg = True
            result.grad_fn = node
            if result._ext is not None and "out_idx" in result._ext:
                attach(result, node, 0)
            if op.view and result._base is not None:
                _register_view(result)
        return result
    # an op may name outputs of this call that carry no gradient (svd's zero-filled U and V without compute_uv)
    constant = op.constant_outputs(args, kwargs) if op.constant_outputs is not None else ()
    for i in constant:  # (the engine materialises no zero gradients for them)
        node._out_meta[i] = None
    for i, o in enumerate(outputs or (result,)):
        if o._data.dtype.kind in "fcV" and i not in constant:  # floating and complex dtypes
            attach(o, node, i)
            if op.view and o._base is not None:
                _register_view(o)
    return result


def _record_in_place(node, target, before):
    """Join an in-place call's node to the graph: the target's history becomes the node (through its base's when
    the target is a view), and every other view of the same memory becomes a view of that new history."""
    versions = node._versions[0]
    for i, t in enumerate(node._inputs):
        versions[i] = before.get(id(t._vc), versions[i])
    if target._base is not None and _chain(target) is not None:
        _rebase_view(target, node)
    elif target._data.dtype.kind in "fcV":
        attach(target, node, 0)
    base = target._base if target._base is not None else target
    views = base._ext.get("views") if base._ext is not None else None
    for ref in views or ():
        view = ref()
        if view is not None and view is not target and view._vc is base._vc:
            chain = _chain(view)
            if chain is not None:
                attach(view, _view_of_new_base(base, chain, view), 0)


def _refuse_inference(tensors):
    for t in tensors:
        if t._ext is not None and t._ext.get("inference"):
            raise RuntimeError(_INFERENCE_ERROR)


def attach(t, node, index):
    t._rg = True
    t.grad_fn = node
    if index or (t._ext is not None and "out_idx" in t._ext):
        t._ext = {**(t._ext or {}), "out_idx": index}


def _snapshot(target):
    """The target's value before an in-place op, carrying its autograd history."""
    return _history_of(target, target._data.copy())


def _history_of(t, data=None):
    """A tensor standing for ``t`` in a graph: same autograd history, ``data`` (default: t's array)."""
    proxy = Tensor._wrap(t._data if data is None else data)
    proxy._rg = t._rg
    proxy.grad_fn = t.grad_fn if t.grad_fn is not None or not t._rg else accumulator(t)
    if t._ext is not None and "out_idx" in t._ext:
        proxy._ext = {"out_idx": t._ext["out_idx"]}
    return proxy


_signatures = {}


def _bind_tensor_kwargs(op, args, kwargs):
    """(args, kwargs, inputs) with keyword arguments that are tensors moved into their positions, so VJPs return
    their gradients; ``inputs`` the tensors among the arguments, None if a keyword tensor could not be moved (the
    node then finds them itself)."""
    if any(isinstance(v, Tensor) for v in kwargs.values()):
        sig = _signatures.get(op)
        if sig is None:
            params = list(inspect.signature(op.impl).parameters.values())[1:]
            sig = _signatures[op] = inspect.Signature(params)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs, None
        args, kwargs = bound.args, bound.kwargs
        if any(isinstance(v, Tensor) for v in kwargs.values()):
            return args, kwargs, None
    return args, kwargs, _flat_tensors(args)


# ---- in-place changes through views -----------------------------------------------------------------
def _register_view(view):
    """Remember a view that carries gradient on its base (weakly), so that an in-place change of the base or of
    another of its views gives it the new history, as PyTorch regenerates a view's grad_fn. (Not for leaves: an
    in-place change of a leaf that requires grad, or of a view of one, is refused.)"""
    base = view._base
    if base.grad_fn is None:
        return
    if base._ext is None:
        base._ext = {}
    views = base._ext.get("views")
    if views is None:
        views = base._ext["views"] = []
    elif len(views) % 32 == 31:  # (views die often: drop the dead references now and then)
        views[:] = [r for r in views if r() is not None]
    views.append(weakref.ref(view))


def _chain(view):
    """The ops that made ``view`` from its base, outermost last; None if one of them is not replayable."""
    steps = []
    t = view
    while t._base is not None:
        info = (t._ext or {}).get("view")
        if info is None:
            return None
        parent, op, args, kwargs, index = info
        steps.append((op, args, kwargs, index))
        t = parent
    return steps[::-1] if t is view._base else None


def replay(chain, t):
    for op, args, kwargs, index in chain:
        t = op.fn(t, *args, **kwargs)
        if index is not None:
            t = t[index] if not isinstance(t, tuple) else t[index]
    return t


def _rebase_view(view, inplace_node):
    """An in-place op changed ``view``: the base's history becomes 'old base with the view's region
    replaced by the op's result', and the view becomes a fresh view of the new base."""
    base = view._base
    chain = _chain(view)

    def copy_slices(ctx, g):
        g_region = replay(chain, g)
        grads = list(inplace_node.apply([g_region]))
        g_old = g.clone()
        region = replay(chain, g_old)
        region.copy_(grads[0] if grads[0] is not None else region * 0)
        return [g_old] + grads[1:]

    node = node_type("CopySlices")(copy_slices, (_history_of(base),), {}, [base])
    # the in-place op's other inputs keep their own edges: the VJP above returns one gradient per edge
    extra = list(zip(inplace_node.next_functions, inplace_node._in_meta))[1:]
    node.next_functions += tuple(e for e, _ in extra)
    node._in_meta += [m for _, m in extra]
    node._structure = None
    attach(base, node, 0)
    attach(view, _view_of_new_base(base, chain, view), 0)


def _view_of_new_base(base, chain, view):
    """The node of ``view`` (made from ``base`` by ``chain``) as a view of the base's present history: its VJP
    differentiates the replayed view ops (an expanded view's gradient sums where elements repeat)."""
    def vjp(ctx, g):
        from . import grad
        create = _MODE.enabled
        with grad_mode.enable_grad():
            full = g.new_zeros(base.shape).requires_grad_()
            return list(grad(replay(chain, full), full, g, create_graph=create))

    return node_type("AsStridedBackward0")(vjp, (base,), {}, [view])


__all__ = ["autograd_layer", "edge_of", "record"]
