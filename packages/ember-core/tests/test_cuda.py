"""ember.cuda and ember.backends: behaviour without a GPU everywhere, the real paths on a GPU (``gpu`` mark)."""
import importlib.util
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
import ember.backends
import ember.cuda as cuda

no_gpu = pytest.mark.skipif(cuda.is_available(), reason="checks the behaviour without a GPU")


def test_import_and_availability_do_not_import_cupy():
    code = ("import sys, ember, ember.backends; assert 'cupy' not in sys.modules; "
            "ember.cuda.is_available(); ember.cuda.device_count(); ember.cuda.memory_allocated(); "
            "ember.backends.cuda.matmul.allow_tf32 = True; print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@no_gpu
def test_is_available_false_without_error_or_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda.is_available() is False
        assert cuda.device_count() == 0
        assert cuda.is_initialized() is False


def _reset_probe(monkeypatch):
    monkeypatch.setattr(cuda, "_probe", None)


def test_probe_names_missing_cupy(monkeypatch):
    _reset_probe(monkeypatch)
    monkeypatch.setattr(cuda.importlib.util, "find_spec", lambda name: None)
    assert cuda.is_available() is False
    assert "CuPy is not installed" in cuda._driver_probe()[1]


def test_probe_names_missing_driver(monkeypatch):
    _reset_probe(monkeypatch)

    def no_lib(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(cuda.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(cuda.ctypes, "CDLL", no_lib)
    assert cuda.device_count() == 0
    assert "no NVIDIA driver" in cuda._driver_probe()[1]


class _FakeDriver:
    def __init__(self, init_result):
        self.init_result = init_result

    def cuInit(self, flags):
        return self.init_result

    def cuDeviceGetCount(self, ref):
        return 0

    def cuGetErrorName(self, err, ref):
        return 0


@pytest.mark.parametrize("err, words", [(100, "no CUDA GPU found"), (35, "failed to initialise")])
def test_probe_names_driver_errors(monkeypatch, err, words):
    _reset_probe(monkeypatch)
    monkeypatch.setattr(cuda.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(cuda.ctypes, "CDLL", lambda name: _FakeDriver(err))
    assert cuda.is_available() is False
    assert words in cuda._driver_probe()[1]


def test_probe_never_raises(monkeypatch):
    _reset_probe(monkeypatch)

    def broken(name):
        raise ValueError("weird driver")

    monkeypatch.setattr(cuda.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(cuda.ctypes, "CDLL", broken)
    assert cuda.is_available() is False
    assert "weird driver" in cuda._driver_probe()[1]


NEEDS_GPU = {
    "init": lambda: cuda.init(),
    "current_device": lambda: cuda.current_device(),
    "set_device": lambda: cuda.set_device(0),
    "set_device_str": lambda: cuda.set_device("cuda:0"),
    "device_enter": lambda: cuda.device(0).__enter__(),
    "synchronize": lambda: cuda.synchronize(),
    "Stream": lambda: cuda.Stream(),
    "Event": lambda: cuda.Event(enable_timing=True),
    "current_stream": lambda: cuda.current_stream(),
    "default_stream": lambda: cuda.default_stream(),
    "get_device_name": lambda: cuda.get_device_name(),
    "get_device_properties": lambda: cuda.get_device_properties(0),
    "get_device_capability": lambda: cuda.get_device_capability(),
    "mem_get_info": lambda: cuda.mem_get_info(),
    "can_device_access_peer": lambda: cuda.can_device_access_peer(0, 1),
    "current_blas_handle": lambda: cuda.current_blas_handle(),
    "set_per_process_memory_fraction": lambda: cuda.set_per_process_memory_fraction(0.5),
    "caching_allocator_alloc": lambda: cuda.caching_allocator_alloc(16),
    "ones_cuda": lambda: ember.ones(2, device="cuda"),
    "tensor_cuda0": lambda: ember.tensor([1.0, 2.0], device="cuda:0"),
    "Tensor.cuda": lambda: ember.ones(2).cuda(),
    "Tensor.to": lambda: ember.ones(2).to("cuda"),
}


@no_gpu
@pytest.mark.parametrize("call", NEEDS_GPU.values(), ids=NEEDS_GPU.keys())
def test_device_calls_raise_naming_the_cause(call):
    with pytest.raises(RuntimeError, match=r"^CUDA is not available: .*(driver|GPU|CuPy)"):
        call()
    assert cuda.is_initialized() is False


@no_gpu
@pytest.mark.filterwarnings("ignore:`torch.cuda:FutureWarning")
def test_calls_that_work_without_a_gpu():
    torch_cuda = pytest.importorskip("torch.cuda")
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                 "memory_cached", "max_memory_cached", "is_bf16_supported", "is_tf32_supported", "is_initialized",
                 "memory_stats", "memory_stats_as_nested_dict", "empty_cache"):
        assert getattr(cuda, name)() == getattr(torch_cuda, name)(), name
    assert cuda.memory_allocated("cuda:3") == 0
    cuda.reset_peak_memory_stats()
    cuda.reset_accumulated_memory_stats()
    assert cuda.is_current_stream_capturing() is False
    with cuda.device(None), cuda.device(-1), cuda.device_of(ember.ones(1)), cuda.stream(None):
        pass
    cuda.set_device(-1)
    cuda.set_stream(None)
    assert "not initialised" in cuda.memory_summary()


@no_gpu
def test_seeding_without_a_gpu_is_silent(monkeypatch):
    for call in (lambda: cuda.manual_seed(1), lambda: cuda.manual_seed_all(2), cuda.seed, cuda.seed_all):
        call()
    assert cuda.default_generators == () and cuda.get_rng_state_all() == []
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        cuda.initial_seed()
    with pytest.raises(RuntimeError, match="manual_seed expected a long"):
        cuda.manual_seed("0")
    # with a GPU present, seeding before initialisation waits for it rather than initialising CUDA
    monkeypatch.setattr(cuda.random, "is_available", lambda: True)
    monkeypatch.setattr(cuda.random, "_queued", [])
    cuda.manual_seed(3)
    assert len(cuda.random._queued) == 1 and not cuda.is_initialized()


def test_device_index_arguments():
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        cuda.device("cpu")
    with pytest.raises(ValueError, match="Expected a cuda device"):
        cuda.device(1.5)
    assert cuda.device("cuda:1").idx == 1 and cuda.device(ember.device("cuda", 2)).idx == 2


def test_pool_block_accounting():
    from ember.cuda import memory

    class Mem:
        def __init__(self, size):
            self.size = size

    s = memory._DeviceStats()
    a = memory._Owner(Mem(512), s.allocation, s.allocated_bytes)
    b = memory._Owner(Mem(1024), s.allocation, s.allocated_bytes)
    assert (s.allocation.current, s.allocated_bytes.current, s.allocated_bytes.peak) == (2, 1536, 1536)
    del a
    assert (s.allocation.current, s.allocated_bytes.current, s.allocated_bytes.peak) == (1, 1024, 1536)
    assert (s.allocated_bytes.allocated, s.allocated_bytes.freed) == (1536, 512)
    del b
    assert s.allocated_bytes.current == 0 and s.allocation.freed == 2


def test_out_of_memory_error_is_a_runtime_error():
    assert issubclass(cuda.OutOfMemoryError, RuntimeError)


# ---- ember.backends --------------------------------------------------------------------------------
@pytest.fixture
def backend_flags():
    bc = ember.backends.cuda
    saved = dict(bc._state)
    yield bc
    bc._state.update(saved)


def test_backend_flag_defaults_match_pytorch():
    torch = pytest.importorskip("torch")
    m, tm = ember.backends.cuda.matmul, torch.backends.cuda.matmul
    for flag in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        assert getattr(m, flag) is getattr(tm, flag), flag
    assert ember.backends.cuda.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(ember.backends.cudnn, flag) is getattr(torch.backends.cudnn, flag), flag


def test_mps_is_never_there_and_version_describes_the_build():
    # device selection in PyTorch programs: `torch.backends.mps.is_available()`, `torch.version.cuda`
    assert ember.backends.mps.is_available() is False and ember.backends.mps.is_built() is False
    version = ember.version  # a lazily imported submodule
    assert version.__version__ == ember.__version__ and version.hip is None
    cuda_version = version.cuda
    if importlib.util.find_spec("cupy") is None:
        assert cuda_version is None  # as a CPU-only PyTorch build says
    else:
        assert cuda_version is None or re.fullmatch(r"\d+\.\d", cuda_version), cuda_version
    with pytest.raises(AttributeError, match="no attribute 'git'"):
        _ = version.git


def test_allow_tf32_and_float32_matmul_precision_round_trip(backend_flags):
    bc = backend_flags
    bc.matmul.allow_tf32 = True
    assert bc.matmul.allow_tf32 is True and bc.get_float32_matmul_precision() == "high"
    assert bc._math_mode("float32") == bc.CUBLAS_TF32_TENSOR_OP_MATH
    bc.set_float32_matmul_precision("highest")
    assert bc.matmul.allow_tf32 is False and bc._math_mode("float32") == bc.CUBLAS_DEFAULT_MATH
    bc.set_float32_matmul_precision("medium")
    assert bc.matmul.allow_tf32 is True
    with pytest.warns(UserWarning, match="has no effect"):
        bc.set_float32_matmul_precision("fastest")
    assert bc.get_float32_matmul_precision() == "medium"


def test_reduced_precision_flags_map_to_cublas_math_mode(backend_flags):
    bc = backend_flags
    disallow = bc.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
    assert bc._math_mode("float16") == bc._math_mode("bfloat16") == bc.CUBLAS_DEFAULT_MATH
    bc.matmul.allow_fp16_reduced_precision_reduction = False
    assert bc.matmul.allow_fp16_reduced_precision_reduction is False
    assert bc._math_mode("float16") == disallow and bc._math_mode("bfloat16") == bc.CUBLAS_DEFAULT_MATH
    bc.matmul.allow_bf16_reduced_precision_reduction = False
    assert bc._math_mode("bfloat16") == disallow and bc._math_mode("float32") == bc.CUBLAS_DEFAULT_MATH


def test_unknown_matmul_flag_is_an_error():
    with pytest.raises(AttributeError, match="Unknown attribute allow_fp8"):
        ember.backends.cuda.matmul.allow_fp8 = True
    with pytest.raises(AttributeError, match="Unknown attribute allow_fp8"):
        _ = ember.backends.cuda.matmul.allow_fp8


def test_cudnn_flags_are_settable():
    cudnn = ember.backends.cudnn
    saved = cudnn.deterministic
    cudnn.deterministic = True
    assert ember.backends.cudnn.deterministic is True
    cudnn.deterministic = saved
    assert cudnn.is_available() is False


def test_device_fixture_places_tensors(device):
    t = ember.ones(3, device=device)
    assert t.device.type == device and t.sum().item() == 3


# ---- on a GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_tensor_round_trip():
    x = ember.arange(6.0).reshape(2, 3)
    y = x.cuda()
    assert y.is_cuda and y.device == ember.device("cuda", 0) and cuda.is_initialized()
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    with cuda.device_of(y):
        assert cuda.current_device() == 0


@pytest.mark.gpu
def test_gpu_seeding_and_rng_state():
    cuda.manual_seed(5)
    a = ember.rand(4, device="cuda")
    state = cuda.get_rng_state()
    b = ember.rand(4, device="cuda")
    cuda.manual_seed(5)
    np.testing.assert_array_equal(ember.rand(4, device="cuda").cpu().numpy(), a.cpu().numpy())
    cuda.set_rng_state(state)
    np.testing.assert_array_equal(ember.rand(4, device="cuda").cpu().numpy(), b.cpu().numpy())
    assert cuda.initial_seed() == 5 and len(cuda.default_generators) == cuda.device_count()


@pytest.mark.gpu
def test_gpu_device_queries():
    assert cuda.device_count() >= 1
    props = cuda.get_device_properties(0)
    assert isinstance(cuda.get_device_name(), str) and props.total_memory > 0
    assert cuda.get_device_capability() == (props.major, props.minor)
    assert cuda.is_bf16_supported() == (props.major >= 8)
    free, total = cuda.mem_get_info()
    assert 0 < free <= total
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        cuda.set_device(cuda.device_count())


@pytest.mark.gpu
def test_gpu_memory_statistics():
    cuda.synchronize()
    before = cuda.memory_allocated()
    t = ember.ones(1 << 20, device="cuda")  # 4 MiB
    assert cuda.memory_allocated() >= before + 4 * 2**20
    assert cuda.max_memory_allocated() >= cuda.memory_allocated()
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    stats = cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == cuda.memory_allocated()
    assert stats["allocation.all.current"] >= 1
    del t
    assert cuda.memory_allocated() == before
    cuda.reset_peak_memory_stats()
    assert cuda.max_memory_allocated() == before
    cuda.empty_cache()
    assert cuda.memory_reserved() <= cuda.max_memory_reserved()
    ptr = cuda.caching_allocator_alloc(4096)
    assert cuda.memory_allocated() >= before + 4096
    cuda.caching_allocator_delete(ptr)
    assert cuda.memory_allocated() == before


@pytest.mark.gpu
def test_gpu_out_of_memory_maps_to_ember_error():
    import cupy
    total = cuda.mem_get_info()[1]
    cuda.set_per_process_memory_fraction(0.01)
    try:
        with pytest.raises(cuda.OutOfMemoryError, match="CUDA out of memory") as info:
            ember.empty(total // 4, dtype=ember.uint8, device="cuda")
        assert isinstance(info.value, cupy.cuda.memory.OutOfMemoryError)
        assert cuda.memory_stats()["num_ooms"] >= 1
    finally:
        cuda.set_per_process_memory_fraction(1.0)


@pytest.mark.gpu
def test_gpu_streams_and_events():
    s = cuda.Stream()
    assert cuda.current_stream() == cuda.default_stream()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    with cuda.stream(s):
        assert cuda.current_stream() == s
        start.record()
        y = (ember.ones(1 << 16, device="cuda") * 2).sum()
        end.record()
    assert cuda.current_stream() == cuda.default_stream()
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 0
    cuda.current_stream().wait_stream(s)
    assert y.item() == 2 * (1 << 16)
    with pytest.raises(RuntimeError, match="enable_timing"):
        cuda.Event().elapsed_time(end)
    cuda.synchronize()


@pytest.mark.gpu
def test_gpu_kernels_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    y, c = rng.standard_normal(1000).astype(np.float32), rng.random(1000) < 0.5
    lo, hi = np.full(1000, -0.5, np.float32), np.full(1000, 0.5, np.float32)
    g = {k: ember.from_numpy(v).cuda() for k, v in dict(x=x, y=y, c=c, lo=lo, hi=hi).items()}
    np.testing.assert_array_equal(ember.where(g["c"], g["x"], g["y"]).cpu().numpy(), np.where(c, x, y))
    np.testing.assert_array_equal(ember.clamp(g["x"], g["lo"], g["hi"]).cpu().numpy(),
                                  np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_allclose(ember.sum(g["y"]).item(), y.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_cublas_math_mode_follows_flags(backend_flags):
    from cupy import _core
    from cupy_backends.cuda.libs import cublas
    bc = backend_flags
    bc.matmul.allow_tf32 = True
    bc.matmul.allow_fp16_reduced_precision_reduction = False
    assert cublas.getMathMode(bc._prepare_matmul("float32")) == bc.CUBLAS_TF32_TENSOR_OP_MATH
    assert cublas.getMathMode(bc._prepare_matmul("float16")) == (
        bc.CUBLAS_TF32_TENSOR_OP_MATH | bc.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
    tf32 = cuda.get_device_capability()[0] >= 8
    assert (_core.get_compute_type(np.float32) == _core._routines_linalg.COMPUTE_TYPE_TF32) == tf32
    bc.matmul.allow_tf32 = False
    assert cublas.getMathMode(cuda.current_blas_handle()) == bc.CUBLAS_DEFAULT_MATH
    assert _core.get_compute_type(np.float32) == _core._routines_linalg.COMPUTE_TYPE_DEFAULT
