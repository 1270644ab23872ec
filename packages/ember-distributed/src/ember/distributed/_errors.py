"""The exception classes of torch.distributed, with its hierarchy (all are RuntimeErrors)."""


class DistError(RuntimeError):
    """An error of the distributed package."""


class DistBackendError(DistError):
    """A backend (the communication library of a process group) failed."""


class DistNetworkError(DistError):
    """A connection failed: a peer or the store server closed, reset or could not be reached."""


class DistStoreError(DistError):
    """A store operation failed, e.g. a key did not appear within the timeout."""


class QueueEmptyError(DistStoreError):
    """A non-blocking ``queue_pop`` found the queue empty."""
