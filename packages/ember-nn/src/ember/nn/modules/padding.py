"""Padding layers: constant, zero, reflection, replication and circular, for 1, 2 and 3 spatial dims."""
from .. import functional as F
from ._utils import _ntuple
from .module import Module

__all__ = [f"{kind}Pad{n}d" for kind in ("Constant", "Zero", "Reflection", "Replication", "Circular")
           for n in (1, 2, 3)]


class _PadNd(Module):
    mode, n = "constant", None

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = _ntuple(2 * self.n)(padding)
        if self.mode == "constant":
            self.value = value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}" if self.mode == "constant" else f"{self.padding}"


def _layer(kind, mode, n):
    if kind == "Constant":
        def __init__(self, padding, value):
            _PadNd.__init__(self, padding, value)
    elif kind == "Zero":
        def __init__(self, padding):
            _PadNd.__init__(self, padding, 0.0)
    else:
        def __init__(self, padding):
            _PadNd.__init__(self, padding)
    namespace = {"mode": mode, "n": n, "__init__": __init__, "__module__": __name__,
                 "__doc__": f"Pads the last {n} dim{'s' if n > 1 else ''} ({mode})."}
    if kind == "Zero":
        namespace["extra_repr"] = lambda self: f"{self.padding}"
    return type(f"{kind}Pad{n}d", (_PadNd,), namespace)


_MODES = {"Constant": "constant", "Zero": "constant", "Reflection": "reflect", "Replication": "replicate",
          "Circular": "circular"}
globals().update({name: _layer(name[:-5], _MODES[name[:-5]], int(name[-2])) for name in __all__})
