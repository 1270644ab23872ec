"""``ember.Size``: a tensor's shape, a tuple of ints."""


class Size(tuple):
    __slots__ = ()

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for s in sizes:
            if not hasattr(s, "__index__") or isinstance(s, float):
                raise TypeError(f"ember.Size() takes an iterable of 'int' (item {len(sizes)} is "
                                f"'{type(s).__name__}')")
        return tuple.__new__(cls, (s.__index__() for s in sizes))

    def __repr__(self):
        return f"ember.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __reduce__(self):
        return (Size, (tuple(self),))
