"""Op table lines of the elementwise math family: unary math, complex helpers, binary and ternary math."""
import numpy as np
import torch
from optable import FLOATS, NC, NUMERIC, Line, T, binary, fn, meth, unary, values

from ember._registry import REGISTRY

REALS = ("float32", "float64")
NO_HALF = ("float32", "float64", "bfloat16", "int64", "bool")
_COMPLEX = {"float32": "complex64", "float64": "complex128"}


def with_kwargs(samples, *extra):
    """``samples`` again with each of the keyword sets in ``extra``."""
    def build(dtype, rng):
        base = samples(dtype, rng)
        return base + [(args, kw) for kw in extra for args, _ in base[:1]]
    return build


def complex_of(dtype, shape, rng):
    """A complex tensor (complex64 for float32 samples, else complex128) with NaN/inf among its values."""
    return T(values("float64", shape, rng, special=True) + 1j * values("float64", shape, rng), _COMPLEX.get(dtype,
                                                                                                           "complex128"))


def complex_unary(dtype, rng):
    """``unary`` plus complex operands."""
    return unary(dtype, rng) + [((complex_of(dtype, (3, 4), rng),), {}), ((complex_of(dtype, (), rng),), {})]


def positive_unary(dtype, rng):
    """Inputs in the domain of logarithms and roots, plus the usual edge values."""
    a = np.abs(values(dtype, (3, 4), rng, special=True)) if dtype != "bool" else values(dtype, (3, 4), rng)
    return [((a,), {})] + unary(dtype, rng)


def unit_unary(dtype, rng):
    """Inputs mostly inside [-1, 1] (the domain of asin/acos/atanh), plus the usual edge values."""
    a = values(dtype, (3, 4), rng) / 4 if dtype not in ("int64", "bool") else values(dtype, (3, 4), rng)
    return [((a,), {})] + unary(dtype, rng)


def inplace(name):
    """Call ``args[0].clone().<name>_(*args[1:])``: dtype and shape rules of the in-place form."""
    def call(m, x, *a, **k):
        return getattr(x.clone(), name + "_")(*a, **k)
    return call


def fn_inplace(name):
    """Call ``lib.<name>_(args[0].clone(), *args[1:])`` (in-place forms PyTorch has only as functions)."""
    def call(m, x, *a, **k):
        return getattr(m, name + "_")(x.clone(), *a, **k)
    return call


def out_form(name):
    """Call ``lib.<name>(*args, out=<empty tensor of args[0]'s dtype>)`` (resized by the op)."""
    def call(m, x, *a, **k):
        return getattr(m, name)(x, *a, out=m.empty(0, dtype=x.dtype), **k)
    return call


def clamp_sides(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a, 0.5), {}), ((a, -1), {}), ((a, values(dtype, (4,), rng)), {}), ((a, float("nan")), {}),
            ((a, T(values("float64", (), rng), "float64")), {}), ((NC(values(dtype, (4, 3), rng)), 0), {}),
            ((a, values(dtype, (5,), rng)), {})]


def nan_to_nums(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a,), {}), ((a, 1.0, 2.0, -2.0), {}), ((a,), {"posinf": 1e30}), ((a,), {"neginf": 3}),
            ((NC(values(dtype, (4, 3), rng, special=True)),), {}), ((values(dtype, (0,), rng),), {})]


def shrinks(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a,), {}), ((a, 1.5), {}), ((a,), {"lambd": 0.0}), ((NC(values(dtype, (4, 3), rng)),), {})]


def thresholds(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return [((a, 0.5, 2.5), {}), ((a, -0.5, 7), {}), ((a, 1, -1), {}), ((values(dtype, (), rng), 0, 1), {})]


def celus(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    return unary(dtype, rng) + [((a, 2.0), {}), ((a,), {"alpha": 0.5}), ((a, 0.0), {})]


def roundings(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True) * 37
    return unary(dtype, rng) + [((a,), {"decimals": 1}), ((a,), {"decimals": 2}), ((a,), {"decimals": -1}),
                                ((np.array([0.5, 1.5, 2.5, -0.5, -2.5]),), {})]


def frac_inputs(dtype, rng):
    return unary(dtype, rng) + [((np.array([-2.5, -0.25, 0.0, 1.75, 3.0]),), {})]


def complex_pairs(dtype, rng):
    """Pairs of real tensors for complex()/polar(), plus dtype mismatches."""
    a, b = values(dtype, (3, 4), rng, special=True), values(dtype, (4,), rng)
    return [((a, b), {}), ((values(dtype, (), rng), values(dtype, (2,), rng)), {}),
            ((a, T(values("float64", (3, 4), rng), "float64")), {}), ((a, values(dtype, (5,), rng)), {})]


def as_real(dtype, rng):
    return [((complex_of(dtype, (3, 4), rng),), {}), ((complex_of(dtype, (), rng),), {}),
            ((complex_of(dtype, (0, 2), rng),), {}), ((values(dtype, (3,), rng),), {})]


def as_complex(dtype, rng):
    return [((values(dtype, (3, 2), rng),), {}), ((values(dtype, (2, 3, 2), rng),), {}),
            ((values(dtype, (0, 2), rng),), {}), ((NC(values(dtype, (3, 2), rng)),), {}),
            ((values(dtype, (3, 3), rng),), {}), ((values(dtype, (), rng),), {})]


def parts(dtype, rng):
    return unary(dtype, rng) + [((complex_of(dtype, (3, 4), rng),), {}), ((complex_of(dtype, (), rng),), {})]


def tensor_pairs(dtype, rng):
    """``binary`` without its Python-scalar operands (for ops whose signature takes tensors only), plus them
    once, which must raise."""
    return [s for s in binary(dtype, rng) if not isinstance(s[0][1], (int, float))] + [
        ((values(dtype, (3,), rng), 2), {})]


def float_pairs(dtype, rng):
    """``tensor_pairs`` without integer second operands."""
    return [s for s in tensor_pairs(dtype, rng) if not (isinstance(s[0][1], T) and s[0][1].dtype == "int64")]


def shifts(dtype, rng):
    a = values(dtype, (3, 4), rng)
    big = np.array([0, 1, 7, 8, 63, 64, 70, -1])
    return binary(dtype, rng) + [((T(np.arange(8) - 4, "int64"), T(big, "int64")), {}),
                                 ((T(np.array([1, -1, 100, -128, 5, 1, 1, 1]), "int8"), T(big, "int8")), {}),
                                 ((T(np.array([200, 1, 255, 3, 5, 6, 7, 8]), "uint8"), T(big, "uint8")), {}),
                                 ((a, 3), {})]


def heavisides(dtype, rng):
    a = values(dtype, (3, 4), rng, special=True)
    if dtype not in ("int64", "bool"):
        a[0, 3] = a[1, 0] = 0
    return [((a, values(dtype, (4,), rng)), {}), ((a, values(dtype, (), rng)), {}),
            ((a, T(values("float64", (), rng), "float64")), {}), ((a, values(dtype, (5,), rng)), {})]


def lerps(dtype, rng):
    a, b = values(dtype, (3, 4), rng, special=True), values(dtype, (3, 4), rng)
    return [((a, b, 0.3), {}), ((a, b, 0.7), {}), ((a, b, values(dtype, (3, 4), rng)), {}),
            ((a, values(dtype, (4,), rng), values(dtype, (3, 1), rng)), {}), ((a, b, 2), {}),
            ((values(dtype, (), rng), values(dtype, (), rng), 0.5), {}), ((values(dtype, (0, 4), rng), b[0], 0.5), {}),
            ((NC(values(dtype, (3, 4), rng)), b, 1.5), {}),
            ((a, T(values("float64", (3, 4), rng), "float64"), 0.5), {}),
            ((a, values(dtype, (5,), rng), 0.5), {})]


def addcs(dtype, rng):
    a, b, c = (values(dtype, (3, 4), rng, special=True), values(dtype, (3, 4), rng), values(dtype, (4,), rng))
    return [((a, b, c), {}), ((a, b, c), {"value": 2}), ((a, b, c), {"value": 0.5}),
            ((values(dtype, (), rng), b, values(dtype, (3, 1), rng)), {}), ((NC(values(dtype, (3, 4), rng)), b, c), {}),
            ((a, T(values("int64", (3, 4), rng), "int64"), c), {}), ((values(dtype, (0, 4), rng), c, c), {}),
            ((a, b, values(dtype, (5,), rng)), {})]


def backward_call(name):
    """ember's VJP op ``_<name>_backward`` against torch's aten.<name>_backward."""
    def call(m, grad, out):
        if m is torch:
            return getattr(torch.ops.aten, f"{name}_backward")(grad, out)
        return REGISTRY[f"_{name}_backward"].fn(grad, out)
    call.direct = True
    return call


def act_backwards(act):
    """(grad, ``act`` output) pairs: same shape, broadcast both ways, non-contiguous, NaN/inf, empty, 0-d."""
    return lambda dtype, rng: _act_backwards(act, dtype, rng)


def _act_backwards(act, dtype, rng):
    v = lambda *s: values(dtype, s, rng, special=True)  # noqa: E731
    y = act(values(dtype, (3, 4), rng))
    return [((v(3, 4), y), {}), ((v(4), y), {}), ((v(3, 4), y[0]), {}), ((NC(v(4, 3)), NC(y.T.copy())), {}),
            ((v(0, 4), v(0, 4)), {}), ((v(), v()), {}), ((v(3, 4), v(3)), {})]


UNARY_FLOAT = ["exp", "exp2", "expm1", "sin", "cos", "tan", "atan", "sinh", "cosh", "tanh", "asinh", "arctan",
               "arcsinh", "sigmoid", "reciprocal", "deg2rad", "rad2deg"]
UNARY_POSITIVE = ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "acosh", "arccosh"]
UNARY_UNIT = ["asin", "acos", "atanh", "arcsin", "arccos", "arctanh"]
ROUNDING = ["ceil", "floor", "trunc", "fix"]
PREDICATES = ["isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal", "signbit"]

LINES = [Line(n, fn(n), unary) for n in UNARY_FLOAT] + [
    Line("_tanh_backward", backward_call("tanh"), act_backwards(np.tanh), dtypes=FLOATS),
    Line("_sigmoid_backward", backward_call("sigmoid"), act_backwards(lambda a: 1 / (1 + np.exp(-a))),
         dtypes=FLOATS)] + [
    Line(n, fn(n), positive_unary) for n in UNARY_POSITIVE] + [
    Line(n, fn(n), unit_unary) for n in UNARY_UNIT] + [
    Line(n, fn(n), unary, dtypes=NUMERIC + ("bool",)) for n in ROUNDING] + [
    Line(n, fn(n), unary) for n in PREDICATES] + [
    # every unary float op in place and with out=: integer targets refuse a float result
    Line(n + "_", inplace(n), unary, dtypes=("float32", "float16", "int64")) for n in UNARY_FLOAT + ROUNDING] + [
    Line(n + "(out=)", out_form(n), unary, dtypes=("float64", "bfloat16", "int64")) for n in UNARY_FLOAT] + [
    Line("sign", fn("sign"), unary, dtypes=NUMERIC),
    # torch.autograd answers sgn of real inputs with a ZeroTensor, which the VJP check cannot read
    Line("sgn", fn("sgn"), unary, dtypes=NUMERIC, grad=False),
    Line("conj", fn("conj"), unary),
    Line("conj(complex)", lambda m, x: m.conj(x).resolve_conj(), complex_unary, dtypes=REALS),
    Line("square", fn("square"), unary), Line("square_", inplace("square"), unary),
    Line("round", fn("round"), roundings), Line("round_", inplace("round"), roundings, dtypes=REALS),
    Line("frac", fn("frac"), frac_inputs), Line("relu", fn("relu"), unary), Line("relu_", inplace("relu"), unary),
    Line("negative", fn("negative"), unary), Line("absolute", fn("absolute"), unary),
    Line("absolute_", inplace("absolute"), unary, dtypes=("float32", "int64", "bool")),
    Line("positive", fn("positive"), unary),
    Line("nan_to_num", fn("nan_to_num"), nan_to_nums), Line("nan_to_num_", inplace("nan_to_num"), nan_to_nums),
    Line("angle", fn("angle"), unary), Line("angle(complex)", fn("angle"), complex_unary, dtypes=REALS, grad=False),
    Line("conj_physical", fn("conj_physical"), complex_unary, dtypes=REALS),
    Line("conj_physical(real)", fn("conj_physical"), unary, grad=False),
    Line("resolve_conj", fn("resolve_conj"), unary), Line("resolve_neg", fn("resolve_neg"), unary),
    Line("is_conj", fn("is_conj"), unary), Line("is_neg", fn("is_neg"), unary),
    Line("real", fn("real"), parts), Line("imag", fn("imag"), parts, grad=False),
    Line("Tensor.real", lambda m, x: x.real, parts), Line("Tensor.imag", lambda m, x: x.imag, parts),
    Line("view_as_real", fn("view_as_real"), as_real, dtypes=REALS, grad=False),
    # ember has no complex32, so float16 parts are left out
    Line("view_as_complex", fn("view_as_complex"), as_complex, dtypes=NO_HALF, grad=False),
    Line("complex", fn("complex"), complex_pairs, dtypes=NO_HALF, grad=False),
    Line("polar", fn("polar"), complex_pairs, dtypes=NO_HALF, grad=False),
    Line("frexp", fn("frexp"), unary),
    Line("clamp_min", fn("clamp_min"), clamp_sides, dtypes=NUMERIC),
    Line("clamp_max", fn("clamp_max"), clamp_sides, dtypes=NUMERIC),
    Line("clamp_min_", inplace("clamp_min"), clamp_sides, dtypes=("float32", "int64")),
    Line("hardshrink", fn("hardshrink"), shrinks), Line("Tensor.hardshrink", meth("hardshrink"), shrinks, grad=False),
    Line("threshold", fn("threshold"), thresholds), Line("threshold_", fn_inplace("threshold"), thresholds),
    Line("selu", fn("selu"), unary), Line("celu", fn("celu"), celus), Line("celu_", fn_inplace("celu"), celus),
    # binary and ternary
    Line("atan2", fn("atan2"), tensor_pairs), Line("arctan2", fn("arctan2"), tensor_pairs),
    Line("hypot", fn("hypot"), tensor_pairs), Line("fmod", fn("fmod"), binary),
    Line("copysign", fn("copysign"), binary), Line("nextafter", fn("nextafter"), tensor_pairs),
    Line("ldexp", fn("ldexp"), float_pairs),
    # PyTorch's gradient for an integer exponent computes 2 ** other in integers (0 below 0); ember's is 2 ** other
    Line("ldexp(int exponent)", fn("ldexp"), tensor_pairs, grad=False), Line("float_power", fn("float_power"), binary),
    Line("float_power_", inplace("float_power"), binary, dtypes=("float32", "float64")),
    Line("logaddexp", fn("logaddexp"), tensor_pairs), Line("logaddexp2", fn("logaddexp2"), tensor_pairs),
    Line("fmax", fn("fmax"), tensor_pairs), Line("fmin", fn("fmin"), tensor_pairs),
    Line("heaviside", fn("heaviside"), heavisides),
    Line("gcd", fn("gcd"), tensor_pairs), Line("lcm", fn("lcm"), tensor_pairs),
    Line("bitwise_left_shift", fn("bitwise_left_shift"), shifts),
    Line("bitwise_right_shift", fn("bitwise_right_shift"), shifts),
    Line("<<", lambda m, a, b: a << b, shifts, dtypes=("int64",)), Line(">>", lambda m, a, b: a >> b, shifts),
    Line("<<=", lambda m, a, b: a.clone().__ilshift__(b), shifts, dtypes=("int64",)),
    Line("lerp", fn("lerp"), lerps), Line("lerp_", inplace("lerp"), lerps, dtypes=("float32", "float64")),
    Line("addcmul", fn("addcmul"), addcs), Line("addcdiv", fn("addcdiv"), addcs),
    Line("addcdiv_", inplace("addcdiv"), addcs, dtypes=("float32", "int64")),
    Line("divide", fn("divide"), binary), Line("multiply", fn("multiply"), binary),
    Line("subtract", fn("subtract"), binary), Line("rsub", fn("rsub"), binary),
    Line("rsub(alpha)", lambda m, a, b: m.rsub(a, b, alpha=2), binary, dtypes=NUMERIC),
    Line("not_equal", fn("not_equal"), binary), Line("greater", fn("greater"), binary),
    Line("greater_equal", fn("greater_equal"), binary), Line("less", fn("less"), binary),
    Line("less_equal", fn("less_equal"), binary), Line("divide_", inplace("divide"), binary, dtypes=FLOATS),
]
