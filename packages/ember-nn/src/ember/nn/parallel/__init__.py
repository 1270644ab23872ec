"""ember.nn.parallel: DataParallel and its parts (scatter, replicate, parallel_apply, gather), and
DistributedDataParallel, which ember-distributed provides.

This package extends its ``__path__`` like ``ember`` itself, so that another distribution (ember-distributed) can
add modules to it, e.g. ``ember/nn/parallel/distributed.py``. ``DistributedDataParallel`` is looked up on first
access: from that module if installed, else from ``ember.distributed``; without either, it is a placeholder whose
construction names the package to install.
"""
import importlib
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

from .data_parallel import DataParallel, data_parallel  # noqa: E402
from .parallel_apply import parallel_apply  # noqa: E402
from .replicate import replicate  # noqa: E402
from .scatter_gather import gather, scatter  # noqa: E402

__all__ = ["replicate", "scatter", "parallel_apply", "gather", "data_parallel", "DataParallel",
           "DistributedDataParallel"]


def _distributed_data_parallel():
    """ember-distributed's DistributedDataParallel; None when ember-distributed is not installed, False when it is
    but provides none."""
    installed = False
    for name in (f"{__name__}.distributed", "ember.distributed"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name not in (name, "ember.distributed"):  # (a missing dependency of an installed package: say so)
                raise
            continue
        installed = installed or name == "ember.distributed"
        found = getattr(module, "DistributedDataParallel", None)
        if found is not None:
            return found
    return False if installed else None


class _MissingDistributedDataParallel:
    """Stands for DistributedDataParallel while ember-distributed does not provide it: importing it works (as in
    PyTorch); constructing it looks again, and names the package when it is still missing."""

    def __new__(cls, *args, **kwargs):
        found = _distributed_data_parallel()
        if found:
            return found(*args, **kwargs)
        if found is False:
            raise NotImplementedError("ember.nn.parallel.DistributedDataParallel: the installed ember-distributed "
                                      "does not provide DistributedDataParallel yet")
        from ember._extensions import missing
        raise missing("class", "ember.nn.parallel.DistributedDataParallel", "ember-distributed")


def __getattr__(name):
    if name == "DistributedDataParallel":
        found = _distributed_data_parallel()
        if not found:
            return _MissingDistributedDataParallel
        globals()[name] = found  # (resolved once: later lookups are plain attribute reads)
        return found
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
