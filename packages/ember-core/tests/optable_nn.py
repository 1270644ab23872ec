"""Op table lines of the neural-network primitives: convolutions, pooling, interpolation, activations,
softmax, normalization, dropout, embeddings, distances and losses."""
import math

import numpy as np
import torch
from optable import ALL, DT, FLOATS, NC, Line, T, fn, values
from optable_pointwise import complex_unary

from ember._registry import REGISTRY

F64 = ("float32", "float64")


def nnf(name, torch_name=None):
    """``torch.nn.functional.<name>`` against the registered op (not in ember's namespace)."""
    def call(m, *a, **k):
        if m is torch:
            return getattr(torch.nn.functional, torch_name or name)(*a, **k)
        return REGISTRY[name].fn(*a, **k)
    call.direct = True
    return call


def _v(dtype, rng, exact=False):
    """Sample maker; ``exact``: small integers in half precision, whose sums round the same in any order."""
    if exact and dtype in ("float16", "bfloat16"):
        return lambda *s: rng.integers(-2, 3, s).astype(np.float64)
    return lambda *s: values(dtype, s, rng)


# ---- convolutions --------------------------------------------------------------------------------
def convs(n):
    def samples(dtype, rng):
        v = _v(dtype, rng, exact=True)
        sp = (7, 6, 5)[:n]
        k = (3, 2, 2)[:n]
        x, w, b = v(2, 4, *sp), v(6, 4, *k), v(6)
        return [((x, w), {}), ((x, w, b), {"stride": 2, "padding": 1}),
                ((x, v(6, 2, *k), b), {"groups": 2, "dilation": 2 if n < 3 else 1, "padding": (1,) * n}),
                ((x, w), {"padding": "same"}), ((x, v(6, 4, *(1,) * n)), {"padding": "valid"}),
                ((v(4, *sp), w, b), {}),                                     # unbatched
                ((v(0, 4, *sp), w), {}),                                     # empty batch
                ((NC(v(2, 4, *sp)), w), {"stride": (1,) * (n - 1) + (2,)}),  # non-contiguous input
                ((x, v(6, 3, *k)), {}),                                      # channel mismatch
                ((x, v(6, 4, *(9,) * n)), {}),                               # kernel larger than input
                ((x, w), {"padding": "same", "stride": 2}),
                ((x, w, v(5)), {}),                                          # bias of the wrong size
                ((x, T(values("float64", (6, 4) + k, rng), "float64")), {}),  # dtype mismatch
                ((v(2, 4), w), {})]                                          # too few dims
    return samples


def conv_transposes(n):
    def samples(dtype, rng):
        v = _v(dtype, rng, exact=True)
        sp = (5, 4, 3)[:n]
        k = (3, 2, 2)[:n]
        x, w, b = v(2, 4, *sp), v(4, 3, *k), v(6)
        return [((x, w), {}), ((x, w, v(3)), {"stride": 2, "padding": 1, "output_padding": 1}),
                ((x, v(4, 3, *k), b), {"groups": 2, "dilation": 2, "stride": (1,) * (n - 1) + (3,)}),
                ((v(4, *sp), w), {}), ((v(0, 4, *sp), w), {}), ((NC(v(2, 4, *sp)), w), {}),
                ((x, w), {"output_padding": 1}),                             # not smaller than stride or dilation
                ((x, v(3, 3, *k)), {}),                                      # channel mismatch
                ((x, w), {"padding": 5})]                                    # output too small
    return samples


def convolutions(dtype, rng):
    v = _v(dtype, rng, exact=True)
    x = v(2, 4, 6, 5)
    return [((x, v(6, 2, 3, 2), v(6), [2, 1], [1, 0], [1, 2], False, [0, 0], 2), {}),
            ((x, v(4, 3, 2, 2), None, [2, 2], [0, 1], [1, 1], True, [1, 0], 1), {}),
            ((v(2, 3, 7), v(5, 3, 2), v(5), [1], [1], [2], False, [0], 1), {}),
            ((x, v(6, 3, 3, 2), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})]


CONV_DTYPES = FLOATS + ("int64", "bool")

LINES = [
    Line("convolution", fn("convolution"), convolutions, dtypes=CONV_DTYPES),
    Line("conv1d", fn("conv1d"), convs(1), dtypes=CONV_DTYPES),
    Line("conv2d", fn("conv2d"), convs(2), dtypes=CONV_DTYPES),
    Line("conv3d", fn("conv3d"), convs(3), dtypes=CONV_DTYPES),
    Line("conv_transpose1d", fn("conv_transpose1d"), conv_transposes(1), dtypes=CONV_DTYPES),
    Line("conv_transpose2d", fn("conv_transpose2d"), conv_transposes(2), dtypes=CONV_DTYPES),
    Line("conv_transpose3d", fn("conv_transpose3d"), conv_transposes(3), dtypes=CONV_DTYPES),
]


# ---- pooling ------------------------------------------------------------------------------------
def max_pools(n):
    def samples(dtype, rng):
        v = _v(dtype, rng)
        sp = (7, 6, 5)[:n]
        x = v(2, 3, *sp)
        if dtype in FLOATS:
            x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
        return [((x, 2), {}), ((x, 3, 2, 1), {}), ((x, 3), {"stride": 2, "ceil_mode": True}),
                ((x, (2,) * n, (1,) * n, 0, 2), {}), ((v(3, *sp), 2), {}), ((v(0, 3, *sp), 2), {}),
                ((NC(v(2, 3, *sp)), 2), {}), ((x, 2, 1, 2), {}),      # padding more than half the kernel
                ((x, 9), {}), ((v(*sp[:1]), 2), {})]                  # output empty; too few dims
    return samples


def avg_pools(n):
    def samples(dtype, rng):
        v = _v(dtype, rng)
        sp = (7, 6, 5)[:n]
        x = v(2, 3, *sp)
        out = [((x, 2), {}), ((x, 3, 2, 1), {}), ((x, 3, 2, 1, True), {}), ((x, 3, 2, 1, True, False), {}),
               ((x, (2,) * n, (1,) * n), {"count_include_pad": False}), ((v(3, *sp), 2), {}),
               ((v(0, 3, *sp), 2), {}), ((NC(v(2, 3, *sp)), 2), {}), ((x, 2, 1, 2), {}), ((x, 9), {})]
        if n > 1:
            out += [((x, 3, 2, 1), {"divisor_override": 4}), ((x, 2), {"divisor_override": 0})]
        return out
    return samples


def adaptives(n):
    def samples(dtype, rng):
        v = _v(dtype, rng)
        sp = (7, 6, 5)[:n]
        x = v(2, 3, *sp)
        return [((x, 3), {}), ((x, (4, 2, 5)[:n]), {}), ((x, 1), {}), ((v(3, *sp), (8, 7, 5)[:n]), {}),
                ((NC(v(2, 3, *sp)), 2), {}), ((v(0, 3, *sp), 2), {}), ((x, (None,) * (n - 1) + (2,)), {}),
                ((v(*sp[:1]), 2), {})]
    return samples


def _with_indices(torch_name):
    def call(m, *a, **k):
        if m is torch:
            return getattr(torch.nn.functional, torch_name)(*a, return_indices=True, **k)
        return REGISTRY[torch_name + ("_with_indices" if "adaptive" not in torch_name else "")].fn(*a, **k)
    return call


def unpools(n):
    def samples(dtype, rng):
        sp = (4, 6, 4)[:n]
        vals, idx = getattr(torch.nn.functional, f"max_pool{n}d")(torch.tensor(values("float64", (2, 3) + sp, rng)), 2,
                                                                   return_indices=True)
        extra = ((2, 2, 2), (0, 0, 0)) if n == 3 else ()
        v, i = vals.numpy(), idx.numpy()
        return [((v, T(i, "int64"), sp) + extra, {}), ((v, T(i * 0 + 99, "int64"), sp) + extra, {}),
                ((v, T(i, "int64"), sp[:1] * (n + 1)) + extra, {}), ((v[0], T(i[0], "int64"), sp) + extra, {})]
    return samples


def _unpool_call(name):
    def call(m, *a, **k):
        return getattr(torch._C._nn, name)(*a, **k) if m is torch else REGISTRY[name].fn(*a, **k)
    call.direct = True
    return call


POOL_DTYPES = FLOATS + ("int64", "bool")
for _n in (1, 2, 3):
    LINES += [
        Line(f"max_pool{_n}d", fn(f"max_pool{_n}d"), max_pools(_n), dtypes=POOL_DTYPES),
        Line(f"max_pool{_n}d_with_indices", _with_indices(f"max_pool{_n}d") if _n > 1
             else fn("max_pool1d_with_indices"), max_pools(_n), dtypes=POOL_DTYPES, grad=True),
        Line(f"avg_pool{_n}d", fn("avg_pool1d") if _n == 1 else nnf(f"avg_pool{_n}d"), avg_pools(_n),
             dtypes=POOL_DTYPES),
        Line(f"adaptive_avg_pool{_n}d", fn("adaptive_avg_pool1d") if _n == 1 else nnf(f"adaptive_avg_pool{_n}d"),
             adaptives(_n), dtypes=POOL_DTYPES),
        Line(f"adaptive_max_pool{_n}d",
             fn("adaptive_max_pool1d") if _n == 1 else _with_indices(f"adaptive_max_pool{_n}d"),
             adaptives(_n), dtypes=POOL_DTYPES, grad=True),
    ]


# ---- softmax and activations ------------------------------------------------------------------
def softmaxes(dtype, rng):
    v = _v(dtype, rng)
    a = values(dtype, (3, 4), rng, special=dtype in FLOATS)
    return [((a, 1), {}), ((a, 0), {}), ((v(2, 3, 4), -1), {}), ((v(), 0), {}), ((v(0, 3), 1), {}),
            ((NC(v(4, 3)), 1), {}), ((v(3, 4), 1), {"dtype": DT("float64")}), ((a, 2), {}),
            ((T(np.array([[-np.inf, -np.inf], [np.inf, 1.0]]), "float64"), 1), {})]


# x * F(x) for a cumulative-distribution-like F: the limits at the infinities (torch: NaN at -inf, and NaN or inf at
# +inf by CPU; float16 gelu(inf) is NaN on AVX-512 CPUs without AVX512-BF16, inf on others)
X_TIMES_CDF = {math.inf: math.inf, -math.inf: 0.0}


def acts(*kwargs_list):
    def samples(dtype, rng):
        a = values(dtype, (3, 4), rng, special=dtype in FLOATS)
        out = [((a,), {}), ((values(dtype, (), rng),), {}), ((values(dtype, (0, 3), rng),), {}),
               ((NC(values(dtype, (4, 3), rng)),), {})]
        return out + [((values(dtype, (5, 4), rng),), k) for k in kwargs_list]
    return samples


def _backward_call(name):
    """ember's VJP op ``_<name>_backward`` against torch's aten.<name>_backward (grad first, then the input)."""
    def call(m, grad, x, *args, **kwargs):
        if m is torch:
            return getattr(torch.ops.aten, f"{name}_backward")(grad, x, *args, **kwargs)
        return REGISTRY[f"_{name}_backward"].fn(grad, x, *args, **kwargs)
    call.direct = True
    return call


def act_backwards(*extra):
    """(grad, input, *extra[i]) samples: NaN/inf in the input (with a unit gradient), non-contiguous, empty, 0-d
    (an infinite gradient times a derivative of either sign is inf or NaN depending on torch's kernel path)."""
    def samples(dtype, rng):
        v = lambda *s: values(dtype, s, rng)  # noqa: E731
        x = values(dtype, (3, 4), rng, special=True)
        out = []
        for args, k in extra or [((), {})]:
            out += [((np.ones((3, 4)), x, *args), k), ((v(3, 4), v(3, 4), *args), k),
                    ((NC(v(4, 3)), NC(v(4, 3)), *args), k), ((v(0, 4), v(0, 4), *args), k), ((v(), v(), *args), k)]
        return out
    return samples


def glus(dtype, rng):
    v = _v(dtype, rng)
    return [((v(3, 4),), {}), ((v(4, 3), 0), {}), ((v(3, 5),), {}), ((v(),), {}), ((NC(v(4, 6)),), {})]


def prelus(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3, 4), v(3)), {}), ((v(2, 3), v(1)), {}), ((v(5), v(1)), {}), ((v(2, 3, 4), v(4)), {}),
            ((NC(v(2, 3)), v(3)), {}), ((v(), v(1)), {})]


def rrelus(dtype, rng):
    a = values(dtype, (3, 4), rng, special=dtype in FLOATS)
    return [((a,), {}), ((a, 0.1, 0.3), {}), ((values(dtype, (0, 2), rng),), {})]


LINES += [
    Line("max_unpool2d", _unpool_call("max_unpool2d"), unpools(2), dtypes=("float32", "float64")),
    Line("max_unpool3d", _unpool_call("max_unpool3d"), unpools(3), dtypes=("float32", "float64")),
    Line("softmax", fn("softmax"), softmaxes, dtypes=ALL),
    Line("log_softmax", fn("log_softmax"), softmaxes, dtypes=ALL),
    Line("gelu", nnf("gelu"), lambda d, r: acts({"approximate": "tanh"}, {"approximate": "nope"})(d, r) + [
        ((values(d, (3, 4), r, special=d in FLOATS),), {"approximate": "tanh"})], dtypes=ALL, limits=X_TIMES_CDF),
    Line("_gelu_backward", _backward_call("gelu"), act_backwards(((), {}), ((), {"approximate": "tanh"})),
         dtypes=FLOATS),
    Line("silu", nnf("silu"), acts(), dtypes=ALL, limits=X_TIMES_CDF),
    Line("_silu_backward", _backward_call("silu"), act_backwards(), dtypes=FLOATS, grad=False),  # (torch: none)
    Line("mish", nnf("mish"), acts(), dtypes=ALL, limits=X_TIMES_CDF),
    Line("hardtanh", nnf("hardtanh"), acts({"min_val": -0.5, "max_val": 2.0}, {"min_val": 2.0, "max_val": 1.0}),
         dtypes=ALL),
    Line("hardsigmoid", nnf("hardsigmoid"), acts(), dtypes=ALL),
    Line("hardswish", nnf("hardswish"), acts(), dtypes=ALL, limits=X_TIMES_CDF),
    Line("elu", nnf("elu"), acts({"alpha": 0.5}), dtypes=ALL),
    Line("leaky_relu", nnf("leaky_relu"), acts({"negative_slope": 0.2}), dtypes=ALL),
    Line("softplus", nnf("softplus"), acts({"beta": 2.0, "threshold": 1.0}), dtypes=ALL),
    Line("_softplus_backward", _backward_call("softplus"), act_backwards(((1.0, 20.0), {}), ((2.0, 1.0), {})),
         dtypes=FLOATS),
    Line("softsign", nnf("softsign"), acts(), dtypes=ALL, limits={math.inf: 1.0, -math.inf: -1.0}),
    Line("tanhshrink", nnf("tanhshrink"), acts(), dtypes=ALL),
    # complex inputs stay complex (their gradients: ember-autograd's test_complex_gradients.py)
    Line("softsign(complex)", nnf("softsign"), complex_unary, dtypes=F64, grad=False,
         limits={math.inf: 1.0, -math.inf: -1.0}),
    Line("tanhshrink(complex)", nnf("tanhshrink"), complex_unary, dtypes=F64, grad=False),
    Line("softshrink", nnf("softshrink"), acts({"lambd": 1.5}, {"lambd": -1.0}), dtypes=ALL),
    Line("log_sigmoid", nnf("log_sigmoid", "logsigmoid"), acts(), dtypes=ALL),
    Line("glu", nnf("glu"), glus, dtypes=ALL),
    Line("prelu", fn("prelu"), prelus, dtypes=FLOATS),
    Line("rrelu", fn("rrelu"), rrelus, dtypes=ALL),
    Line("rrelu (training)", lambda m, x: m.rrelu(x, training=True).shape, lambda d, r: [((values(d, (3, 4), r),), {})],
         dtypes=FLOATS, grad=False),
]


# ---- normalization ------------------------------------------------------------------------------
def _f64(rng, *s):
    return T(values("float64", s, rng), "float64")


def batch_norms(dtype, rng):
    v = _v(dtype, rng)
    x = v(4, 3, 5)
    stats = lambda: (v(3), np.abs(v(3)) + 0.5)  # noqa: E731
    f32 = (T(values("float64", (3,), rng), "float32"), T(np.abs(values("float64", (3,), rng)) + 0.5, "float32"))
    w, b = v(3), v(3)
    return [((x, f32[0], f32[1], *f32, True, 0.1, 1e-5, False), {}), ((x, w, b, *f32, True, 0.1, 1e-5, False), {}),
            ((x, w, b, *stats(), True, 0.1, 1e-5, False), {}), ((x, w, b, *stats(), False, 0.1, 1e-5, False), {}),
            ((v(6, 3), None, None, None, None, True, 0.3, 1e-3, False), {}),
            ((NC(v(4, 3, 2, 5)), w, None, *stats(), True, 0.1, 1e-5, False), {}),
            ((x, v(4), b, *stats(), True, 0.1, 1e-5, False), {}),
            ((x, w, b, None, None, False, 0.1, 1e-5, False), {})]


def instance_norms(dtype, rng):
    v = _v(dtype, rng)
    x = v(4, 3, 5)
    stats = lambda: (v(3), np.abs(v(3)) + 0.5)  # noqa: E731
    return [((x, v(3), v(3), *stats(), True, 0.1, 1e-5, False), {}),
            ((v(2, 3, 2, 4), None, None, None, None, True, 0.1, 1e-5, False), {}),
            ((x, v(3), v(3), *stats(), False, 0.1, 1e-5, False), {})]


def running_stats(name):
    """The batch/instance norm call, returning the running statistics it updated as well (copies: torch's
    tensors share memory with the samples)."""
    def call(m, *a):
        stats = [None if s is None else s.clone() for s in a[3:5]]
        return getattr(m, name)(*a[:3], *stats, *a[5:]), stats[0], stats[1]
    return call


def layer_norms(dtype, rng):
    v = _v(dtype, rng)
    x = v(2, 3, 4)
    return [((x, (4,), v(4), v(4)), {}), ((x, [3, 4], v(3, 4), None), {}), ((x, (4,)), {"eps": 1e-2}),
            ((NC(v(2, 4, 3)), (3,), None, v(3)), {}), ((v(0, 4), (4,)), {}), ((x, (3,)), {}),
            ((x, (4,), v(3)), {})]


def group_norms(dtype, rng):
    v = _v(dtype, rng)
    x = v(2, 6, 5)
    return [((x, 3, v(6), v(6)), {}), ((x, 2), {}), ((v(2, 4, 2, 3), 4, v(4), None), {"eps": 1e-3}),
            ((NC(v(2, 6, 4)), 1), {}), ((x, 4), {}), ((x, 3, v(3)), {}), ((v(0, 6, 2), 3), {})]


def rms_norms(dtype, rng):
    v = _v(dtype, rng)
    x = v(2, 3, 4)
    return [((x, (4,), v(4)), {}), ((x, [3, 4]), {}), ((x, (4,), None, 1e-2), {}), ((NC(v(2, 4, 3)), (3,)), {}),
            ((x, (3,)), {}), ((v(0, 4), (4,)), {})]


LINES += [
    Line("batch_norm", fn("batch_norm"), batch_norms, dtypes=ALL),
    Line("batch_norm (running stats)", running_stats("batch_norm"), batch_norms, dtypes=("float32", "float64")),
    Line("instance_norm", fn("instance_norm"), instance_norms, dtypes=ALL),
    Line("instance_norm (running stats)", running_stats("instance_norm"), instance_norms,
         dtypes=("float32", "float64")),
    Line("layer_norm", fn("layer_norm"), layer_norms, dtypes=ALL,
         exempt={"cudnn_enable": "a cuDNN switch: no effect on the CPU"}),
    Line("group_norm", fn("group_norm"), group_norms, dtypes=ALL,
         exempt={"cudnn_enabled": "a cuDNN switch: no effect on the CPU"}),
    Line("rms_norm", fn("rms_norm"), rms_norms, dtypes=ALL),
]


def linears(dtype, rng):
    v = _v(dtype, rng, exact=True)
    x, w, b = v(5, 4), v(3, 4), v(3)
    # weights without rows or columns (not bool ones: torch's bool product of no columns refuses to add the bias)
    empty = [((x, v(0, 4), v(0)), {}), ((v(5, 0), v(3, 0), b), {})] if dtype != "bool" else []
    return empty + [((x, w, b), {}), ((x, w), {}), ((v(2, 5, 4), w, b), {}), ((v(4), w, b), {}), ((v(0, 4), w, b), {}),
            ((NC(v(5, 4)), NC(v(3, 4)), b), {}), ((x, w, v(1)), {}), ((x, w, v()), {}), ((x, w), {"bias": b}),
            ((x, v(3, 5)), {}), ((x, w, v(4)), {}), ((x, T(values("float64", (3, 4), rng), "float64")), {}),
            ((x, w, T(values("float64", (3,), rng), "float64")), {})]


# ---- dropout, embedding, shuffles, distances --------------------------------------------------------
def dropouts(dtype, rng):
    a = values(dtype, (4, 3, 2), rng)
    return [((a, 0.5, False), {}), ((a, 0.0, True), {}), ((a, 1.0, True), {}), ((a, 1.5, True), {}),
            ((values(dtype, (0, 3), rng), 0.2, False), {})]


def dropout_training(name, masked=False):
    """Training-mode dropout from the same seed (ember's CPU stream is PyTorch's); ``masked``: ember's recorded form
    ``_<name>_with_mask``, whose first result is the op's."""
    def call(m, x, p):
        m.manual_seed(7)
        if masked and m is not torch:
            return REGISTRY[f"_{name}_with_mask"].fn(x, p, True)[0]
        return getattr(m, name)(x, p, True)
    return call


def embeddings(dtype, rng):
    w = values(dtype, (6, 3), rng)
    idx = T(np.array([[0, 2, 5], [2, 2, 1]]), "int64")
    return [((w, idx), {}), ((w, idx, 2), {}), ((w, idx), {"scale_grad_by_freq": True}),
            ((w, T(np.array([1, 6]), "int64")), {}), ((w, T(np.array([1.0]), "float32")), {}),
            ((w, T(np.zeros((0, 2), np.int64), "int64")), {}), ((w, T(np.array(3), "int64")), {})]


def embedding_bags(dtype, rng):
    w = _v(dtype, rng, exact=True)(6, 3)
    i64 = lambda *v: T(np.array(v, np.int64), "int64")  # noqa: E731
    idx, off, even = i64(0, 2, 5, 2, 2, 1, 4, 0), i64(0, 3, 3, 6), i64(3, 1, 4, 1, 4, 3)
    psw = _v(dtype, rng, exact=True)(8)
    return [((w, idx, off), {}), ((w, idx, off, False, 1), {}), ((w, idx, off, False, 2), {}),
            # scale_grad_by_freq, every row as frequent (torch's CPU backward divides by the count of another row)
            ((w, even, i64(0, 2, 2, 5), True, 0), {}), ((w, even, i64(0, 2, 2, 5), True, 1), {}),
            ((w, idx, i64(0, 3, 3, 8), False, 1, False, None, True), {}),                  # include_last_offset
            ((w, idx, i64(0, 3, 3, 8), False, 2, False, None, True), {}),
            ((w, idx, off, False, 0, False, None, False, 2), {}),                          # padding_idx
            ((w, idx, off, False, 1, False, None, False, -4), {}),
            ((w, idx, off, False, 2, False, None, False, 2), {}),
            ((w, idx, off, False, 0, False, psw), {}),                                      # per_sample_weights
            ((w, idx, off, False, 0, False, psw, False, 5), {}),
            ((w, T(np.array([0, 2, 5, 2], np.int32), "int32"), T(np.array([0, 1], np.int32), "int32"), False, 2), {}),
            ((w, T(np.zeros(0, np.int64), "int64"), i64(0, 0), False, 1), {}),            # empty input
            ((w, idx, off, False, 1, False, psw), {}),                                      # weights need mode sum
            ((w, idx, off, False, 0, False, T(np.ones(8), "int64")), {}),                  # weights of another dtype
            ((w, idx, off, False, 0, False, psw[:5]), {}),
            ((w, idx, off, False, 3), {}),                                                  # no such mode
            ((w, idx, off, False, 0, False, None, False, 6), {}),                          # padding_idx out of range
            ((w, idx, i64(), False, 0, False, None, True), {}),
            ((w, idx, i64(1, 3)), {}), ((w, idx, i64(0, 9)), {}),                          # bad offsets
            ((w, i64(0, 6), i64(0)), {}), ((w, i64(-1, 2), i64(0)), {}),                    # indices out of range
            ((w, T(np.array([0.0, 1.0]), "float32"), i64(0)), {}), ((w, idx, T(np.zeros(1), "float32")), {}),
            ((w[0], idx, off), {})]
    # (not 2-D indices, no bags, decreasing offsets: torch's kernel reads past them, crashes or returns garbage; sparse
    # gradients: test_embedding_bag.py)


def pixel_shuffles(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 8, 3, 2), 2), {}), ((v(2, 3, 9, 2, 3), 3), {}), ((v(8, 2, 2), 2), {}), ((v(2, 6, 2, 2), 2), {}),
            ((v(3, 4), 2), {}), ((NC(v(2, 4, 3, 2)), 2), {})]


def pixel_unshuffles(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 2, 4, 6), 2), {}), ((v(3, 6, 3), 3), {}), ((v(2, 2, 3, 4), 2), {}), ((NC(v(2, 3, 4, 2)), 2), {})]


def channel_shuffles(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 6, 3), 2), {}), ((v(2, 6, 2, 2), 3), {}), ((v(2, 6, 3), 4), {}), ((v(6, 3), 2), {})]


def similarities(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4, 3), v(4, 3)), {}), ((v(4, 3), v(3)), {"dim": -1}), ((v(2, 3, 4), v(2, 1, 4)), {"dim": 1}),
            ((v(4, 3), np.zeros((4, 3))), {}), ((v(4, 3), v(4, 3)), {"dim": 2}), ((NC(v(3, 4)), v(4, 4)), {})]


def distances(dtype, rng):
    v = _v(dtype, rng)
    return [((v(4, 3), v(4, 3)), {}), ((v(4, 3), v(3)), {"p": 1.0}), ((v(4, 3), v(4, 3)), {"p": 3.0, "keepdim": True}),
            ((v(4, 3), v(4, 3)), {"p": float("inf")}), ((v(2, 3, 4), v(4)), {"eps": 0.0}), ((NC(v(3, 4)), v(4, 4)), {})]


LINES += [Line(name, fn(name), dropouts, dtypes=FLOATS + ("int64",))
          for name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")]
_TRAINING = lambda d, r: [((values(d, (4, 3, 2), r), 0.3), {}), ((values(d, (4, 3, 2), r), 0.0), {}),  # noqa: E731
                          ((values(d, (4, 3, 2), r), 1.0), {})]
LINES += [Line(name + " (training)", dropout_training(name), _TRAINING, dtypes=FLOATS)
          for name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout", "native_dropout")]
LINES += [Line(f"_{name}_with_mask", dropout_training(name, masked=True), _TRAINING, dtypes=FLOATS, grad=False)
          for name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")]
LINES += [
    Line("linear", nnf("linear"), linears, dtypes=ALL),
    Line("native_dropout", fn("native_dropout"), lambda d, r: dropouts(d, r)[:4], dtypes=FLOATS),
    Line("embedding", fn("embedding"), embeddings, dtypes=FLOATS + ("int64",),
         exempt={"sparse": "the layout of the gradient: autograd's (test_embedding_bag.py, test_sparse.py)"}),
    Line("embedding_bag", fn("embedding_bag"), embedding_bags, dtypes=FLOATS + ("int64",)),
    Line("pixel_shuffle", fn("pixel_shuffle"), pixel_shuffles, dtypes=ALL),
    Line("pixel_unshuffle", fn("pixel_unshuffle"), pixel_unshuffles, dtypes=ALL),
    Line("channel_shuffle", fn("channel_shuffle"), channel_shuffles, dtypes=ALL),
    Line("cosine_similarity", fn("cosine_similarity"), similarities, dtypes=FLOATS + ("int64",)),
    Line("pairwise_distance", fn("pairwise_distance"), distances, dtypes=FLOATS + ("int64",)),
]


# ---- resampling (the primitive of interpolate) against PyTorch's aten upsample kernels ----------------------------
_ATEN_UPSAMPLE = {"nearest": "upsample_nearest{n}d", "nearest-exact": "_upsample_nearest_exact{n}d",
                  "linear": ("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d"),
                  "cubic": "upsample_bicubic{n}d"}


def _aten_upsample(mode, n, antialias):
    """(aten op name, whether it takes align_corners) of ``_upsample``'s mode."""
    if antialias or mode == "lanczos":
        return f"_upsample_{ {'linear': 'bilinear', 'cubic': 'bicubic'}.get(mode, mode)}2d_aa", True
    name = _ATEN_UPSAMPLE[mode]
    return (name[n - 1] if isinstance(name, tuple) else name.format(n=n)), not mode.startswith("nearest")


def upsample_call(m, x, size, mode, align_corners=False, scales=None, antialias=False):
    if m is not torch:
        return REGISTRY["_upsample"].fn(x, size, mode, align_corners, scales, antialias)
    name, aligned = _aten_upsample(mode, len(size), antialias)
    return getattr(torch.ops.aten, name)(x, size, *(align_corners,) * aligned, *(scales or [None] * len(size)))


def upsample_backward_call(m, g, input_size, mode, align_corners=False, scales=None, antialias=False):
    if m is not torch:
        return REGISTRY["_upsample_backward"].fn(g, input_size, mode, align_corners, scales, antialias)
    name, aligned = _aten_upsample(mode, len(input_size), antialias)
    return getattr(torch.ops.aten, name + "_backward")(g, list(g.shape[2:]), list(g.shape[:2]) + list(input_size),
                                                       *(align_corners,) * aligned,
                                                       *(scales or [None] * len(input_size)))


upsample_call.direct = upsample_backward_call.direct = True

# (input spatial size, output size, mode, align_corners, scales, antialias)
_RESAMPLES = [((5,), (9,), "nearest", False, None, False), ((5, 4), (7, 9), "nearest", False, None, False),
              ((5, 4), (10, 8), "nearest", False, None, False), ((5, 4), (7, 6), "nearest", False, (1.5, 1.7), False),
              ((3, 4, 5), (5, 3, 7), "nearest", False, None, False),
              ((5,), (8,), "nearest-exact", False, (1.7,), False),
              ((5, 4), (3, 9), "nearest-exact", False, None, False),
              ((3, 4, 2), (6, 3, 4), "nearest-exact", False, None, False), ((5,), (9,), "linear", False, None, False),
              ((5,), (9,), "linear", True, None, False), ((7,), (3,), "linear", False, (0.45,), False),
              ((5, 4), (8, 3), "linear", False, None, False), ((5, 4), (10, 8), "linear", False, (2.0, 2.0), False),
              ((5, 4), (9, 2), "linear", True, None, False), ((3, 4, 2), (5, 3, 4), "linear", False, None, False),
              ((3, 4, 2), (5, 3, 4), "linear", True, None, False), ((5, 4), (9, 7), "cubic", False, None, False),
              ((6, 4), (3, 9), "cubic", True, None, False), ((5, 4), (8, 6), "cubic", False, (1.6, 1.5), False),
              ((9, 8), (4, 3), "linear", False, None, True), ((9, 8), (4, 11), "linear", True, None, True),
              ((9, 8), (4, 5), "cubic", False, None, True), ((9, 8), (3, 12), "lanczos", False, None, True),
              ((10, 6), (4, 3), "lanczos", False, (0.4, 0.5), True)]


def resamples(dtype, rng):
    v = _v(dtype, rng)
    out = [((v(2, 3, *sp), list(o), mode, ac, None if s is None else list(s), aa), {})
           for sp, o, mode, ac, s, aa in _RESAMPLES]
    return out + [((NC(v(2, 3, 4, 5)), [7, 3], "linear", False, None, False), {}),  # non-contiguous
                  ((v(0, 3, 4, 5), [7, 3], "cubic", False, None, False), {}),    # empty batch
                  ((v(2, 3, 4, 5), [0, 3], "nearest", False, None, False), {}),  # empty output
                  ((v(2, 0, 4, 5), [7, 3], "linear", False, None, False), {}),   # no channels
                  ((v(2, 3, 4), [7, 3], "linear", False, None, False), {})]      # too few dims


def resample_backwards(dtype, rng):
    v = _v(dtype, rng)
    return [((v(2, 3, *o), list(sp), mode, ac, None if s is None else list(s), aa), {})
            for sp, o, mode, ac, s, aa in _RESAMPLES] + [((NC(v(2, 3, 7, 3)), [4, 5], "cubic", False, None, False), {})]


LINES += [
    Line("_upsample", upsample_call, resamples, dtypes=FLOATS + ("int64", "bool")),
    Line("_upsample_backward", upsample_backward_call, resample_backwards, dtypes=FLOATS),
]
