"""shrink_group: replace a process group by one without some of its ranks (e.g. ranks that failed), made by the
remaining ranks alone through the group's backend, as torch.distributed.shrink_group.

Only a backend that says so (``supports_shrinking`` true, and ``shrink(excluded_ranks, flags, options)`` returning
the new backend object) can shrink: PyTorch's gloo cannot, nor can ember's CPU and NCCL backends (CuPy has no
ncclCommShrink), so with them shrink_group raises PyTorch's TypeError; a backend registered with
Backend.register_backend may."""
import logging

from . import distributed_c10d as c10d
from ._store import PrefixStore

SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01  # ask the backend to abort the group's pending work before shrinking

_log = logging.getLogger("ember.distributed")


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """A new group of ``group``'s ranks (default: the default group) but ``ranks_to_exclude`` (group ranks), which
    replaces it: called by the remaining ranks only. Shrinking the default group makes the new group the default
    one (ranks renumbered) and discards every other group."""
    if not isinstance(ranks_to_exclude, list):
        raise TypeError(f"ranks_to_exclude must be a list, but got {type(ranks_to_exclude).__name__}. Example: "
                        f"[1, 3, 5] to exclude ranks 1, 3, and 5.")
    if not ranks_to_exclude:
        raise ValueError("ranks_to_exclude cannot be empty. To shrink a group, you must specify at least one rank to "
                         "exclude. Example: [failed_rank_id]")
    if not isinstance(shrink_flags, int) or shrink_flags not in (SHRINK_DEFAULT, SHRINK_ABORT):
        raise ValueError(f"Invalid shrink_flags value: {shrink_flags}. Must be one of: SHRINK_DEFAULT "
                         f"({SHRINK_DEFAULT}) or SHRINK_ABORT ({SHRINK_ABORT}). Use SHRINK_ABORT to abort ongoing "
                         f"operations before shrinking.")
    pg = c10d._get_default_group() if group is None else group
    size, name = pg.size(), c10d._world.pg_names.get(pg, pg.group_name)
    if size <= 1:
        raise ValueError(f"Cannot shrink a process group with size {size}. Group must have at least 2 ranks to "
                         f"support shrinking.")
    backend = _backend_of(pg, name)
    if not getattr(backend, "supports_shrinking", False):
        raise TypeError(f"Process group backend for '{name}' does not support shrinking operations.")
    excluded = _checked_exclusions(ranks_to_exclude, size, pg.rank())
    new_backend = backend.shrink(sorted(excluded), shrink_flags, pg_options)
    return _replace(pg, excluded, new_backend, shrink_flags)


def _backend_of(pg, name):
    """The backend of the group's bound device, else of the GPU, else of the CPU (PyTorch's preference)."""
    try:
        if pg.bound_device_id is not None:
            return pg._get_backend(pg.bound_device_id)
        try:
            return pg._get_backend("cuda")
        except RuntimeError:
            return pg._get_backend("cpu")
    except RuntimeError as e:
        raise RuntimeError(f"Cannot access device backend for process group '{name}'. Ensure the process group was "
                           f"initialized with a compatible device backend and devices are available.") from e


def _checked_exclusions(ranks, size, me):
    excluded = set()
    for i, r in enumerate(ranks):
        if not isinstance(r, int):
            raise TypeError(f"All elements in ranks_to_exclude must be integers. Element at index {i} is "
                            f"{type(r).__name__}: {r}")
        if not 0 <= r < size:
            raise ValueError(f"Rank {r} at index {i} is out of bounds for group size {size}. Valid ranks are in "
                             f"range [0, {size - 1}].")
        if r in excluded:
            raise ValueError(f"Duplicate rank {r} found in ranks_to_exclude at index {i}. Each rank can only be "
                             f"excluded once.")
        excluded.add(r)
    if len(excluded) >= size:
        raise ValueError(f"Cannot exclude all {size} ranks from process group. At least one rank must remain. "
                         f"Excluding {len(excluded)} ranks.")
    if me in excluded:
        raise RuntimeError(f"Current rank {me} is in the exclusion list and should not call shrink_group(). Only "
                           f"non-excluded ranks should participate in the shrinking operation. Excluded ranks should "
                           f"terminate their processes instead.")
    return excluded


def _forget(pg):
    for table in (c10d._world.pg_map, c10d._world.pg_names, c10d._world.pg_group_ranks,
                  c10d._world.pg_backend_config, c10d._world.split_counts):
        table.pop(pg, None)


def _replace(pg, excluded, new_backend, flags):
    """Register a group around ``new_backend`` in place of ``pg`` (whose backends are shut down)."""
    world = c10d._world
    is_default = pg is world.default_pg
    if is_default:  # the old global ranks no longer hold: the other groups go (aborted: their ranks may be gone)
        others = [g for g in list(world.pg_names) if g is not pg]
        if others:
            _log.warning("Shrinking the default group discards the %d other process groups (%s): global ranks are "
                         "renumbered.", len(others), ", ".join(world.pg_names[g] for g in others))
        for g in others:
            try:
                g.abort()
            except Exception:  # noqa: BLE001 - a group already broken must not stop the shrink
                _log.warning("Failed to abort process group %s", world.pg_names[g], exc_info=True)
            _forget(g)
    backend_name, store = world.pg_map[pg]
    config = world.pg_backend_config.get(pg)
    original = c10d.get_process_group_ranks(pg)
    remaining = [g for r, g in enumerate(original) if r not in excluded]
    name = c10d._process_group_name(original, use_hashed_name=True)
    try:
        pg.abort() if flags == SHRINK_ABORT else pg.shutdown()
    except Exception:  # noqa: BLE001 - the old group may be broken by the ranks that left
        _log.warning("Failed to shut down the %s group during shrinking", "default" if is_default else "non-default",
                     exc_info=True)
    _forget(pg)
    device = pg.bound_device_id.type if pg.bound_device_id is not None else "cpu"
    new = c10d.ProcessGroup(PrefixStore(f"{name}/", store), new_backend.rank(), new_backend.size())
    new._register_backend(device, c10d.Backend.NCCL if device == "cuda" else c10d.Backend.GLOO, new_backend)
    new.bound_device_id = pg.bound_device_id
    new._set_group_name(name)
    new._set_group_desc("default:shrunken" if is_default else f"{pg.group_name}:shrunk")
    if is_default:
        world.default_pg = new
    world.pg_map[new] = (backend_name, store)
    world.pg_names[new] = name
    world.pg_group_ranks[new] = {g: r for r, g in enumerate(remaining)}
    if config is not None:
        world.pg_backend_config[new] = config
    return new
