"""PyTorch's low-level top-level spellings that ember-nn provides (ember.ctc_loss, ember.grid_sampler*, ember.lstm,
ember.gru, ember.rnn_tanh, ember.rnn_relu) against torch: values, shapes, dtypes, gradients, errors."""
import sys

import numpy as np
import pytest
import torch
from _torch_compare import assert_same, to_ember

import ember


def _grads_match(e_out, t_out, e_leaves, t_leaves, rtol=1e-5, atol=1e-6):
    rng = np.random.default_rng(3)
    e_outs = e_out if isinstance(e_out, tuple) else (e_out,)
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    cot = [rng.standard_normal(tuple(t.shape)).astype(np.float64) for t in t_outs]
    sum((t * torch.tensor(c, dtype=t.dtype)).sum() for t, c in zip(t_outs, cot)).backward()
    sum((e * ember.tensor(c, dtype=e.dtype)).sum() for e, c in zip(e_outs, cot)).backward()
    for e, t in zip(e_leaves, t_leaves):
        assert_same(e.grad, t.grad, rtol, atol)


# ---- ctc_loss ----------------------------------------------------------------------------------------------
def _ctc_inputs(dtype=torch.float64):
    # the leaf is the logits: PyTorch's CTC gradient is right only through log_softmax (it assumes normalised rows)
    torch.manual_seed(0)
    logits = torch.randn(7, 3, 5, dtype=dtype, requires_grad=True)
    return logits, torch.tensor([[1, 2, 2], [3, 4, 0], [1, 1, 1]]), [7, 6, 7], [3, 2, 1]


@pytest.mark.parametrize("reduction", [None, 0, 1, 2, 5])
@pytest.mark.parametrize("tensor_lengths", [False, True])
def test_ctc_loss(reduction, tensor_lengths):
    lp, tg, il, tl = _ctc_inputs()
    if tensor_lengths:
        il, tl = torch.tensor(il), torch.tensor(tl)
    args = (lp, tg, il, tl) + (() if reduction is None else (0, reduction))
    t = torch.ctc_loss(lp.log_softmax(2), *args[1:])
    e_lp = to_ember(lp)
    e = ember.ctc_loss(e_lp.log_softmax(2), *to_ember(args[1:]))
    assert_same(e, t, 1e-10, 1e-12)
    _grads_match(e, t, [e_lp], [lp], 1e-9, 1e-11)


def test_ctc_loss_keywords_and_errors():
    lp, tg, il, tl = _ctc_inputs(torch.float32)
    lp = lp.detach().log_softmax(2)
    t = torch.ctc_loss(lp, tg, il, tl, blank=0, reduction=1, zero_infinity=True)
    e = ember.ctc_loss(to_ember(lp), ember.tensor(tg.numpy()), il, tl, blank=0, reduction=1, zero_infinity=True)
    assert_same(e, t, 1e-5, 1e-6)
    for lib, x in ((torch, lp), (ember, to_ember(lp))):
        with pytest.raises(TypeError):
            lib.ctc_loss(x, lib.tensor(tg.numpy()), il, tl, 0, "mean")


# ---- grid_sampler ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,dims", [(0, 2), (1, 2), (2, 2), (0, 3), (1, 3)])  # bicubic is 2-d only
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sampler(mode, padding, align, dims):
    rng = np.random.default_rng(dims)
    spatial = (4, 5) if dims == 2 else (3, 4, 5)
    x = torch.tensor(rng.standard_normal((2, 3, *spatial)), requires_grad=True)
    g = torch.tensor(rng.uniform(-1.2, 1.2, (2, *(3,) * dims, dims)), requires_grad=True)
    ex, eg = to_ember(x), to_ember(g)
    for name in ("grid_sampler", f"grid_sampler_{dims}d"):
        t = getattr(torch, name)(x, g, mode, padding, align)
        e = getattr(ember, name)(ex, eg, mode, padding, align)
        assert_same(e, t, 1e-10, 1e-12)
    x.grad = g.grad = None
    leaves = ([ex, eg], [x, g]) if mode == 0 else ([ex], [x])  # nearest has no grid gradient
    _grads_match(e, t, *leaves, rtol=1e-8, atol=1e-10)


def test_grid_sampler_errors():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="grid_sampler"):
            lib.grid_sampler_2d(lib.zeros(1, 1, 2, 2, 2), lib.zeros(1, 1, 1, 1, 3), 0, 0, False)
        with pytest.raises(RuntimeError, match="grid_sampler"):
            lib.grid_sampler_3d(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 1, 2), 0, 0, False)
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
            lib.grid_sampler(lib.zeros(1, 1, 2, 2, 2), lib.zeros(1, 1, 1, 1, 3), 2, 0, False)
    with pytest.raises(RuntimeError, match="interpolation_mode"):
        ember.grid_sampler(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), 3, 0, False)
    with pytest.raises(ValueError, match="'bilinear', 'nearest' or 'bicubic'"):
        ember.nn.functional.grid_sample(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), mode="cubic")


# ---- the RNN functions -------------------------------------------------------------------------------------
_MODULES = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}


def _module(fn, bias, layers, bidirectional, proj=0):
    torch.manual_seed(1)
    kwargs = dict(num_layers=layers, bias=bias, bidirectional=bidirectional, dtype=torch.float64)
    if fn.startswith("rnn"):
        kwargs["nonlinearity"] = fn[4:]
    if proj:
        kwargs["proj_size"] = proj
    return getattr(torch.nn, _MODULES[fn])(3, 4, **kwargs)


@pytest.mark.parametrize("fn", list(_MODULES))
@pytest.mark.parametrize("bias,layers,bidirectional,batch_first",
                         [(True, 1, False, False), (False, 2, True, False), (True, 2, True, True)])
def test_rnn_functions(fn, bias, layers, bidirectional, batch_first):
    m = _module(fn, bias, layers, bidirectional)
    params = [p.detach().clone().requires_grad_() for p in m._flat_weights]
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((2, 5, 3) if batch_first else (5, 2, 3)), requires_grad=True)
    h = torch.tensor(rng.standard_normal((layers * (1 + bidirectional), 2, 4)), requires_grad=True)
    hx = [h, torch.tensor(rng.standard_normal(tuple(h.shape)))] if fn == "lstm" else h
    t = getattr(torch, fn)(x, hx, params, bias, layers, 0.0, False, bidirectional, batch_first)
    e_params, ex, e_hx = to_ember(params), to_ember(x), to_ember(hx)
    e = getattr(ember, fn)(ex, e_hx, e_params, bias, layers, 0.0, False, bidirectional, batch_first)
    assert isinstance(e, tuple) and len(e) == len(t) == (3 if fn == "lstm" else 2)
    assert_same(e, t, 1e-10, 1e-12)
    e_h = e_hx[0] if fn == "lstm" else e_hx
    _grads_match(e, t, [ex, e_h, *e_params], [x, h, *params], 1e-8, 1e-10)


@pytest.mark.parametrize("fn", list(_MODULES))
def test_rnn_functions_packed(fn):
    m = _module(fn, True, 2, True)
    seqs = [torch.tensor(np.random.default_rng(i).standard_normal((n, 3))) for i, n in enumerate((5, 3, 2))]
    packed = torch.nn.utils.rnn.pack_sequence(seqs)
    h = torch.zeros(4, 3, 4, dtype=torch.float64)
    hx = [h, h] if fn == "lstm" else h
    t = getattr(torch, fn)(packed.data, packed.batch_sizes, hx, m._flat_weights, True, 2, 0.0, False, True)
    e = getattr(ember, fn)(to_ember(packed.data), ember.tensor(packed.batch_sizes.numpy()), to_ember(hx),
                           to_ember(m._flat_weights), True, 2, 0.0, False, True)
    assert_same(e, t, 1e-10, 1e-12)


def test_lstm_projection_and_errors():
    m = _module("lstm", True, 1, False, proj=2)
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    hx = [torch.zeros(1, 2, 2, dtype=torch.float64), torch.zeros(1, 2, 4, dtype=torch.float64)]
    t = torch.lstm(x, hx, m._flat_weights, True, 1, 0.0, False, False, False)
    e = ember.lstm(to_ember(x), to_ember(hx), to_ember(m._flat_weights), True, 1, 0.0, False, False, False)
    assert_same(e, t, 1e-10, 1e-12)
    with pytest.raises(RuntimeError):
        ember.lstm(to_ember(x), to_ember(hx), to_ember(m._flat_weights)[:-1], True, 1, 0.0, False, False, False)
    for lib, xx, hh, ws in ((torch, x, hx, m._flat_weights), (ember, to_ember(x), to_ember(hx),
                                                             to_ember(m._flat_weights))):
        with pytest.raises(IndexError):
            lib.lstm(xx[:, 0], [h[:, 0] for h in hh], ws, True, 1, 0.0, False, False, False)
    with pytest.raises(TypeError):
        ember.gru(to_ember(x), to_ember(hx[1]))


def test_dropout_between_layers_in_training():
    m = _module("gru", True, 3, False)
    x = ember.ones(5, 2, 3, dtype=ember.float64)
    h = ember.zeros(3, 2, 4, dtype=ember.float64)
    ws = to_ember(m._flat_weights)
    a = ember.gru(x, h, ws, True, 3, 0.5, False, False, False)[0]
    b = ember.gru(x, h, ws, True, 3, 0.5, False, False, False)[0]
    assert ember.equal(a, b)  # train=False: no dropout
    c = ember.gru(x, h, ws, True, 3, 0.999, True, False, False)[0]
    assert not ember.equal(a, c)


def test_namespace_lookup_names_the_distribution(monkeypatch):
    assert ember.lstm is sys.modules["ember.nn._torch_functions"].lstm
    # as if ember-nn were not installed: the error names the package to install
    monkeypatch.setitem(sys.modules, "ember.nn", None)
    monkeypatch.setitem(sys.modules, "ember.nn._torch_functions", None)
    with pytest.raises(AttributeError, match="pip install ember-nn"):
        getattr(ember, "lstm")  # noqa: B009
    with pytest.raises(AttributeError, match="no attribute 'not_a_function'"):
        getattr(ember, "not_a_function")  # noqa: B009
