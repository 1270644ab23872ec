"""TorchScript's module types as plain ``nn.Module`` subclasses (imported on first use: they need ember-nn).

ember never makes instances of them itself (``script`` and ``trace`` return the module they are given), so
``isinstance(m, ember.jit.ScriptModule)`` is False for every module ember hands back; a class written as
``class M(torch.jit.ScriptModule)`` with ``@torch.jit.script_method`` methods works as an ordinary module.
"""
from ember.nn import Module


class ScriptModule(Module):
    """A module meant for TorchScript; in ember an ordinary, eager ``nn.Module``."""


class RecursiveScriptModule(ScriptModule):
    """The type ``torch.jit.script`` gives a module in PyTorch; ember returns the module itself instead."""


class TracedModule(ScriptModule):
    """The type ``torch.jit.trace`` gives a submodule in PyTorch; ember returns the module itself instead."""


class TopLevelTracedModule(TracedModule):
    """The type ``torch.jit.trace`` gives a module in PyTorch; ember returns the module itself instead."""
