"""ember-special's CuPy kernels, compiled for the host with g++ (the translation unit NVRTC gets, via
ember-core's tests/test_kernels_host.py) and compared with the CPU path of the same function, on
inputs with NaN, infinities, signed zeros, large arguments and, for the polynomials, degrees that
are negative, fractional or not finite."""
import importlib.util
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import ember
import ember.special
from ember.special import _cuda

_CORE = pathlib.Path(__file__).resolve().parents[2] / "ember-core" / "tests" / "test_kernels_host.py"
_spec = importlib.util.spec_from_file_location("core_kernels_host", _CORE)
host = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(host)

# kernel -> the ember.special function it implements
FUNCTIONS = {name: getattr(ember.special, name) for name in _cuda.UNARY}
FUNCTIONS.update({name: getattr(ember.special, "_".join(name.split("_")[:-1] + ["polynomial", name.split("_")[-1]]))
                  for name in _cuda.BINARY})  # chebyshev_t -> chebyshev_polynomial_t


def _inputs(dtype, binary):
    rng = np.random.default_rng(1)
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 11.0, -15.0, 29.5, 31.0, 700.0, -700.0, 1e5]
    x = np.concatenate([edges, rng.uniform(-20, 20, 48), rng.uniform(-1.2, 1.2, 64)]).astype(dtype)
    if not binary:
        return [x]
    n = rng.choice([-3.0, -0.5, 0, 1, 2, 3, 4.7, 7, 9, 12, 25, np.nan, np.inf], size=x.size).astype(dtype)
    return [x, n]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.usefixtures("compiled_loops")  # (the CPU's numba loops: the kernels' algorithms)
@pytest.mark.parametrize("ctype", ["float", "double"])
@pytest.mark.parametrize("name", sorted(_cuda.KERNELS))
def test_kernel_matches_cpu_path(name, ctype, tmp_path):
    kernel = _cuda.KERNELS[name]
    subst = {"T": ctype}
    dtype = np.float32 if ctype == "float" else np.float64
    ins = host.ck.parse_params(kernel.spec["in_params"], subst)
    outs = host.ck.parse_params(kernel.spec["out_params"], subst)
    src = tmp_path / "k.cpp"
    src.write_text(host._host_program(kernel, subst, ins, outs, "n"))
    exe = tmp_path / "k"
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    arrays = _inputs(dtype, len(ins) == 2)
    files = []
    for k, a in enumerate(arrays):
        files.append(tmp_path / f"in{k}.bin")
        a.tofile(files[-1])
    out = tmp_path / "out.bin"
    run = subprocess.run([str(exe), str(arrays[0].size), *map(str, files), str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = np.fromfile(out, dtype=dtype)
    want = FUNCTIONS[name](*[ember.from_numpy(a) for a in arrays]).numpy()
    # the CPU path rounds float64 results of the same algorithms (SciPy's for i0e, NumPy's sin for j0):
    # a few units of the dtype's rounding apart
    rtol = 8 * np.finfo(dtype).eps if dtype == np.float64 else 4e-7
    np.testing.assert_allclose(got, want, rtol=rtol, atol=np.finfo(dtype).tiny, equal_nan=True, err_msg=name)


def test_every_special_kernel_is_registered():
    from ember._kernels import KERNELS
    assert {k.name for k in _cuda.KERNELS.values()} <= set(KERNELS)
