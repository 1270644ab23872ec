"""ember.distributed.algorithms: the Join context for uneven inputs, and DDP's communication hooks
(``ddp_comm_hooks``)."""
from .join import Join, Joinable, JoinHook  # noqa: F401
