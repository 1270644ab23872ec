"""Where ember's optional packages plug in, and the error that names a missing one.

``import ember`` loads every entry point of the group ``ember.extensions``: each is a function
called with the ``ember`` module, which registers dispatcher layers, adds Tensor methods and module
attributes. Names that only an extension provides are listed here, so that using one without its
package says which package to install.
"""
import importlib
from importlib.metadata import entry_points

# name -> distribution that provides it, for module attributes (ember.X) and Tensor attributes
PROVIDERS = {
    "autograd": "ember-autograd", "no_grad": "ember-autograd", "enable_grad": "ember-autograd",
    "set_grad_enabled": "ember-autograd", "is_grad_enabled": "ember-autograd",
    "inference_mode": "ember-autograd", "is_inference_mode_enabled": "ember-autograd",
    "nn": "ember-nn", "optim": "ember-nn", "special": "ember-special",
    "amp": "ember-amp", "autocast": "ember-amp", "get_autocast_dtype": "ember-amp",
    "is_autocast_enabled": "ember-amp", "set_autocast_enabled": "ember-amp",
    "is_autocast_available": "ember-amp", "clear_autocast_cache": "ember-amp", "cpu": "ember-amp",
    "ao": "ember-quantization", "quantize_per_tensor": "ember-quantization",
    "quantize_per_channel": "ember-quantization",
    "distributed": "ember-distributed",
}
TENSOR_PROVIDERS = {
    "backward": "ember-autograd", "register_hook": "ember-autograd", "retain_grad": "ember-autograd",
    "register_post_accumulate_grad_hook": "ember-autograd", "retains_grad": "ember-autograd",
    "q_scale": "ember-quantization", "q_zero_point": "ember-quantization",
    "dequantize": "ember-quantization", "int_repr": "ember-quantization",
}

# filled by extensions: the autograd package sets "requires_grad" to its checker for leaves
hooks = {}
loaded = []


def missing(what, name, dist):
    return AttributeError(f"{what} '{name}' needs {dist}: pip install {dist}")


def load_all(module):
    """Call every installed extension's entry point once, in a stable order."""
    for ep in sorted(entry_points(group="ember.extensions"), key=lambda e: e.name):
        if ep.name in loaded:
            continue
        ep.load()(module)
        loaded.append(ep.name)


def lazy_submodule(package, name):
    """``package.name`` imported on first attribute access (a module ``__getattr__``); AttributeError
    when no such submodule exists."""
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
    raise AttributeError(f"module '{package}' has no attribute '{name}'")
