"""ember.ao: quantization (``ember.ao.quantization``, ``ember.ao.nn``) and, with ember-numeric-suite, ``ember.ao.ns``.

A namespace like ``ember`` itself, so that ember-numeric-suite can add ``ember/ao/ns``; submodules load on first
access.
"""
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ._version import __version__  # noqa: E402,F401


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
