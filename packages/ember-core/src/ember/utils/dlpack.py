"""``ember.utils.dlpack``: DLPack capsules in and out (the capsule-level API; ``ember.from_dlpack``
also takes arrays directly)."""
from .._dlpack import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor):
    """A DLPack capsule sharing ``tensor``'s memory; it can be consumed once."""
    return tensor.__dlpack__()
