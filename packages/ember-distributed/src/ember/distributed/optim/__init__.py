"""ember.distributed.optim, as torch.distributed.optim: ``ZeroRedundancyOptimizer`` (optimizer state sharded over
the ranks), ``PostLocalSGDOptimizer`` (periodic model averaging after the local step), ``as_functional_optim``;
``DistributedOptimizer`` (over RRefs) is ember-rpc's module ``optimizer`` of this package, loaded on first use."""
import importlib
import importlib.util
import pkgutil

# ember-rpc adds the module ``optimizer`` to this package (DistributedOptimizer needs rpc), editable or not
__path__ = pkgutil.extend_path(__path__, __name__)

from .post_localSGD_optimizer import PostLocalSGDOptimizer  # noqa: E402
from .utils import as_functional_optim  # noqa: E402
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer  # noqa: E402

_HAS_RPC = importlib.util.find_spec(f"{__name__}.optimizer") is not None

__all__ = ["as_functional_optim", *(["DistributedOptimizer"] if _HAS_RPC else []), "PostLocalSGDOptimizer",
           "ZeroRedundancyOptimizer"]


def __getattr__(name):
    if name == "DistributedOptimizer":
        if not _HAS_RPC:
            raise AttributeError("ember.distributed.optim.DistributedOptimizer needs the ember-rpc package "
                                 "(pip install ember-rpc)")
        return importlib.import_module(f"{__name__}.optimizer").DistributedOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
