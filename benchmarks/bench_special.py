"""ember.special against torch.special: every function on 1M float32 elements (CPU, same thread count).

    python benchmarks/bench_special.py   # per-function ratios, their geometric mean and the worst

Each function gets inputs inside its domain; the polynomials use degree 5 (PyTorch evaluates degrees
above 6 by trigonometry, ember by its recurrence, so the ratio depends on the degree).
"""
import math

import numpy as np
from _harness import benchmark, best

N = 1_000_000
GOAL = 4.0  # per function; the geometric mean's goal is 1.5


def _inputs():
    rng = np.random.default_rng(0)
    return {"real": (rng.standard_normal(N) * 3).astype(np.float32),
            "positive": rng.uniform(0.1, 10, N).astype(np.float32),
            "unit": rng.uniform(0.001, 0.999, N).astype(np.float32),
            "cheb": rng.uniform(-1, 1, N).astype(np.float32),
            "rows": (rng.standard_normal((1000, 1000)) * 3).astype(np.float32)}


# name -> (input kind(s), extra positional arguments)
CASES = {
    "airy_ai": ("real",), "bessel_j0": ("real",), "bessel_j1": ("real",), "bessel_y0": ("positive",),
    "bessel_y1": ("positive",), "modified_bessel_i0": ("real",), "modified_bessel_i1": ("real",),
    "modified_bessel_k0": ("positive",), "modified_bessel_k1": ("positive",),
    "scaled_modified_bessel_k0": ("positive",), "scaled_modified_bessel_k1": ("positive",),
    "spherical_bessel_j0": ("real",),
    **{name: ("cheb", 5) for name in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p")},
    "digamma": ("real",), "psi": ("real",), "gammaln": ("real",), "entr": ("positive",), "erf": ("real",),
    "erfc": ("real",), "erfcx": ("real",), "erfinv": ("unit",), "exp2": ("real",), "expit": ("real",),
    "expm1": ("real",), "i0": ("real",), "i0e": ("real",), "i1": ("real",), "i1e": ("real",), "log1p": ("positive",),
    "log_ndtr": ("real",), "ndtr": ("real",), "ndtri": ("unit",), "logit": ("unit",), "sinc": ("real",),
    "round": ("real",), "gammainc": ("positive", "positive"), "gammaincc": ("positive", "positive"),
    "xlogy": ("real", "positive"), "xlog1py": ("real", "positive"), "zeta": ("positive+1", "positive"),
    "softmax": ("rows", -1), "log_softmax": ("rows", -1), "logsumexp": ("rows", -1),
}
POLYGAMMA_ORDERS = (1, 2)


def _args(lib, spec, data):
    out = []
    for a in spec:
        if isinstance(a, str):
            kind, plus = (a[:-2], 1) if a.endswith("+1") else (a, 0)
            out.append(lib.from_numpy(data[kind] + np.float32(plus)))
        else:
            out.append(a)
    return out


def _time(name, call, spec, data):
    import torch

    import ember
    import ember.special  # noqa: F401
    from ember import _jit
    e_args, t_args = _args(ember, spec, data), _args(torch, spec, data)
    call(ember, *e_args)  # queues the numba loops (compiled in the background) ...
    _jit.wait()  # ... timed once ready (bench_startup times the first calls)
    return {"ember": best("f(lib, *a)", repeat=5, f=call, lib=ember, a=e_args),
            "torch": best("f(lib, *a)", repeat=5, f=call, lib=torch, a=t_args)}


def _register():
    data = {}

    def lazy_data():
        if not data:
            data.update(_inputs())
        return data

    def add(label, call, spec):
        benchmark(f"special.{label}, 1M float32", goal=GOAL)(lambda: _time(label, call, spec, lazy_data()))

    for name, spec in CASES.items():
        add(name, lambda lib, *a, name=name: getattr(lib.special, name)(*a), spec)
    add("multigammaln p=3", lambda lib, x: lib.special.multigammaln(x, 3), ("positive+1",))
    for n in POLYGAMMA_ORDERS:
        add(f"polygamma n={n}", lambda lib, x, n=n: lib.special.polygamma(n, x), ("real",))


_register()


def main():
    import numba
    import torch
    from _harness import BENCHMARKS, blas_threads
    threads = blas_threads()[0]
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    print(f"threads: torch {torch.get_num_threads()}, numba {numba.get_num_threads()}")
    ratios = {}
    for b in BENCHMARKS:
        if not b["name"].startswith("special."):
            continue
        t = b["fn"]()
        ratios[b["name"]] = r = t["ember"] / t["torch"]
        print(f"{b['name']:<52} ember {t['ember'] * 1e3:8.2f} ms  torch {t['torch'] * 1e3:8.2f} ms  ratio {r:6.2f}"
              + ("  (over goal)" if r > GOAL else ""), flush=True)
    geo = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    worst = max(ratios, key=ratios.get)
    print(f"geometric mean of ember/torch over {len(ratios)} functions: {geo:.2f} (goal 1.5); "
          f"worst: {worst} {ratios[worst]:.2f} (goal {GOAL})")


if __name__ == "__main__":
    main()
