"""The CUDA unscale-and-check kernel, compiled for the host with g++ (one "thread" walking the grid-stride
loop) and compared with the NumPy pass on gradients holding infinities, NaNs, signed zeros and extremes."""
import shutil
import subprocess

import numpy as np
import pytest

from ember._kernels import KERNELS
from ember.amp._unscale import unscale_numpy

PRELUDE = """#include <cmath>
#include <cstdio>
#include <cstdlib>
using namespace std;
#define __global__
struct ember_dim3 { unsigned int x, y, z; };
static const ember_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
"""
# main: argv = n_tensors, sizes..., input file, output file; writes the unscaled values then found_inf
DRIVER = """
int main(int argc, char** argv) {
  int k = atoi(argv[1]);
  long long* ends = new long long[k];
  long long total = 0;
  for (int i = 0; i < k; ++i) { total += atoll(argv[2 + i]); ends[i] = total; }
  T* data = new T[total];
  FILE* f = fopen(argv[2 + k], "rb");
  if (fread(data, sizeof(T), total, f) != (size_t)total) return 2;
  fclose(f);
  unsigned long long* ptrs = new unsigned long long[k];
  for (int i = 0; i < k; ++i) ptrs[i] = (unsigned long long)(data + (i ? ends[i - 1] : 0));
  float inv = 0.125f, found = 0.0f;
  NAME(ptrs, ends, k, total, &inv, &found);
  f = fopen(argv[3 + k], "wb");
  fwrite(data, sizeof(T), total, f);
  fwrite(&found, sizeof(float), 1, f);
  fclose(f);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("ctype, dtype", [("float", np.float32), ("double", np.float64)])
def test_unscale_kernel_on_host_matches_numpy(ctype, dtype, tmp_path):
    name = f"ember_amp_unscale_{ctype}"
    kernel = KERNELS[name]
    src = tmp_path / "k.cpp"
    src.write_text(PRELUDE + f"typedef {ctype} T;\n#define NAME {name}\n" + kernel.spec["code"] + DRIVER)
    exe = tmp_path / "k"
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-o", str(exe), str(src)], capture_output=True,
                           text=True)
    assert build.returncode == 0, build.stderr
    rng = np.random.default_rng(0)
    fi = np.finfo(dtype)
    special = np.array([0.0, -0.0, fi.max, -fi.max, fi.tiny, fi.smallest_subnormal, 1.0], dtype)
    for bad in (None, np.inf, -np.inf, np.nan):
        sizes = [7, 1, 300, 64]
        arrays = [(rng.standard_normal(n) * 100).astype(dtype) for n in sizes]
        arrays[2][:len(special)] = special
        if bad is not None:
            arrays[3][rng.integers(64)] = bad
        inp = tmp_path / "in.bin"
        np.concatenate(arrays).tofile(inp)
        out = tmp_path / "out.bin"
        run = subprocess.run([str(exe), str(len(sizes)), *map(str, sizes), str(inp), str(out)], capture_output=True)
        assert run.returncode == 0, run.stderr
        raw = out.read_bytes()
        got = np.frombuffer(raw[:-4], dtype)
        found = np.frombuffer(raw[-4:], np.float32)[0]
        want_found = unscale_numpy(arrays, 0.125)
        np.testing.assert_array_equal(got, np.concatenate(arrays))
        assert found == float(want_found) == float(bad is not None)
