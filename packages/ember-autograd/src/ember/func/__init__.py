"""Functional transforms (PyTorch's ``torch.func``): ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``linearize``,
``vmap`` (``_vmap``), ``jacrev``, ``jacfwd``, ``hessian`` (``_jac``), ``functional_call``, ``stack_module_state``,
``replace_all_batch_norm_modules_``, and ``functionalize``, ``debug_unwrap``, ``rearrange`` (``_misc``).

The reverse-mode transforms run the function on fresh differentiable aliases of the chosen inputs and ask the
autograd engine for the gradients. The graph of those gradients is kept (``create_graph``) only when someone can
differentiate them again: inside another transform, or when an input already requires grad. That makes the
transforms compose (``grad(grad(f))``) while a top-level call returns plain tensors, as torch.func's do.

Inside ``vmap`` the graph is the physical (batched) computation. So that its gradients come out per example, the
transforms first make their inputs batched at every active vmap level (an expanded view: no copy) and run the
backward pass on the physical tensors; examples never mix in a batched computation, so the gradient of the
physical outputs' sum with respect to example i's input is example i's gradient.
"""
import contextlib
import functools
import threading

import ember
from ember._tensor import Tensor
from ember.autograd import forward_ad
from ember.autograd import grad as _autograd_grad

from ._jac import hessian, jacfwd, jacrev
from ._misc import debug_unwrap, functionalize, rearrange
from ._pytree import leaves as _leaves
from ._pytree import tree_map as _map
from ._vmap import STATE as _VMAP
from ._vmap import align as _align
from ._vmap import as_batched as _as_batched
from ._vmap import levels_of as _levels_of
from ._vmap import physical as _physical
from ._vmap import vmap

__all__ = ["debug_unwrap", "functional_call", "functionalize", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev",
           "jvp", "linearize", "rearrange", "replace_all_batch_norm_modules_", "stack_module_state", "vjp", "vmap"]


class _Depth(threading.local):
    value = 0  # reverse-mode transforms currently running on this thread


_DEPTH = _Depth()


@contextlib.contextmanager
def _nested():
    _DEPTH.value += 1
    try:
        yield
    finally:
        _DEPTH.value -= 1


# ---- pytrees of tensors (tuples, lists, dicts) ----

def _check_tensors(tree):
    for leaf in _leaves(tree):
        if not isinstance(leaf, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(leaf)}")


def _alias(t):
    """A differentiable stand-in for ``t``: connected to ``t``'s own graph (and forward-mode tangent) when it has
    one."""
    if t.requires_grad:
        return t.view_as(t)
    if _has_tangent(t):
        return t.view_as(t).requires_grad_()
    return t.detach().requires_grad_()


def _lift(t):
    """``t`` batched at every active vmap level (expanded where it is not), so that gradients are per example."""
    levels = tuple(_VMAP.levels)
    if not levels or _levels_of(t) == levels:
        return t
    with _physical():
        x = _align(t, levels, expand=True)
    return _as_batched(x, levels)


def _fresh(g, levels):
    """Gradient ``g`` of the physical backward pass (maybe a tensor the caller holds) as a new batched tensor."""
    with _physical():
        g = g.view_as(g)
    return _as_batched(g, levels)


def _keep_graph(tensors):
    """Whether gradients must stay differentiable: inside another transform, for inputs that require grad, or for
    inputs carrying forward-mode tangents (the backward pass then propagates them: forward-over-reverse)."""
    return ember.is_grad_enabled() and (_DEPTH.value > 0 or any(t.requires_grad or _has_tangent(t) for t in tensors))


def _has_tangent(t):
    return t._ext is not None and "tangent" in t._ext


def _gradients(outputs, inputs, cotangents, create_graph, retain_graph):
    if _VMAP.levels:  # the backward pass of the physical (batched) graph
        with _physical():
            if cotangents is None:
                cotangents = [ember.ones_like(o) for o in outputs]
            else:
                cotangents = [_align(c, _levels_of(o), expand=True) for o, c in zip(outputs, cotangents)]
            grads = _autograd_grad(outputs, inputs, cotangents, retain_graph=retain_graph,
                                   create_graph=create_graph, allow_unused=True)
            grads = [ember.zeros_like(x) if g is None else g if create_graph else g.detach()
                     for g, x in zip(grads, inputs)]
        return [_fresh(g, _levels_of(x)) for g, x in zip(grads, inputs)]
    grads = _autograd_grad(outputs, inputs, cotangents, retain_graph=retain_graph, create_graph=create_graph,
                           allow_unused=True)
    return [ember.zeros_like(x) if g is None else g if create_graph else g.detach() for g, x in zip(grads, inputs)]


def _release(tree, keep):
    return tree if keep else _map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _split_aux(result, has_aux, name):
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(f"{name}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return result


# ---- reverse mode ----

def grad_and_value(func, argnums=0, has_aux=False):
    """``func`` -> a function returning ``(gradient of func's scalar output w.r.t. args[argnums], output)``;
    with ``has_aux`` func returns ``(output, aux)`` and the result is ``(gradient, (output, aux))``."""
    name = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if isinstance(argnums, int):
            nums = (argnums,)
        else:
            nums = tuple(argnums)
            if not nums:
                raise RuntimeError("argnums must be non-empty")
        for n in nums:
            if not isinstance(n, int):
                raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(n)}")
            if not -len(args) <= n < len(args):
                raise RuntimeError(f"Got argnum={n}, but only {len(args)} positional inputs")
        nums = tuple(n % len(args) for n in nums)
        for n in nums:
            _check_tensors(args[n])
        keep = _keep_graph([leaf for n in nums for leaf in _leaves(args[n])])
        args = list(args)
        for n in nums:
            args[n] = _map(lambda t: _alias(_lift(t)), args[n])
        inputs = [leaf for n in nums for leaf in _leaves(args[n])]
        with ember.enable_grad(), _nested():
            output, aux = _split_aux(func(*args, **kwargs), has_aux, name)
        if not isinstance(output, Tensor):
            raise RuntimeError(f"{name}: Expected f(*args) to return a Tensor, got {type(output)}")
        if output.dim() != 0:
            raise RuntimeError(f"{name}: Expected f(*args) to return a scalar Tensor, got tensor with "
                               f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
        if output.requires_grad:
            grads = iter(_gradients((output,), inputs, None, keep, keep))
        else:  # the output does not depend on the inputs
            grads = iter([ember.zeros_like(x) for x in inputs])
        per_arg = tuple(_map(lambda _: next(grads), args[n]) for n in nums)
        gradient = per_arg[0] if isinstance(argnums, int) else per_arg
        output = _release(output, keep)
        return gradient, ((output, _release(aux, keep)) if has_aux else output)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``func`` -> the gradient of its scalar output w.r.t. ``args[argnums]`` (an int or a tuple of ints);
    with ``has_aux`` the result is ``(gradient, aux)``."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` gives the vector-Jacobian product for every primal
    (a tuple, one entry per primal); it can be called more than once."""
    _check_tensors(primals)
    given = primals
    originals = _leaves(primals)
    keep = _keep_graph(originals)
    primals = _map(lambda t: _alias(_lift(t)), primals)
    inputs = _leaves(primals)
    with ember.enable_grad(), _nested():
        output, aux = _split_aux(func(*primals), has_aux, "vjp(f, *primals)")
    _check_tensors(output)
    outputs = _leaves(output)
    nested = _DEPTH.value > 0

    def vjp_fn(cotangents):
        if isinstance(output, Tensor) and isinstance(cotangents, (tuple, list)) and len(cotangents) == 1:
            cotangents = cotangents[0]
        _check_tensors(cotangents)
        flat = _leaves(cotangents)
        if len(flat) != len(outputs):
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function: {len(flat)} cotangents for {len(outputs)} outputs")
        if any(not set(_levels_of(o)).issuperset(_levels_of(c)) for o, c in zip(outputs, flat)):
            # cotangents batched by a vmap entered after the forward pass (``vmap(vjp_fn)``): the graph has no
            # batch dims for them, so the function runs again, batched at every level now active
            return vjp(func, *given, has_aux=has_aux)[1](cotangents)
        keep = ember.is_grad_enabled() and (nested or any(t.requires_grad or _has_tangent(t)
                                                           for t in originals + flat))
        pairs = [(o, c) for o, c in zip(outputs, flat) if o.requires_grad]
        if pairs:
            grads = iter(_gradients([o for o, _ in pairs], inputs, [c for _, c in pairs], keep, True))
        else:
            grads = iter([ember.zeros_like(x) for x in inputs])
        return _map(lambda _: next(grads), primals)

    output = _release(output, keep)
    return (output, vjp_fn, _release(aux, keep)) if has_aux else (output, vjp_fn)


# ---- forward mode (one dual level at a time: jvp does not nest inside itself) ----

def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), Jacobian-vector product with tangents)``, computed in forward mode; with
    ``has_aux`` also func's auxiliary output. ``strict`` is accepted and changes nothing, as in torch.func."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    _check_tensors(primals)
    _check_tensors(tangents)
    flat_p, flat_t = _leaves(primals), _leaves(tangents)
    if len(flat_p) != len(flat_t):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    if _VMAP.levels:
        flat_p, flat_t = [_lift(p) for p in flat_p], [_lift(t) for t in flat_t]
    with forward_ad.dual_level():
        duals = iter([forward_ad.make_dual(p, t) for p, t in zip(flat_p, flat_t)])
        output, aux = _split_aux(func(*_map(lambda _: next(duals), primals)), has_aux, "jvp(f, primals, tangents)")
        _check_tensors(output)

        def unpack(t):
            primal, tangent = forward_ad.unpack_dual(t)
            if tangent is None:
                return primal, ember.zeros_like(primal)
            return primal, _fresh(tangent, _levels_of(primal)) if _VMAP.levels else tangent

        values = _map(lambda t: unpack(t)[0], output)
        tangent_out = _map(lambda t: unpack(t)[1], output)
    # (a transform inside may have kept a graph for the tangents' sake: a top-level call returns plain tensors)
    keep = ember.is_grad_enabled() and (_DEPTH.value > 0 or any(t.requires_grad for t in flat_p + flat_t))
    values, tangent_out = _release(values, keep), _release(tangent_out, keep)
    return (values, tangent_out, aux) if has_aux else (values, tangent_out)


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product at ``primals``
    (recomputed in forward mode on each call)."""
    _check_tensors(primals)
    output = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


# ---- modules ----

def _swap(module, name, value):
    """Put ``value`` at the dotted ``name`` of ``module``; return what was there."""
    *path, attr = name.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    for store in (owner._parameters, owner._buffers):
        if attr in store:
            old, store[attr] = store[attr], value
            return old
    old = getattr(owner, attr, None)
    object.__setattr__(owner, attr, value)
    return old


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors of
    ``parameter_and_buffer_dicts`` (a dict or a tuple of dicts keyed by dotted names); the module's own
    tensors are put back afterwards, also when the call raises."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        given = dict(dicts)
    elif isinstance(dicts, (tuple, list)) and all(isinstance(d, dict) for d in dicts):
        keys = [k for d in dicts for k in d]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             f"ambiguous")
        given = {k: v for d in dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)

    own = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    if strict:
        names = [n for n, _ in own]
        unexpected = [k for k in given if k not in names]
        missing = [n for n in names if n not in given]
        if unexpected or missing:
            lines = ([f"\tUnexpected key(s): {', '.join(repr(k) for k in unexpected)}."] if unexpected else []) + \
                    ([f"\tMissing key(s): {', '.join(repr(k) for k in missing)}."] if missing else [])
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n" + "\n".join(lines))
    if tie_weights:  # a tensor shared under several names follows the value given for any of them
        tied = {}
        for n, t in own:
            tied.setdefault(id(t), []).append(n)
        for group in tied.values():
            named = [n for n in group if n in given]
            if named:
                if any(given[n] is not given[named[0]] for n in named):
                    raise ValueError(f"functional_call got multiple values for keys {named}, which are tied. "
                                     f"Consider using tie_weights=False")
                given.update(dict.fromkeys(group, given[named[0]]))

    swapped = []
    try:
        for name, value in given.items():
            swapped.append((name, _swap(module, name, value)))
        return module(*args, **kwargs)
    finally:
        for name, old in reversed(swapped):
            _swap(module, name, old)


def stack_module_state(models):
    """``(params, buffers)`` of same-structured ``models`` stacked along a new leading dimension; stacked
    parameters are fresh leaves that require grad when the originals do."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kinds = {type(m) for m in models}
    if len(kinds) > 1:
        raise RuntimeError(f"stack_module_state: Expected all models to be of the same class, got: {kinds}")

    def stack(named):
        names = [n for n, _ in named(models[0])]
        return {n: ember.stack([dict(named(m))[n].detach() for m in models]) for n in names}

    params = stack(lambda m: m.named_parameters())
    for name, p in models[0].named_parameters():
        params[name].requires_grad_(p.requires_grad)
    return params, stack(lambda m: m.named_buffers())


def replace_all_batch_norm_modules_(root):
    """Make every batch-norm module under ``root`` stop tracking running statistics (in place), so that it
    normalises each call's batch alone, as vmap needs; returns ``root``."""
    from ember.nn.modules.normalization import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = module.running_var = module.num_batches_tracked = None
            module.track_running_stats = False
    return root
