"""ember.nn: modules, layers, losses, ``functional``, ``init`` and ``utils``."""
import pkgutil

# other distributions add modules below (ember-distributed: ember/nn/parallel/distributed.py), editable or not
__path__ = pkgutil.extend_path(__path__, __name__)

from ember._extensions import lazy_submodule  # noqa: E402

from ._version import __version__  # noqa: F401
from .modules import *  # noqa: F403
from .modules._utils import factory_kwargs  # noqa: F401
from .modules.module import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401


def __getattr__(name):
    """``functional``, ``init``, ``utils`` (and other submodules) load on first access."""
    return lazy_submodule(__name__, name)
