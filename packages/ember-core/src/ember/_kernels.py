"""Every CuPy kernel of ember is made here, so that every source is recorded in ``KERNELS``.

Kernel bodies are portable C++: the same text compiles as CUDA (``nox -s kernels`` compiles each
kernel with NVRTC, without a GPU) and as host C++ (a test compiles elementwise and reduction bodies
with g++ and compares them with the NumPy implementation). In a body, ``T`` is the element type and
only <cmath>-style functions available on host and device are used.

The CuPy kernel object is made on first use, so importing ember never imports CuPy.
"""
import sys

KERNELS = {}


class Kernel:
    """A recorded kernel; calling it builds the CuPy kernel once and launches it."""

    def __init__(self, kind, name, spec, type_sets):
        if name in KERNELS:
            raise RuntimeError(f"kernel '{name}' is registered twice")
        self.kind, self.name, self.spec = kind, name, spec
        # the module that made the kernel (each package's host test checks its own kernels)
        self.module = sys._getframe(2).f_globals.get("__name__", "")
        self.type_sets = type_sets  # {placeholder: [C++ types]} the kernel is meant for
        self._cupy_kernel = None
        KERNELS[name] = self

    def _build(self):
        import cupy
        s = self.spec
        if self.kind == "elementwise":
            return cupy.ElementwiseKernel(s["in_params"], s["out_params"], s["operation"], self.name,
                                          preamble=s.get("preamble", ""))
        if self.kind == "reduction":
            return cupy.ReductionKernel(s["in_params"], s["out_params"], s["map_expr"], s["reduce_expr"],
                                        s["post_map_expr"], s["identity"], self.name,
                                        preamble=s.get("preamble", ""))
        return cupy.RawKernel(s["code"], self.name, options=tuple(s.get("options", ())))

    def __call__(self, *args, **kwargs):
        if self._cupy_kernel is None:
            self._cupy_kernel = self._build()
        return self._cupy_kernel(*args, **kwargs)

    def __repr__(self):
        return f"<ember {self.kind} kernel {self.name}>"


FLOAT_TYPES = ["float", "double"]


def elementwise_kernel(name, in_params, out_params, operation, *, preamble="", types=None):
    """An ``cupy.ElementwiseKernel``; ``types`` maps type placeholders to the C++ types to check."""
    spec = {"in_params": in_params, "out_params": out_params, "operation": operation, "preamble": preamble}
    return Kernel("elementwise", name, spec, types or {"T": FLOAT_TYPES})


def reduction_kernel(name, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, *,
                     preamble="", types=None):
    """A ``cupy.ReductionKernel`` (``a``/``b`` in ``reduce_expr``, ``a`` in ``post_map_expr``)."""
    spec = {"in_params": in_params, "out_params": out_params, "map_expr": map_expr, "reduce_expr": reduce_expr,
            "post_map_expr": post_map_expr, "identity": identity, "preamble": preamble}
    return Kernel("reduction", name, spec, types or {"T": FLOAT_TYPES})


def raw_kernel(name, code, *, options=()):
    """A ``cupy.RawKernel``: ``code`` is a whole CUDA translation unit defining ``extern "C" name``."""
    return Kernel("raw", name, {"code": code, "options": options}, {})
