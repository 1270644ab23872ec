"""The registry's generated spellings (function, method, operators, in-place, out=) and the dispatcher."""
import operator
import warnings

import numpy as np
import pytest
import torch

import ember
from ember import _dispatch
from ember._registry import REGISTRY

BINARY_OPERATORS = [("add", operator.add, operator.iadd), ("sub", operator.sub, operator.isub),
                    ("mul", operator.mul, operator.imul), ("div", operator.truediv, operator.itruediv),
                    ("floor_divide", operator.floordiv, operator.ifloordiv), ("remainder", operator.mod, operator.imod),
                    ("pow", operator.pow, operator.ipow)]


def sample(lib, dtype="float32"):
    a = lib.tensor([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], dtype=getattr(lib, dtype))
    b = lib.tensor([2.0, 0.5, -3.0], dtype=getattr(lib, dtype))
    return a, b


@pytest.mark.parametrize("name,op,iop", BINARY_OPERATORS)
def test_function_method_operator_inplace_and_out_agree(name, op, iop):
    a, b = sample(ember)
    ta, tb = sample(torch)
    expected = getattr(torch, name)(ta, tb).numpy()
    for got in (getattr(ember, name)(a, b), getattr(a, name)(b), op(a, b)):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    out = ember.empty(2, 3)
    assert getattr(ember, name)(a, b, out=out) is out
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    c = a.clone()
    version = c._version
    assert getattr(c, name + "_")(b) is c and c._version == version + 1
    np.testing.assert_allclose(c.numpy(), expected, rtol=1e-6)
    d = a.clone()
    d_id = id(d)
    d = iop(d, b)
    assert id(d) == d_id
    np.testing.assert_allclose(d.numpy(), expected, rtol=1e-6)
    # reflected operators with a Python number on the left
    np.testing.assert_allclose(op(2.0, a).numpy(), op(2.0, ta).numpy(), rtol=1e-6)


def test_unary_and_comparison_operators():
    a, _ = sample(ember)
    ta, _ = sample(torch)
    for op in (operator.neg, abs, lambda x: x < 1, lambda x: x >= 1, lambda x: x == 1.5, lambda x: x != 1.5,
               lambda x: 1 < x):
        np.testing.assert_array_equal(op(a).numpy(), op(ta).numpy())
    i = ember.tensor([1, 2, 3])
    ti = torch.tensor([1, 2, 3])
    for op in (operator.invert, lambda x: x & 2, lambda x: x | 4, lambda x: x ^ 1, lambda x: 6 & x):
        np.testing.assert_array_equal(op(i).numpy(), op(ti).numpy())
    np.testing.assert_allclose((a @ a.T).numpy(), (ta @ ta.T).numpy(), rtol=1e-6)


def test_out_checks_dtype_and_resizes_with_warning():
    a, b = sample(ember)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ember.add(a, b, out=ember.empty(2, 3, dtype=ember.int64))
    out = ember.empty(5)
    with pytest.warns(UserWarning, match="was resized"):
        ember.add(a, b, out=out)
    assert out.shape == (2, 3)
    empty = ember.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.mul(a, b, out=empty)
    assert empty.shape == (2, 3)
    wide = ember.empty(2, 3, dtype=ember.float64)
    ember.add(a, b, out=wide)
    assert wide.dtype is ember.float64


def test_inplace_refuses_dtype_and_shape_changes():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ember.ones(3, dtype=ember.int64).add_(ember.ones(3))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember.ones(3).add_(ember.ones(2, 3))
    x = ember.ones(3, dtype=ember.float64)
    x.add_(ember.ones(3, dtype=ember.int32))
    assert x.dtype is ember.float64 and x.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="more than one element"):
        ember.ones(1, 3).expand(2, 3).add_(1)


def test_public_functions_refuse_numbers_where_torch_does():
    with pytest.raises(TypeError, match=r"maximum\(\): argument 'input' \(position 1\) must be Tensor, not int"):
        ember.maximum(2, ember.ones(2))
    with pytest.raises(TypeError, match="maximum"):
        ember.maximum(ember.ones(2), 1)
    with pytest.raises(TypeError, match=r"add\(\): argument 'input' \(position 1\) must be Tensor, not int"):
        ember.add(2, 3)
    assert (2 - ember.ones(2)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow",
                                  "float_power", "multiply", "subtract", "divide"])
@pytest.mark.parametrize("number", [2, 2.5, -1, True, 3j])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_arithmetic_takes_a_number_first_as_torch_does(name, number, dtype):
    outcome = []
    for m in (torch, ember):
        try:
            r = getattr(m, name)(number, m.tensor([1, 2, -3]).to(getattr(m, dtype)))
            outcome.append((str(r.dtype).split(".")[1], np.round(r.to(m.complex128).numpy(), 3).tolist()))
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            outcome.append(type(e).__name__)
    assert outcome[1] == outcome[0]


@pytest.mark.parametrize("call", [
    lambda m, t: m.where(2, t), lambda m, t: m.tril(2), lambda m, t: m.topk(2, t), lambda m, t: m.var(2),
    lambda m, t: m.unique(2), lambda m, t: m.trace(2), lambda m, t: m.unbind(2), lambda m, t: m.clamp(2, t),
    lambda m, t: m.zero_(2), lambda m, t: m.sin_(2), lambda m, t: m.vdot(2, t), lambda m, t: m.cat(t),
    lambda m, t: m.bucketize(2, t.flatten()).shape,
], ids=["where", "tril", "topk", "var", "unique", "trace", "unbind", "clamp", "zero_", "sin_", "vdot", "cat",
        "bucketize"])
def test_a_number_for_a_tensor_argument_gets_torchs_exception(call):
    """A Python number where the op takes a tensor: the exception type PyTorch raises (or PyTorch's result)."""
    outcome = []
    for m in (torch, ember):
        try:
            outcome.append(repr(call(m, m.ones(2, 2))).replace("torch.", "").replace("ember.", ""))
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            outcome.append(type(e))
    assert outcome[1] == outcome[0]
    if outcome[0] is TypeError:
        refusal = r"\(\): argument '\w+' \(position 1\) must be (Tensor|tuple of Tensors), not (int|Tensor)"
        with pytest.raises(TypeError, match=refusal):
            call(ember, ember.ones(2, 2))


_NOT_TENSORS = {
    "matmul(list)": lambda m: m.matmul([1.0, 2.0], m.ones(2, 2)),
    "sum(list)": lambda m: m.sum([1, 2]),
    "transpose(list)": lambda m: m.transpose([[1]], 0, 1),
    "topk(list)": lambda m: m.topk([1, 2, 3], 2),
    "gather(list)": lambda m: m.gather([[1, 2]], 1, m.tensor([[0]])),
    "bmm(Size)": lambda m: m.bmm(m.Size([1, 2, 2]), m.ones(1, 2, 2)),
    "mm(ndarray)": lambda m: m.mm(np.ones((2, 2), np.float32), m.ones(2, 2)),
    "mm(, ndarray)": lambda m: m.mm(m.ones(2, 2), np.ones((2, 2), np.float32)),
    "max_pool2d(ndarray)": lambda m: m.max_pool2d(np.zeros((1, 1, 4, 4), np.float32), 2),
    "stack(ndarrays)": lambda m: m.stack([m.ones(2), np.ones(2)]),
    "cat(ndarrays)": lambda m: m.cat([np.ones(2), np.ones(2)]),
    "atleast_1d(list)": lambda m: m.atleast_1d([m.ones(2), m.ones(())])[1].shape,
}


@pytest.mark.parametrize("name", _NOT_TENSORS)
def test_a_sequence_or_array_for_a_tensor_gets_torchs_typeerror(name):
    """A list, a Size or a NumPy array where the op takes a tensor: PyTorch's TypeError and its message (NumPy arrays
    would pass for a tensor's array); sequences where the op takes a sequence of tensors still work."""
    outcome = []
    for m in (torch, ember):
        try:
            outcome.append(repr(_NOT_TENSORS[name](m)).replace("torch.", "").replace("ember.", ""))
        except Exception as e:  # noqa: BLE001 - the type and message are what is compared
            outcome.append((type(e), str(e).replace("torch.", "ember.")))
    if "received an invalid combination" not in str(outcome[0]):  # (torch's overload listing: its type only)
        assert outcome[1] == outcome[0]
    assert type(outcome[1]) is type(outcome[0]) and (isinstance(outcome[0], str) or outcome[1][0] is outcome[0][0])


def test_exports_are_generated_from_the_registry():
    for name, op in REGISTRY.items():
        if op.function:
            assert getattr(ember, name) is op.fn, name
        if op.method:
            method = name if op.method is True else op.method
            assert getattr(ember.Tensor, method) is op.fn, name
        if op.inplace and op.method:
            assert callable(getattr(ember.Tensor, (name if op.method is True else op.method) + "_")), name


def test_every_differentiable_op_declares_a_vjp_or_a_mark():
    undeclared = [n for n, o in REGISTRY.items()
                  if o.kind != "factory" and o.differentiable and o.vjp_fn is None]
    assert not undeclared, f"ops with neither a VJP nor differentiable=False: {undeclared}"


class RecordingLayer:
    def __init__(self, log, tag):
        self.log, self.tag = log, tag

    def __call__(self, call, call_next):
        self.log.append((self.tag, call.op.name, call.mode))
        return call_next(call)


def test_layers_run_in_order_only_when_the_slow_path_is_forced():
    log = []
    _dispatch.register_layer("test-late", 300, RecordingLayer(log, "late"))
    _dispatch.register_layer("test-early", 50, RecordingLayer(log, "early"))
    try:
        a = ember.ones(3)
        a + a  # fast path: no layer runs
        assert log == []
        _dispatch.force_slow(True)
        try:
            r = a + a
            a.mul_(2)
            a.sum()
        finally:
            _dispatch.force_slow(False)
        assert r.tolist() == [2.0, 2.0, 2.0]
        assert log == [("early", "add", None), ("late", "add", None), ("early", "mul", "inplace"),
                       ("late", "mul", "inplace"), ("early", "sum", None), ("late", "sum", None)]
        with pytest.raises(RuntimeError, match="already registered"):
            _dispatch.register_layer("test-late", 1, RecordingLayer(log, "x"))
    finally:
        _dispatch.unregister_layer("test-late")
        _dispatch.unregister_layer("test-early")
    assert "test-late" not in _dispatch.layers()


def test_a_layer_can_change_the_call():
    def double_inputs(call, call_next):
        if call.op.name == "add":
            call.args = tuple(x * 2 if isinstance(x, ember.Tensor) else x for x in call.args)
        return call_next(call)

    _dispatch.register_layer("test-double", 100, double_inputs)
    _dispatch.force_slow(True)
    try:
        assert (ember.ones(2) + ember.ones(2)).tolist() == [4.0, 4.0]
    finally:
        _dispatch.force_slow(False)
        _dispatch.unregister_layer("test-double")


def test_fast_path_and_slow_path_agree_on_dtypes():
    for dtype in (ember.float32, ember.float64, ember.int64, ember.int8, ember.bool):
        a = ember.ones(4, dtype=dtype)
        fast = a == a
        _dispatch.force_slow(True)
        try:
            slow = a == a
        finally:
            _dispatch.force_slow(False)
        assert fast.dtype is slow.dtype is ember.bool
        if dtype is not ember.bool:
            assert (a + a).dtype is dtype and (a * 2.5).dtype is ember.promote_types(dtype, ember.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_inplace_ufunc_writes_into_the_target(dtype):
    """In-place ops write their result into the target's memory (a view of it sees the result, the array stays
    the same), an operand aliasing the target and add/sub's alpha included, with torch's values and errors."""
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 4, (6, 5)) if dtype != "int64" else rng.integers(1, 9, (6, 5))
    e, t = ember.tensor(x).to(getattr(ember, dtype)), torch.tensor(x).to(getattr(torch, dtype))
    eb, tb = ember.tensor(x[::-1].copy()).to(e.dtype), torch.tensor(x[::-1].copy()).to(t.dtype)
    array, view, version = e._data, e[2:], e._version
    for f in (lambda a, b: a.mul_(a), lambda a, b: a.add_(b[0]), lambda a, b: a.t().sub_(b.t()),
              lambda a, b: a[:, ::2].mul_(3), lambda a, b: a.mul_(b[1, 1]), lambda a, b: a.__iadd__(2),
              lambda a, b: a.neg_()):
        f(e, eb), f(t, tb)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(view.numpy(), t[2:].numpy())
    for f in (lambda a, b: a.add_(b, alpha=2), lambda a, b: a.sub_(b[0], alpha=3)):  # (torch fuses alpha: an ulp)
        f(e, eb), f(t, tb)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=0.125 if dtype == "float16" else 1e-4)
    assert e._data is array and e._version == version + 9
    with pytest.raises(RuntimeError, match="more than one element"):
        e[:1].expand(4, 5).add_(1)
    if dtype == "int64":
        with pytest.raises(RuntimeError, match="can't be cast"):
            e.mul_(1.5)


@pytest.mark.parametrize("call", [
    lambda m, a, b: a.add_(-2, b), lambda m, a, b: a.sub_(0.5, b), lambda m, a, b: a.addcmul_(2, b, b),
    lambda m, a, b: a.addcdiv_(3, b, b + 1), lambda m, a, b: m.addcmul(a, 0.5, b, b),
    lambda m, a, b: m.addcdiv(a, -1, b, b + 2)])
def test_deprecated_scalar_first_overloads_as_torch(call):
    # older programs (word_language_model's SGD by hand, optimisers written before 1.5) still call these
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch warns once per process)
        expected = call(torch, torch.ones(3), torch.arange(3.0)).tolist()
    with pytest.warns(UserWarning, match="This overload of .* is deprecated"):
        assert call(ember, ember.ones(3), ember.arange(3.0)).tolist() == expected


def test_scalar_first_refused_where_torch_has_no_such_overload():
    for m in (torch, ember):
        with pytest.raises(TypeError):
            m.ones(3).mul_(2, m.ones(3))
        with pytest.raises(TypeError):
            m.ones(3).add_(m.ones(3), m.ones(3))
