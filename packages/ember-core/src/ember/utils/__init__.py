"""``ember.utils``: a namespace that other ember distributions extend (``ember.utils.data``, ...)."""
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
