"""ember.special against PyTorch 2.13 on the CPU: values, dtypes, shapes and exception types of every
line of optable_special.py, and each differentiable op's VJP (called as the engine calls it)."""
import pathlib
import sys
import types
import warnings

import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "ember-core" / "tests"))

import optable_special as table  # noqa: E402
from optable import convert  # noqa: E402
from test_ops import _flat, _seed, _torch_leaves, assert_same  # noqa: E402

import ember.special  # noqa: E402
from ember.special._common import OPS  # noqa: E402

LINES = table.LINES
# float32 tolerance: PyTorch computes in float32, ember in float64 rounded once, so the two differ by
# PyTorch's float32 rounding errors (a few ulp; more after cancellation, as erfc/log_ndtr in their tails)
TOL = {"float32": (2e-5, 1e-5), "float64": (1e-12, 1e-12), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}
CASES = [pytest.param(line, dtype, id=f"{line.name}-{i}-{dtype}") for i, line in enumerate(LINES)
         for dtype in line.dtypes]


def _same(got, expected, where, line):
    import test_ops
    saved = dict(test_ops.TOL)
    test_ops.TOL.update(TOL)
    test_ops.TOL.update(getattr(line, "tol", {}))
    try:
        assert_same(got, expected, where)
    finally:
        test_ops.TOL.clear()
        test_ops.TOL.update(saved)


@pytest.mark.parametrize("line,dtype", CASES)
def test_special_matches_torch(line, dtype):
    rng = np.random.default_rng(_seed(line.name, dtype))
    for i, (args, kwargs) in enumerate(line.samples(dtype, rng)):
        where = f"{line.name}[{dtype}] sample {i}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = line.call(torch, *convert(torch, args, dtype), **convert(torch, kwargs, dtype))
            except Exception as exc:  # noqa: BLE001 - the oracle's exception type is what we compare
                with pytest.raises(type(exc)):
                    line.call(ember, *convert(ember, args, dtype), **convert(ember, kwargs, dtype))
                continue
            got = line.call(ember, *convert(ember, args, dtype), **convert(ember, kwargs, dtype))
        _same(got, expected, where, line)


GRAD_LINES = {}
for _line in LINES:  # the first line of each differentiable op that passes its arguments straight on
    if _line.grad and "float64" in _line.dtypes and REGISTRY[_line.name].differentiable:
        GRAD_LINES.setdefault(_line.name, _line)


@pytest.mark.parametrize("line", list(GRAD_LINES.values()), ids=list(GRAD_LINES))
def test_vjp_matches_torch_autograd(line):
    op = REGISTRY[line.name]
    assert op.vjp_fn is not None, f"{line.name} has no VJP"
    ctx_of = table.CTX.get(line.name, lambda a, k: (a, k))
    rng = np.random.default_rng(_seed(line.name, "grad"))
    checked = 0
    for args, kwargs in line.samples("float64", rng):
        targs, tkw = _torch_leaves(convert(torch, args, "float64")), _torch_leaves(convert(torch, kwargs, "float64"))
        try:
            tout = line.call(torch, *targs, **tkw)
            leaves = [a for a in _flat(list(targs) + list(tkw.values())) if isinstance(a, torch.Tensor)
                      and a.requires_grad]
            g = torch.from_numpy(rng.standard_normal(tout.shape))
            expected = torch.autograd.grad(tout, leaves, g, allow_unused=True)
        except Exception:  # noqa: BLE001 - bad input, or no gradient for an argument in torch
            continue
        eargs, ekw = convert(ember, args, "float64"), convert(ember, kwargs, "float64")
        cargs, ckw = ctx_of(eargs, ekw)
        ctx = types.SimpleNamespace(args=cargs, kwargs=ckw, out=line.call(ember, *eargs, **ekw))
        got = [gr for a, gr in zip(cargs, op.vjp_fn(ctx, ember.tensor(g.numpy())))
               if isinstance(a, ember.Tensor) and a.dtype == ember.float64]
        for i, (g_e, g_t) in enumerate(zip(got, expected)):
            where = f"{line.name} grad {i} of sample {checked}"
            if g_t is None:
                assert g_e is None, where
                continue
            g_e = g_e.sum_to_size(tuple(g_t.shape)) if tuple(g_e.shape) != tuple(g_t.shape) else g_e
            np.testing.assert_allclose(g_e.numpy(), g_t.numpy(), rtol=1e-7, atol=1e-10, err_msg=where)
        checked += 1
    assert checked, f"{line.name}: no sample produced a gradient to compare"


def test_every_op_has_a_line():
    lined = {line.name for line in LINES}
    assert not [o.name for o in OPS if o.name not in lined]


def test_every_torch_special_name_is_exposed():
    names = (pathlib.Path(__file__).resolve().parents[4] / "shared" / "api" / "special.txt")
    wanted = [n.strip() for n in names.read_text().splitlines() if n.strip() and not n.startswith("#")] \
        if names.exists() else \
        [n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))]
    missing = [n for n in wanted if n.isidentifier() and not callable(getattr(ember.special, n, None))]
    assert not missing


def test_aliases_share_the_implementation():
    s = ember.special
    assert s.psi is s.digamma is ember.digamma and s.gammaln is ember.lgamma and s.expit is ember.sigmoid
    assert s.multigammaln is ember.mvlgamma and s.gammainc is ember.igamma and s.i0 is ember.i0
    assert s.erf is ember.erf is ember.Tensor.erf and s.logsumexp is ember.logsumexp


def test_import_is_light():
    """``import ember`` (with every package here) loads no compiler (numba, llvmlite, CuPy's), SciPy, Ray, tqdm or
    importlib.metadata (ember finds its extensions itself)."""
    import subprocess
    code = ("import sys, ember; print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numba', 'llvmlite', "
            "'cupy', 'cupyx', 'cupy_backends', 'ray', 'tqdm', 'mpmath', 'torch'}), "
            "'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "False"]


def test_polygamma_refuses_negative_order():
    with pytest.raises(RuntimeError, match="negative n"):
        ember.special.polygamma(-1, ember.tensor([1.0]))
