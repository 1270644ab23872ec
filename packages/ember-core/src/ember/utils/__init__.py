"""``ember.utils``: a namespace that other ember distributions extend (``ember.utils.data``, ...)."""
from .._extensions import lazy_submodule

__path__ = __import__("pkgutil").extend_path(__path__, __name__)


def __getattr__(name):
    """Submodules (``ember.utils.data``, ``ember.utils.checkpoint``, ...) load on first access."""
    return lazy_submodule(__name__, name)
