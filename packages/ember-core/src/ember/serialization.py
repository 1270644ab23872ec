"""``ember.serialization``: ``save``/``load`` and the allow-list of ``weights_only=True`` loading."""
from ._serialization import add_safe_globals, clear_safe_globals, get_safe_globals, load, safe_globals, save

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals", "save"]
