"""Jacobians and Hessians: ``jacrev`` (one batched backward pass over the rows of the identity), ``jacfwd`` (one
batched forward-mode pass over its columns) and ``hessian`` (``jacfwd`` of ``jacrev``)."""
import functools

import ember
from ember._tensor import Tensor

from ._pytree import leaves as _leaves
from ._pytree import unflatten as _unflatten

__all__ = ["hessian", "jacfwd", "jacrev"]


def _argnums(argnums, args, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    for n in nums:
        if not isinstance(n, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got: {type(n)}")
        if not -len(args) <= n < len(args):
            raise RuntimeError(f"{name}: Got argnums={n}, but only {len(args)} positional inputs")
    return tuple(n % len(args) for n in nums)


def _partial(func, args, nums):
    """``func`` of the arguments at ``nums`` only, the others fixed."""
    def f(*chosen):
        full = list(args)
        for n, value in zip(nums, chosen):
            full[n] = value
        return func(*full)
    return f


def _check_output(out, name):
    for leaf in _leaves(out):
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}: Expected f(*args) to return only tensors, but got {type(leaf)}")


def _basis(leaves, dtype_of):
    """One pytree-shaped batch of rows of the identity per leaf: the leaf's part of ``eye(total)``, (total, *shape)."""
    total = sum(t.numel() for t in leaves)
    parts, start = [], 0
    for t in leaves:
        n = t.numel()
        eye = ember.zeros(total, n, dtype=dtype_of(t), device=t.device)
        if n:
            eye[start:start + n] = ember.eye(n, dtype=dtype_of(t), device=t.device)
        parts.append(eye.reshape(total, *t.shape))
        start += n
    return parts, total


def _blocks(stacked, leaves, lead_shape, rows_first):
    """Split ``stacked`` (total, *rest) along its first dim into one block per leaf, reshaped to the Jacobian's
    layout: (*leaf.shape, *rest) when ``rows_first`` else (*rest, *leaf.shape)."""
    out, start = [], 0
    for t in leaves:
        n = t.numel()
        block = stacked.narrow(0, start, n)
        if rows_first:
            out.append(block.reshape(*t.shape, *lead_shape))
        else:
            out.append(block.movedim(0, -1).reshape(*lead_shape, *t.shape))
        start += n
    return out


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """``func`` -> the Jacobian of its outputs with respect to ``args[argnums]``, by reverse mode: the rows of the
    identity go through one vmapped vector-Jacobian product."""
    from . import vjp
    from ._vmap import vmap

    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums(argnums, args, "jacrev")
        primals = tuple(args[n] for n in nums)
        f = _partial(func, args, nums)
        result = f(*primals)
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jacrev(f, ...)(*args): output of function f should be a tuple: (output, aux) if "
                                   "has_aux is True")
            result, aux = result
        _check_output(result, "jacrev(f, ...)(*args)")
        outs = _leaves(result)
        basis, total = _basis(outs, lambda t: t.dtype)

        def rows(*cotangents):
            g = f if not has_aux else (lambda *p: f(*p)[0])
            return vjp(g, *primals)[1](_unflatten(result, cotangents))

        grads = vmap(rows, chunk_size=chunk_size)(*basis)  # per primal: (total, *primal leaf shape)
        ins = _leaves(primals)
        flat_grads = _leaves(grads)
        # per output leaf, per input leaf: (*out.shape, *in.shape)
        per_in = [_blocks(g, outs, tuple(x.shape), True) for g, x in zip(flat_grads, ins)]
        jac_leaves = []
        for j in range(len(outs)):
            by_input = _unflatten(primals, [per_in[i][j] for i in range(len(ins))])
            jac_leaves.append(by_input[0] if isinstance(argnums, int) else by_input)
        jac = _unflatten(result, jac_leaves)
        return (jac, aux) if has_aux else jac

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``func`` -> the Jacobian of its outputs with respect to ``args[argnums]``, by forward mode: the columns of
    the identity go through one vmapped Jacobian-vector product."""
    from . import jvp
    from ._vmap import vmap

    @functools.wraps(func)
    def wrapper(*args):
        from ember.autograd import forward_ad
        if forward_ad._level[0] is not None:
            # inside another forward-mode transform (jacfwd(jacfwd(f))): ember's forward AD has one level, so this
            # Jacobian, the same matrix, comes from reverse mode (which the outer level differentiates)
            return jacrev(func, argnums, has_aux=has_aux)(*args)
        nums = _argnums(argnums, args, "jacfwd")
        primals = tuple(args[n] for n in nums)
        f = _partial(func, args, nums)
        ins = _leaves(primals)
        for x in ins:
            if not isinstance(x, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        basis, total = _basis(ins, lambda t: t.dtype)
        g = f if not has_aux else (lambda *p: f(*p)[0])

        def columns(*tangents):
            return jvp(g, primals, _unflatten(primals, tangents))[1]

        pushed = vmap(columns, randomness=randomness)(*basis)  # per output leaf: (total, *out shape)
        aux = None
        if has_aux:
            result = f(*primals)
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jacfwd(f, ...)(*args): output of function f should be a tuple: (output, aux) if "
                                   "has_aux is True")
            aux = result[1]
        jac_leaves = []
        for t in _leaves(pushed):
            blocks = _blocks(t, ins, tuple(t.shape[1:]), False)
            by_input = _unflatten(primals, blocks)
            jac_leaves.append(by_input[0] if isinstance(argnums, int) else by_input)
        jac = _unflatten(pushed, jac_leaves)
        return (jac, aux) if has_aux else jac

    return wrapper


def hessian(func, argnums=0):
    """``func`` -> its Hessian with respect to ``args[argnums]``: forward mode over reverse mode."""
    return jacfwd(jacrev(func, argnums), argnums)
