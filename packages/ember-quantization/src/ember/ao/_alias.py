"""The older module names PyTorch keeps for its quantization (``torch.quantization``, ``torch.nn.quantized``,
``torch.nn.quantizable``, ``torch.nn.intrinsic``, ``torch.nn.qat``). Each is the ``ember.ao`` module itself,
registered under the old name together with its submodules, so that a class is the same object under both names
(``isinstance`` and the module mappings see one class)."""
import importlib
import sys


def alias(old, new, *submodules):
    """Make module ``old`` (being imported) the module ``new``; ``new``'s ``submodules`` are imported first, and
    every loaded submodule of ``new`` is also registered under ``old``."""
    for name in (new, *(f"{new}.{s}" for s in submodules)):
        importlib.import_module(name)
    for name, module in list(sys.modules.items()):
        if name == new or name.startswith(new + "."):
            sys.modules[old + name[len(new):]] = module
