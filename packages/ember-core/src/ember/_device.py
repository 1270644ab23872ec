"""``ember.device``: where a tensor's array lives (cpu: NumPy, cuda: CuPy)."""

_TYPES = ("cpu", "cuda", "meta")


class device:
    """A device: ``ember.device("cuda", 1)``, ``ember.device("cuda:1")``, ``ember.device(0)``."""

    __slots__ = ("type", "index")

    def __new__(cls, type, index=None):
        if isinstance(type, device):
            return type
        if isinstance(type, int) and not isinstance(type, bool):
            if type < 0:
                raise RuntimeError(f"Device index must not be negative, got {type}")
            type, index = "cuda", type
        elif not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got ({type!r})")
        elif ":" in type:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}:{idx}'")
            index = int(idx)
        if type not in _TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of device "
                               f"string: {type}")
        key = (type, index)
        cached = _CACHE.get(key)
        if cached is None:
            cached = object.__new__(cls)
            object.__setattr__(cached, "type", type)
            object.__setattr__(cached, "index", index)
            _CACHE[key] = cached
        return cached

    def __setattr__(self, name, value):
        raise AttributeError("ember.device is immutable")

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self):
        from . import _factory
        _factory.push_default_device(self)
        return self

    def __exit__(self, *exc):
        from . import _factory
        _factory.pop_default_device()


_CACHE = {}
CPU = device("cpu")


def as_device(d):
    """Normalise what users pass as ``device=`` (str, int, device, None) to a device or None."""
    if d is None or isinstance(d, device):
        return d
    return device(d)
