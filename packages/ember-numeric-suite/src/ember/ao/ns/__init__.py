"""ember.ao.ns: the numeric suite of eager-mode quantization.

``ember.ao.ns._numeric_suite`` is PyTorch's ``torch.ao.ns._numeric_suite`` (compare the weights and activations of
a float model with those of its quantized form); ``ember.ao.ns.metrics`` holds the error metrics and
``ember.ao.ns.report`` a per-layer table of them for a float and a quantized model. Submodules load on first
access.
"""
from ._version import __version__  # noqa: F401


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
