"""Every differentiable op of the op table, through the engine: first- and second-order gradients
equal torch.autograd's on the same float64 inputs (relative 1e-7)."""
import importlib
import pathlib
import sys
import warnings

import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

CORE_TESTS = pathlib.Path(__file__).resolve().parents[2] / "ember-core" / "tests"
sys.path.insert(0, str(CORE_TESTS))
optable = importlib.import_module("optable")
LINES = optable.all_lines()
CASES = [pytest.param(line, id=line.name) for line in LINES
         if line.grad and "float64" in line.dtypes and REGISTRY[line.name].differentiable]


def _leaves(lib, args):
    if isinstance(args, lib.Tensor):
        return args.detach().requires_grad_() if args.dtype == lib.float64 else args
    if isinstance(args, (list, tuple)):
        return type(args)(_leaves(lib, a) for a in args)
    if isinstance(args, dict):
        return {k: _leaves(lib, v) for k, v in args.items()}
    return args


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flat(v)]
    return [x]


def _like(lib, t, values):
    """A tensor of ``t``'s shape from ``values`` (complex, from both ends, for a complex ``t``)."""
    n = t.numel()
    values = np.resize(values, max(n, len(values)))  # (large samples repeat the values)
    v = values[:n] + 1j * values[len(values) - n:] if t.is_complex() else values[:n]
    return lib.tensor(v.reshape(tuple(t.shape)))


def _grads(lib, line, args, kwargs, rng_values, second_order=True):
    """First-order grads and the grads of sum(first * v) (second order; None where torch has no double
    backward, such as hardsigmoid's and pdist's) for one library."""
    out = line.call(lib, *args, **kwargs)
    outs = [o for o in _flat(out) if isinstance(o, lib.Tensor) and o.requires_grad]
    leaves = [a for a in _flat([args, kwargs]) if isinstance(a, lib.Tensor) and a.requires_grad]
    if not outs or not leaves:
        return None
    gs = [_like(lib, o, rng_values[i]) for i, o in enumerate(outs)]
    first = lib.autograd.grad(outs, leaves, gs, create_graph=True, allow_unused=True)
    pairs = [(f, _like(lib, f, rng_values[-1 - i])) for i, f in enumerate(first) if f is not None and f.requires_grad]
    second = None
    if pairs and second_order:
        s = sum((f * v).real.sum() if f.is_complex() else (f * v).sum() for f, v in pairs)
        try:
            second = lib.autograd.grad(s, leaves, allow_unused=True)
        except (RuntimeError, NotImplementedError):
            if lib is not torch:
                raise
    return first, second


@pytest.mark.parametrize("line", CASES)
def test_gradients_match_torch_to_second_order(line):
    rng = np.random.default_rng(7)
    compared = 0
    for args, kwargs in line.samples("float64", rng):
        values = [rng.standard_normal(4096) for _ in range(8)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = _grads(torch, line, _leaves(torch, optable.convert(torch, args, "float64")),
                                  _leaves(torch, optable.convert(torch, kwargs, "float64")), values)
            except Exception:  # noqa: BLE001 - bad-input samples, or no double backward in torch
                continue
            if expected is None:
                continue
            got = _grads(ember, line, _leaves(ember, optable.convert(ember, args, "float64")),
                         _leaves(ember, optable.convert(ember, kwargs, "float64")), values, expected[1] is not None)
        for order, (e_set, t_set) in enumerate(zip(got, expected)):
            if t_set is None:
                continue
            if e_set is None:  # ember's first-order result is constant: torch's next order must be zero
                assert all(t is None or not torch.any(t != 0) for t in t_set), f"{line.name}: no order-2 gradient"
                continue
            for i, (e, t) in enumerate(zip(e_set, t_set)):
                where = f"{line.name} order {order + 1} input {i}"
                if t is None or not torch.any(t != 0):
                    assert e is None or not np.any(e.detach().numpy()), where
                    continue
                assert e is not None, where
                np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-7, atol=1e-9,
                                           err_msg=where)
        compared += 1
    assert compared, f"{line.name}: no sample could be compared"
