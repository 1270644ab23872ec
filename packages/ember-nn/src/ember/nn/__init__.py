"""ember.nn: modules, layers, losses, ``functional``, ``init`` and ``utils``."""
import importlib

from . import modules
from ._version import __version__  # noqa: F401
from .modules import *  # noqa: F403
from .modules.module import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401


def __getattr__(name):
    if name in ("functional", "init", "utils", "attention"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'ember.nn' has no attribute '{name}'")
