"""Seeds and states of the CUDA default generators (the generators themselves live in ``ember._random``).

As in PyTorch, seeding is safe without a GPU (it does nothing) and does not initialise CUDA: a seed
for the current GPU given before initialisation is applied by ``_lazy_init``, so that seeding in a
parent process does not stop forked workers from using CUDA.
"""
import os

from .. import _random
from . import _parse, device_count, is_available, is_initialized

__all__ = ["get_rng_state", "get_rng_state_all", "initial_seed", "manual_seed", "manual_seed_all", "seed",
           "seed_all", "set_rng_state", "set_rng_state_all"]

_queued = []  # calls waiting for CUDA initialisation


def _run_queued():
    while _queued:
        _queued.pop(0)()


def _on_current_gpu(call):
    if is_initialized():
        call()
    elif is_available():
        _queued.append(call)


def manual_seed(seed):
    """Seed the default generator of the current GPU."""
    seed = _random._check_seed(seed)
    _on_current_gpu(lambda: _random.cuda_default_generator().manual_seed(seed))


def manual_seed_all(seed):
    """Seed the default generators of every GPU, also those not made yet."""
    _random.cuda_manual_seed_all(seed)


def seed():
    """Seed the current GPU's default generator from the operating system's entropy."""
    _on_current_gpu(lambda: _random.cuda_default_generator().seed())


def seed_all():
    _random.cuda_manual_seed_all(int.from_bytes(os.urandom(8), "little"))


def initial_seed():
    return _random.cuda_default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The state of ``device``'s default generator as a uint8 CPU tensor."""
    return _random.cuda_default_generator(_parse(device)).get_state()


def set_rng_state(new_state, device="cuda"):
    _random.cuda_default_generator(_parse(device)).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
