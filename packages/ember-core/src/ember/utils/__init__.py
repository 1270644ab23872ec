"""``ember.utils``: a namespace that other ember distributions extend (``ember.utils.data``, ...)."""
import importlib

__path__ = __import__("pkgutil").extend_path(__path__, __name__)


def __getattr__(name):
    """Submodules (``ember.utils.data``, ``ember.utils.checkpoint``, ...) load on first access."""
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")
