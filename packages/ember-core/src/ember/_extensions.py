"""Where ember's optional packages plug in, and the error that names a missing one.

``import ember`` loads every entry point of the group ``ember.extensions``: each is a function
called with the ``ember`` module, which registers dispatcher layers, adds Tensor methods and module
attributes. Names that only an extension provides are listed here, so that using one without its
package says which package to install.
"""
import importlib
import os
import re
import sys

# the special functions ember-special also puts in the ember namespace and on tensors (with in-place forms)
SPECIAL = ("i0", "digamma", "polygamma", "lgamma", "mvlgamma", "igamma", "igammac", "erf", "erfc", "erfinv", "xlogy",
           "logit", "sinc")
# name -> distribution that provides it, for module attributes (ember.X) and Tensor attributes
PROVIDERS = {
    "autograd": "ember-autograd", "no_grad": "ember-autograd", "enable_grad": "ember-autograd",
    "set_grad_enabled": "ember-autograd", "is_grad_enabled": "ember-autograd",
    "inference_mode": "ember-autograd", "is_inference_mode_enabled": "ember-autograd", "profiler": "ember-autograd",
    "func": "ember-autograd",
    "nn": "ember-nn", "optim": "ember-nn", "special": "ember-special",
    "amp": "ember-amp", "autocast": "ember-amp", "get_autocast_dtype": "ember-amp",
    "is_autocast_enabled": "ember-amp", "set_autocast_enabled": "ember-amp",
    "is_autocast_available": "ember-amp", "clear_autocast_cache": "ember-amp", "cpu": "ember-amp",
    "ao": "ember-quantization", "quantization": "ember-quantization",
    "distributed": "ember-distributed", "distributions": "ember-nn",
    **dict.fromkeys(SPECIAL, "ember-special"),
}
# functions of the ember namespace that another distribution implements, imported on first use: name -> module
ATTRIBUTES = dict.fromkeys(("ctc_loss", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "gru", "lstm",
                            "rnn_relu", "rnn_tanh"), "ember.nn._torch_functions")
PROVIDERS.update(dict.fromkeys(ATTRIBUTES, "ember-nn"))
ATTRIBUTES.update(fork="ember.jit", wait="ember.jit")  # torch.fork/wait are TorchScript's, as torch.jit's
TENSOR_PROVIDERS = {
    "backward": "ember-autograd", "register_hook": "ember-autograd", "retain_grad": "ember-autograd",
    "register_post_accumulate_grad_hook": "ember-autograd", "retains_grad": "ember-autograd",
    **dict.fromkeys(SPECIAL + tuple(n + "_" for n in SPECIAL), "ember-special"),
}

# filled by extensions: the autograd package sets "requires_grad" to its checker for leaves
hooks = {}
loaded = []


def missing(what, name, dist):
    return AttributeError(f"{what} '{name}' needs {dist}: pip install {dist}")


def load_all(module):
    """Call every installed extension's entry point once, in a stable order."""
    for name, value in sorted(entry_points("ember.extensions")):
        if name in loaded:
            continue
        target, _, attrs = value.partition(":")
        fn = importlib.import_module(target.strip())
        for part in filter(None, attrs.partition("[")[0].strip().split(".")):  # (a trailing "[extras]" is no name)
            fn = getattr(fn, part)
        fn(module)
        loaded.append(name)


def entry_points(group):
    """``[(name, value)]`` of the entry points in ``group`` of the installed distributions, found where
    importlib.metadata finds them (``*.dist-info``/``*.egg-info`` folders on sys.path; of several of one name,
    the first) without importing it: it brings the email and zipfile packages, and cost a sixth of ``import
    ember`` besides NumPy."""
    seen, found = set(), []
    for entry in sys.path:
        try:
            folders = os.listdir(entry or ".")
        except OSError:  # a zip archive, a missing folder
            continue
        for folder in folders:
            stem, _, kind = folder.rpartition(".")
            dist = re.sub(r"[-_.]+", "_", stem.partition("-")[0]).lower()
            if kind not in ("dist-info", "egg-info") or dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(entry or ".", folder, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            section = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == group and "=" in line and not line.startswith(("#", ";")):
                    name, _, value = line.partition("=")
                    found.append((name.strip(), value.strip()))
    return found


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
