"""ember.distributed.nn: ``RemoteModule`` (a module living on another RPC worker)."""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

from .api.remote_module import RemoteModule  # noqa: E402

__all__ = ["RemoteModule"]
