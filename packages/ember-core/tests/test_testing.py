"""ember.testing against torch.testing: assert_close's verdicts, exception types and message texts on a table of
inputs (tensors of every kind of dtype, numbers, NumPy values, nested containers, meta data mismatches), and
make_tensor's shapes, ranges, layouts and errors."""
import math
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.testing

nan, inf = math.nan, math.inf

# input pairs, written once for both libraries: `lib` is torch or ember, `T` its tensor(), `ac` its assert_close
CASES = {
    "float": "ac(T([1.,2.,3.]), T([1.,2.,4.]))",
    "float2": "ac(T([[1.,2.],[3.,5.]]), T([[1.,2.5],[3.,4.]]))",
    "int": "ac(T([1,2,3]), T([1,2,5]))",
    "bool": "ac(T([True,False]), T([True,True]))",
    "uint8": "ac(T([1,2],dtype=lib.uint8), T([3,2],dtype=lib.uint8))",
    "nan": "ac(T([nan]), T([nan]))",
    "nan_eq": "ac(T([nan]), T([nan]), equal_nan=True)",
    "inf": "ac(T([inf]), T([inf]))",
    "inf2": "ac(T([inf]), T([-inf]))",
    "inf3": "ac(T([1.]), T([inf]))",
    "shape": "ac(T([1.,2.]), T([1.,2.,3.]))",
    "dtype": "ac(T([1.,2.]), T([1.,2.],dtype=lib.float64))",
    "dtype_off": "ac(T([1.,2.]), T([1.,2.],dtype=lib.float64), check_dtype=False)",
    "scalar": "ac(1.0, 2.0)",
    "scalar_int": "ac(1, 2)",
    "scalar_int_float": "ac(1, 1.0)",
    "scalar_bool": "ac(True, False)",
    "scalar_cplx": "ac(1+1j, 1+2j)",
    "tensor_scalar": "ac(T(1.), 1.0)",
    "tensor_np": "ac(T([1.,2.]), np.array([1.,2.], dtype=np.float32))",
    "np_np": "ac(np.array([1.,2.]), np.array([1.,3.]))",
    "list": "ac([T(1.), T(2.)], [T(1.), T(3.)])",
    "list_len": "ac([T(1.), T(2.)], [T(1.)])",
    "dict": "ac({'a': T(1.), 'b': [T(2.)]}, {'a': T(1.), 'b': [T(3.)]})",
    "dict_keys": "ac({'a': T(1.)}, {'b': T(1.)})",
    "list_tensor": "ac([1.,2.], T([1.,2.]))",
    "str": "ac('a', 'a')",
    "none": "ac(None, None)",
    "none2": "ac(None, 1)",
    "rtol_only": "ac(T(1.), T(1.), rtol=1e-3)",
    "atol_only": "ac(T(1.), T(1.), atol=1e-3)",
    "msg": "ac(T(1.), T(2.), msg='custom')",
    "msg_callable": "ac([T(1.)], [T(2.)], msg=lambda m: 'X<' + m + '>')",
    "0d": "ac(T(1.), T(2.))",
    "empty": "ac(T([]), T([]))",
    "half": "ac(T([1.],dtype=lib.float16), T([1.001],dtype=lib.float16))",
    "half2": "ac(T([1., 3.],dtype=lib.float16), T([1.01, 3.],dtype=lib.float16))",
    "complex": "ac(T([1+1j]), T([1+2j]))",
    "stride": "ac(T([[1.,2.],[3.,4.]]).t(), T([[1.,3.],[2.,4.]]), check_stride=True)",
    "many": "ac(lib.arange(10.), lib.arange(10.)+T([0,0,0,1e-3,0,0,0,0,0,2.]))",
    "tuple_list": "ac((T(1.),), [T(1.)])",
    "int_float_tensor": "ac(T([1]), T([1.]))",
    "rel_inf": "ac(T([0.]), T([0.1]))",
    "int64_big": "ac(T([2**40]), T([2**40+1]))",
    "nested_idx": "ac({'a': [T(1.), {'b': T(2.)}]}, {'a': [T(1.), {'b': T(3.)}]})",
    "mixed_nested_num": "ac([1, 2.0], [1, 2.5])",
    "scalar_nan": "ac(nan, nan)",
    "bool_int": "ac(T([True]), T([1]))",
    "1elem": "ac(T([1.]), T([2.]))",
    "1elem_2d": "ac(T([[1]]), T([[2]]))",
    "nanmix": "ac(T([nan, 5.]), T([nan, 1.]))",
    "nanmix_eq": "ac(T([nan, 5.]), T([nan, 1.]), equal_nan=True)",
    "nan_one_side": "ac(T([1., 5.]), T([nan, 1.]))",
    "rel_inf2": "ac(T([0.1, 0.]), T([0., 0.]))",
    "atol0": "ac(T([1.]), T([2.]), atol=0, rtol=0)",
    "int_tol": "ac(T([1, 2]), T([1, 5]), atol=1, rtol=0)",
    "int_tol_ok": "ac(T([1, 2]), T([1, 3]), atol=1, rtol=0)",
    "dtypeoff": "ac(T([1., 2.]), T([1., 2.1], dtype=lib.float64), check_dtype=False)",
    "dtypeoff_int": "ac(T([1, 2]), T([1., 2.1]), check_dtype=False)",
    "dtypeoff_half": "ac(T([1., 2.], dtype=lib.float16), T([1., 2.001], dtype=lib.float32), check_dtype=False)",
    "shape0": "ac(T([]), T([1.]))",
    "big": "ac(lib.zeros(2,3,4), lib.zeros(2,3,4).index_put_((T([1]),T([2]),T([3])), T(1.)))",
    "neg_zero": "ac(T([-0.]), T([0.]))",
    "scalar_tol": "ac(1.0, 1.0 + 1e-8)",
    "scalar_tol2": "ac(1.0, 1.0 + 1e-6)",
    "scalar_kw": "ac(1.0, 1.1, rtol=0, atol=0.2)",
    "scalar_nan_eq": "ac(nan, nan, equal_nan=True)",
    "np_scalar": "ac(np.float32(1.0), np.float32(1.1))",
    "np_scalar_i": "ac(np.int32(1), np.int64(1))",
    "np_scalar_bool": "ac(np.bool_(True), np.bool_(False))",
    "np_vs_py": "ac(np.float32(1.0), 1.0)",
    "np0d": "ac(np.array(1.0), np.array(2.0))",
    "np_int_np_float": "ac(np.array([1]), np.array([1.]))",
    "seq_tensor": "ac([T([1.,2.])], [T([1.,3.])])",
    "dict_list": "ac({'a':1}, [1])",
    "set": "ac({1}, {1})",
    "bf16": "ac(T([1.], dtype=lib.bfloat16), T([1.01], dtype=lib.bfloat16))",
    "bf16b": "ac(T([1.], dtype=lib.bfloat16), T([1.03], dtype=lib.bfloat16))",
    "msg_nested": "ac([T(1.)], [T(2.)], msg='custom')",
    "large_pct": "ac(lib.zeros(3), lib.ones(3))",
    "tiny_pct": "ac(lib.zeros(3000), lib.cat([lib.ones(1), lib.zeros(2999)]))",
    "s10": "ac(1.0, 0.0)",
    "s01": "ac(0, 1)",
    "s10i": "ac(1, 0)",
    "sinf": "ac(inf, 1.0)",
    "sinf2": "ac(1.0, inf)",
    "order_shape_dtype": "ac(T([1.]), T([1,2]))",
    "order_dtype_stride": "ac(T([[1.,2.],[3.,4.]]).t(), T([[1.,3.],[2.,4.]], dtype=lib.float64), check_stride=True)",
    "0d_int": "ac(T(1), T(3))",
    "0d_bool": "ac(T(True), T(False))",
    "0d_half": "ac(T(1., dtype=lib.float16), T(1.01, dtype=lib.float16))",
    "cplx_scalar_int": "ac(1+0j, 1)",
    "int_float_nodtype_0d": "ac(T(1), T(1.5), check_dtype=False)",
    "tuple_idx": "ac((T(1.), (T(2.),)), (T(1.), (T(3.),)))",
    "dict_int_keys": "ac({1: T(1.)}, {1: T(2.)})",
    "dict_keys_many": "ac({'a':1,'b':2,'c':3}, {'a':1,'d':2,'e':3})",
    "dict_sub": "ac({'a':1}, {'a':1,'b':2})",
    "len_nested": "ac([T(1.), [1, 2]], [T(1.), [1]])",
    "type_nested": "ac([T(1.), 'a'], [T(2.), 'a'])",
    "list_int": "ac([1], 1)",
    "list_list_int": "ac([[1]], [1])",
    "cplx64": "ac(T([1+1j, 2+2j], dtype=lib.complex64), T([1+1j, 2+2.5j], dtype=lib.complex64))",
    "f64": "ac(T([1., 2.], dtype=lib.float64), T([1., 2.000001], dtype=lib.float64))",
    "int8": "ac(T([-100, 100], dtype=lib.int8), T([100, -100], dtype=lib.int8))",
}


def _run(lib, expr):
    env = {"lib": lib, "T": lib.tensor, "ac": lib.testing.assert_close, "np": np, "nan": nan, "inf": inf}
    try:
        eval(expr, env)
    except Exception as e:  # noqa: BLE001 - type and message are what is compared
        return type(e).__name__, str(e)
    return "passed", ""


def _in_ember_terms(text):
    """torch's message with the names ember prints in its place."""
    return text.replace("torch.nn.parameter.Parameter", "P").replace("torch.Tensor", "ember._tensor.Tensor") \
        .replace("torch.", "ember.")


@pytest.mark.parametrize("name", list(CASES))
def test_assert_close_matches_torch(name):
    want = _run(torch, CASES[name])
    got = _run(ember, CASES[name])
    assert got == (want[0], _in_ember_terms(want[1]))


@pytest.mark.autograd
def test_assert_close_ignores_requires_grad():
    expr = "ac(T([1.], requires_grad=True), T([2.]))"
    want = _run(torch, expr)
    assert want[0] == "AssertionError" and _run(ember, expr) == want
    ember.testing.assert_close(ember.ones(2, requires_grad=True), ember.ones(2))


def test_assert_close_parameter_subclass():
    nn = pytest.importorskip("ember.nn")
    p = nn.Parameter(ember.tensor([1.0]))
    ember.testing.assert_close(p, ember.tensor([1.0]))
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type"):
        ember.testing.assert_close(p, ember.tensor([1.0]), allow_subclasses=False)


def test_assert_close_reports_a_device_mismatch(monkeypatch):
    a, b = ember.ones(2), ember.ones(2)
    gpu, cpu = ember.device("cuda", 0), ember.device("cpu")
    monkeypatch.setattr(ember.Tensor, "device", property(lambda t: gpu if t is b else cpu))
    with pytest.raises(AssertionError, match="The values for attribute 'device' do not match: cpu != cuda:0."):
        ember.testing.assert_close(a, b)


ALLCLOSE = ["T([1.]), T([1.1])", "T([1.]), [1.0]", "T([1.]), 1.0", "T([1., nan]), T([1., nan])",
            "T([1.]), T([1.], dtype=lib.float64)", "T([1.]), T([1.001]), msg='hey'", "T([1.]), T([1.00005])",
            "T([1, 2]), T([1, 3])"]


@pytest.mark.parametrize("args", ALLCLOSE)
def test_assert_allclose_matches_torch(args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        want = _run(torch, f"lib.testing.assert_allclose({args})")
        got = _run(ember, f"lib.testing.assert_allclose({args})")
    assert got == (want[0], _in_ember_terms(want[1]))
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]


# ---- make_tensor --------------------------------------------------------------------------------------------------
MAKE_DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "int64", "int32", "int16", "int8", "uint8",
               "bool"]


@pytest.mark.parametrize("dtype", MAKE_DTYPES)
def test_make_tensor_default_ranges(dtype):
    t = ember.testing.make_tensor(4000, dtype=getattr(ember, dtype), device="cpu")
    assert t.dtype is getattr(ember, dtype) and tuple(t.shape) == (4000,) and t.is_contiguous()
    values = np.asarray(t.to(ember.complex128 if t.dtype.is_complex else ember.float64)).ravel()
    parts = [values.real, values.imag] if t.dtype.is_complex else [values]
    low, high = {"bool": (0, 1), "uint8": (0, 9)}.get(dtype, (-9, 9 if t.dtype.is_floating_point or
                                                                t.dtype.is_complex else 9))
    for p in parts:
        assert p.min() >= low and p.max() <= high
        assert p.min() < low + 1 and p.max() > high - 1  # the whole range is drawn from
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        assert set(values.tolist()) == set(range(low, high + 1))


# the interval [low, high) each bound setting gives (integers: bounds ceiled, clamped to the dtype)
BOUNDS = {"low=2, high=3": {"int": (2, 3), "float": (2, 3)},
          "low=-1000, high=1000": {"int8": (-128, 128), "uint8": (0, 256), "int64": (-1000, 1000),
                                   "float": (-1000, 1000)},
          "low=0.5, high=2.5": {"int": (1, 3), "float": (0.5, 2.5)},
          "low=5": {"int": (5, 10), "float": (5, 9)},
          "high=-20": {}}


@pytest.mark.parametrize("kwargs", list(BOUNDS))
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float16", "float32"])
def test_make_tensor_bounds(dtype, kwargs):
    t_kind, t = _outcome(lambda: eval(f"torch.testing.make_tensor(500, dtype=torch.{dtype}, device='cpu', {kwargs})"))
    e_kind, e = _outcome(lambda: eval(f"ember.testing.make_tensor(500, dtype=ember.{dtype}, device='cpu', {kwargs})"))
    assert e_kind == t_kind
    if t is None:
        return
    kind = "float" if dtype.startswith("float") else "int"
    low, high = BOUNDS[kwargs].get(dtype) or BOUNDS[kwargs][kind]
    for values in (t.double().numpy(), np.asarray(e.to(ember.float64))):
        assert values.min() >= low and (values.max() < high or dtype == "float16" and values.max() <= high)
        if kind == "int" and high - low <= 10:
            assert values.min() == low and values.max() == high - 1


def _outcome(fn):
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e).__name__, None


@pytest.mark.parametrize("call", ["2, 3, dtype={lib}.float32", "(2, 3), dtype={lib}.float32, device='cpu'",
                                  "[2, 3], dtype={lib}.int64, device='cpu'", "dtype={lib}.float32, device='cpu'",
                                  "3, dtype={lib}.float32, device='cpu', low=5, high=3",
                                  "3, dtype={lib}.float32, device='cpu', low=nan",
                                  "3, dtype={lib}.int64, device='cpu', low=2, high=2",
                                  "3, dtype={lib}.int8, device='cpu', low=200, high=300",
                                  "3, dtype={lib}.int64, device='cpu', requires_grad=True",
                                  "3, device='cpu'", "2, 3, dtype={lib}.float32, device='cpu', noncontiguous=True",
                                  "1, dtype={lib}.float32, device='cpu', noncontiguous=True",
                                  "2, 3, dtype={lib}.float32, device='cpu', noncontiguous=True, memory_format=1"])
def test_make_tensor_shapes_layouts_and_errors_match_torch(call):
    t_kind, t = _outcome(lambda: eval(f"torch.testing.make_tensor({call.format(lib='torch')})"))
    e_kind, e = _outcome(lambda: eval(f"ember.testing.make_tensor({call.format(lib='ember')})"))
    assert e_kind == t_kind
    if t is not None:
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
        assert e.is_contiguous() == t.is_contiguous() and str(e.dtype)[6:] == str(t.dtype)[6:]


def test_make_tensor_low_equal_high_and_exclude_zero():
    with pytest.warns(FutureWarning, match="low==high"):
        t = ember.testing.make_tensor(3, dtype=ember.float32, device="cpu", low=2, high=2)
    assert t.tolist() == [2.0, 2.0, 2.0]
    with pytest.warns(FutureWarning):
        t = ember.testing.make_tensor(4, dtype=ember.float32, device="cpu", low=0, high=0, exclude_zero=True)
    assert t.tolist() == [ember.finfo(ember.float32).tiny] * 4
    t = ember.testing.make_tensor(2000, dtype=ember.int8, device="cpu", low=-1, high=2, exclude_zero=True)
    assert set(t.tolist()) == {-1, 1}
    t = ember.testing.make_tensor(2000, dtype=ember.bool, device="cpu", exclude_zero=True)
    assert t.all()


def test_make_tensor_follows_the_seed():
    ember.manual_seed(3)
    a = ember.testing.make_tensor(5, dtype=ember.float32, device="cpu")
    ember.manual_seed(3)
    assert ember.testing.make_tensor(5, dtype=ember.float32, device="cpu").tolist() == a.tolist()


def test_make_tensor_spans_a_whole_float_range():
    t = ember.testing.make_tensor(1000, dtype=ember.float16, device="cpu", low=-math.inf, high=math.inf)
    assert bool(t.isfinite().all()) and float(t.abs().max()) > 1000


@pytest.mark.autograd
def test_make_tensor_requires_grad():
    t = ember.testing.make_tensor(3, dtype=ember.float32, device="cpu", requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_names():
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[4] / "shared" / "api" / "testing.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    names = [n.strip() for n in path.read_text().splitlines() if n.strip() and not n.startswith("#")]
    assert [n for n in names if not hasattr(ember.testing, n)] == ["FileCheck"]  # TorchScript IR only
