"""The registered CuPy kernels, checked without a GPU.

Every spec is checked for completeness, and every elementwise and reduction kernel is compiled for
the host with g++ -- the very translation unit ``tools/compile_kernels.py`` gives NVRTC, behind a
prelude that defines CUDA's keywords for one host "thread" -- run on inputs with NaN, infinities,
signed zeros and integer limits, and compared with ember's CPU implementation of the same op.
"""
import importlib.util
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember._kernels import KERNELS

_TOOL = pathlib.Path(__file__).resolve().parents[1] / "tools" / "compile_kernels.py"
_spec = importlib.util.spec_from_file_location("compile_kernels", _TOOL)
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)

NP_OF_CTYPE = {"bool": np.bool_, "signed char": np.int8, "unsigned char": np.uint8, "short": np.int16,
               "unsigned short": np.uint16, "int": np.int32, "unsigned int": np.uint32, "long long": np.int64,
               "unsigned long long": np.uint64, "float": np.float32, "double": np.float64}


def _t(a):
    return ember.from_numpy(np.ascontiguousarray(a))


# kernel name -> the CPU op it implements, on NumPy inputs in parameter order; a new kernel needs a line here
ORACLES = {
    "ember_where": lambda c, x, y: ember.where(_t(c), _t(x), _t(y)).numpy(),
    "ember_clamp": lambda x, lo, hi: ember.clamp(_t(x), _t(lo), _t(hi)).numpy(),
    "ember_sum": lambda x: ember.sum(_t(x)).numpy(),
    "ember_logsumexp": lambda x, m: ember.log(ember.exp(_t(x) - _t(m)).sum()).numpy(),
    "ember_sqdev": lambda x, m: ((_t(x) - _t(m)) * (_t(x) - _t(m))).sum().numpy(),
    "ember_lerp": lambda a, b, w: ember.lerp(_t(a), _t(b), _t(w)).numpy(),
    # the CPU ops take ``value`` as a scalar: fold the kernel's per-element value into tensor1 (value * tensor1 is
    # the kernel's first product either way)
    "ember_addcmul": lambda a, b, c, v: ember.addcmul(_t(a), _t(v * b), _t(c)).numpy(),
    "ember_addcdiv": lambda a, b, c, v: ember.addcdiv(_t(a), _t(v * b), _t(c)).numpy(),
    "ember_softmax_sum": lambda x, m: ember.exp(_t(x) - _t(m)).sum().numpy(),
    # exp in double and rounded: the host's expf is correctly rounded where NumPy's float32 exp may be 1 ulp off
    "ember_softmax": lambda x, m, s: (ember.exp((_t(x) - _t(m)).double()).to(_t(x).dtype) / _t(s)).numpy(),
    "ember_log_softmax": lambda x, m, s: (_t(x) - _t(m) - ember.log(_t(s))).numpy(),
}

HOST_PRELUDE = """#include <cmath>
#include <cstdio>
#include <cstdlib>
using namespace std;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
struct ember_dim3 { unsigned int x, y, z; };
static const ember_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static inline void __syncthreads() {}
"""

_N = 64
HOST_KINDS = ("elementwise", "reduction")


def _cases():
    for name, k in sorted(KERNELS.items()):
        if k.kind in HOST_KINDS and k.module.startswith("ember._ops"):  # ember-core's own kernels
            for subst in ck.instantiations(k):
                yield pytest.param(name, subst, id=f"{name}-" + "-".join(v.replace(" ", "_") for v in subst.values()))


def _special(dtype):
    """Edge values of ``dtype``: NaN, infinities, signed zeros, extremes; integer limits."""
    if dtype == np.bool_:
        return np.array([True, False])
    if np.issubdtype(dtype, np.floating):
        fi = np.finfo(dtype)
        return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, fi.max, -fi.max, fi.tiny,
                         fi.smallest_subnormal, -fi.eps], dtype=dtype)
    ii = np.iinfo(dtype)
    return np.array(sorted({ii.min, ii.max, 0, 1, ii.max - 1, ii.min + 1} | ({-1} if ii.min < 0 else set())),
                    dtype=dtype)


def _random(rng, dtype, n):
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(n) * 10).astype(dtype)
    ii = np.iinfo(dtype)
    return rng.integers(ii.min, ii.max, n, dtype=dtype, endpoint=True)


def _elementwise_inputs(rng, dtypes):
    """One input set: random values with each parameter's edge values shuffled in, all combinations likely."""
    out = []
    for dt in dtypes:
        a = _random(rng, dt, _N)
        sp = _special(dt)
        a[rng.choice(_N, size=_N // 2, replace=False)] = rng.choice(sp, size=_N // 2)
        out.append(a)
    return [out]


def _reduction_inputs(rng, dtypes):
    """Several input sets, each with one kind of edge value, and the empty input (the identity)."""
    base = [_random(rng, dt, _N) for dt in dtypes]
    sets = [base, [a[:0] for a in base], [a[:1] for a in base]]
    if np.issubdtype(dtypes[0], np.floating):
        for extra in ([np.nan], [np.inf], [-np.inf], [np.inf, -np.inf], [-0.0]):
            a = base[0].copy()
            a[rng.choice(_N, size=len(extra), replace=False)] = extra
            sets.append([a] + base[1:])
    return sets


def _host_program(kernel, subst, ins, outs, n_out):
    def reads(params):
        return "".join(
            f"  {c}* {n}_ = new {c}[n + 1];\n"
            f"  {{ FILE* f = fopen(argv[{k}], \"rb\"); if (fread({n}_, sizeof({c}), n, f) != (size_t)n) return 2; "
            f"fclose(f); }}\n" for k, (c, n, _) in enumerate(params, start=2))

    writes = "".join(
        f"  {{ FILE* f = fopen(argv[{k}], \"wb\"); fwrite({n}_, sizeof({c}), {n_out}, f); fclose(f); }}\n"
        for k, (c, n, _) in enumerate(outs, start=2 + len(ins)))
    allocs = "".join(f"  {c}* {n}_ = new {c}[n + 1]();\n" for c, n, _ in outs)
    call = ", ".join(f"{n}_" for _, n, _ in ins + outs) + ", n"
    return (HOST_PRELUDE + ck.translation_unit(kernel, subst)
            + "int main(int argc, char** argv) {\n  long long n = atoll(argv[1]);\n"
            + reads(ins) + allocs + f"  {kernel.name}({call});\n" + writes + "  return 0;\n}\n")


def _compare(name, got, want, dtype):
    if np.issubdtype(dtype, np.floating):
        if KERNELS[name].spec.get("reduce_expr") == "a + b":  # sequential sums against NumPy's pairwise sum
            np.testing.assert_allclose(got, want, rtol=10 * _N * np.finfo(dtype).eps, atol=0, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)  # NaN equals NaN here; -0.0 equals 0.0
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("name, subst", list(_cases()))
def test_kernel_body_on_host_matches_cpu_op(name, subst, tmp_path):
    kernel = KERNELS[name]
    assert name in ORACLES, f"kernel {name} has no CPU oracle in ORACLES of {__file__}"
    s = kernel.spec
    ins, outs = ck.parse_params(s["in_params"], subst), ck.parse_params(s["out_params"], subst)
    in_dtypes = [NP_OF_CTYPE[c] for c, _, _ in ins]
    src = tmp_path / f"{name}.cpp"
    src.write_text(_host_program(kernel, subst, ins, outs, "n" if kernel.kind == "elementwise" else "1"))
    exe = tmp_path / name
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror=return-type", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    assert build.returncode == 0, f"{name} {subst} does not compile on the host:\n{build.stderr}"
    rng = np.random.default_rng(0)
    make = _elementwise_inputs if kernel.kind == "elementwise" else _reduction_inputs
    for case, arrays in enumerate(make(rng, in_dtypes)):
        n = len(arrays[0])
        files = []
        for k, a in enumerate(arrays):
            files.append(tmp_path / f"in{case}_{k}.bin")
            a.tofile(files[-1])
        out_files = [tmp_path / f"out{case}_{k}.bin" for k in range(len(outs))]
        run = subprocess.run([str(exe), str(n), *map(str, files + out_files)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is meant to give NaN
            want = ORACLES[name](*arrays)
        got = np.fromfile(out_files[0], dtype=NP_OF_CTYPE[outs[0][0]])
        if kernel.kind == "reduction":
            got = got.reshape(())
        _compare(name, got, want, NP_OF_CTYPE[outs[0][0]])


_IDENT = re.compile(r"[A-Za-z_]\w*$")
_REQUIRED = {"elementwise": ("in_params", "out_params", "operation"),
             "reduction": ("in_params", "out_params", "map_expr", "reduce_expr", "post_map_expr", "identity"),
             "raw": ("code",)}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_spec_is_complete(name):
    k = KERNELS[name]
    assert k.name == name and _IDENT.match(name), name
    assert k.kind in _REQUIRED
    for key in _REQUIRED[k.kind]:
        assert str(k.spec.get(key, "")).strip(), f"{name}: spec has no {key}"
    if k.kind == "raw":
        assert re.search(rf'extern\s+"C"[^;{{]*\b{name}\s*\(', k.spec["code"]), f"{name}: no extern \"C\" {name}(...)"
        return
    assert k.type_sets and all(k.type_sets.values()), f"{name}: no C++ types to check"
    params = f"{k.spec['in_params']}, {k.spec['out_params']}"
    used = {w.split()[-2] for w in params.split(",") if w.strip()}
    assert set(k.type_sets) <= used, f"{name}: placeholders {set(k.type_sets) - used} are not used by a parameter"
    unknown = used - set(k.type_sets) - set(ck.NUMPY_CTYPES)
    assert not unknown, f"{name}: parameter types {unknown} are neither placeholders nor NumPy dtype names"
    for subst in ck.instantiations(k):
        assert f" {name}(" in ck.translation_unit(k, subst)


def test_registry_is_not_empty():
    assert {"ember_where", "ember_clamp", "ember_sum"} <= set(KERNELS)
