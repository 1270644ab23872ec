"""The PyTorch APIs real programs touch besides ops: ember.accelerator, ember.onnx, the legacy typed constructors
and type strings, Tensor's device flags, the math constants, ember.compile / ember.compiler / ember.jit /
ember._dynamo, compared with torch where torch answers on this machine."""
import importlib
import pathlib
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import ember

API = pathlib.Path(__file__).resolve().parents[4] / "shared" / "api"
LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
          "CharTensor", "ByteTensor", "BoolTensor"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "complex128"]
no_gpu = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the behaviour without a GPU")


def outcome(fn):
    """(exception type name, None) or (None, value) of calling fn."""
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e).__name__, None


def api_names(stem):
    path = API / f"{stem}.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    return [n.strip() for n in path.read_text().splitlines() if n.strip() and not n.startswith("#")]


# ---- submodules -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["accelerator", "onnx", "jit", "testing", "multiprocessing", "compiler"])
def test_submodules_import_both_ways(name):
    module = importlib.import_module(f"ember.{name}")
    assert getattr(ember, name) is module


def test_import_ember_loads_none_of_them():
    code = ("import sys, ember; print(sorted(m for m in sys.modules if m == 'multiprocessing' or m in "
            "('ember.accelerator', 'ember.onnx', 'ember.jit', 'ember.testing', 'ember.multiprocessing', "
            "'ember.compiler', 'ember._dynamo')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- ember.accelerator ------------------------------------------------------------------------------------
def test_accelerator_names():
    missing = [n for n in api_names("accelerator") if not hasattr(ember.accelerator, n)]
    assert missing == ["Graph"]  # ember records no CUDA graphs


@no_gpu
@pytest.mark.parametrize("call", ["is_available()", "current_accelerator()", "current_accelerator(True)",
                                  "device_count()", "current_device_index()", "set_device_index(0)",
                                  "synchronize()", "synchronize(0)", "current_stream()", "empty_cache()",
                                  "empty_host_cache()", "memory_stats()", "memory_allocated()",
                                  "max_memory_allocated()", "memory_reserved()", "max_memory_reserved()",
                                  "reset_peak_memory_stats()", "reset_accumulated_memory_stats()",
                                  "get_memory_info()", "get_device_capability()"])
def test_accelerator_without_one_matches_torch(call):
    want = outcome(lambda: eval(f"torch.accelerator.{call}"))
    got = outcome(lambda: eval(f"ember.accelerator.{call}"))
    assert got == want


@no_gpu
def test_accelerator_device_index_and_deprecated_names_without_one():
    with ember.accelerator.device_index(None):
        pass
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        with ember.accelerator.device_index(0):
            pass
    for name, args in (("current_device_idx", ()), ("set_device_idx", (0,))):
        with pytest.warns(FutureWarning, match="instead"), pytest.raises(RuntimeError):
            getattr(ember.accelerator, name)(*args)


@pytest.fixture
def fake_gpu(monkeypatch):
    """ember.cuda as if one GPU were present (only what ember.accelerator asks of it)."""
    calls = []
    monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ember.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(ember.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(ember.cuda, "set_device", lambda i: calls.append(("set_device", i)))
    monkeypatch.setattr(ember.cuda, "synchronize", lambda i=None: calls.append(("synchronize", i)))
    return calls


def test_accelerator_is_cuda_when_ember_cuda_is_available(fake_gpu):
    acc = ember.accelerator
    assert acc.current_accelerator() == ember.device("cuda") and acc.current_accelerator().index is None
    assert acc.is_available() and acc.device_count() == 1 and acc.current_device_index() == 0
    acc.set_device_index("cuda:0")
    acc.synchronize()
    acc.synchronize(ember.device("cuda", 0))
    assert fake_gpu == [("set_device", 0), ("synchronize", 0), ("synchronize", 0)]
    with pytest.raises(ValueError, match="cpu doesn't match the current accelerator cuda"):
        acc.synchronize("cpu")
    with pytest.raises(ValueError, match="Expected a torch.device with a specified index or an integer"):
        acc.set_device_index("cuda")
    with pytest.warns(FutureWarning, match="Use `current_device_index` instead"):
        assert acc.current_device_idx() == 0


@pytest.mark.gpu
def test_accelerator_on_a_gpu():
    acc = ember.accelerator
    assert acc.current_accelerator() == ember.device("cuda") and acc.device_count() == ember.cuda.device_count()
    with acc.device_index(0):
        assert acc.current_device_index() == 0
    x = ember.ones(1024, device="cuda")
    acc.synchronize()
    assert acc.memory_allocated() >= x.nbytes and acc.max_memory_allocated() >= acc.memory_allocated()
    free, total = acc.get_memory_info()
    assert 0 < free <= total and ember.float32 in acc.get_device_capability()["supported_dtypes"]


# ---- ember.onnx -------------------------------------------------------------------------------------------
def test_onnx():
    import ember.onnx
    assert ember.onnx.is_in_onnx_export() is False and torch.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="ONNX export is not supported by ember"):
        ember.onnx.export(lambda x: x, (ember.ones(1),), "model.onnx")


# ---- legacy typed constructors and type strings -------------------------------------------------------------
def e_dtype(name):
    return getattr(ember, name)


def t_dtype(name):
    return getattr(torch, name)


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_constructors_match_torch(name):
    E, T = getattr(ember, name), getattr(torch, name)
    assert E.dtype == e_dtype(str(T.dtype).split(".")[1]) and E.is_cuda is False and E.is_sparse is False
    assert repr(E) == f"<class 'ember.{name}'>" and pickle.loads(pickle.dumps(E)) is E
    assert issubclass(E, ember.Tensor) is issubclass(T, torch.Tensor)
    e, t = E(2, 3), T(2, 3)
    assert type(e) is ember.Tensor and tuple(e.shape) == tuple(t.shape) and e.dtype is E.dtype
    assert tuple(E(ember.Size([4])).shape) == tuple(T(torch.Size([4])).shape) == (4,)
    assert tuple(E().shape) == tuple(T().shape) == (0,) and tuple(E(3, 0).shape) == (3, 0)
    data = [[1.75, 0.0], [-2.0, 3.0]] if name != "ByteTensor" else [[1.75, 0.0], [2.0, 3.0]]
    assert E(data).tolist() == T(data).tolist() and E((1, 0)).tolist() == T((1, 0)).tolist()
    assert E(np.array([1, 0, 1])).tolist() == T(np.array([1, 0, 1])).tolist()


@pytest.mark.parametrize("make", ["2.5", "'a'", "-1", "2, 3.0", "[1], [2]", "2, device='meta'"])
def test_legacy_constructor_errors_match_torch(make):
    want = outcome(lambda: eval(f"torch.FloatTensor({make})"))[0]
    got = outcome(lambda: eval(f"ember.FloatTensor({make})"))[0]
    assert want is not None and got == want


def test_legacy_constructor_of_a_tensor():
    x = ember.tensor([1.0, 2.0])
    y = ember.FloatTensor(x)
    y[0] = 5.0
    assert x.tolist() == [5.0, 2.0]  # an alias, as torch.FloatTensor(t) is
    assert outcome(lambda: ember.FloatTensor(ember.tensor([1, 2])))[0] == \
        outcome(lambda: torch.FloatTensor(torch.tensor([1, 2])))[0] == "TypeError"


@pytest.mark.parametrize("dtype", DTYPES)
def test_type_strings_and_isinstance_match_torch(dtype):
    e, t = ember.zeros(2, dtype=e_dtype(dtype)), torch.zeros(2, dtype=t_dtype(dtype))
    assert e.type() == t.type()
    for name in LEGACY:
        assert isinstance(e, getattr(ember, name)) is isinstance(t, getattr(torch, name))
        assert not isinstance(e, getattr(ember.cuda, name))
    assert not isinstance(np.zeros(2), ember.FloatTensor) and not isinstance(3.0, ember.FloatTensor)


@pytest.mark.parametrize("target", ["'torch.LongTensor'", "'torch.FloatTensor'", "'torch.BFloat16Tensor'",
                                    "{lib}.DoubleTensor", "{lib}.BoolTensor", "{lib}.int32", "{lib}.Tensor",
                                    "'LongTensor'", "'torch.Foo'", "'torch.ComplexFloatTensor'", "5", "dtype=None"])
def test_type_conversions_match_torch(target):
    e_kind, e = outcome(lambda: eval(f"ember.tensor([1.5, -2.0, 0.0]).type({target.format(lib='ember')})"))
    t_kind, t = outcome(lambda: eval(f"torch.tensor([1.5, -2.0, 0.0]).type({target.format(lib='torch')})"))
    assert e_kind == t_kind
    if t is not None:
        assert (e.type() if hasattr(e, "type") else e) == (t.type() if hasattr(t, "type") else t)
        if hasattr(t, "tolist"):
            assert e.tolist() == t.tolist()


def test_type_returns_self_when_unchanged_and_accepts_ember_names():
    x = ember.ones(2)
    assert x.type("torch.FloatTensor") is x and x.type(ember.FloatTensor) is x and x.type(ember.float32) is x
    assert x.type("ember.LongTensor").dtype is ember.int64


@no_gpu
@pytest.mark.parametrize("name", LEGACY)
def test_cuda_legacy_types_need_a_gpu(name):
    E = getattr(ember.cuda, name)
    assert E.is_cuda is True and E.dtype is getattr(ember, name).dtype and repr(E) == f"<class 'ember.cuda.{name}'>"
    with pytest.raises(TypeError, match=f"ember.cuda.{name} not available: CUDA is not available"):
        E(2)
    with pytest.raises(TypeError):
        torch.cuda.FloatTensor(2)  # torch, built without CUDA, refuses with the same type


@pytest.mark.gpu
def test_cuda_legacy_types_on_a_gpu():
    x = ember.cuda.FloatTensor([1, 2])
    assert x.is_cuda and x.dtype is ember.float32 and isinstance(x, ember.cuda.FloatTensor)
    assert not isinstance(x, ember.FloatTensor) and x.type() == "torch.cuda.FloatTensor"
    assert ember.ones(2).type("torch.cuda.LongTensor").type() == "torch.cuda.LongTensor"


@pytest.fixture
def default_dtype():
    yield
    ember.set_default_dtype(ember.float32)
    ember.set_default_device(None)
    torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("arg", ["{lib}.DoubleTensor", "{lib}.HalfTensor", "{lib}.LongTensor", "'torch.FloatTensor'",
                                 "'torch.BoolTensor'", "{lib}.float64", "5"])
def test_set_default_tensor_type_takes_classes_as_torch(arg, default_dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        e_kind, _ = outcome(lambda: ember.set_default_tensor_type(eval(arg.format(lib="ember"))))
        t_kind, _ = outcome(lambda: torch.set_default_tensor_type(eval(arg.format(lib="torch"))))
    assert e_kind == t_kind
    assert str(ember.get_default_dtype()).split(".")[1] == str(torch.get_default_dtype()).split(".")[1]


# ---- Tensor flags and constants ---------------------------------------------------------------------------
FLAGS = ["is_xpu", "is_mps", "is_meta", "is_cuda", "is_cpu", "is_quantized", "is_mkldnn", "is_vulkan", "is_ipu",
         "is_maia", "is_mtia", "is_xla", "is_nested", "is_sparse", "is_sparse_csr"]


@pytest.mark.parametrize("flag", FLAGS)
def test_tensor_flags_match_torch(flag):
    assert getattr(ember.ones(2), flag) is getattr(torch.ones(2), flag)


def test_flags_are_overridable_class_attributes_and_layout():
    class Sub(ember.Tensor):
        is_mps = True

    assert Sub(2).is_mps is True and ember.ones(1).is_mps is False
    assert ember.ones(1).layout is ember.strided and repr(ember.strided) == "ember.strided"


def test_constants_match_torch():
    for name in ("pi", "e", "inf", "nan"):
        e, t = getattr(ember, name), getattr(torch, name)
        assert type(e) is type(t) is float and (e == t or (np.isnan(e) and np.isnan(t)))
    assert ember.newaxis is torch.newaxis is None
    assert tuple(ember.ones(3)[:, ember.newaxis].shape) == (3, 1)


# ---- ember.compile, ember.compiler, ember.jit, ember._dynamo ------------------------------------------------
def add_one(x):
    return x + 1


@pytest.mark.parametrize("kwargs", ["", "mode='max-autotune'", "backend='eager'", "backend=lambda gm, ex: gm",
                                    "dynamic=True, fullgraph=True", "disable=True", "mode='foo'",
                                    "mode='default', options={'a': 1}", "backend='foo'", "dynamic='x'"])
def test_compile_checks_arguments_as_torch(kwargs):
    e_kind, e = outcome(lambda: eval(f"ember.compile(add_one, {kwargs})"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own deprecation warnings from inside compile
        t_kind, _ = outcome(lambda: eval(f"torch.compile(add_one, {kwargs})"))
    assert e_kind == t_kind
    if e is not None:
        assert e is add_one


def test_compile_forms():
    assert outcome(lambda: ember.compile(5))[0] == outcome(lambda: torch.compile(5))[0] == "AssertionError"

    @ember.compile
    def f(x):
        return x * 2

    @ember.compile(mode="reduce-overhead", fullgraph=True)
    def g(x):
        return x * 3

    assert f(ember.ones(1)).tolist() == [2.0] and g(ember.ones(1)).tolist() == [3.0]
    assert ember.compiler.is_compiling() is False and ember.compiler.disable(f) is f
    assert ember.compiler.list_backends() == torch.compiler.list_backends()


def test_compile_keeps_a_module_a_module():
    nn = pytest.importorskip("ember.nn")
    m = nn.Linear(2, 2)
    c = ember.compile(m)
    assert c is m and list(c.state_dict()) == ["weight", "bias"]


def test_dynamo_config_takes_settings():
    import ember._dynamo
    ember._dynamo.config.suppress_errors = True
    assert ember._dynamo.config.suppress_errors is True
    ember._dynamo.reset()


def test_jit_script_and_decorators_return_their_argument():
    jit = ember.jit
    assert jit.script(add_one) is add_one and jit.is_scripting() is False and jit.is_tracing() is False
    for deco in (jit.unused, jit.export, jit.ignore, jit.ignore(drop=True), jit.interface, jit.script_if_tracing):
        assert deco(add_one) is add_one
    assert jit.annotate(list, [1]) == [1] and jit.Attribute(3, int) == 3
    assert jit.wait(jit.fork(add_one, ember.ones(1))).tolist() == [2.0]
    assert ember.wait(ember.fork(add_one, ember.ones(1))).tolist() == [2.0] and ember.fork is jit.fork
    assert not isinstance(add_one, jit.ScriptFunction)


def test_jit_trace_runs_the_example_once():
    seen = []

    def f(x, y):
        seen.append(ember.jit.is_tracing())
        return x * y, {"s": x + y}

    traced = ember.jit.trace(f, (ember.ones(2), ember.full((2,), 3.0)))
    assert traced is f and seen == [True] and ember.jit.is_tracing() is False
    assert traced(ember.ones(1), ember.ones(1))[0].tolist() == [1.0]
    assert ember.jit.trace(add_one, ember.ones(1)) is add_one
    assert ember.jit.trace(lambda x: x, example_kwarg_inputs={"x": ember.ones(1)}) is not None


@pytest.mark.parametrize("fn, inputs", [("lambda x: x.item()", "ones(1)"), ("lambda x: [x, 1]", "ones(1)"),
                                        ("5", "ones(1)"), ("lambda x: x", "None")])
def test_jit_trace_errors_match_torch(fn, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_kind = outcome(lambda: torch.jit.trace(eval(fn), eval(f"torch.{inputs}") if inputs != "None" else None))[0]
    e_kind = outcome(lambda: ember.jit.trace(eval(fn), eval(f"ember.{inputs}") if inputs != "None" else None))[0]
    assert t_kind is not None and e_kind == t_kind


def test_jit_modules_and_archives():
    nn = pytest.importorskip("ember.nn")
    m = nn.Linear(2, 1)
    assert ember.jit.script(m) is m and ember.jit.trace(m, ember.ones(3, 2)) is m
    assert ember.jit.trace_module(m, {"forward": ember.ones(1, 2)}) is m
    assert not isinstance(m, ember.jit.ScriptModule) and issubclass(ember.jit.ScriptModule, nn.Module)

    class Old(ember.jit.ScriptModule):
        @ember.jit.script_method
        def forward(self, x):
            return x + 1

    assert Old()(ember.ones(1)).tolist() == [2.0]
    with pytest.raises(NotImplementedError, match="ember.save"):
        ember.jit.save(m, "m.pt")
    with pytest.raises(NotImplementedError, match="ember.load"):
        ember.jit.load("m.pt")


def test_assert_function():
    ember._assert(True, "unused")
    ember._assert(ember.tensor(True), "unused")
    with pytest.raises(AssertionError, match="expected a 4-d input"):
        ember._assert(ember.ones(2).dim() == 4, "expected a 4-d input")
