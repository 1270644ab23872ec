#!/usr/bin/env python3
"""Compile every kernel registered in ``ember._kernels.KERNELS`` with NVRTC, for sm_80 and sm_90.

No GPU or driver is needed: NVRTC comes from the ``nvidia-cuda-nvrtc-cu12`` wheel and is called
through ``cupy_backends.cuda.libs.nvrtc`` (CuPy's own compile path asks the driver for the
architecture). Each elementwise and reduction kernel becomes one CUDA translation unit per type
instantiation: an ``extern "C" __global__`` function whose parameters are typed pointers and whose
grid-stride loop runs the kernel's body, as CuPy would; a raw kernel is its own code.

    pip install -e packages/ember-core cupy-cuda12x nvidia-cuda-nvrtc-cu12
    python packages/ember-core/tools/compile_kernels.py

Exit status 1 (with kernel, types, architecture and NVRTC's log) when a kernel does not compile.
The helpers ``parse_params``, ``instantiations`` and ``translation_unit`` are also used by the
host test, which compiles the same translation units with g++.
"""
import ctypes
import importlib.util
import itertools
import pathlib
import sys

ARCHS = ("80", "90")

# NumPy dtype names CuPy accepts in a parameter list -> C++ type
NUMPY_CTYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
                "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
                "uint64": "unsigned long long", "float32": "float", "float64": "double"}


def parse_params(text, subst):
    """``[(c_type, name, is_raw)]`` of a CuPy parameter list, type placeholders replaced by ``subst``."""
    params = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        words = item.split()
        if len(words) not in (2, 3) or (len(words) == 3 and words[0] != "raw"):
            raise ValueError(f"cannot parse parameter '{item}'")
        typ, name = words[-2:]
        ctype = subst.get(typ) or NUMPY_CTYPES.get(typ)
        if ctype is None:
            raise ValueError(f"parameter '{item}': type '{typ}' is neither a placeholder nor a NumPy dtype name")
        params.append((ctype, name, len(words) == 3))
    return params


def instantiations(kernel):
    """Every assignment of C++ types to the kernel's placeholders (one empty assignment for raw kernels)."""
    names = sorted(kernel.type_sets)
    return [dict(zip(names, combo)) for combo in itertools.product(*(kernel.type_sets[n] for n in names))]


def _bind(params, at):
    """Declarations giving the body its parameters by name: element ``at`` of each array, or the raw pointer."""
    lines = []
    for ctype, name, raw in params:
        lines.append(f"{ctype}* {name} = {name}_;" if raw else f"{ctype}& {name} = {name}_[{at}];")
    return "".join(f"    {line}\n" for line in lines)


def _indent(code):
    return "".join(f"    {line}\n" for line in code.strip().splitlines()).rstrip("\n")


def translation_unit(kernel, subst):
    """The CUDA source compiled for ``kernel`` with placeholders ``subst`` (portable C++ for the host test)."""
    s = kernel.spec
    if kernel.kind == "raw":
        return s["code"]
    ins, outs = parse_params(s["in_params"], subst), parse_params(s["out_params"], subst)
    # inputs are read-only in CuPy: const pointers make a body that writes one fail here too
    ins = [(f"const {c}", n, raw) for c, n, raw in ins]
    args = ", ".join([f"{c}* {n}_" for c, n, _ in ins + outs] + ["long long _n"])
    head = "".join(f"typedef {c} {p};\n" for p, c in subst.items())
    loop = ("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n;\n"
            "       i += (long long)blockDim.x * gridDim.x) {\n")
    if kernel.kind == "elementwise":
        return (f"{head}{s['preamble']}\n"
                f'extern "C" __global__ void {kernel.name}({args}) {{\n'
                f"{loop}{_bind(ins + outs, 'i')}{_indent(s['operation'])};\n  }}\n}}\n")
    # reduction: each thread folds a grid-stride slice, each block folds its threads in shared memory
    # and writes element blockIdx.x of the outputs (launched with one block of 256 threads, that is
    # the whole reduction)
    return (f"{head}typedef {outs[0][0]} _type_reduce;\n{s['preamble']}\n"
            f"#define REDUCE(a, b) ({s['reduce_expr']})\n"
            f"#define POST_MAP(a) ({s['post_map_expr']})\n"
            f'extern "C" __global__ void {kernel.name}({args}) {{\n'
            f"  __shared__ _type_reduce _sdata[256];\n"
            f"  _type_reduce _s = _type_reduce({s['identity']});\n"
            f"{loop}{_bind(ins, 'i')}    _type_reduce _m = _type_reduce({s['map_expr']});\n"
            f"    _s = REDUCE(_s, _m);\n  }}\n"
            f"  _sdata[threadIdx.x] = _s;\n  __syncthreads();\n"
            f"  for (unsigned int _k = blockDim.x / 2; _k > 0; _k >>= 1) {{\n"
            f"    if (threadIdx.x < _k) _sdata[threadIdx.x] = REDUCE(_sdata[threadIdx.x], _sdata[threadIdx.x + _k]);\n"
            f"    __syncthreads();\n  }}\n"
            f"  if (threadIdx.x == 0) {{\n{_bind(outs, 'blockIdx.x')}    POST_MAP(_sdata[0]);\n  }}\n}}\n")


def load_nvrtc():
    """``cupy_backends.cuda.libs.nvrtc``, preloading libnvrtc from the nvidia-cuda-nvrtc wheel if CuPy misses it."""
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
        return nvrtc
    except Exception as first:
        spec = importlib.util.find_spec("nvidia.cuda_nvrtc")
        libs = sorted(pathlib.Path(p, "lib") for p in (spec.submodule_search_locations if spec else ()))
        found = [f for d in libs for f in sorted(d.glob("libnvrtc.so*")) if ".alt." not in f.name]
        if not found:
            raise RuntimeError(f"NVRTC not found ({first}): pip install nvidia-cuda-nvrtc-cu12") from None
        for builtins in sorted(found[0].parent.glob("libnvrtc-builtins.so*")):
            if ".alt." not in builtins.name:
                ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(found[0]), mode=ctypes.RTLD_GLOBAL)
        sys.modules.pop("cupy_backends.cuda.libs.nvrtc", None)
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
        return nvrtc


def compile_nvrtc(nvrtc, code, name, arch, options=()):
    """(cubin size, None) or (0, NVRTC's log)."""
    prog = nvrtc.createProgram(code, f"{name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"--gpu-architecture=sm_{arch}", *options])
        except nvrtc.NVRTCError as e:
            return 0, nvrtc.getProgramLog(prog).strip() or str(e)
        return len(nvrtc.getCUBIN(prog)), None
    finally:
        nvrtc.destroyProgram(prog)


def main():
    import ember  # noqa: F401  (importing ember registers every kernel)
    from ember._kernels import KERNELS

    if not KERNELS:
        print("no kernels registered in ember._kernels.KERNELS", file=sys.stderr)
        return 1
    nvrtc = load_nvrtc()
    print(f"NVRTC {'.'.join(map(str, nvrtc.getVersion()))}: {len(KERNELS)} kernels, architectures "
          + ", ".join(f"sm_{a}" for a in ARCHS))
    failures, done = [], 0
    for name, kernel in sorted(KERNELS.items()):
        for subst in instantiations(kernel):
            types = ", ".join(f"{p}={c}" for p, c in subst.items()) or "-"
            try:
                code = translation_unit(kernel, subst)
            except ValueError as e:
                failures.append((name, types, "-", str(e)))
                print(f"FAIL {name} [{types}]: {e}")
                continue
            failed = False
            for arch in ARCHS:
                size, log = compile_nvrtc(nvrtc, code, name, arch, kernel.spec.get("options", ()))
                done += 1
                print(f"{'ok  ' if size else 'FAIL'} {name} [{types}] sm_{arch}"
                      + (f" ({size} bytes of cubin)" if size else ""))
                if not size:  # the source is shown once per instantiation
                    failures.append((name, types, f"sm_{arch}", log if failed else f"{log}\n--- source ---\n{code}"))
                    failed = True
    for name, types, arch, log in failures:
        print(f"\n{name} [{types}] {arch} does not compile:\n{log}", file=sys.stderr)
    print(f"{done} compilations of {len(KERNELS)} kernels: "
          + (f"{len(failures)} FAILED" if failures else "all compiled"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
