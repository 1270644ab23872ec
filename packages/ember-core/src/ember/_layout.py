"""``ember.strided``, ``ember.sparse_coo``, ``ember.sparse_csr``: how a tensor stores its elements."""


class layout:
    """A memory layout. Instances are singletons; compare them with ``is`` or ``==``."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "ember." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (by_name, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
_ALL = {x.name: x for x in (strided, sparse_coo, sparse_csr)}


def by_name(name):
    """The layout called ``name`` ("strided", "sparse_coo", ...)."""
    return _ALL[name]
