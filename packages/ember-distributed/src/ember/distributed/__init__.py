"""ember.distributed: stores, process groups and collectives, as torch.distributed."""
from ._version import __version__  # noqa: F401


def is_available():
    """True: ember's distributed package is installed."""
    return True
