"""Neural-network activations: softmax/log_softmax (fused on CuPy), GELU, SiLU, Mish, the hard and soft
families, ELU, leaky/parametric/randomized ReLU, log-sigmoid and GLU. Also the small helpers the other
neural-network op files share (argument binding in VJPs, float-only inputs)."""
import functools
import inspect
import math

import numpy as np

from .. import _dtype as D
from .. import _kernels, _loops
from .. import _mt19937 as MT
from .._parallel import pool
from .._random import generator_for
from .._registry import TORCH_NAME, op
from .._tensor import Tensor
from .arithmetic import saves, wanted
from .comparison import NO_COMPLEX_CLAMP, where
from .pointwise import _elu, _elu_grad, quiet

_HALF = (np.dtype(np.float16), D.bfloat16.np)
_EMPTY = inspect.Parameter.empty


# ---- helpers shared by the neural-network op files -----------------------------------------------
@functools.cache
def _signature(impl):
    return inspect.signature(impl)


@functools.cache
def _parameters(impl):
    """The parameters of ``impl`` after ``xp`` as (names, defaults, how many may come positionally, the set of
    names), or None when a ``*args``/``**kwargs``/positional-only one needs inspect's binding."""
    ps = list(_signature(impl).parameters.values())[1:]
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in ps):
        return None
    names = tuple(p.name for p in ps)
    return names, tuple(p.default for p in ps), sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in ps), frozenset(names)


def bound(ctx, o):
    """The arguments of the call a VJP differentiates, by parameter name of op ``o``, defaults filled."""
    args, kwargs, params = ctx.args, ctx.kwargs, _parameters(o.impl)
    if params is not None and len(args) <= params[2]:  # a call that binds, bound by hand (inspect costs ~5 us)
        names, defaults, _, known = params
        k = len(args)
        if kwargs.keys() <= known and kwargs.keys().isdisjoint(names[:k]):
            rest = [kwargs.get(n, d) for n, d in zip(names[k:], defaults[k:])]
            if not any(v is _EMPTY for v in rest):
                a = dict(zip(names, args))
                a.update(zip(names[k:], rest))
                return a
    b = _signature(o.impl).bind(None, *args, **kwargs)  # (and inspect's errors for a call that does not bind)
    b.apply_defaults()
    return dict(list(b.arguments.items())[1:])


def grads(ctx, o, **named):
    """One gradient per positional argument of the call, taken from ``named`` by parameter name."""
    names = _parameters(o.impl)
    names = names[0] if names is not None else list(_signature(o.impl).parameters)[1:]
    return tuple(named.get(n) for n in names[:len(ctx.args)])


def tname(a):
    return TORCH_NAME[D.FROM_NP[a.dtype]]


def up(a):
    """Half-precision arrays as float32 (computed there and rounded back); others unchanged."""
    return a.astype(np.float32) if a.dtype in _HALF else a


def floating(a, kernel):
    """``a`` upcast for computing; PyTorch's NotImplementedError for integer and bool inputs."""
    if a.dtype.kind not in "fV":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{tname(a)}'")
    return up(a)


def same_dtype(name, *arrays):
    """PyTorch's error when tensors that must share a dtype do not."""
    arrays = [a for a in arrays if a is not None]
    for a in arrays[1:]:
        if a.dtype != arrays[0].dtype:
            raise RuntimeError(f"{name}: expected scalar type {tname(arrays[0])} but found {tname(a)}")


def dim_of(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


# ---- softmax and log_softmax ----------------------------------------------------------------------
_EXP_SUM = _kernels.reduction_kernel("ember_softmax_sum", "T x, T m", "T s", "exp(x - m)", "a + b", "s = a", "0")
_SOFTMAX = _kernels.elementwise_kernel("ember_softmax", "T x, T m, T s", "T y", "y = exp(x - m) / s")
_LOG_SOFTMAX = _kernels.elementwise_kernel("ember_log_softmax", "T x, T m, T s", "T y", "y = x - m - log(s)")


@quiet
def _softmax(xp, input, dim, dtype, log):
    if dtype is not None:
        input = input.astype(D.storage(dtype))
    d = dim_of(dim, input.ndim)
    if input.size == 0:
        return input.copy()
    x = floating(input, f"{'log_softmax' if log else 'softmax'}_lastdim_kernel_impl")
    if x.ndim == 0:
        return (xp.zeros_like(input) if log else xp.ones_like(input))
    if xp is not np:
        m = x.max(axis=d, keepdims=True)
        s = _EXP_SUM(x, m, axis=d, keepdims=True)
        return (_LOG_SOFTMAX if log else _SOFTMAX)(x, m, s).astype(input.dtype)
    out = np.empty(x.shape, x.dtype)
    if _last_rows(x, d):  # ember's row loops: one pass over each row in cache
        n = x.shape[-1]
        _loops.rows("log_softmax_rows_f32" if log else "softmax_rows_f32", x.reshape(-1, n), out=out.reshape(-1, n))
        return out.astype(input.dtype, copy=False)
    a = 1 if d == 0 else 0  # halves along another dim: two threads (NumPy releases the GIL) for large inputs
    if x.size < _SPLIT_MIN or x.ndim < 2 or x.shape[a] < 2:
        _np_softmax(x, d, log, out)
    else:
        h = (slice(None),) * a + (slice(None, x.shape[a] // 2),)
        t = (slice(None),) * a + (slice(x.shape[a] // 2, None),)
        job = pool().submit(_np_softmax, x[h], d, log, out[h])
        _np_softmax(x[t], d, log, out[t])
        job.result()
    return out.astype(input.dtype, copy=False)


def _last_rows(x, d):
    """Whether a float32 NumPy array's rows along ``d`` are its C-contiguous last dim, large enough for the row
    loops."""
    return (type(x) is np.ndarray and x.dtype == np.float32 and d == x.ndim - 1 and x.flags.c_contiguous
            and x.size >= _loops.LOOP_MIN)


def _rows_vjp(name, g, y, d, dtype):
    """A softmax-family VJP by row loop ``name`` on the arrays (None where it does not apply: a graph is being
    recorded, or the arrays are not float32 rows along the last dim)."""
    if g._rg or y._rg or dtype != D.float32 or type(g._data) is not np.ndarray or g._data.shape != y._data.shape:
        return None
    yd, gd = y._data, g._data
    if not (_last_rows(yd, d % max(yd.ndim, 1)) and gd.dtype == np.float32 and gd.flags.c_contiguous):
        return None
    n = yd.shape[-1]
    out = np.empty(yd.shape, np.float32)
    _loops.rows(name, yd.reshape(-1, n), gd.reshape(-1, n), out=out.reshape(-1, n))
    return Tensor._wrap(out)


_SPLIT_MIN = 1 << 18  # measured on two cores, 1000 x 1000 float32: softmax 0.80 -> 0.49 ms, log_softmax 1.0 -> 0.55


def _np_softmax(x, d, log, out):
    """softmax or log_softmax of NumPy ``x`` along ``d`` into ``out``."""
    with np.errstate(all="ignore"):  # (errstate is per thread)
        if not log:
            m = x.max(axis=d, keepdims=True)
            # with every row's maximum in [0, 60] neither exp(x) nor its sums overflow, and no term underflows that
            # exp(x - max) would keep: the shift's pass (and its rounding) is skipped
            np.exp(x if 0 <= m.min() and m.max() <= 60 else np.subtract(x, m, out=out), out=out)
            out /= out.sum(axis=d, keepdims=True)
            return
        # log(sum) = log1p(sum of the terms besides one maximum): summing 1 + tiny first would round the tiny part
        # away, and the maximum's result (-log(sum)) would lose its relative accuracy. That maximum's term is
        # replaced by its z (0, or NaN where the maximum is not finite, which must reach the whole row).
        i = x.argmax(axis=d, keepdims=True)
        z = np.subtract(x, np.take_along_axis(x, i, d), out=out)
        e = np.exp(z)
        np.put_along_axis(e, i, np.take_along_axis(z, i, d), d)
        z -= np.log1p(e.sum(axis=d, keepdims=True))


@op("softmax")
def softmax(xp, input, dim, dtype=None):
    """``exp(input)`` normalised to sum to one along ``dim`` (max-shifted for stability)."""
    return _softmax(xp, input, dim, dtype, False)


@op("log_softmax")
def log_softmax(xp, input, dim, dtype=None):
    """Logarithm of ``softmax`` along ``dim``, computed as ``x - max - log(sum(exp(x - max)))``."""
    return _softmax(xp, input, dim, dtype, True)


@softmax.vjp
def _(ctx, g):
    a = bound(ctx, softmax)
    y, d = ctx.out, a["dim"]
    gx = _rows_vjp("softmax_backward_rows_f32", g, y, d, a["input"].dtype)
    if gx is None:
        gx = y * (g - (g * y).sum(d, keepdim=True)) if y.dim() else g * 0
    return grads(ctx, softmax, input=gx.to(a["input"].dtype))


@log_softmax.vjp
def _(ctx, g):
    a = bound(ctx, log_softmax)
    y, d = ctx.out, a["dim"]
    gx = _rows_vjp("log_softmax_backward_rows_f32", g, y, d, a["input"].dtype)
    if gx is None:
        gx = g - y.exp() * g.sum(d, keepdim=True) if y.dim() else g * 0
    return grads(ctx, log_softmax, input=gx.to(a["input"].dtype))


# ---- pointwise activations ----------------------------------------------------------------------
def activation(name, kernel, *, inplace=False, function=False, complex_too=False, **options):
    """Register a float-only activation ``impl(xp, x, *args)`` (``x`` already upcast; result rounded back);
    ``complex_too``: complex inputs as well; ``options`` the registry's."""
    def register(impl):
        @functools.wraps(impl)
        @quiet
        def run(xp, input, *args, **kwargs):
            x = input if complex_too and input.dtype.kind == "c" else floating(input, kernel)
            return xp.asarray(impl(xp, x, *args, **kwargs)).astype(input.dtype, copy=False)
        params = list(inspect.signature(impl).parameters.values())
        run.__signature__ = inspect.Signature([params[0], params[1].replace(name="input")] + params[2:])
        return op(name, method=function, function=function, inplace=inplace, **options)(run)
    return register


def pointwise_vjp(o, derivative):
    """VJP ``g * derivative(x, **arguments)`` for a one-tensor activation ``o``."""
    @o.vjp
    def _(ctx, g):
        a = bound(ctx, o)
        return grads(ctx, o, input=g * derivative(**a))


_SQRT_2_PI = math.sqrt(2 / math.pi)


def _finite_range(x):
    f = np.finfo(x.dtype)
    return float(f.min), float(f.max)


def above_neg_inf(xp, x):
    """``x`` with -inf replaced by the lowest finite value (NaN kept): ``x * g(x)`` forms with ``g(-inf) = 0`` then
    give their limit 0 at -inf instead of IEEE's ``inf * 0 = NaN``. PyTorch gives NaN there (and at +inf, NaN or
    inf depending on the CPU's kernel path); ember gives the mathematical values."""
    return xp.maximum(x, _finite_range(x)[0])


@op("gelu", method=False, function=False)
@quiet
def gelu(xp, input, approximate="none"):
    """Gaussian error linear unit ``x * Phi(x)``; ``approximate='tanh'`` uses the tanh formula."""
    x = floating(input, "GeluKernelImpl")
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh. Got {approximate}")
    return _loops.gelu(xp, x, approximate).astype(input.dtype, copy=False)


@gelu.vjp
@saves(out=False)
def _(ctx, g):
    a = bound(ctx, gelu)
    return grads(ctx, gelu, input=_gelu_backward(g, a["input"], a["approximate"]))


@op("_gelu_backward", method=False, function=False)
@quiet
def _gelu_backward(xp, grad_output, input, approximate="none"):
    """GELU's VJP ``grad_output * gelu'(input)`` as one op, one pass over the arrays (a double backward records
    this node, whose own VJP is written in ember ops)."""
    same_dtype("gelu_backward", grad_output, input)
    x = floating(input, "GeluBackwardKernelImpl")
    return _loops.gelu_backward(xp, up(grad_output), x, approximate).astype(input.dtype, copy=False)


@_gelu_backward.vjp
def _(ctx, gg):
    a = bound(ctx, _gelu_backward)
    g, x, approximate = a["grad_output"], a["input"], a["approximate"]
    need = wanted(ctx)
    return (_gelu_backward(gg, x, approximate) if need[0] else None,
            gg * g * _gelu_second(x, approximate) if need[1] else None)


def _gelu_second(x, approximate):
    """GELU's second derivative, in ember ops (so that higher orders follow)."""
    if approximate == "none":  # phi(x) (2 - x^2)
        return (-0.5 * x * x).exp() * (2 - x * x) / math.sqrt(2 * math.pi)
    # x sigmoid(v), v = x (K0 + K1 x^2): 2 s' v' + x (s'' v'^2 + s' v''), s' = s (1 - s), s'' = s' (1 - 2 s)
    k0, k1 = 2 * _SQRT_2_PI, 2 * _SQRT_2_PI * 0.044715
    s = (x * (k0 + k1 * x * x)).sigmoid()
    d1 = s * (1 - s)
    dv = k0 + 3 * k1 * x * x
    return 2 * d1 * dv + x * (d1 * (1 - 2 * s) * dv * dv + d1 * 6 * k1 * x)


@activation("silu", "silu", complex_too=True)
def silu(xp, x):
    """``x * sigmoid(x)``; of complex inputs too, without gradients (PyTorch refuses them)."""
    if xp is np and x.dtype == np.float32 and x.size >= _loops.LOOP_MIN:  # one pass of ember's loop
        return _loops.float32_loop("silu_f32", x)
    if x.dtype.kind != "c":
        x = above_neg_inf(xp, x)
    return x / (1 + xp.exp(-x))


silu.complex_grad = False


@silu.vjp
@saves(out=False)
def _(ctx, g):
    return (_silu_backward(g, ctx.args[0]),)


@op("_silu_backward", method=False, function=False)
@quiet
def _silu_backward(xp, grad_output, input):
    """SiLU's VJP ``grad_output * s (1 + x (1 - s))``, ``s = sigmoid(x)``, as one op (one pass in float32)."""
    same_dtype("silu_backward", grad_output, input)
    x, g = floating(input, "silu_backward_out"), up(grad_output)
    if xp is np and x.dtype == np.float32 and x.size >= _loops.LOOP_MIN:
        r = _loops.float32_loop("silu_backward_f32", x, g)
    else:
        s = 1 / (1 + xp.exp(-x))
        r = g * (s * (1 + x * (1 - s)))
    return r.astype(input.dtype, copy=False)


@_silu_backward.vjp
def _(ctx, gg):
    g, x = ctx.args
    need = wanted(ctx)
    s = x.sigmoid()  # silu'' = s (1 - s) (2 + x (1 - 2 s))
    return (_silu_backward(gg, x) if need[0] else None,
            gg * g * (s * (1 - s) * (2 + x * (1 - 2 * s))) if need[1] else None)


def _softplus_arr(xp, x):
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))`` (NumPy's logaddexp is a scalar loop, ten times
    slower)."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


@activation("mish", "mish")
def mish(xp, x):
    """``x * tanh(softplus(x))``."""
    x = above_neg_inf(xp, x)
    return x * xp.tanh(_softplus_arr(xp, x))


def _mish_grad(input):
    t = softplus.fn(input).tanh()
    return t + input * input.sigmoid() * (1 - t * t)


pointwise_vjp(mish, _mish_grad)


@op("hardtanh", method=False, function=False, inplace=True)
def hardtanh(xp, input, min_val=-1.0, max_val=1.0):
    """``input`` clamped to [min_val, max_val] (NaN propagates; integers too)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype.kind == "b":
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if input.dtype.kind == "c":  # (NumPy orders complex numbers by real part, then imaginary)
        raise NotImplementedError(NO_COMPLEX_CLAMP)
    x = up(input)
    lo, hi = (x.dtype.type(int(v) if x.dtype.kind in "iu" else v) for v in (min_val, max_val))
    return xp.where(x < lo, lo, xp.where(x > hi, hi, x)).astype(input.dtype, copy=False)


pointwise_vjp(hardtanh, lambda input, min_val=-1.0, max_val=1.0: (input > min_val) & (input < max_val))


@activation("hardsigmoid", "hardsigmoid_cpu", inplace=True)
def hardsigmoid(xp, x):
    """Piecewise-linear sigmoid ``clamp(x / 6 + 1 / 2, 0, 1)``."""
    return xp.clip(x / 6 + 0.5, 0, 1)


pointwise_vjp(hardsigmoid, lambda input: ((input > -3) & (input < 3)) / 6.0)


@activation("hardswish", "hardswish_cpu", inplace=True)
def hardswish(xp, x):
    """``x * hardsigmoid(x)``."""
    x = above_neg_inf(xp, x)
    return x * xp.clip(x / 6 + 0.5, 0, 1)


pointwise_vjp(hardswish, lambda input: where(input < -3, 0.0, where(input <= 3, input / 3 + 0.5, 1.0)))


@op("elu", method=False, function=False, inplace=True)
def elu(xp, input, alpha=1.0, scale=1.0, input_scale=1.0):
    """Exponential linear unit: ``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""
    return _elu(xp, input, alpha, scale, input_scale)


@elu.vjp
def _(ctx, g):
    a = bound(ctx, elu)
    return grads(ctx, elu, input=_elu_grad(g, a["input"], a["alpha"], a["scale"], a["input_scale"]))


@activation("leaky_relu", "leaky_relu_cpu", inplace=True)
def leaky_relu(xp, x, negative_slope=0.01):
    """``x`` for positive inputs, ``negative_slope * x`` otherwise."""
    return xp.where(x > 0, x, x * x.dtype.type(negative_slope))


pointwise_vjp(leaky_relu, lambda input, negative_slope=0.01: where(input > 0, 1.0, negative_slope))


@activation("softplus", "softplus_cpu")
def softplus(xp, x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    if xp is np and x.dtype == np.float32 and x.size >= _loops.LOOP_MIN:  # one pass of ember's loop
        return _loops.float32_loop("softplus_f32", x, beta=beta, threshold=threshold)
    bx = x * beta
    return xp.where(bx > threshold, x, _softplus_arr(xp, bx) / beta)


@softplus.vjp
@saves(out=False)
def _(ctx, g):
    a = bound(ctx, softplus)
    return grads(ctx, softplus, input=_softplus_backward(g, a["input"], a["beta"], a["threshold"]))


@op("_softplus_backward", method=False, function=False)
@quiet
def _softplus_backward(xp, grad_output, input, beta=1.0, threshold=20.0):
    """softplus's VJP ``grad_output * sigmoid(beta x)`` (``grad_output`` where ``beta x > threshold``) as one op."""
    same_dtype("softplus_backward", grad_output, input)
    x, g = floating(input, "softplus_backward_out"), up(grad_output)
    if xp is np and x.dtype == np.float32 and x.size >= _loops.LOOP_MIN:
        r = _loops.float32_loop("softplus_backward_f32", x, g, beta=beta, threshold=threshold)
    else:
        bx = x * beta
        r = g * xp.where(bx > threshold, 1, 1 / (1 + xp.exp(-bx)))
    return r.astype(input.dtype, copy=False)


@_softplus_backward.vjp
def _(ctx, gg):
    a = bound(ctx, _softplus_backward)
    g, x, beta, threshold = a["grad_output"], a["input"], a["beta"], a["threshold"]
    need = wanted(ctx)
    s = (x * beta).sigmoid()
    return (_softplus_backward(gg, x, beta, threshold) if need[0] else None,
            gg * g * where(x * beta > threshold, 0.0, beta * s * (1 - s)) if need[1] else None)


def _in_float(input, fn):
    """``fn`` of ``input`` in floating point: integers give the default float, half types round back, complex stays."""
    is_float = input.dtype.kind in "fVc"
    x = up(input) if is_float else input.astype(D.get_default_dtype().np)
    return fn(x).astype(input.dtype if is_float else x.dtype, copy=False)


@op("softsign", method=False, function=False)
@quiet
def softsign(xp, input):
    """``x / (1 + |x|)`` (integers give the default float)."""
    if input.dtype.kind == "b":
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    def softsign_of(x):
        if x.dtype.kind != "c":  # (a complex infinity gives NaN, as in PyTorch)
            x = xp.clip(x, *_finite_range(x))  # so that +-inf give their limits +-1, not inf / inf
        return x / (1 + xp.abs(x))
    return _in_float(input, softsign_of)


@softsign.vjp
def _(ctx, g):
    x = bound(ctx, softsign)["input"]
    r = 1 + x.abs()
    if not x.is_complex():
        return grads(ctx, softsign, input=g * (1 / r - x * x.sign() / r ** 2))
    # x / (1 + |x|) is not holomorphic: the conjugate of its z-derivative takes g, its conj(z)-derivative conj(g)
    return grads(ctx, softsign, input=g / r - (g * (r - 1) + g.conj() * x * x.sgn()) / (2 * r ** 2))


@op("tanhshrink", method=False, function=False)
@quiet
def tanhshrink(xp, input):
    """``x - tanh(x)`` (integers give the default float)."""
    if input.dtype.kind == "b":
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported.")
    return _in_float(input, lambda x: x - xp.tanh(x))


pointwise_vjp(tanhshrink, lambda input: (input.tanh() ** 2).conj())  # (holomorphic: the conjugate derivative)


@activation("softshrink", "softshrink_cpu")
def softshrink(xp, x, lambd=0.5):
    """``x`` moved towards zero by ``lambd``; zero within [-lambd, lambd]."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, x * 0))


pointwise_vjp(softshrink, lambda input, lambd=0.5: (input > lambd) | (input < -lambd))


@activation("log_sigmoid", "log_sigmoid_cpu", result_layout="row_major")
def log_sigmoid(xp, x):
    """``log(sigmoid(x))`` computed as ``-softplus(-x)``."""
    return -_softplus_arr(xp, -x)


pointwise_vjp(log_sigmoid, lambda input: (-input).sigmoid())


@op("glu", method=False, function=False)
def glu(xp, input, dim=-1):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second half."""
    x = floating(input, "glu_cpu")
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim_of(dim, x.ndim)
    if x.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {x.shape[d]}")
    a, b = xp.split(x, 2, axis=d)
    with np.errstate(all="ignore"):
        return (a / (1 + xp.exp(-b))).astype(input.dtype, copy=False)


@glu.vjp
def _(ctx, g):
    a = bound(ctx, glu)
    x, d = a["input"], a["dim"]
    first, second = x.chunk(2, d)
    s = second.sigmoid()
    return grads(ctx, glu, input=from_halves(g * s, g * first * s * (1 - s), d))


def from_halves(a, b, d):
    from .shape import cat
    return cat([a, b], d)


@op("prelu")
def prelu(xp, input, weight):
    """``x`` for positive inputs, ``weight * x`` otherwise; ``weight`` has one or ``C`` (dim 1) elements."""
    same_dtype("prelu", input, weight)
    x, w = floating(input, "prelu_cpu"), up(weight)
    if w.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {w.ndim}")
    if w.size != 1:
        if x.ndim < 2 or w.ndim != 1 or w.size != x.shape[1]:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{w.size} and channel size = {x.shape[1] if x.ndim > 1 else 1}.")
        w = w.reshape((-1,) + (1,) * (x.ndim - 2))
    else:
        w = w.reshape(())  # one slope for every element, whatever the input's rank
    return xp.where(x > 0, x, w * x).astype(input.dtype, copy=False)


@prelu.vjp
def _(ctx, g):
    x, w = ctx.args
    wb = w if w.numel() == 1 else w.reshape((-1,) + (1,) * (x.dim() - 2))
    pos = x > 0
    gw = where(pos, 0.0, g * x)
    gw = gw.sum().reshape(w.shape) if w.numel() == 1 else gw.sum_to_size(wb.shape).reshape(w.shape)
    return where(pos, g, g * wb), gw


def _random_slopes(xp, g, x, lower, upper):
    """rrelu's slopes: as PyTorch on the CPU, one double uniform on [lower, upper) (bounds in x's precision)
    per element not above zero, in order, rounded to x's dtype; the other slopes are unused."""
    if g._stream is None:
        return (lower + (upper - lower) * xp.asarray(g._draws().random(x.shape))).astype(x.dtype)
    lo, hi = float(x.dtype.type(lower)), float(x.dtype.type(upper))
    neg = x <= 0
    slope = np.ones_like(x)
    slope[neg] = MT.unit53(g._stream, int(neg.sum())) * (hi - lo) + lo
    return slope


@op("rrelu", method=False, inplace=True)
def rrelu(xp, input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Leaky ReLU with the slope drawn uniformly from [lower, upper] per element when training (their mean
    otherwise)."""
    x = floating(input, "rrelu_with_noise_cpu")
    if not training:
        slope = x.dtype.type((lower + upper) / 2)
    else:
        if input.dtype == np.float16:  # PyTorch draws no random slopes in float16
            raise NotImplementedError(f"\"rrelu_with_noise_out_cpu\" not implemented for '{tname(input)}'")
        slope = _random_slopes(xp, generator_for(generator, input), x, lower, upper)
    return xp.where(x >= 0, x, x * slope).astype(input.dtype, copy=False)


@rrelu.vjp
def _(ctx, g):
    a = bound(ctx, rrelu)
    x, lower, upper = a["input"], a["lower"], a["upper"]
    if a["training"]:  # the slope each element drew: the output over the input where that is negative
        slope = where(x < 0, ctx.out / where(x < 0, x, 1.0), 1.0)
    else:
        slope = where(x > 0, 1.0, (lower + upper) / 2)
    return grads(ctx, rrelu, input=g * slope)
