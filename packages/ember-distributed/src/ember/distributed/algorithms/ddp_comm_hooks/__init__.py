"""DDP communication hooks (``ddp_model.register_comm_hook(state, hook)``): ``default_hooks`` (averaging, float16
and bfloat16 compression and wrappers), ``powerSGD_hook`` (low-rank compression), ``debugging_hooks`` (no-op);
``DDPCommHookType`` names them for ``register_ddp_comm_hook``."""
import enum
from functools import partial

from . import debugging_hooks as debugging
from . import default_hooks as default
from . import powerSGD_hook as powerSGD

__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _ddp_comm_hook_wrapper(comm_hook, model, state):
    model.register_comm_hook(state, comm_hook)


def _powerSGD_comm_hook_wrapper(comm_hook, model, state, matrix_approximation_rank, start_powerSGD_iter=1_000):
    """Register a PowerSGD hook whose state is made from ``state`` (a process group) and the rank."""
    model.register_comm_hook(powerSGD.PowerSGDState(process_group=state,
                                                    matrix_approximation_rank=matrix_approximation_rank,
                                                    start_powerSGD_iter=start_powerSGD_iter), comm_hook)


class DDPCommHookType(enum.Enum):
    """The built-in hooks by name: ``DDPCommHookType.ALLREDUCE.value(model=model, state=process_group)``."""

    ALLREDUCE = enum.member(partial(_ddp_comm_hook_wrapper, comm_hook=default.allreduce_hook))
    FP16_COMPRESS = enum.member(partial(_ddp_comm_hook_wrapper, comm_hook=default.fp16_compress_hook))
    BF16_COMPRESS = enum.member(partial(_ddp_comm_hook_wrapper, comm_hook=default.bf16_compress_hook))
    POWER_SGD = enum.member(partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook,
                                    matrix_approximation_rank=1))
    POWER_SGD_RANK2 = enum.member(partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook,
                                          matrix_approximation_rank=2))
    BATCHED_POWER_SGD = enum.member(partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.batched_powerSGD_hook,
                                            matrix_approximation_rank=1))
    BATCHED_POWER_SGD_RANK2 = enum.member(partial(_powerSGD_comm_hook_wrapper,
                                                  comm_hook=powerSGD.batched_powerSGD_hook,
                                                  matrix_approximation_rank=2))
    NOOP = enum.member(partial(_ddp_comm_hook_wrapper, comm_hook=debugging.noop_hook))


def register_ddp_comm_hook(comm_hook_type, model, state=None):
    """Register the hook ``comm_hook_type`` names on DDP ``model`` (``state``: its process group)."""
    comm_hook_type.value(model=model, state=state)
