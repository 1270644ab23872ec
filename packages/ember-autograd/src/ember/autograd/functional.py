"""``ember.autograd.functional``: derivatives of whole functions: vjp, jvp, jacobian, hessian, vhp, hvp.

Every entry point takes ``func`` and ``inputs`` (a tensor or a tuple of tensors) and answers in the
shape of its arguments: a tensor where it got a tensor, a tuple where it got a tuple (``jacobian``
nests outputs, then inputs). The inputs are detached copies that require grad, so the caller's graph is
untouched, unless ``create_graph=True``, where the results stay differentiable back to the caller's
tensors. ``strict=True`` raises where a derivative is independent of an input instead of returning zeros.
``jvp`` uses the double-VJP trick; ``jacobian(strategy="forward-mode")`` uses ``ember.autograd.forward_ad``.
"""
import ember
from ember._tensor import Tensor

from . import grad_mode

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(value, arg_name, fn_name):
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            where = f" but the value at index {i} has type {type(t)}." if is_tuple else \
                f" but the given {arg_name} has type {type(t)}."
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors" + where)
    return is_tuple, items


def _unpack(result, is_tuple):
    """Undo the tuple wrapping: ``is_tuple`` is a flag, or a pair (outer, inner) for nested results."""
    if isinstance(is_tuple, tuple):
        if not is_tuple[1]:
            result = tuple(r[0] for r in result)
        return result if is_tuple[0] else result[0]
    return result if is_tuple else result[0]


def _prepare(inputs, create_graph, need_graph):
    """Inputs as fresh leaves; with create_graph, views that keep the caller's graph."""
    if create_graph and any(t.requires_grad for t in inputs):
        return tuple(t.view_as(t) if t.requires_grad else t.detach().requires_grad_(need_graph) for t in inputs)
    return tuple(t.detach().requires_grad_(need_graph) for t in inputs)


def _finish(tensors, create_graph):
    if create_graph:
        return tensors
    if isinstance(tensors, Tensor):
        return tensors.detach()
    return tuple(_finish(t, create_graph) for t in tensors)


def _check_v(v, refs):
    if len(v) != len(refs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got {len(v)}.")
    for i, (a, b) in enumerate(zip(v, refs)):
        if a.shape != b.shape:
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {b.shape} but got {a.shape}.")


_INDEPENDENT = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed "
               "in a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
                   "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
                "input {i} is independent of the input. This is not allowed in strict mode.",
}
_UNUSED = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
                  "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
}


def _check_requires_grad(tensors, kind, strict):
    if strict:
        for i, t in enumerate(tensors):
            if t is None or not t.requires_grad:
                raise RuntimeError(_INDEPENDENT[kind].format(i=i))


def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that have a graph; None for inputs nothing reaches."""
    keep = [k for k, o in enumerate(outputs) if o is not None and o.requires_grad]
    if not keep:
        return (None,) * len(inputs)
    seeds = None if grad_outputs is None else [grad_outputs[k] for k in keep]
    return ember.autograd.grad([outputs[k] for k in keep], inputs, seeds, retain_graph=retain_graph,
                               create_graph=create_graph, allow_unused=True)


def _zeros_for_none(grads, refs, strict, create_graph, stage):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_UNUSED[stage].format(i=i))
            g = ember.zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(f"The {'jacobian' if stage == 'back' else 'hessian'} of the user-provided function is "
                               f"independent of input {i}. This is not allowed in strict mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def _single_element_v(tensors, what, fn_name):
    if len(tensors) != 1 or tensors[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if the {what} is a single Tensor with a single element.")


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs`` (``v`` shaped like the outputs)."""
    with grad_mode.enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, True)
        is_out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        if v is not None:
            v = _prepare(_as_tuple(v, "v", "vjp")[1], create_graph, False)
            _check_v(v, outputs)
        else:
            _single_element_v(outputs, "user-provided function returns", "vjp")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        grads = _zeros_for_none(_grad(outputs, inputs, v, create_graph), inputs, strict, create_graph, "back")
    return _unpack(_finish(outputs, create_graph), is_out_tuple), _unpack(_finish(grads, create_graph), is_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product (``v`` shaped like the inputs), computed by
    differentiating the VJP ``u -> u^T J`` with respect to ``u`` (it is linear in ``u``)."""
    with grad_mode.enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, True)
        if v is not None:
            v = _prepare(_as_tuple(v, "v", "jvp")[1], create_graph, False)
            _check_v(v, inputs)
        else:
            _single_element_v(inputs, "input to the user-provided function", "jvp")
        is_out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        seeds = tuple(ember.zeros_like(o).requires_grad_() for o in outputs)
        grad_inputs = _grad(outputs, inputs, seeds, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        grads = _grad(grad_inputs, seeds, v, create_graph=create_graph)
        result = _zeros_for_none(grads, outputs, strict, create_graph, "back_trick")
    return _unpack(_finish(outputs, create_graph), is_out_tuple), _unpack(_finish(result, create_graph), is_out_tuple)


def _one_hot(t, j):
    e = ember.zeros(t.numel(), dtype=t.dtype, device=t.device)
    e[j] = 1
    return e.reshape(t.shape)


def _reverse_jacobian(outputs, inputs, create_graph, strict):
    result = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        for j in range(out.numel()):
            grads = _grad((out,), inputs, (_one_hot(out, j),), create_graph=create_graph, retain_graph=True)
            for k, (g, x) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {k}. "
                                           "This is not allowed in strict mode.")
                    g = ember.zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError(f"The jacobian of the user-provided function is independent of input {k}. "
                                       "This is not allowed in strict mode when create_graph=True.")
                rows[k].append(g)
        result.append(tuple(ember.stack(r).reshape(tuple(out.shape) + tuple(x.shape)) if r else
                            ember.zeros(tuple(out.shape) + tuple(x.shape), dtype=out.dtype, device=out.device)
                            for r, x in zip(rows, inputs)))
    return tuple(result)


def _forward_jacobian(func, outputs, inputs, strict):
    from . import forward_ad as fwAD
    cols = [[[] for _ in inputs] for _ in outputs]
    for k, x in enumerate(inputs):
        for j in range(x.numel()):
            with fwAD.dual_level():
                args = list(inputs)
                args[k] = fwAD.make_dual(x, _one_hot(x, j))
                outs = _as_tuple(func(*args), "outputs of the user-provided function", "jacobian")[1]
                for i, o in enumerate(outs):
                    tangent = fwAD.unpack_dual(o).tangent
                    if tangent is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{k}. This is not allowed in strict mode.")
                        tangent = ember.zeros_like(o)
                    cols[i][k].append(tangent.detach())
    return tuple(tuple(ember.stack(c, -1).reshape(tuple(o.shape) + tuple(x.shape)) if c else
                       ember.zeros(tuple(o.shape) + tuple(x.shape), dtype=o.dtype, device=o.device)
                       for c, x in zip(per_out, inputs)) for per_out, o in zip(cols, outputs))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output ``o`` and input ``x`` a tensor of shape
    ``o.shape + x.shape``. "reverse-mode" runs one backward per output element, "forward-mode" one
    forward pass with a dual input per input element (better when there are fewer inputs than outputs).
    ``vectorize`` is accepted for compatibility; ember always loops."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                         'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer '
                         'to use "reverse-mode".')
    if strategy == "forward-mode" and create_graph:
        raise NotImplementedError('jacobian: `create_graph=True` and `strategy="forward-mode"` are not supported '
                                  'together (yet). Please either set `create_graph=False` or '
                                  '`strategy="reverse-mode"`.')
    with grad_mode.enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, True)
        is_out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        if strategy == "forward-mode":
            result = _forward_jacobian(func, outputs, inputs, strict)
        else:
            result = _reverse_jacobian(outputs, inputs, create_graph, strict)
    return _unpack(tuple(_finish(r, create_graph) for r in result), (is_out_tuple, is_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with a single-element output: the Jacobian of its gradient. For
    inputs ``x_i``, ``x_j`` the block ``[i][j]`` has shape ``x_i.shape + x_j.shape``.
    ``outer_jacobian_strategy="forward-mode"`` gives forward-over-reverse."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*args):
        out = func(*args)
        is_out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outs, "outputs", strict)
        if is_out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def gradient(*args):
        jac = jacobian(scalar_func, args, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                      strategy=outer_jacobian_strategy)
    return _unpack(result, (is_tuple, is_tuple))


def _hessian_product(func, inputs, v, create_graph, strict, name):
    with grad_mode.enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _prepare(inputs, create_graph, True)
        if v is not None:
            v = _prepare(_as_tuple(v, "v", name)[1], create_graph, False)
            _check_v(v, inputs)
        else:
            _single_element_v(inputs, "input to the user-provided function", name)
        is_out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", name)
        _check_requires_grad(outputs, "outputs", strict)
        if is_out_tuple:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element")
        jac = _grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        grads = _zeros_for_none(_grad(jac, inputs, v, create_graph), inputs, strict, create_graph, "double_back")
    return _finish(outputs[0], create_graph), _unpack(_finish(grads, create_graph), is_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a function with a single-element output."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a function with a single-element output. The Hessian of a twice
    continuously differentiable function is symmetric, so this is computed as ``v^T H`` (one double
    backward instead of the double-backward trick)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")
