"""Op table lines of the torch-namespace losses and nn helpers, window functions, STFT and the
miscellaneous torch functions."""
import numpy as np
import torch
from optable import DT, FLOATS, NC, Line, T, fn, meth, values

from ember._registry import REGISTRY

F64 = ("float32", "float64")
NUM = FLOATS + ("int64",)


def _v(dtype, rng):
    return lambda *s: values(dtype, s, rng)


def _sign(rng, *shape):
    """A target of -1 and 1 (int64: the loss does not care about its dtype)."""
    return T(np.where(rng.random(shape) > 0.5, 1, -1), "int64")


def _mutated_call(name):
    """``args[0].clone().<name>(*args[1:])``: the in-place form's result and the written tensor."""
    def call(m, x, *a):
        x = x.clone()
        return getattr(x, name)(*a), x
    return call


def _unit(rng, *shape):
    return np.asarray(rng.random(shape))


# ---- losses --------------------------------------------------------------------------------------
def bce_logits(dtype, rng):
    v = _v(dtype, rng)
    x, t = values(dtype, (3, 4), rng, special=True), _unit(rng, 3, 4)
    return [((v(3, 4), t), {}), ((x, t, None, None, 1), {}), ((v(3, 4), t, _unit(rng, 4), None, 2), {}),
            ((v(3, 4), t), {"pos_weight": _unit(rng, 4) * 3}), ((v(3, 4), t, _unit(rng, 3, 4), _unit(rng, 4), 1), {}),
            ((v(3, 4), _unit(rng, 4)), {}),                           # target smaller than input: error
            ((v(0, 4), _unit(rng, 0, 4), None, None, 1), {}), ((v(), _unit(rng)), {}),
            ((NC(v(3, 4)), _unit(rng, 3, 4), None, None, 2), {}),
            ((v(3, 4), t), {"reduction": "mean"})]                    # reduction must be an int


def _nn_call(name):
    """``torch._C._nn.<name>`` (no torch-namespace function) against the registered op."""
    def call(m, *a):
        return getattr(torch._C._nn, name)(*a) if m is torch else REGISTRY[name].fn(*a)
    call.direct = True
    return call


def bces(dtype, rng):
    # probabilities with exact 0s and 1s (saturated sigmoids: PyTorch's gradient floor) and targets in [0, 1]
    x = _unit(rng, 3, 4)
    x[0, :2], x[1, :2] = 0.0, 1.0
    t = _unit(rng, 3, 4)
    return [((x, t), {}), ((x, t, None, 2), {}), ((_unit(rng, 3, 4), t, _unit(rng, 4), 0), {}),
            ((_unit(rng, 3, 4), t, _unit(rng, 3, 4), 1), {}), ((_unit(rng, 0, 4), _unit(rng, 0, 4), None, 1), {}),
            ((NC(_unit(rng, 3, 4)), _unit(rng, 4, 3).T, None, 2), {}), ((_unit(rng), _unit(rng)), {})]


def kl_divs(dtype, rng):
    v = _v(dtype, rng)
    t = _unit(rng, 3, 4) + 0.1
    return [((v(3, 4), t), {}), ((v(3, 4), t, 1), {}), ((v(3, 4), v(3, 4), 2), {"log_target": True}),
            ((v(3, 4), t[0]), {}), ((v(0, 4), v(0, 4), 1), {}), ((v(), np.asarray(t[0, 0])), {}),
            ((NC(v(3, 4)), t, 1), {}), ((v(3, 4), T(t, "float64")), {}),
            ((v(3, 4), np.where(t > 0.5, t, 0.0)), {"reduction": 0})]


def hinges(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), _sign(rng, 3, 4)), {}), ((v(3, 4), _sign(rng, 3, 4), 0.5, 1), {}),
            ((v(3, 4), _sign(rng, 4), 2.0, 2), {}), ((v(0, 2), _sign(rng, 0, 2), 1.0, 1), {}),
            ((NC(v(3, 4)), _sign(rng, 3, 4)), {}), ((v(), _sign(rng)), {}), ((v(3, 4), _sign(rng, 5)), {})]


def rankings(dtype, rng):
    v = _v(dtype, rng)
    return [((v(5), v(5), _sign(rng, 5)), {}), ((v(5), v(5), _sign(rng, 5), 0.5, 1), {}),
            ((v(3), v(2, 3), _sign(rng, 3), 0.1, 2), {}), ((v(0), v(0), _sign(rng, 0), 0.0, 1), {}),
            ((v(4), v(4), _sign(rng, 5)), {})]


def cosines(dtype, rng):
    v = _v(dtype, rng)
    z = np.zeros((3, 4))
    z[1] = values(dtype, (4,), rng)
    return [((v(3, 4), v(3, 4), _sign(rng, 3)), {}), ((v(3, 4), v(3, 4), _sign(rng, 3), 0.2, 1), {}),
            ((v(4), v(4), _sign(rng)), {"margin": -0.5, "reduction": 2}), ((z, v(3, 4), _sign(rng, 3), 0.0, 1), {}),
            ((NC(v(3, 4)), v(3, 4), _sign(rng, 3)), {}), ((v(3, 4), v(3, 4), _sign(rng, 3, 1)), {}),
            ((v(3, 4), v(3, 4), _sign(rng)), {}), ((v(0, 4), v(0, 4), _sign(rng, 0), 0.0, 1), {})]


def poissons(dtype, rng):
    v = _v(dtype, rng)
    counts = rng.integers(0, 5, (3, 4)).astype(np.float64)
    rate = _unit(rng, 3, 4) * 3 + 0.1
    return [((v(3, 4), counts, True, False, 1e-8, 1), {}), ((rate, counts, False, False, 1e-8, 0), {}),
            ((v(3, 4), counts, True, True, 1e-8, 2), {}), ((rate, counts[0], False, True, 1e-3, 1), {}),
            ((v(0, 4), v(0, 4), True, False, 1e-8, 1), {}), ((NC(v(3, 4)), counts, True, True, 1e-8, 0), {})]


def triplets(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), v(3, 4), v(3, 4)), {}), ((v(3, 4), v(3, 4), v(3, 4), 0.5, 1.0, 1e-6, True, 1), {}),
            ((v(3, 4), v(3, 4), v(3, 4)), {"p": 3.0, "swap": True, "reduction": 2}),
            ((v(4), v(4), v(4), 2.0), {}), ((NC(v(3, 4)), v(3, 4), v(4)), {}),
            ((v(3, 4), v(3, 4), v(4)), {"reduction": 1}), ((v(0, 4), v(0, 4), v(0, 4), 1.0, 2.0, 1e-6, False, 1), {})]


LINES = [
    Line("binary_cross_entropy_with_logits", fn("binary_cross_entropy_with_logits"), bce_logits, dtypes=NUM),
    Line("binary_cross_entropy", _nn_call("binary_cross_entropy"), bces, dtypes=FLOATS,
         exempt={"out": "PyTorch 2.13 leaves an empty out= of it unresized (shape (0,)): nothing to compare"}),
    Line("kl_div", fn("kl_div"), kl_divs, dtypes=NUM),
    Line("hinge_embedding_loss", fn("hinge_embedding_loss"), hinges, dtypes=FLOATS),
    Line("margin_ranking_loss", fn("margin_ranking_loss"), rankings, dtypes=FLOATS),
    Line("cosine_embedding_loss", fn("cosine_embedding_loss"), cosines, dtypes=FLOATS),
    Line("poisson_nll_loss", fn("poisson_nll_loss"), poissons, dtypes=FLOATS),
    Line("triplet_margin_loss", fn("triplet_margin_loss"), triplets, dtypes=FLOATS),
]


# ---- windows and creation functions ---------------------------------------------------------------
def windows(*extra):
    def samples(dtype, rng):
        d = {"dtype": DT(dtype)}
        return ([((n,), d) for n in (0, 1, 2, 5, 8)] + [((7, False), d), ((6, True) + extra, d),
                                                          ((6, False) + extra, d),
                ((-1,), {}), ((5,), {"dtype": DT("int64")}), ((5,), {"dtype": DT("complex64")}), ((5.0,), {})])
    return samples


def ranges(dtype, rng):
    d = {"dtype": DT(dtype)}
    return [((0, 3), {}), ((1, 4), d), ((0, 1, 0.25), d), ((4, 1, -1), d), ((2.5,), {}), ((0, 1, 0.3), {}),
            ((1, 5, 2), {"dtype": DT("int64")}), ((0, 3, 0.0), {}), ((3, 0, 1), {})]


def permuted(dtype, rng):
    d = {"dtype": DT(dtype)}
    return [(((2, 3, 4), (2, 0, 1)), d), (((2, 3), (0, 1)), {}), (((0, 3), (1, 0)), d), (((2, 3), (0, 0)), {}),
            (((2, 3), (0, 1, 2)), {})]


def _strides(m, *a, **k):
    t = m.empty_permuted(*a, **k)
    return t.shape, t.stride(), t.dtype == m.get_default_dtype()


LINES += [Line(name, fn(name), windows(*extra), dtypes=FLOATS)
          for name, extra in [("hann_window", ()), ("hamming_window", (0.5, 0.4)), ("blackman_window", ()),
                              ("bartlett_window", ()), ("kaiser_window", (5.0,))]]
LINES += [
    Line("range", fn("range"), ranges, dtypes=("float32", "float64")),
    Line("empty_permuted", fn("empty_permuted"), permuted, dtypes=("float32", "int64"), values=False),
    Line("empty_permuted (strides)", _strides, lambda d, r: [s for s in permuted(d, r) if 0 not in s[0][0]],
         dtypes=("float32",)),
]


# ---- misc functions --------------------------------------------------------------------------------
def gradients(dtype, rng):
    v = _v(dtype, rng)
    a = values(dtype, (4, 5), rng, special=True)
    return [((v(4, 5),), {}), ((v(4, 5),), {"spacing": 2.0}), ((v(4, 5),), {"spacing": [0.5, 3], "edge_order": 2}),
            ((v(3, 4, 5),), {"dim": 1, "edge_order": 2}), ((v(3, 4, 5),), {"dim": [-1, 0], "spacing": 2}),
            ((a,), {"dim": 0}), ((NC(v(5, 4)),), {}), ((v(6),), {"edge_order": 2}), ((v(),), {}),
            ((v(4, 5),), {"edge_order": 3}), ((v(2, 5),), {"edge_order": 2}), ((v(4, 5),), {"dim": (0, 0)}),
            ((v(4, 5),), {"spacing": [1], "dim": [0, 1]}), ((v(1, 5),), {}), ((v(4, 5),), {"dim": 2})]


def gradient_coords(dtype, rng):
    v = _v(dtype, rng)
    x0 = T(np.cumsum(rng.random(4) + 0.5), "float64")
    x1 = T(np.cumsum(rng.random(5) + 0.5), "float64")
    return [((v(4, 5),), {"spacing": (x0, x1)}), ((v(4, 5),), {"spacing": (x0, x1), "edge_order": 2}),
            ((v(4, 5),), {"spacing": (x1,), "dim": 1}), ((v(4, 5),), {"spacing": (x0,), "dim": 1})]


def fills(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4), 2), {}), ((v(3, 4), 1.5), {}), ((v(0, 2), True), {}), ((NC(v(3, 4)), v()), {}),
            ((v(3, 4), v(2)), {}), ((v(), -1), {})]


def adjoints(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4),), {}), ((v(2, 3, 4),), {}), ((NC(v(3, 4)),), {}), ((v(0, 3),), {}), ((v(4),), {}), ((v(),), {}),
            ((T(v(3, 2) + 1j * v(3, 2), "complex128"),), {})]


def histdds(dtype, rng):
    v = _v(dtype, rng)
    return [((v(20, 2), 3), {}), ((v(20, 3), [2, 3, 4]), {}), ((v(20, 2), 2), {"range": [-1.0, 1.0, 0.0, 2.0]}),
            ((v(20, 2), 3), {"weight": np.abs(v(20)), "density": True}), ((v(4, 5, 2), [v(4), v(3)]), {}),
            ((v(10),), {"bins": 2}), ((v(10, 2), 0), {}), ((v(10, 2), [2, 3, 4]), {}), ((v(0, 2), 2), {})]


def _binomial_shape(m, count, prob):
    r = m.binomial(count, prob)
    return r.shape, str(r.dtype).split(".")[1], bool((r >= 0).all() and (r <= count).all())


def _binomials(dtype, rng):
    c = np.floor(_unit(rng, 3, 4) * 10)
    return [((c, _unit(rng, 3, 4)), {}), ((c, _unit(rng, 4)), {}), ((np.asarray(c[0, 0]), _unit(rng)), {}),
            ((T(c, "int64"), _unit(rng, 3, 4)), {})]


LINES += [
    Line("gradient", fn("gradient"), gradients, dtypes=NUM),
    Line("gradient", fn("gradient"), gradient_coords, dtypes=("float64",), grad=False),  # no gradient for coordinates
    Line("fill", fn("fill"), fills, dtypes=NUM + ("bool",)),
    Line("adjoint", fn("adjoint"), adjoints, dtypes=NUM + ("bool",)),
    Line("adjoint (method)", meth("adjoint"), adjoints, dtypes=("float64",), grad=False),
    Line("H", lambda m, x: x.H, adjoints, dtypes=("float64",)),
    Line("mH", lambda m, x: x.mH, adjoints, dtypes=("float64",)),
    Line("histogramdd", fn("histogramdd"), histdds, dtypes=("float32", "float64", "int64")),
    Line("binomial", _binomial_shape, _binomials, dtypes=("float32", "float64")),
]


# ---- stft / istft --------------------------------------------------------------------------------------
def stfts(dtype, rng):
    v = _v(dtype, rng)
    x, w = v(2, 40), np.hanning(12) + 0.1
    w10 = T(np.hanning(10) + 0.1, dtype)
    return [((x, 12, None, None, w, True, "reflect", False, None, True), {}),
            ((v(40), 12, 3, None, w, False, "reflect", True, None, True), {}),
            ((x, 12, 4, 10, w10, True, "constant", False, None, True), {}),
            ((x, 12, 5, None, w, True, "replicate", False, False, True), {}),
            ((x, 12, 4, None, w, True, "circular", False, None, False), {}),
            ((x, 12, 3, 10, w10, False, "reflect", False, None, True, True), {}),
            ((x, 12), {"return_complex": True}), ((x, 8), {"return_complex": True}),
            ((x, 12), {}),                                                  # return_complex must be given
            ((x, 12), {"return_complex": True, "hop_length": 0}), ((x, 12), {"return_complex": True, "win_length": 13}),
            ((x, 12, None, None, v(5)), {"return_complex": True}), ((v(2, 2, 40), 12), {"return_complex": True}),
            ((v(2, 4), 12), {"return_complex": True}), ((x, 12), {"return_complex": True, "pad_mode": "bogus"}),
            ((x, 12), {"return_complex": True, "center": True, "align_to_window": True}),
            ((T(x + 1j * v(2, 40), "complex128"), 12), {}), ((x, 60), {"return_complex": True, "center": False})]


def istfts(dtype, rng):
    v = _v(dtype, rng)
    spec = lambda *s: T(v(*s) + 1j * v(*s), "complex128" if dtype == "float64" else "complex64")  # noqa: E731
    w = np.hanning(12) + 0.1
    w10 = T(np.hanning(10) + 0.1, dtype)
    return [((spec(2, 7, 11), 12, None, None, w), {}), ((spec(7, 11), 12, 3, None, w, True, True), {}),
            ((spec(2, 7, 9), 12, 4, 10, w10, False, False, None, 40), {}),
            ((spec(2, 12, 11), 12, 4, None, w, True, False, False, None, True), {}),
            ((spec(2, 7, 11), 12, 4, None, w, True, False, None, 30), {}),
            ((spec(2, 7, 11), 12, 4, None, w, True, False, None, 60), {}),
            ((spec(2, 7, 11), 12), {}), ((v(2, 7, 11), 12), {}), ((spec(2, 6, 11), 12), {}),
            ((spec(2, 7, 11), 12, None, None, v(5)), {}), ((spec(2, 7, 11), 12), {"return_complex": True})]


LINES += [
    Line("stft", fn("stft"), stfts, dtypes=F64 + ("float16",)),
    Line("istft", fn("istft"), istfts, dtypes=F64),
]


# ---- recurrent cells and other nn helpers --------------------------------------------------------------
def cells(chunks, pair=False):
    def samples(dtype, rng):
        v = _v(dtype, rng)
        H, I, B = 3, 4, 2
        hx = (lambda *s: [v(*s), v(*s)]) if pair else v
        w_ih, w_hh, b_ih, b_hh = v(chunks * H, I), v(chunks * H, H), v(chunks * H), v(chunks * H)
        return [((v(B, I), hx(B, H), w_ih, w_hh, b_ih, b_hh), {}), ((v(B, I), hx(B, H), w_ih, w_hh), {}),
                ((v(I), hx(H), w_ih, w_hh, b_ih, b_hh), {}), ((v(0, I), hx(0, H), w_ih, w_hh, b_ih, b_hh), {}),
                ((NC(v(B, I)), hx(B, H), w_ih, w_hh, None, b_hh), {}),
                ((v(B, 5), hx(B, H), w_ih, w_hh), {}), ((v(B, I), hx(3, H), w_ih, w_hh), {}),
                ((v(B, I), hx(B, H), w_ih, v(chunks * H, 2)), {}),
                ((v(B, I), hx(B, H), T(v(chunks * H, I), "float64" if dtype != "float64" else "float32"), w_hh), {})]
    return samples


def _exact(dtype, rng):
    """Sample maker; small integers in half precision, whose products and sums round the same in any order."""
    return _v(dtype, rng) if dtype in F64 else (lambda *s: rng.integers(-2, 3, s).astype(np.float64))


def softmax_nll_call(m, *a, **k):
    """ember's fused cross entropy of class indices against torch's cross_entropy_loss."""
    if m is torch:
        return torch._C._nn.cross_entropy_loss(*a, **k)
    return REGISTRY["_softmax_nll"].fn(*a, **k)


softmax_nll_call.direct = True


def softmax_nlls(dtype, rng):
    v = _v(dtype, rng)
    x, t, w = v(6, 5), T(np.array([0, 4, 2, 2, 1, 3]), "int64"), np.abs(v(5))
    special = v(3, 4)
    if dtype != "int64":
        special[0, 1], special[1, 2] = np.nan, np.inf
    return [((x, t), {}), ((x, t, w), {}), ((x, t, None, 2), {}), ((x, t, w, 0), {}), ((x, t, None, 1, 2), {}),
            ((x, t, w, 1, 2), {}), ((NC(v(6, 5)), t), {}), ((v(0, 5), T(np.zeros(0, np.int64), "int64")), {}),
            ((special, T(np.array([1, 0, 3]), "int64"), None, 0), {}),
            ((x, T(np.array([0, 5, 2, 2, 1, 3]), "int64")), {}), ((x, T(np.array([0, -1, 2, 2, 1, 3]), "int64")), {}),
            ((x, t, T(np.ones(5), "float64" if dtype != "float64" else "float32")), {})]


def _torch_lstm_layer(x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch's LSTM layer (outputs, h_T, c_T), with the gates and cell states of a step loop of torch ops."""
    biases = [b if b is not None else w_ih.new_zeros(w_ih.shape[:1]) for b in (b_ih, b_hh)]
    out, h_n, c_n = torch.lstm(x, (h0[None], c0[None]), [w_ih, w_hh] + biases, True, 1, 0.0, False, False, False)
    up = (lambda a: a.detach().float()) if x.dtype in (torch.float16, torch.bfloat16) else torch.Tensor.detach
    h, c, gates, cells = up(h0), up(c0), [], []  # (half precision computed in float32, as ember does)
    with torch.no_grad():
        for t in range(x.shape[0]):
            i, f, g, o = (up(x[t]) @ up(w_ih).T + h @ up(w_hh).T + up(biases[0]) + up(biases[1])).chunk(4, -1)
            gates.append(torch.cat([i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()], -1))
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            cells.append(c)
    empty = x.new_zeros((0,) + c0.shape)
    return (out, h_n[0], c_n[0], torch.stack(gates).to(x.dtype) if gates else empty.repeat(1, 1, 4),
            torch.stack(cells).to(x.dtype) if cells else empty)


def lstm_layer_call(m, *a, **k):
    if m is torch:
        return _torch_lstm_layer(*a, **k)
    return REGISTRY["_lstm_layer"].fn(*a, **k)


lstm_layer_call.direct = True


def lstm_backward_call(m, x, h0, c0, w_ih, w_hh, b_ih, b_hh, g_out, g_h, g_c):
    """Gradients of (x, h0, c0, w_ih, w_hh, b_ih + b_hh): torch.autograd on torch's layer, ember's backward op."""
    if m is torch:
        leaves = [a.detach().requires_grad_() for a in (x, h0, c0, w_ih, w_hh, b_ih)]
        out = _torch_lstm_layer(*leaves, b_hh)[:3]
        return m.autograd.grad(out, leaves, [g_out, g_h, g_c])
    out, _, _, gates, cells = REGISTRY["_lstm_layer"].fn(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    return REGISTRY["_lstm_layer_backward"].fn(x, h0, c0, w_ih, w_hh, b_ih + b_hh, out, g_out, g_h, g_c, gates,
                                               cells)


def lstm_layers(dtype, rng):
    v = _v(dtype, rng)
    T_, B, F, H = 4, 3, 5, 2
    w = [v(4 * H, F), v(4 * H, H), v(4 * H), v(4 * H)]
    return [((v(T_, B, F), v(B, H), v(B, H), *w), {}), ((v(T_, B, F), v(B, H), v(B, H), *w[:2]), {}),
            ((NC(v(T_, B, F)), v(B, H), v(B, H), w[0], w[1], None, w[3]), {}),
            ((v(1, B, F), v(B, H), v(B, H), *w), {}), ((v(T_, 0, F), v(0, H), v(0, H), *w), {}),
            ((v(0, B, F), v(B, H), v(B, H), *w), {}),
            ((v(T_, B, F), v(B, H), v(B, H), T(values("float64" if dtype != "float64" else "float32", (4 * H, F),
                                                        rng), "float64" if dtype != "float64" else "float32"),
              *w[1:]), {})]


def lstm_backwards(dtype, rng):
    v = _v(dtype, rng)
    T_, B, F, H = 4, 3, 5, 2
    return [((v(T_, B, F), v(B, H), v(B, H), v(4 * H, F), v(4 * H, H), v(4 * H), v(4 * H), v(T_, B, H), v(B, H),
              v(B, H)), {})]


def bilinears(dtype, rng):
    v = _exact(dtype, rng)
    return [((v(2, 3), v(2, 4), v(5, 3, 4), v(5)), {}), ((v(2, 6, 3), v(2, 6, 4), v(5, 3, 4)), {}),
            ((v(3), v(4), v(5, 3, 4), v(5)), {}), ((v(0, 3), v(0, 4), v(5, 3, 4)), {}),
            ((v(2, 3), v(3, 4), v(5, 3, 4)), {}), ((v(2, 3), v(2, 4), v(5, 4, 4)), {}),
            ((v(2, 3), v(2, 4), v(5, 3, 4), v(4)), {})]


def pdists(dtype, rng):
    v = _v(dtype, rng)
    x = v(5, 3)
    return [((x,), {}), ((x, 1.0), {}), ((x, 3.0), {}), ((x, float("inf")), {}), ((x, 0.0), {}), ((v(1, 3),), {}),
            ((NC(v(5, 3)),), {}), ((v(5),), {}), ((x, -1.0), {})]


def renorms(dtype, rng):
    v = _v(dtype, rng)
    x = v(4, 3, 2)
    return [((x, 2, 0, 3.0), {}), ((x, 1, 1, 2.0), {}), ((x, 3.5, -1, 4.0), {}), ((x, float("inf"), 0, 1.0), {}),
            ((NC(v(3, 4)), 2, 1, 2.0), {}), ((v(0, 3), 2, 0, 1.0), {}), ((v(4), 2, 0, 1.0), {}), ((x, 0, 0, 1.0), {}),
            ((x, 2, 3, 1.0), {}), ((x, 2, 0, -1.0), {})]


def norms_except(dtype, rng):
    v = _v(dtype, rng)
    x = v(4, 3, 2)
    return [((x,), {}), ((x, 2, 1), {}), ((x, 3, 2), {}), ((x, 2, -1), {}), ((NC(v(3, 4)), 1, 0), {}),
            ((v(3, 4), 2, 1), {})]


def tbcs(dtype, rng):
    v = _exact(dtype, rng)
    return [((v(7, 2, 3), v(3, 3, 4), v(4)), {}), ((v(7, 2, 3), v(3, 3, 4), v(4), 1), {}),
            ((v(5, 0, 3), v(2, 3, 4), v(4)), {}),  # (PyTorch refuses non-contiguous inputs: a view error)
            ((v(7, 2, 3), v(3, 4, 4), v(4)), {}), ((v(7, 2, 3), v(3, 3, 4), v(5)), {}),
            ((v(7, 3), v(3, 3, 4), v(4)), {})]


def _renormed(m, w, idx, max_norm, norm_type):
    w = w.clone()
    r = m.embedding_renorm_(w, idx, max_norm, norm_type)
    return w, r is w


def emb_renorms(dtype, rng):
    v = _v(dtype, rng)
    idx = T(np.array([0, 2, 2, 4]), "int64")
    return [((v(5, 3), idx, 1.0, 2.0), {}), ((v(5, 3), idx, 2.0, 1.0), {}),
            ((v(5, 3), T(np.array([1]), "int64"), 0.5, 3.0), {}),
            ((v(5, 3), T(np.array([0.5]), "float32"), 1.0, 2.0), {})]


LINES += [
    Line("rnn_tanh_cell", fn("rnn_tanh_cell"), cells(1), dtypes=FLOATS),
    Line("rnn_relu_cell", fn("rnn_relu_cell"), cells(1), dtypes=FLOATS),
    Line("gru_cell", fn("gru_cell"), cells(3), dtypes=FLOATS),
    Line("lstm_cell", fn("lstm_cell"), cells(4, pair=True), dtypes=FLOATS),
    Line("_softmax_nll", softmax_nll_call, softmax_nlls, dtypes=NUM,
         exempt={"label_smoothing":
                 "ember's fused op has none: cross_entropy with label smoothing takes ember-nn's path"}),
    # (its gates and cell states are transposed views: the layout the backward reads them in)
    Line("_lstm_layer", lstm_layer_call, lstm_layers, dtypes=FLOATS, contiguous=False),
    Line("_lstm_layer_backward", lstm_backward_call, lstm_backwards, dtypes=F64),
    Line("bilinear", fn("bilinear"), bilinears, dtypes=FLOATS),
    Line("pdist", fn("pdist"), pdists, dtypes=NUM),
    Line("pdist", fn("pdist"), lambda d, r: [((values(d, (0, 3), r),), {})], dtypes=NUM, grad=False),  # torch's
    # backward crashes on no rows
    Line("renorm", fn("renorm"), renorms, dtypes=NUM),
    Line("renorm_", _mutated_call("renorm_"), renorms, dtypes=F64),
    Line("norm_except_dim", fn("norm_except_dim"), norms_except, dtypes=FLOATS),
    Line("conv_tbc", fn("conv_tbc"), tbcs, dtypes=FLOATS),
    Line("embedding_renorm_", _renormed, emb_renorms, dtypes=FLOATS),
]


def affine_grids(dtype, rng):
    v = _exact(dtype, rng)
    # (PyTorch's half precision fails on spatial sizes of 1: "tensor_cpu" not implemented)
    ones = [((v(1, 3, 4), (1, 1, 2, 1, 3), True), {}), ((v(2, 2, 3), [2, 3, 1, 1], False), {})]
    return (ones if dtype in F64 else []) + [
            ((v(2, 2, 3), [2, 3, 4, 5], False), {}), ((v(2, 2, 3), [2, 1, 4, 5], True), {}),
            ((v(1, 3, 4), [1, 2, 3, 4, 2], False), {}), ((v(0, 2, 3), [0, 3, 4, 5], False), {}),
            ((v(2, 2, 3), [2, 3, 4], False), {}), ((v(2, 3, 4), [2, 3, 4, 5], False), {})]


LINES.append(Line("affine_grid_generator", fn("affine_grid_generator"), affine_grids, dtypes=FLOATS))
