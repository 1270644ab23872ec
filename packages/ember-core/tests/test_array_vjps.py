"""The VJPs that compute on the arrays in a backward recording no graph (fused cross entropy, linear, relu)
against torch.autograd, with the ember-op path they replace (create_graph) checked beside them; and the hand
binding of VJP arguments against inspect's."""
import inspect
import types

import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember._ops import activation, losses, nn_misc, normalization
from ember._registry import REGISTRY

pytestmark = needs_autograd

TORCH_DT = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
            "float16": torch.float16}
TOL = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2, "float16": 2e-3}


def _pair(a, dtype, requires_grad=True):
    """``a`` (float64 NumPy) as a torch and an ember tensor of ``dtype`` with the same values."""
    t = torch.tensor(a).to(TORCH_DT[dtype])
    e = ember.tensor(t.float().numpy() if dtype in ("bfloat16", "float16") else t.numpy()).to(getattr(ember, dtype))
    return t.requires_grad_(requires_grad), e.requires_grad_(requires_grad)


def _close(e, t, dtype):
    assert e.dtype == getattr(ember, dtype)
    np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(), rtol=TOL[dtype],
                               atol=TOL[dtype])


def _spy(monkeypatch, module, name):
    """Record the calls of ``module.name`` (and what they return)."""
    seen, fn = [], getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(fn(*args, **kwargs))
        return seen[-1]
    monkeypatch.setattr(module, name, spy)
    return seen


# ---- fused cross entropy ------------------------------------------------------------------------
def _nll_case(dtype, weighted, ignored, reduction, create_graph, monkeypatch):
    rng = np.random.default_rng(reduction + 3 * ignored)
    logits = rng.standard_normal((10, 7)) * 3  # made non-contiguous below
    logits[2, 4] = 40.0
    target = rng.integers(0, 10, 7)
    target[:ignored] = 5
    tx, ex = _pair(logits, dtype)
    tw, ew = _pair(rng.uniform(0.5, 2.0, 10), dtype, requires_grad=False) if weighted else (None, None)
    tt, et = torch.tensor(target), ember.tensor(target)
    kw = dict(weight=tw, reduction=("none", "mean", "sum")[reduction], ignore_index=5)
    tl = torch.nn.functional.cross_entropy(tx.T, tt, **kw)
    el = REGISTRY["_softmax_nll"].fn(ex.mT, et, ew, reduction, 5)
    _close(el, tl, dtype)
    g = rng.uniform(0.5, 2.0, tl.shape)
    if reduction == 0:
        g[:ignored] = np.inf  # an ignored row keeps a zero gradient
    tg, eg = _pair(g, dtype, requires_grad=False)
    seen = _spy(monkeypatch, losses, "_softmax_nll_array_grad")
    (tdx,) = torch.autograd.grad(tl, tx, tg, create_graph=create_graph)
    (edx,) = ember.autograd.grad(el, ex, eg, create_graph=create_graph)
    assert len(seen) == (not create_graph)
    _close(edx, tdx, dtype)
    return tx, ex, tdx, edx


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignored", [0, 2, 7])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("create_graph", [False, True])
def test_softmax_nll_grad(dtype, weighted, ignored, reduction, create_graph, monkeypatch):
    """Every row ignored: the mean divides by a zero total weight, yet the gradient is zero, as PyTorch's."""
    _nll_case(dtype, weighted, ignored, reduction, create_graph, monkeypatch)


def test_softmax_nll_double_backward(monkeypatch):
    tx, ex, tdx, edx = _nll_case("float64", True, 2, 1, True, monkeypatch)
    (tgg,) = torch.autograd.grad((tdx ** 2).sum(), tx)
    (egg,) = ember.autograd.grad((edx ** 2).sum(), ex)
    _close(egg, tgg, "float64")


@pytest.mark.parametrize("classes", [3, 300])  # up to losses._FEW classes the logits are copied column-major
@pytest.mark.parametrize("create_graph", [False, True])
def test_softmax_nll_many_or_few_classes(classes, create_graph):
    rng = np.random.default_rng(classes)
    tx, ex = _pair(rng.standard_normal((6, classes)) * 4, "float64")
    t = rng.integers(0, classes, 6)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t))
    el = REGISTRY["_softmax_nll"].fn(ex, ember.tensor(t), None, 1, -100)
    _close(el, tl, "float64")
    (tdx,) = torch.autograd.grad(tl, tx)
    (edx,) = ember.autograd.grad(el, ex, create_graph=create_graph)
    _close(edx, tdx, "float64")
    assert edx.is_contiguous()


def test_softmax_nll_grad_nan_logits():
    x = np.array([[0.0, np.nan, 1.0], [2.0, -np.inf, 1.0], [np.inf, 0.0, 1.0]])
    tx, ex = _pair(x, "float64")
    t = np.array([0, 2, 1])
    torch.nn.functional.cross_entropy(tx, torch.tensor(t)).backward()
    REGISTRY["_softmax_nll"].fn(ex, ember.tensor(t), None, 1, -100).backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


# ---- linear -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5), (0, 5)])
@pytest.mark.parametrize("bias", [None, "arg", "kwarg"])
@pytest.mark.parametrize("needs", ["all", "input", "weight"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_linear_grad(dtype, shape, bias, needs, create_graph, monkeypatch):
    rng = np.random.default_rng(len(shape))
    tx, ex = _pair(rng.standard_normal(shape[::-1]).T, dtype, needs != "weight")  # non-contiguous
    tw, ew = _pair(rng.standard_normal((3, 5)), dtype, needs != "input")
    tb, eb = _pair(rng.standard_normal(3), dtype, needs != "input") if bias else (None, None)
    ty = torch.nn.functional.linear(tx, tw, tb)
    lin = REGISTRY["linear"].fn
    ey = lin(ex, ew, eb) if bias == "arg" else lin(ex, ew, bias=eb) if bias else lin(ex, ew)
    _close(ey, ty, dtype)
    tg, eg = _pair(rng.standard_normal(ty.shape), dtype, requires_grad=False)
    wrt = [(t, e) for t, e in ((tx, ex), (tw, ew), (tb, eb)) if t is not None and t.requires_grad]
    seen = _spy(monkeypatch, nn_misc, "no_graph")
    tgrads = torch.autograd.grad(ty, [t for t, _ in wrt], tg)
    egrads = ember.autograd.grad(ey, [e for _, e in wrt], eg, create_graph=create_graph)
    assert seen == [not create_graph]
    for e, t in zip(egrads, tgrads):
        _close(e, t, dtype)


@pytest.mark.parametrize("bias_shape", [(3,), (1,), ()])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_results_own_their_memory(bias_shape, dtype):
    """The output (bias written, product accumulated onto it) and the input's gradient are arrays of their own
    (not reshaped views): the engine may hand such a gradient to the next VJP to write into."""
    rng = np.random.default_rng(0)
    (tx, ex), (tw, ew) = _pair(rng.standard_normal((2, 4, 5)), dtype), _pair(rng.standard_normal((3, 5)), dtype)
    tb, eb = _pair(rng.standard_normal(bias_shape), dtype)
    ty, ey = torch.nn.functional.linear(tx, tw, tb), REGISTRY["linear"].fn(ex, ew, eb)
    _close(ey, ty, dtype)
    assert ey._data.base is None
    tg, eg = _pair(rng.standard_normal(ty.shape), dtype, requires_grad=False)
    egrads = ember.autograd.grad(ey, (ex, ew, eb), eg)
    for e, t in zip(egrads, torch.autograd.grad(ty, (tx, tw, tb), tg)):
        _close(e, t, dtype)
    assert egrads[0]._data.base is None and egrads[0].is_contiguous()


def test_linear_double_backward():
    rng = np.random.default_rng(0)
    (tx, ex), (tw, ew) = _pair(rng.standard_normal((4, 5)), "float64"), _pair(rng.standard_normal((3, 5)), "float64")
    tgx, tgw = torch.autograd.grad(torch.nn.functional.linear(tx, tw).sin().sum(), (tx, tw), create_graph=True)
    egx, egw = ember.autograd.grad(REGISTRY["linear"].fn(ex, ew).sin().sum(), (ex, ew), create_graph=True)
    for e, t in zip(ember.autograd.grad((egx * egw.sum()).sum(), (ex, ew)),
                    torch.autograd.grad((tgx * tgw.sum()).sum(), (tx, tw))):
        _close(e, t, "float64")


# ---- relu ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_relu_grad(dtype, create_graph):
    """NaN inputs pass the gradient, -0.0 and 0 stop it; non-contiguous; 0-d."""
    x = np.random.default_rng(1).standard_normal((6, 4))
    x[0, :4] = [np.nan, -0.0, 0.0, np.inf]
    g = np.random.default_rng(2).standard_normal((6, 4))
    g[x > 0] *= 1e3
    for xs, gs in ((x.T, g.T), (x[2, 1], g[2, 1])):
        tx, ex = _pair(xs, dtype)
        tg, eg = _pair(gs, dtype, requires_grad=False)
        (tdx,) = torch.autograd.grad(torch.relu(tx), tx, tg)
        (edx,) = ember.autograd.grad(ember.relu(ex), ex, eg, create_graph=create_graph)
        _close(edx, tdx, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("path", ["arrays", "donated", "create_graph"])
def test_relu_grad_selects(dtype, path, monkeypatch):
    """Where the input was clamped the gradient is +0.0 whatever arrives (NaN, inf, negative), as PyTorch's
    threshold_backward selects; elsewhere it is passed bit for bit (NaN inputs pass it too)."""
    x = np.array([-1.0, 0.0, -0.0, -np.inf, np.nan, 2.0, 3.0, 0.5])
    g = np.array([np.nan, -np.inf, -2.0, np.nan, -3.0, np.nan, -0.0, -1.5])
    tx, ex = _pair(x, dtype)
    tg, eg = _pair(g, dtype, requires_grad=False)
    donated = []
    if path == "donated":  # the product's gradient is the engine's own: the VJP writes into it
        vjp = REGISTRY["relu"].vjp_fn
        monkeypatch.setattr(REGISTRY["relu"], "vjp_fn", lambda ctx, g: donated.append(ctx.grad_donated) or vjp(ctx, g))
        (torch.relu(tx) * tg).sum().backward()
        (ember.relu(ex) * eg).sum().backward()
        assert donated == [True]
        tdx, edx = tx.grad, ex.grad
    else:
        (tdx,) = torch.autograd.grad(torch.relu(tx), tx, tg)
        (edx,) = ember.autograd.grad(ember.relu(ex), ex, eg, create_graph=path == "create_graph")
    got, want = edx.detach().numpy(), tdx.numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---- batch norm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 1), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("needs", ["all", "input", "weight"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_batch_norm_grad(dtype, shape, affine, needs, create_graph, monkeypatch):
    """Training mode, inputs far from zero mean (the variance in two passes), non-contiguous; the running
    statistics updated as torch's."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape[::-1]).T * 3 + 50
    tx, ex = _pair(x, dtype, needs != "weight")
    tw, ew = _pair(rng.uniform(0.5, 2.0, 3), dtype, needs != "input") if affine else (None, None)
    tb, eb = _pair(rng.standard_normal(3), dtype, needs != "input") if affine else (None, None)
    stats = [_pair(a, dtype, requires_grad=False) for a in (rng.standard_normal(3), rng.uniform(0.5, 2.0, 3))]
    ty = torch.batch_norm(tx, tw, tb, stats[0][0], stats[1][0], True, 0.3, 1e-5, False)
    ey = REGISTRY["batch_norm"].fn(ex, ew, eb, stats[0][1], stats[1][1], True, 0.3, 1e-5, False)
    _close(ey, ty, dtype)
    for t, e in stats:
        _close(e, t, dtype)
    tg, eg = _pair(rng.standard_normal(shape), dtype, requires_grad=False)
    wrt = [(t, e) for t, e in ((tx, ex), (tw, ew), (tb, eb)) if t is not None and t.requires_grad]
    if not wrt:
        return
    seen = _spy(monkeypatch, normalization, "_batch_norm_array_grads")
    tgrads = torch.autograd.grad(ty, [t for t, _ in wrt], tg)
    egrads = ember.autograd.grad(ey, [e for _, e in wrt], eg, create_graph=create_graph)
    assert len(seen) == (not create_graph)
    for e, t in zip(egrads, tgrads):
        _close(e, t, dtype)


@pytest.mark.parametrize("shape", [(8, 3, 160, 160), (3, 5, 200, 200)])  # even and odd batch
def test_batch_norm_large_halves(shape, monkeypatch):
    """Large inputs run each pass in two halves of the batch over the cores: torch's values all the same."""
    from ember import _parallel
    rng = np.random.default_rng(1)
    tx, ex = _pair(rng.standard_normal(shape) * 2 + 3, "float32")
    (tw, ew), (tb, eb) = (_pair(a, "float32") for a in (rng.uniform(0.5, 2, shape[1]), rng.standard_normal(shape[1])))
    seen = _spy(monkeypatch, _parallel, "halves")
    ty = torch.batch_norm(tx, tw, tb, None, None, True, 0.1, 1e-5, False)
    ey = REGISTRY["batch_norm"].fn(ex, ew, eb, None, None, True, 0.1, 1e-5, False)
    _close(ey, ty, "float32")
    tg, eg = _pair(rng.standard_normal(shape), "float32", requires_grad=False)
    for e, t in zip(ember.autograd.grad(ey, (ex, ew, eb), eg), torch.autograd.grad(ty, (tx, tw, tb), tg)):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-4, atol=1e-4)
    assert len(seen) == 6  # the sums, the centred values and the output or the input's gradient, both ways


def test_batch_norm_double_backward():
    rng = np.random.default_rng(0)
    (tx, ex), (tw, ew) = _pair(rng.standard_normal((4, 3, 5)), "float64"), _pair(rng.uniform(1, 2, 3), "float64")
    tgx, tgw = torch.autograd.grad(torch.batch_norm(tx, tw, None, None, None, True, 0.1, 1e-5, False).sin().sum(),
                                   (tx, tw), create_graph=True)
    egx, egw = ember.autograd.grad(REGISTRY["batch_norm"].fn(ex, ew, None, None, None, True, 0.1, 1e-5, False).sin()
                                   .sum(), (ex, ew), create_graph=True)
    for e, t in zip(ember.autograd.grad((egx * egw.sum()).sum(), (ex, ew)),
                    torch.autograd.grad((tgx * tgw.sum()).sum(), (tx, tw))):
        _close(e, t, "float64")


# ---- gather ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("dim, index_shape", [(1, (5, 1)), (1, (4, 3)), (0, (6, 2)), (-1, (3, 1)), (0, ())])
@pytest.mark.parametrize("create_graph", [False, True])
def test_gather_grad(dtype, dim, index_shape, create_graph):
    """One pick per slice (nll_loss's: assigned) and repeated picks (added), an index smaller than the input."""
    rng = np.random.default_rng(len(index_shape))
    shape = (5, 4) if index_shape else ()
    tx, ex = _pair(rng.standard_normal(shape), dtype)
    size = shape[dim] if shape else 1
    index = rng.integers(0, size, index_shape)
    ty, ey = torch.gather(tx, dim if shape else 0, torch.tensor(index)), ember.gather(ex, dim if shape else 0,
                                                                                        ember.tensor(index))
    tg, eg = _pair(rng.standard_normal(index_shape), dtype, requires_grad=False)
    (tdx,) = torch.autograd.grad(ty, tx, tg)
    (edx,) = ember.autograd.grad(ey, ex, eg, create_graph=create_graph)
    _close(edx, tdx, dtype)


# ---- embedding ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("options", [{}, {"padding_idx": 3}, {"scale_grad_by_freq": True}, "empty"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_embedding_grad(dtype, options, create_graph, monkeypatch):
    """Repeated rows summed as torch's (in order), 2-D indices, the padding row's gradient zero."""
    rng = np.random.default_rng(0)
    tw, ew = _pair(rng.standard_normal((7, 5)), dtype)
    index = rng.integers(0, 7, (0,) if options == "empty" else (4, 6))
    kw = options if options != "empty" else {}
    ty = torch.nn.functional.embedding(torch.tensor(index), tw, **kw)
    ey = REGISTRY["embedding"].fn(ew, ember.tensor(index), kw.get("padding_idx", -1),
                                  kw.get("scale_grad_by_freq", False))
    tg, eg = _pair(rng.standard_normal(ty.shape), dtype, requires_grad=False)
    seen = _spy(monkeypatch, nn_misc, "_row_sums")
    (tdw,) = torch.autograd.grad(ty, tw, tg)
    (edw,) = ember.autograd.grad(ey, ew, eg, create_graph=create_graph)
    assert len(seen) == (not create_graph and dtype != "float16")
    _close(edw, tdw, dtype)


# ---- argument binding ---------------------------------------------------------------------------
def _impl(xp, input, target, weight=None, reduction=1, *, flag=False):
    return input


def _varargs(xp, *tensors, dim=0):
    return tensors


@pytest.mark.parametrize("impl, args, kwargs", [
    (_impl, (1, 2), {}), (_impl, (1, 2, 3, 4), {"flag": True}), (_impl, (1,), {"target": 2, "reduction": 0}),
    (_impl, (), {"input": 1, "target": 2}), (_impl, (1, 2, 3, 4, 5), {}), (_impl, (1, 2), {"input": 3}),
    (_impl, (1,), {}), (_impl, (1, 2), {"other": 3}), (_impl, (1, 2), {"flag": 3, "bad": 4}),
    (_varargs, (1, 2, 3), {"dim": 1}), (_varargs, (), {})])
def test_bound_matches_inspect(impl, args, kwargs):
    """The hand binding gives inspect's arguments (in order, defaults filled), and its TypeError for a call
    that does not bind."""
    o, ctx = types.SimpleNamespace(impl=impl), types.SimpleNamespace(args=args, kwargs=kwargs)
    try:
        b = inspect.signature(impl).bind(None, *args, **kwargs)
    except TypeError as e:
        with pytest.raises(TypeError, match=str(e)):
            activation.bound(ctx, o)
        return
    b.apply_defaults()
    assert list(activation.bound(ctx, o).items()) == list(b.arguments.items())[1:]
    names = list(inspect.signature(impl).parameters)[1:]
    assert activation.grads(ctx, o, **{n: n for n in names}) == tuple(names[:len(args)])
