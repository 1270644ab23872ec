"""``ember.random``: seeding and state of the default generators, and ``fork_rng``."""
import contextlib

from . import _random
from ._device import as_device
from ._random import get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Run a block with the default generators' states saved and restored on exit: the CPU one and
    the CUDA ones of ``devices`` (by default every CUDA generator in use)."""
    if not enabled or device_type == "meta":
        yield
        return
    if device_type not in (None, "cuda"):
        raise RuntimeError(f"ember has no random number generators for device type '{device_type}'")
    made_before = set(_random._cuda_generators)
    if devices is None:
        cuda = [_random._cuda_generators[i] for i in made_before]
    else:
        cuda = [_random.cuda_default_generator(as_device(d).index) for d in devices]
    saved = [(g, g.get_state()) for g in [_random.default_generator, *cuda]]
    seed_before = _random._cuda_seed[0]
    try:
        yield
    finally:
        for g, state in saved:
            g.set_state(state)
        if devices is None:
            # generators first used inside the block are dropped, so that they start afresh later
            for i in set(_random._cuda_generators) - made_before:
                del _random._cuda_generators[i]
            _random._cuda_seed[0] = seed_before
