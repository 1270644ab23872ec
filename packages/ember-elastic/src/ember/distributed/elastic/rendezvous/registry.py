"""The rendezvous backends known by name: "c10d" (dynamic, on a TCPStore or FileStore) and "static"; packages may
add theirs through the entry point group ``emberrun.handlers`` (a function returning the handler creator)."""
from ember._extensions import entry_points
from ember.distributed.elastic.utils.logging import get_logger

from .api import rendezvous_handler_registry as handler_registry

__all__ = ["get_rendezvous_handler"]

logger = get_logger(__name__)


def _create_static_handler(params):
    from . import static_tcp_rendezvous
    return static_tcp_rendezvous.create_rdzv_handler(params)


def _create_c10d_handler(params):
    from .c10d_rendezvous_backend import create_backend
    from .dynamic_rendezvous import create_handler
    backend, store = create_backend(params)
    return create_handler(store, backend, params)


def _register_default_handlers():
    handler_registry.register("c10d", _create_c10d_handler)
    handler_registry.register("static", _create_static_handler)


def _register_out_of_tree_handlers():
    import importlib
    for name, value in entry_points("emberrun.handlers"):
        try:
            module, _, attr = value.partition(":")
            get_handler = getattr(importlib.import_module(module.strip()), attr.strip())
            handler_registry.register(name, get_handler())
        except Exception:
            logger.warning("Exception while registering out of tree plugin %s: ", name, exc_info=True)


def get_rendezvous_handler(params):
    """A handler for ``params.backend``, made from ``params``."""
    return handler_registry.create_handler(params)
