"""Neural-network helpers of the torch namespace: the recurrent cells (``rnn_tanh_cell``, ``rnn_relu_cell``,
``lstm_cell``, ``gru_cell``), ``bilinear``, ``pdist``, ``renorm``, ``norm_except_dim``, ``conv_tbc`` and
``embedding_renorm_``. Each cell is one op: its gates from two matmuls, its VJP the cell's backward pass
written in ember ops. Half precision computes in float32 and rounds."""
import types

import numpy as np

from .. import _factory
from .._blas import gemm
from .._registry import REGISTRY, op
from .activation import bound, grads, tname, up
from .arithmetic import wanted
from .comparison import where


# ---- recurrent cells -----------------------------------------------------------------------------
def _cell_check(x, h, w_ih, w_hh, chunks):
    """PyTorch's checks of a cell's arguments (batched 2-D input and state only, as the ATen cells take)."""
    if x.ndim != 2 or h.ndim != 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    if x.shape[0] != h.shape[0]:
        raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden0 batch size {h.shape[0]}")
    if x.shape[-1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {x.shape[-1]} expected {w_ih.shape[1]}")
    if h.shape[-1] != w_hh.shape[1]:
        raise RuntimeError(f"hidden0 has inconsistent hidden_size: got {h.shape[-1]}, expected {w_hh.shape[1]}")
    if w_ih.shape[0] != chunks * w_hh.shape[1] or w_hh.shape[0] != chunks * w_hh.shape[1]:
        raise RuntimeError(f"weight_ih first dim must be {chunks} * hidden_size = {chunks * w_hh.shape[1]}, but got "
                           f"{w_ih.shape[0]}")
    for a in (h, w_ih, w_hh):
        if a.dtype != x.dtype:
            raise RuntimeError(f"expected scalar type {tname(x)} but found {tname(a)}")
    if x.dtype.kind not in "fV":
        raise RuntimeError(f"\"addmm_impl_cpu_\" not implemented for '{tname(x)}'")


def _linear(x, w, b):
    r = up(x) @ up(w).T
    return r + up(b) if b is not None else r


def _sigmoid(xp, z):
    return 1 / (1 + xp.exp(-z))


def _simple_cell(name, act):
    def impl(xp, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        _cell_check(input, hx, w_ih, w_hh, 1)
        z = _linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)
        return (xp.tanh(z) if act == "tanh" else xp.maximum(z, 0)).astype(input.dtype)
    impl.__doc__ = f"One step of an Elman RNN: ``{act}(input W_ih^T + b_ih + hx W_hh^T + b_hh)`` on (batch, features)."
    o = op(name, method=False)(impl)

    @o.vjp
    def _(ctx, g):
        a = bound(ctx, o)
        h1 = ctx.out
        gz = g * (1 - h1 * h1) if act == "tanh" else where(h1 > 0, g, 0.0)
        return _linear_grads(ctx, o, a, gz, gz)
    return o


def _linear_grads(ctx, o, a, g_ih, g_hh, hx_grad=None):
    """Gradients through ``input W_ih^T + b_ih`` (pre-activation gradient ``g_ih``) and ``hx W_hh^T + b_hh``
    (``g_hh``); ``hx_grad`` adds what the cell passes straight from hx (or replaces hx's, for lists)."""
    x, w_ih, w_hh = a["input"], a["w_ih"], a["w_hh"]
    h = a["hx"][0] if isinstance(a["hx"], (list, tuple)) else a["hx"]
    gh = g_hh @ w_hh
    named = dict(input=g_ih @ w_ih, w_ih=g_ih.mT @ x, w_hh=g_hh.mT @ h,
                 b_ih=g_ih.sum(0) if a["b_ih"] is not None else None,
                 b_hh=g_hh.sum(0) if a["b_hh"] is not None else None)
    named["hx"] = hx_grad(gh) if hx_grad else gh
    return grads(ctx, o, **named)


rnn_tanh_cell = _simple_cell("rnn_tanh_cell", "tanh")
rnn_relu_cell = _simple_cell("rnn_relu_cell", "relu")


def _lstm_gates(xp, input, hx, w_ih, w_hh, b_ih, b_hh):
    h, c = hx
    _cell_check(input, h, w_ih, w_hh, 4)
    z = _linear(input, w_ih, b_ih) + _linear(h, w_hh, b_hh)
    i, f, gg, o = xp.split(z, 4, axis=-1)
    return _sigmoid(xp, i), _sigmoid(xp, f), xp.tanh(gg), _sigmoid(xp, o), up(c)


@op("lstm_cell", method=False)
def lstm_cell(xp, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: gates (input, forget, cell, output) from ``input`` and ``hx = (h, c)``; returns (h', c')."""
    i, f, g, o, c = _lstm_gates(xp, input, hx, w_ih, w_hh, b_ih, b_hh)
    c1 = f * c + i * g
    return (o * xp.tanh(c1)).astype(input.dtype), c1.astype(input.dtype)


@lstm_cell.vjp
def _(ctx, gh1, gc1):
    a = bound(ctx, lstm_cell)
    x, (h, c), w_ih, w_hh = a["input"], a["hx"], a["w_ih"], a["w_hh"]
    z = x @ w_ih.mT + h @ w_hh.mT
    z = z + a["b_ih"] if a["b_ih"] is not None else z
    z = z + a["b_hh"] if a["b_hh"] is not None else z
    zi, zf, zg, zo = z.chunk(4, -1)
    i, f, g, o = zi.sigmoid(), zf.sigmoid(), zg.tanh(), zo.sigmoid()
    tc = ctx.out[1].tanh()
    gh1 = gh1 if gh1 is not None else h * 0
    gc = (gc1 if gc1 is not None else c * 0) + gh1 * o * (1 - tc * tc)
    dz = _cat([gc * g * i * (1 - i), gc * c * f * (1 - f), gc * i * (1 - g * g), gh1 * tc * o * (1 - o)])
    return _linear_grads(ctx, lstm_cell, a, dz, dz, lambda gh: [gh, gc * f])


def _cat(parts):
    return REGISTRY["cat"].fn(parts, -1)


@op("gru_cell", method=False)
def gru_cell(xp, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step: reset and update gates, candidate ``tanh(x_n + r * h_n)``; returns ``(1 - z) n + z hx``."""
    _cell_check(input, hx, w_ih, w_hh, 3)
    ir, iz, in_ = xp.split(_linear(input, w_ih, b_ih), 3, axis=-1)
    hr, hz, hn = xp.split(_linear(hx, w_hh, b_hh), 3, axis=-1)
    r, z = _sigmoid(xp, ir + hr), _sigmoid(xp, iz + hz)
    n = xp.tanh(in_ + r * hn)
    return (n + z * (up(hx) - n)).astype(input.dtype)


@gru_cell.vjp
def _(ctx, g):
    a = bound(ctx, gru_cell)
    x, h, w_ih, w_hh = a["input"], a["hx"], a["w_ih"], a["w_hh"]
    gi, gh = x @ w_ih.mT, h @ w_hh.mT
    gi = gi + a["b_ih"] if a["b_ih"] is not None else gi
    gh = gh + a["b_hh"] if a["b_hh"] is not None else gh
    ir, iz, in_ = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    dn = g * (1 - z) * (1 - n * n)
    dr = dn * hn * r * (1 - r)
    dz = g * (h - n) * z * (1 - z)
    return _linear_grads(ctx, gru_cell, a, _cat([dr, dz, dn]), _cat([dr, dz, dn * r]), lambda gh_: gh_ + g * z)


# ---- a whole LSTM layer ----------------------------------------------------------------------------
def _lstm_check(input, state, weights):
    if input.ndim != 3 or any(a.ndim != 2 for a in state):
        raise RuntimeError(f"_lstm_layer: expected a 3-D input and 2-D states, got {input.ndim}-D and "
                           f"{[a.ndim for a in state]}-D")
    for a in state + weights:
        if a is not None and a.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {tname(input)} but found {tname(a)}")
    if input.dtype.kind not in "fV":
        raise RuntimeError(f"\"addmm_impl_cpu_\" not implemented for '{tname(input)}'")
    if input.shape[0] == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")


_CHUNK = 8  # steps per product over the input (forward and backward)


def _gate_scale(xp, H, dtype):
    """(4H, 1): halves for the rows of the sigmoid gates (i, f, o), ones for g's. With sigmoid(z) = (1 + tanh(z / 2))
    / 2 one tanh makes all four gates, and halving weights and bias halves the products exactly."""
    scale = xp.full((4 * H, 1), 0.5, dtype)
    scale[2 * H:3 * H] = 1
    return scale


@op("_lstm_layer", method=False, function=False)
def _lstm_layer(xp, input, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM layer over a time-major sequence ``input`` (T > 0, B, F) from the state (h0, c0) (B, H); returns
    (outputs (T, B, H), h_T, c_T) and, for the backward pass, the gates (T, B, 4H) and cell states (T, B, H). The
    input's part of the gates is one product per chunk of steps; each step adds one product of the hidden state
    into it and applies the gates. Steps run transposed, (features, batch): a step's gates are then
    contiguous blocks (NumPy's loops over the strided blocks of (B, 4H) rows took several times longer) and the step
    product W_hh h^T is BLAS's fastest arrangement; gates and cell states are returned as transposed views."""
    _lstm_check(input, [h0, c0], [w_ih, w_hh, b_ih, b_hh])
    (T, B, F), H = input.shape, w_hh.shape[1]
    x = up(input)
    scale = _gate_scale(xp, H, x.dtype)
    wi, wh = up(w_ih) * scale, up(w_hh) * scale
    x2, n = x.reshape(T * B, F), _CHUNK * B
    biases = [up(b) for b in (b_ih, b_hh) if b is not None]
    bias = sum(biases)[:, None] * scale if biases else None
    zx = xp.empty((4 * H, n + 16), x.dtype)[:, :n]  # (rows padded: a power-of-two stride thrashes the caches)
    gates, out, cells = xp.empty((T, 4 * H, B), x.dtype), xp.empty((T, H, B), x.dtype), xp.empty((T, H, B), x.dtype)
    h, c, ig = up(h0).T, up(c0).T, xp.empty((H, B), x.dtype)
    for t in range(T):
        k = t % _CHUNK
        if not k:  # the input's part of the next steps' gates: one product per chunk, which stays in cache
            zc = zx[:, :min(n, (T - t) * B)]
            if bias is not None:
                zc[...] = bias
            gemm(wi, x2[t * B:t * B + zc.shape[1]].T, zc, bias is not None)
        z = gates[t]
        zt = zx[:, k * B:(k + 1) * B]
        gemm(wh, h, zt, 1)
        xp.tanh(zt, out=z)
        for s in (z[:2 * H], z[3 * H:]):
            s *= 0.5
            s += 0.5
        c = xp.multiply(z[H:2 * H], c, out=cells[t])
        c += xp.multiply(z[:H], z[2 * H:3 * H], out=ig)
        h = xp.tanh(c, out=out[t])
        h *= z[3 * H:]
    dt = input.dtype  # (h and c are views of out and cells: copied, so that no two outputs share memory)
    return out.transpose(0, 2, 1).astype(dt, order="C"), h.T.astype(dt, order="C"), c.T.astype(dt, order="C"), \
        gates.transpose(0, 2, 1).astype(dt, copy=False), cells.transpose(0, 2, 1).astype(dt, copy=False)


_lstm_layer.constant_outputs = lambda args, kwargs: (3, 4)  # the gates and cell states carry no gradient


def _lstm_bptt(x, h0, c0, w_ih, w_hh, bias, out, g_out, g_h, g_c):
    """Backpropagation through time of _lstm_layer in ember ops (a differentiable backward, for create_graph): the
    gates and cell states are recomputed from the outputs (two products over all steps and the cell recurrence);
    only the hidden state's gradient loops over time."""
    (T, B, F), H = x.shape, w_hh.shape[1]
    cat, stack = REGISTRY["cat"].fn, REGISTRY["stack"].fn
    h_prev = cat([h0.reshape(1, B, H), out[:T - 1]], 0).reshape(T * B, H)
    x2 = x.reshape(T * B, F)
    z = (x2 @ w_ih.T + h_prev @ w_hh.T).reshape(T, B, 4 * H)
    z = z + bias if bias is not None else z
    i, f, o = (z[..., k * H:(k + 1) * H].sigmoid() for k in (0, 1, 3))
    g = z[..., 2 * H:3 * H].tanh()
    cs, c = [], c0
    for t in range(T):
        c = f[t] * c + i[t] * g[t]
        cs.append(c)
    cells = stack(cs)
    tc = cells.tanh()
    # per-step factors that do not depend on the incoming gradients
    c_prev = cat([c0.reshape(1, B, H), cells[:T - 1]], 0)
    a_c, d_o = o * (1 - tc * tc), tc * o * (1 - o)
    d_i, d_g, d_f = g * i * (1 - i), i * (1 - g * g), c_prev * f * (1 - f)
    dh, dc, dzs = g_h, g_c, [None] * T
    for t in range(T - 1, -1, -1):
        dh = g_out[t] + dh
        dc = dc + dh * a_c[t]
        dz = dzs[t] = cat([dc * d_i[t], dc * d_f[t], dc * d_g[t], dh * d_o[t]], -1)
        dh, dc = dz @ w_hh, dc * f[t]
    dz = stack(dzs).reshape(T * B, 4 * H)
    return (dz @ w_ih).reshape(T, B, F), dh, dc, dz.T @ x2, dz.T @ h_prev, dz.sum(0)


@op("_lstm_layer_backward", method=False, function=False, differentiable=False)
def _lstm_layer_backward(xp, input, h0, c0, w_ih, w_hh, bias, out, g_out, g_h, g_c, gates, cells, dx=True):
    """Gradients of _lstm_layer's (input (unless not ``dx``), h0, c0, w_ih, w_hh, bias) from its inputs, ``bias``
    (b_ih + b_hh or None), its outputs (sequence, gates, cell states) and the gradients of its three
    differentiable outputs. The same math as _lstm_bptt, on arrays and transposed as the forward runs; the
    weights' and input's gradients are products over chunks of steps, whose gate gradients stay in cache."""
    _lstm_check(input, [h0, c0], [w_ih, w_hh, bias])
    x, h0, c0, w_ih, w_hh, out, g_out, g_h, g_c, gates, cells = (
        up(v) for v in (input, h0, c0, w_ih, w_hh, out, g_out, g_h, g_c, gates, cells))
    (T, B, F), H, dtype = x.shape, w_hh.shape[1], x.dtype
    gates, cells = (xp.ascontiguousarray(a.transpose(0, 2, 1)) for a in (gates, cells))  # the forward's layout
    dh = g_out.transpose(0, 2, 1).copy()  # each step's gradient of h (T, H, B); the step products accumulate into it
    dh[T - 1] += g_h.T
    dc, dh0, d, a = g_c.T.copy(), xp.empty((H, B), dtype), xp.empty((4 * H, B), dtype), xp.empty((H, B), dtype)
    n, x2, h2 = _CHUNK * B, x.reshape(T * B, F), out.reshape(T * B, H)
    dz = xp.empty((4 * H, n + 16), dtype)[:, :n]  # a chunk of steps' gate gradients (rows padded, as forward's)
    dw_ih, dw_hh, db = xp.empty((4 * H, F), dtype), xp.empty((4 * H, H), dtype), xp.empty((4 * H, 1), dtype)
    ones = xp.ones((n, 1), dtype)  # (the bias's gradient as a product: several times faster than a sum)
    dxs = xp.empty((T * B, F), dtype) if dx else None
    wh = xp.ascontiguousarray(w_hh.T)  # (W_hh^T dz: BLAS's fastest arrangement)
    for t in range(T - 1, -1, -1):  # (the factors each step: on arrays in cache, faster than on all steps)
        k = t % _CHUNK
        z, e = gates[t], dz[:, k * B:(k + 1) * B]
        i, f, g, o = z[:H], z[H:2 * H], z[2 * H:3 * H], z[3 * H:]
        xp.subtract(1, z, out=d)
        d *= z
        d[:H] *= g  # d_i = g i (1 - i)
        d[H:2 * H] *= cells[t - 1] if t else c0.T  # d_f = c_prev f (1 - f)
        d_g = xp.multiply(g, g, out=d[2 * H:3 * H])
        xp.subtract(1, d_g, out=d_g)
        d_g *= i  # i (1 - g^2)
        tc = xp.tanh(cells[t], out=a)
        d[3 * H:] *= tc  # d_o = tanh(c) o (1 - o)
        tc *= tc
        xp.subtract(1, tc, out=tc)
        tc *= o
        d[3 * H:] *= dh[t]
        tc *= dh[t]
        dc += tc  # dh o (1 - tanh(c)^2)
        xp.multiply(d3 := d[:3 * H].reshape(3, H, B), dc, out=d3)  # d is now the step's gate gradients
        gemm(wh, d, dh[t - 1] if t else dh0, t > 0)
        e[...] = d
        dc *= f
        if not k:  # a chunk of steps done: its share of the weights', bias's and input's gradients
            ec, lo, hi = dz[:, :min(n, (T - t) * B)], t * B, min(T, t + _CHUNK) * B
            beta = hi < T * B
            gemm(ec, x2[lo:hi], dw_ih, beta)
            gemm(ec[:, B:] if not t else ec, h2[max(lo - B, 0):hi - B], dw_hh, beta)  # (h_prev: h0 at t = 0)
            if not t:
                gemm(ec[:, :B], h0, dw_hh, 1)
            if dx:
                gemm(ec.T, w_ih, dxs[lo:hi])
            gemm(ec, ones[:ec.shape[1]], db, beta)
    r = (dxs.reshape(T, B, F) if dx else None, dh0.T, dc.T, dw_ih, dw_hh, db.reshape(4 * H))
    return tuple(a.astype(input.dtype, order="C", copy=False) if a is not None else None for a in r)


@_lstm_layer.vjp
def _(ctx, g_out, g_h, g_c, *_):
    a = bound(ctx, _lstm_layer)
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = a.values()
    out, _, _, gates, cells = ctx.out
    g_out = g_out if g_out is not None else out.new_zeros(out.shape)
    g_h, g_c = (g if g is not None else h0.new_zeros(h0.shape) for g in (g_h, g_c))
    bias = b_ih if b_hh is None else b_hh if b_ih is None else b_ih + b_hh
    operands = (x, h0, c0, w_ih, w_hh, bias, out, g_out, g_h, g_c)
    # a graph of the backward (create_graph) needs it in ember ops; otherwise one op on arrays
    if any(t is not None and t.requires_grad for t in operands):
        r = _lstm_bptt(*operands)
    else:
        r = _lstm_layer_backward(*operands, gates, cells, wanted(ctx)[0])
    db = r[5] if bias is not None else None
    return grads(ctx, _lstm_layer, input=r[0], h0=r[1], c0=r[2], w_ih=r[3], w_hh=r[4],
                 b_ih=db if b_ih is not None else None, b_hh=db if b_hh is not None else None)


# ---- bilinear, pdist ------------------------------------------------------------------------------
@op("bilinear", method=False)
def bilinear(xp, input1, input2, weight, bias=None):
    """``y_k = input1^T weight_k input2 + bias_k`` over the last dims (leading dims must match)."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes do not match weight: got {list(input1.shape)}, "
                           f"{list(input2.shape)} and weight {list(weight.shape)}")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[0] if bias.ndim else 0}"
                           f" but expected {weight.shape[0]}")
    x1, x2 = up(input1), up(input2)
    y = xp.einsum("...i,kij,...j->...k", x1, up(weight), x2, optimize=True)
    return (y + up(bias) if bias is not None else y).astype(input1.dtype)


@bilinear.vjp
def _(ctx, g):
    a = bound(ctx, bilinear)
    x1, x2, w = a["input1"], a["input2"], a["weight"]
    es = REGISTRY["einsum"].fn
    lead = tuple(range(g.dim() - 1))
    return grads(ctx, bilinear, input1=es("...k,kij,...j->...i", g, w, x2), input2=es("...k,kij,...i->...j", g, w, x1),
                 weight=es("...k,...i,...j->kij", g, x1, x2),
                 bias=(g.sum(lead) if lead else g) if a["bias"] is not None else None)


def _pairs(n):
    return np.triu_indices(n, 1)


@op("pdist", method=False)
def pdist(xp, input, p=2.0):
    """The ``p``-norm distances between every pair of rows i < j of a 2-D ``input`` (condensed, row-major)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.kind not in "fV":
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if input.dtype.kind == "V" or input.dtype == np.float16:
        if input.shape[0] > 1:
            raise NotImplementedError(f"\"pdist\" not implemented for '{tname(input)}'")
    i, j = _pairs(input.shape[0])
    x = up(input)
    d = xp.abs(x[xp.asarray(i)] - x[xp.asarray(j)])
    if p == float("inf"):
        r = d.max(-1, initial=0)
    elif p == 0:
        r = (d != 0).sum(-1).astype(d.dtype)
    else:
        r = (d ** p).sum(-1) ** (1 / p)
    return r.astype(input.dtype)


@pdist.vjp
def _(ctx, g):
    x = ctx.args[0]
    p = bound(ctx, pdist)["p"]
    i, j = (_factory.tensor(v, device=x.device) for v in _pairs(x.shape[0]))
    d = x.index_select(0, i) - x.index_select(0, j)
    out, gu = ctx.out.unsqueeze(-1), g.unsqueeze(-1)
    if p == float("inf"):
        gd = where(d.abs() == out, gu * d.sign(), 0.0)
    elif p == 0:
        gd = d * 0
    else:
        gd = where(out == 0, 0.0, gu * d.sign() * d.abs() ** (p - 1) / out ** (p - 1))
    return (x.new_zeros(x.shape).index_add(0, i, gd).index_add(0, j, -gd), None)[:len(ctx.args)]


# ---- renorm, norm_except_dim ---------------------------------------------------------------------
def _other_dims(ndim, dim):
    return tuple(d for d in range(ndim) if d != dim)


def _pnorm(xp, x, p, axes):
    a = xp.abs(x)
    if p == float("inf"):
        return a.max(axis=axes, keepdims=True, initial=0)
    if p == 0:
        return (a != 0).sum(axis=axes, keepdims=True).astype(a.dtype)
    return (a ** p).sum(axis=axes, keepdims=True) ** (1 / p)


@op("renorm", inplace=True, result_layout="row_major")
def renorm(xp, input, p, dim, maxnorm):
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    n = max(input.ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    if input.dtype.kind not in "fVc":
        raise RuntimeError(f"renorm: expected a floating point or complex tensor as input. Got {tname(input)}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    x = up(input)
    norm = _pnorm(xp, x, p, _other_dims(x.ndim, dim % x.ndim))
    factor = xp.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1).astype(norm.dtype)
    return (x * factor).astype(input.dtype)


@renorm.vjp
def _(ctx, g):
    a = bound(ctx, renorm)
    x, p, dim, maxnorm = a["input"], a["p"], a["dim"] % max(a["input"].dim(), 1), a["maxnorm"]
    axes = _other_dims(x.dim(), dim)
    ax = x.abs()
    norm = ax.amax(axes, keepdim=True) if p == float("inf") else (ax ** p).sum(axes, keepdim=True) ** (1 / p)
    over = norm > maxnorm
    factor = where(over, maxnorm / (norm + 1e-7), 1.0)
    dnorm = where(ax == norm, x.sgn(), 0.0) if p == float("inf") else x.sgn() * ax ** (p - 1) / norm ** (p - 1)
    gx = g * factor - where(over, maxnorm / (norm + 1e-7) ** 2, 0.0) * (g * x).sum(axes, keepdim=True) * dnorm
    return (gx,) + (None,) * (len(ctx.args) - 1)


@op("norm_except_dim", method=False)
def norm_except_dim(xp, v, pow=2, dim=0):  # noqa: A002 - PyTorch's parameter name
    """The ``pow``-norm over every dim but ``dim`` (kept as size-1 dims); ``dim=-1``: of the whole tensor."""
    x = up(v)
    if dim == -1:
        return _pnorm(xp, x, pow, None).reshape(()).astype(v.dtype)
    return _pnorm(xp, x, pow, _other_dims(x.ndim, dim)).astype(v.dtype)


@norm_except_dim.vjp
def _(ctx, g):
    a = bound(ctx, norm_except_dim)
    v, p = a["v"], a["pow"]
    n = ctx.out
    gv = g * v.sgn() * v.abs() ** (p - 1) / n ** (p - 1)
    return (where(n == 0, 0.0, gv),) + (None,) * (len(ctx.args) - 1)


# ---- conv_tbc, embedding_renorm_ -----------------------------------------------------------------
def _tbc_args(input, weight, bias):
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")


@op("conv_tbc", method=True, result_layout="row_major")
def conv_tbc(xp, input, weight, bias, pad=0):
    """1-D convolution of a (time, batch, channels) sequence with a (kernel, in, out) weight, padded by ``pad``
    in time."""
    _tbc_args(input, weight, bias)
    x = xp.transpose(input, (1, 2, 0))
    w = xp.transpose(weight, (2, 1, 0))
    return xp.transpose(REGISTRY["conv1d"].impl(xp, x, w, bias, 1, pad), (2, 0, 1))


@conv_tbc.vjp
def _(ctx, g):
    a = bound(ctx, conv_tbc)
    args = (a["input"].permute(1, 2, 0), a["weight"].permute(2, 1, 0), a["bias"], 1, a["pad"])
    o = REGISTRY["conv1d"]
    gx, gw, gb = o.vjp_fn(types.SimpleNamespace(args=args, kwargs={}, out=o.fn(*args)), g.permute(1, 2, 0))[:3]
    return (gx.permute(2, 0, 1), gw.permute(2, 1, 0), gb) + (None,) * (len(ctx.args) - 3)


@op("embedding_renorm_", method=False, mutates=True, differentiable=False)
def embedding_renorm_(xp, input, indices, max_norm, norm_type):
    """Rows of the embedding matrix ``input`` named by ``indices`` whose ``norm_type``-norm exceeds ``max_norm``
    scaled (in place) to norm ``max_norm``."""
    if input.ndim != 2:
        raise RuntimeError("embedding_renorm_(): 'self' must be 2-D")
    if input.dtype.kind not in "fV":
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got {tname(input)} "
                           f"instead.")
    if indices.dtype.kind not in "iu":
        raise RuntimeError(f"Expected tensor for argument #2 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {tname(indices)} instead (while checking arguments for "
                           f"embedding_renorm_)")
    rows = xp.unique(indices.reshape(-1))
    w = up(input[rows])
    norm = _pnorm(xp, w, norm_type, (1,))
    input[rows] = xp.where(norm > max_norm, w * (max_norm / (norm + 1e-7)), w).astype(input.dtype)


# ---- affine grids ----------------------------------------------------------------------------------
def _base_grid(size, align_corners):
    """Normalized sample coordinates of an output of spatial ``size`` (D?, H, W) as rows (x, y, z?, 1)."""
    def axis(n):
        if n <= 1:
            return np.zeros(max(n, 0))
        r = np.linspace(-1, 1, n)
        return r if align_corners else r * (n - 1) / n
    coords = list(np.meshgrid(*[axis(n) for n in size], indexing="ij"))[::-1]  # x varies along the last dim
    return np.stack(coords + [np.ones(tuple(size))], -1).reshape(-1, len(size) + 1)


@op("affine_grid_generator", method=False)
def affine_grid_generator(xp, theta, size, align_corners):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) or (N, 3, 4) for an output of ``size``
    (N, C, H, W) or (N, C, D, H, W): (N, H, W, 2) or (N, D, H, W, 3) normalized coordinates."""
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise RuntimeError("AffineGridGenerator needs 4d (spatial) or 5d (volumetric) inputs.")
    k = len(size) - 2
    if theta.ndim != 3 or theta.shape != (size[0], k, k + 1):
        raise RuntimeError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {list(size)}. "
                           f"Got {list(theta.shape)}.")
    if theta.dtype.kind not in "fV":
        raise RuntimeError(f"\"baddbmm_cpu\" not implemented for '{tname(theta)}'")
    t = up(theta)
    base = xp.asarray(_base_grid(size[2:], align_corners).astype(t.dtype))
    return (base @ xp.swapaxes(t, 1, 2)).reshape((size[0],) + size[2:] + (k,)).astype(theta.dtype)


@affine_grid_generator.vjp
def _(ctx, g):
    a = bound(ctx, affine_grid_generator)
    theta, size = a["theta"], tuple(a["size"])
    base = _factory.tensor(_base_grid(size[2:], a["align_corners"]), dtype=theta.dtype, device=theta.device)
    return (g.reshape((size[0], base.shape[0], theta.shape[1])).mT @ base,) + (None,) * (len(ctx.args) - 1)
