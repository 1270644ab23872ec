"""``ember._dynamo``: the few names of ``torch._dynamo`` that training scripts touch, for an eager framework.

Scripts set ``torch._dynamo.config.suppress_errors = True`` or call ``torch._dynamo.reset()``; here ``config``
takes any setting (and reads back what was set) and nothing is compiled (see ``ember.compile``).
"""
import types

from .._compile import InvalidBackend
from ..compiler import allow_in_graph, disable, is_compiling, list_backends, reset

__all__ = ["config", "reset", "disable", "allow_in_graph", "is_compiling", "list_backends", "InvalidBackend"]

config = types.SimpleNamespace(suppress_errors=False, cache_size_limit=8, recompile_limit=8, verbose=False)
