"""ember.ao.nn: quantized (``quantized``, ``quantized.dynamic``), fused (``intrinsic``) and quantization-aware
training (``qat``) modules. Submodules load on first access."""
__path__ = __import__("pkgutil").extend_path(__path__, __name__)


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
