"""Which of PyTorch's results in the op table depend on the machine?

PyTorch's CPU kernels have a vectorised body and a scalar tail, and a vectorised body per instruction set
(``ATEN_CPU_CAPABILITY``: default, avx2, avx512); at NaN and infinities their results can differ (float16
``gelu(inf)`` is NaN on some AVX-512 CPUs, inf on others). This tool runs the op table's elementwise lines under
torch once per capability (and once with oneDNN off), each sample both as it is (a few elements: the scalar
path) and tiled to 64 elements along its last dimension (the vectorised path), and lists every (op, dtype,
sample) whose results disagree. Those are the results the op table must compare with the mathematical value
(a line's ``limits``) rather than with torch.

    python packages/ember-core/tools/edge_audit.py      (needs torch; prints the disagreements)
"""
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
# (ATEN_CPU_CAPABILITY, oneDNN on): torch hands some ops (float16/bfloat16 GELU among them) to oneDNN where the
# CPU has the instructions it wants, and to ATen's own kernels elsewhere
CONFIGS = (("default", "1"), ("avx2", "1"), ("avx512", "1"), ("avx512", "0"))
TILE = 16
# not elementwise along the last dimension: tiling changes their values
ROW_OPS = {"softmax", "log_softmax", "softmin", "glu"}


def _tiled(x):
    return np.tile(x, (1,) * (x.ndim - 1) + (TILE,)) if isinstance(x, np.ndarray) and x.ndim and x.shape[-1] == 4 else x


def _results():
    """{(op, dtype, sample, variant): float64 arrays} of torch under the current capability."""
    sys.path.insert(0, str(TESTS))
    import optable
    import torch

    torch.backends.mkldnn.enabled = os.environ.get("EDGE_AUDIT_ONEDNN") == "1"

    from ember._registry import REGISTRY
    out = {}
    for line in optable.all_lines():
        op = REGISTRY.get(line.name)
        if op is None or line.name in ROW_OPS or op.kind != "elementwise" and "activation" not in op.impl.__module__:
            continue
        for dtype in line.dtypes:
            if dtype in ("int64", "bool"):
                continue
            rng = np.random.default_rng(0)
            for i, (args, kwargs) in enumerate(line.samples(dtype, rng)):
                for variant, f in (("scalar", lambda x: x), ("vector", _tiled)):
                    a = [f(x) for x in args]
                    try:
                        r = line.call(torch, *optable.convert(torch, a, dtype), **optable.convert(torch, kwargs, dtype))
                    except Exception:  # noqa: BLE001 - refused samples are the op table's business
                        continue
                    if isinstance(r, torch.Tensor) and r.is_floating_point():
                        r = r.detach().double().numpy()
                        out[line.name, dtype, i, variant] = r[..., :4] if variant == "vector" and r.ndim else r
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.stdout.buffer.write(pickle.dumps(_results()))
        return
    runs = {}
    for cap, onednn in CONFIGS:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=cap, EDGE_AUDIT_ONEDNN=onednn)
        p = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, check=True)
        runs[cap, onednn] = pickle.loads(p.stdout)
    base = runs[CONFIGS[0]]
    found = set()
    for key, ref in base.items():
        seen = [runs[c].get(key) for c in CONFIGS]
        other = base.get(key[:3] + ("vector" if key[3] == "scalar" else "scalar",))
        for r in seen + [other]:
            if r is None or r.shape != ref.shape:
                continue
            bad = ~(np.isclose(r, ref, rtol=2e-2, atol=1e-3, equal_nan=True))
            if bad.any():
                found.add((key[0], key[1], key[2], f"{ref[bad][:3]} vs {r[bad][:3]}"))
    for f in sorted(found):
        print(*f)
    print(f"{len(found)} machine-dependent (op, dtype, sample) results")


if __name__ == "__main__":
    main()
