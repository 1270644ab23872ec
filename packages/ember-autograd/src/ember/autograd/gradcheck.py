"""``gradcheck``/``gradgradcheck``: derivatives computed by autograd against central finite differences.

Jacobians are compared in real coordinates: a complex input or output counts as its real and
imaginary parts, so that a complex entry ``z`` contributes two rows (or columns), ``Re z`` then ``Im z``.
The numerical Jacobian perturbs each input coordinate by ``±eps`` in place and differences the outputs
in float64/complex128; the analytical one is made row by row with ``ember.autograd.grad`` (a one-hot
grad_output per output coordinate) and, with ``check_forward_ad``, column by column with forward AD.
Matrices are laid out as (input coordinates, output coordinates).
"""
import warnings

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when a check fails."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _host(t):
    a = t._data
    return a if isinstance(a, np.ndarray) else a.get()


def _is_diff(t):
    return isinstance(t, Tensor) and t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)


def _real_coords(a):
    """A host array's entries as real coordinates (complex ones as Re, Im pairs), flat, float64."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        return np.stack([a.real, a.imag], -1).reshape(-1).astype(np.float64)
    return a.reshape(-1).astype(np.float64)


def _n_coords(t):
    return t.numel() * (2 if t.dtype.is_complex else 1)


def _unit(t, k):
    """The tensor like ``t`` that is zero except real coordinate ``k``: 1, or 1j for an imaginary part."""
    a = np.zeros(tuple(t.shape), dtype=t.dtype.np if t.dtype.np is not None else np.float64)
    step = 2 if t.dtype.is_complex else 1
    a.reshape(-1)[k // step] = 1j if k % step else 1
    return ember.tensor(a, device=t.device)


def _from_coords(t, coords):
    """The tensor like ``t`` whose real coordinates are ``coords``."""
    if t.dtype.is_complex:
        coords = coords[0::2] + 1j * coords[1::2]
    return ember.tensor(coords.reshape(tuple(t.shape)).astype(t.dtype.np), device=t.device)


def _evaluate(func, inputs, indices):
    outs = _as_tuple(func(*inputs))  # with grad enabled: gradgradcheck's function calls autograd.grad
    return [_host(outs[o]).astype(np.complex128 if np.iscomplexobj(_host(outs[o])) else np.float64)
            for o in indices]


def _directional(func, inputs, x, direction, eps, out_indices):
    """(f(x + eps d) - f(x - eps d)) / 2eps for each output, perturbing ``x``'s array in place."""
    arr = x._data
    xp = np if isinstance(arr, np.ndarray) else ember._backend.cupy()
    saved = arr.copy()
    d = xp.asarray(direction).astype(arr.dtype)
    try:
        arr += eps * d
        plus = _evaluate(func, inputs, out_indices)
        arr[...] = saved - eps * d
        minus = _evaluate(func, inputs, out_indices)
    finally:
        arr[...] = saved
    return [_real_coords((p - m) / (2 * eps)) for p, m in zip(plus, minus)]


def _numerical(func, inputs, i, out_indices, eps):
    """Numerical Jacobians of the outputs ``out_indices`` w.r.t. input ``i``: one (n_in, n_out) each."""
    x = inputs[i]
    cols = [_directional(func, inputs, x, _host(_unit(x, k)), eps, out_indices) for k in range(_n_coords(x))]
    if not cols:
        return [np.zeros((0, _real_coords(o).size)) for o in _evaluate(func, inputs, out_indices)]
    return [np.stack([c[j] for c in cols]) for j in range(len(out_indices))]


def _analytical(outputs, o, diff_inputs):
    """Analytical Jacobians of output ``o`` w.r.t. each of ``diff_inputs``: (n_in, n_out) each."""
    out = outputs[o]
    rows = [[] for _ in diff_inputs]
    for k in range(_n_coords(out)):
        grads = ember.autograd.grad(out, diff_inputs, _unit(out, k), retain_graph=True, allow_unused=True)
        for r, g, x in zip(rows, grads, diff_inputs):
            r.append(np.zeros(_n_coords(x)) if g is None else _real_coords(_host(g)))
    return [np.stack(r, 1) if r else np.zeros((_n_coords(x), 0)) for r, x in zip(rows, diff_inputs)]


def _forward(func, inputs, i, out_indices):
    """Jacobians w.r.t. input ``i`` computed with forward AD (columns are JVPs of unit tangents)."""
    from . import forward_ad as fwAD
    x = inputs[i]
    cols = []
    for k in range(_n_coords(x)):
        with fwAD.dual_level():
            args = list(inputs)
            args[i] = fwAD.make_dual(x.detach(), _unit(x, k))
            outs = _as_tuple(func(*args))
            cols.append([_fw_coords(fwAD.unpack_dual(outs[o]).tangent, outs[o]) for o in out_indices])
    return [np.stack([c[j] for c in cols]) for j in range(len(out_indices))]


def _fw_coords(tangent, out):
    return np.zeros(_n_coords(out)) if tangent is None else _real_coords(_host(tangent))


def _tensor_of(a):
    return ember.tensor(np.asarray(a))


def _mismatch(kind, o, i, numerical, analytical):
    diff = (f"The max per-element difference is: {np.abs(numerical - analytical).max(initial=0)}.\n"
            if numerical.shape == analytical.shape else "")
    return GradcheckError(f"{kind} mismatch for output {o} with respect to input {i},\nnumerical:"
                          f"{_tensor_of(numerical)}\nanalytical:{_tensor_of(analytical)}\n\n{diff}")


def _close(a, n, atol, rtol):
    return a.shape == n.shape and np.allclose(a, n, rtol=rtol, atol=atol)


def _check_inputs(inputs):
    if not any(_is_diff(t) for t in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    for i, t in enumerate(inputs):
        if _is_diff(t) and t.dtype not in (ember.float64, ember.complex128):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point or complex. "
                          "This check will likely fail if all the inputs are not of double precision floating point "
                          "or complex.", stacklevel=3)


def _slow_checks(func, inputs, outputs, out_idx, in_idx, eps, atol, rtol, nondet_tol, backward, forward):
    numerical = {i: _numerical(func, inputs, i, out_idx, eps) for i in in_idx}
    diff_inputs = [inputs[i] for i in in_idx]
    for j, o in enumerate(out_idx):
        if backward:
            first = _analytical(outputs, o, diff_inputs)
            again = _analytical(outputs, o, diff_inputs)
            for a, b, i in zip(first, again, in_idx):
                if not _close(a, numerical[i][j], atol, rtol):
                    raise _mismatch("Jacobian", o, i, numerical[i][j], a)
                if np.abs(a - b).max(initial=0) > nondet_tol:
                    raise GradcheckError("Backward is not reentrant, i.e., running backward with the same input and "
                                         "grad_output twice gives different values, although the analytical "
                                         "gradient matches the numerical one. The tolerance for nondeterminism was "
                                         f"{nondet_tol}.")
        if forward:
            for i in in_idx:
                a = _forward(func, inputs, i, [o])[0]
                if not _close(a, numerical[i][j], atol, rtol):
                    raise _mismatch("Jacobian computed with forward mode", o, i, numerical[i][j], a)


def _fast_checks(func, inputs, outputs, out_idx, in_idx, eps, atol, rtol, backward, forward):
    """Compare u^T J v for random u, v per (output, input) pair; on a mismatch rerun the full check."""
    rng = np.random.default_rng(0)
    diff_inputs = [inputs[i] for i in in_idx]
    vs = [rng.uniform(-1, 1, _n_coords(x)) for x in diff_inputs]
    for o in out_idx:
        u = rng.uniform(-1, 1, _n_coords(outputs[o]))
        grads = None
        if backward:
            grads = ember.autograd.grad(outputs[o], diff_inputs, _from_coords(outputs[o], u), retain_graph=True,
                                        allow_unused=True)
        for v, g, x, i in zip(vs, grads or [None] * len(vs), diff_inputs, in_idx):
            jv = _directional(func, inputs, x, _host(_from_coords(x, v)), eps, [o])[0]
            numerical = u @ jv
            if backward:
                analytical = 0.0 if g is None else _real_coords(_host(g)) @ v
                if not np.isclose(analytical, numerical, rtol=rtol, atol=atol):
                    return False
            if forward:
                from . import forward_ad as fwAD
                with fwAD.dual_level():
                    args = list(inputs)
                    args[i] = fwAD.make_dual(x.detach(), _from_coords(x, v))
                    out = _as_tuple(func(*args))[o]
                    analytical = u @ _fw_coords(fwAD.unpack_dual(out).tangent, out)
                if not np.isclose(analytical, numerical, rtol=rtol, atol=atol):
                    return False
    return True


def _extra_checks(outputs, out_idx, diff_inputs, check_undefined_grad, check_grad_dtypes, check_batched_grad, atol,
                  rtol):
    outs = [outputs[o] for o in out_idx]
    if check_grad_dtypes or check_batched_grad:
        seeds = [_unit(t, 0) for t in outs]
        grads = ember.autograd.grad(outs, diff_inputs, seeds, retain_graph=True, allow_unused=True)
        for g, x in zip(grads, diff_inputs):
            if check_grad_dtypes and g is not None:
                if g.dtype != x.dtype:
                    raise GradcheckError("Gradient has dtype mismatch")
                if g.shape != x.shape:
                    raise GradcheckError("Gradient has shape mismatch")
                if g.device != x.device:
                    raise GradcheckError("Gradient has device mismatch")
        if check_batched_grad:
            rng = np.random.default_rng(1)
            batch = [ember.tensor(rng.uniform(-1, 1, (2,) + tuple(t.shape)).astype(t.dtype.np), device=t.device)
                     for t in outs]
            batched = ember.autograd.grad(outs, diff_inputs, batch, retain_graph=True, allow_unused=True,
                                          is_grads_batched=True)
            for b in range(2):
                single = ember.autograd.grad(outs, diff_inputs, [g[b] for g in batch], retain_graph=True,
                                             allow_unused=True)
                for i, (bg, sg) in enumerate(zip(batched, single)):
                    if (bg is None) != (sg is None) or (sg is not None and not np.allclose(
                            _host(bg[b]), _host(sg), rtol=rtol, atol=atol)):
                        raise GradcheckError(f"For output 0 and input {i}: the gradient computed with "
                                             "is_grads_batched=True differs from the one computed per batch entry.")
    if check_undefined_grad:
        zeros = [ember.zeros_like(t) for t in outs]
        for g in ember.autograd.grad(outs, diff_inputs, zeros, retain_graph=True, allow_unused=True):
            if g is not None and np.any(_host(g) != 0):
                raise GradcheckError("Expected backward to give zero (or no) gradients when every output gradient "
                                     "is zero (an undefined output gradient means zero).")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """Check the gradients of ``func`` at ``inputs`` (those requiring grad) against finite differences.

    Returns True, or on failure raises GradcheckError (False when ``raise_exception=False``). Inputs
    should be float64 or complex128. ``fast_mode`` compares one random projection ``u^T J v`` per
    input/output pair and falls back to the full Jacobians to describe a mismatch.
    """
    if check_batched_forward_grad:
        raise NotImplementedError("gradcheck: check_batched_forward_grad needs vmap, which ember does not have")
    if not (check_forward_ad or check_backward_ad):
        raise ValueError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    inputs = _as_tuple(inputs)
    try:
        _check_inputs(inputs)
        outputs = _as_tuple(func(*inputs))
        tensors = [k for k, t in enumerate(outputs) if isinstance(t, Tensor)]
        out_idx = [k for k in tensors if _is_diff(outputs[k])]
        in_idx = [k for k, t in enumerate(inputs) if _is_diff(t)]
        if not out_idx:
            floats = [k for k in tensors if outputs[k].dtype.is_floating_point or outputs[k].dtype.is_complex]
            for i in in_idx:
                for n in _numerical(func, inputs, i, floats, eps):
                    if not np.allclose(n, 0, atol=atol):
                        raise GradcheckError("Numerical gradient for function expected to be zero")
            return True
        args = (func, inputs, outputs, out_idx, in_idx, eps, atol, rtol)
        if not fast_mode:
            _slow_checks(*args, nondet_tol, check_backward_ad, check_forward_ad)
        elif not _fast_checks(*args, check_backward_ad, check_forward_ad):
            try:
                _slow_checks(*args, nondet_tol, check_backward_ad, check_forward_ad)
            except GradcheckError as e:
                raise GradcheckError(f"{e}\n(a random projection u^T J v disagreed in fast mode; the full Jacobians "
                                     "above were recomputed in slow mode)") from None
        if check_backward_ad:
            _extra_checks(outputs, out_idx, [inputs[i] for i in in_idx], check_undefined_grad, check_grad_dtypes,
                          check_batched_grad, atol, rtol)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0, check_undefined_grad=True,
                  check_grad_dtypes=False, check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True,
                  fast_mode=False, masked=False):
    """Check second derivatives: gradcheck of ``(inputs, grad_outputs) -> grad(func(inputs), inputs,
    grad_outputs)``. Without ``grad_outputs`` fixed pseudo-random ones are used."""
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outs = [t for t in _as_tuple(func(*inputs)) if _is_diff(t)]
        rng = np.random.default_rng(0)
        grad_outputs = []
        for t in outs:
            shape = tuple(t.shape)
            a = np.empty(shape + (2,) if gen_non_contig_grad_outputs else shape, dtype=t.dtype.np)
            view = a[..., 0] if gen_non_contig_grad_outputs else a
            view[...] = rng.uniform(-1, 1, shape) + (1j * rng.uniform(-1, 1, shape) if t.dtype.is_complex else 0)
            grad_outputs.append(Tensor._wrap(view if t.is_cpu else ember._backend.cupy().asarray(view))
                                .requires_grad_())
    grad_outputs = _as_tuple(grad_outputs)
    n = len(grad_outputs)
    diff_positions = [k for k, t in enumerate(inputs) if _is_diff(t)]

    def first_derivatives(*args):
        primal, seeds = args[:-n], args[-n:]
        outs = [t for t in _as_tuple(func(*primal)) if _is_diff(t)]
        grads = ember.autograd.grad(outs, [primal[k] for k in diff_positions], seeds, create_graph=True,
                                    allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, fast_mode=fast_mode,
                     masked=masked)
