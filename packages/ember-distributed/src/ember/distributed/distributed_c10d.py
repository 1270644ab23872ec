"""Process groups: the default group (init_process_group), subgroups (new_group, new_subgroups), this process's rank
in each, their backends, and the state torch.distributed keeps about them (which destroy_process_group clears)."""
import enum
import hashlib
import io
import logging
import os
import sys
import warnings
from datetime import timedelta
from typing import NewType

import ember

from . import _backends
from ._errors import DistStoreError
from ._process_group_ops import CollectiveMethods
from ._store import PrefixStore, Store, TCPStore
from .collectives import *  # noqa: F403 - torch's distributed_c10d holds the collectives too
from .rendezvous import rendezvous

default_pg_timeout = timedelta(minutes=30)
default_pg_nccl_timeout = timedelta(minutes=10)
log = logging.getLogger("ember.distributed")
GroupName = NewType("GroupName", str)  # a process group's name (ProcessGroup.group_name)
RankType = int  # a rank (torch: an int or a symbolic int)


# ----------------------------------------------------------------------------------------------------------- Backend

class Backend(str):
    """The backend names: ``Backend(name)`` returns the name lower-cased (``Backend.GLOO == "gloo"``).

    "gloo" and "cpu" select ember's CPU backend, "nccl" the GPU backend on NCCL. ``register_backend`` adds a
    third-party backend: ``func(store, rank, size, timeout)`` (or, with ``extended_api``, ``func(options,
    pg_options)`` with ``options.store/group_rank/group_size/timeout/group_id/global_ranks_in_group``)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"
    FAKE = "fake"
    CPU = "cpu"

    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE, CPU]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL, "xpu": XCCL, "mps": GLOO}
    backend_capability = {GLOO: ["cpu", "cuda"], NCCL: ["cuda"], XCCL: ["xpu"], UCC: ["cpu", "cuda"],
                          MPI: ["cpu", "cuda"], FAKE: ["cpu", "cuda", "hpu", "xpu"], CPU: ["cpu", "cuda"]}
    _plugins = {}  # NAME -> (creator_fn, extended_api)

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        return name.lower() if value == Backend.UNDEFINED else value

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=None):
        """Make ``init_process_group(backend=name)`` create its backend with ``func`` (see the class docstring)."""
        if not hasattr(Backend, name.upper()):
            setattr(Backend, name.upper(), name.lower())
        if name.lower() not in Backend.backend_list:
            Backend.backend_list.append(name.lower())
        if devices is None:
            warnings.warn(f"Device capability of {name} unspecified, assuming `cpu` and `cuda`. Please specify it "
                          "via the `devices` argument of `register_backend`.", stacklevel=2)
            devices = ["cpu", "cuda"]
        elif isinstance(devices, str):
            devices = [devices]
        for device in devices:
            if Backend.default_device_backend_map.get(device) in (None, "fake"):
                Backend.default_device_backend_map[device] = name.lower()
        Backend.backend_capability[name.lower()] = list(devices)
        Backend._plugins[name.upper()] = (func, extended_api)


class BackendConfig:
    """Which backend serves each device type in a group (``repr``: "cpu:gloo,cuda:nccl")."""

    def __init__(self, backend):
        backend = str(backend)
        if backend == Backend.UNDEFINED:
            self.device_backend_map = {"cpu": Backend.GLOO}
            if ember.cuda.is_available() and is_nccl_available():
                self.device_backend_map["cuda"] = Backend.NCCL
        elif backend.lower() in Backend.backend_list:
            self.device_backend_map = dict.fromkeys(Backend.backend_capability[backend.lower()], Backend(backend))
        elif ":" in backend:
            self.device_backend_map = {}
            for pair in backend.lower().split(","):
                parts = pair.split(":")
                if len(parts) != 2:
                    raise ValueError(f"Invalid device:backend pairing: {pair}. The backend string must read "
                                     "'<device_type1>:<backend1>,<device_type2>:<backend2>...', e.g. 'cpu:gloo'")
                if parts[0] in self.device_backend_map:
                    raise ValueError(f"Duplicate device type {parts[0]} in backend string: {backend}")
                self.device_backend_map[parts[0]] = Backend(parts[1])
        else:
            warnings.warn(f"Device capability of {backend} unknown, assuming `cpu` and `cuda`. You can specify it "
                          "in `device:backend` format in `init_process_group` call.", stacklevel=3)
            self.device_backend_map = dict.fromkeys(("cpu", "cuda", "xpu"), Backend(backend))

    def __repr__(self):
        return ",".join(f"{device}:{backend}" for device, backend in self.device_backend_map.items())

    def get_device_backend_map(self):
        return self.device_backend_map


def _device_type(device):
    """"cuda" for ember.device("cuda", 1) or "cuda:1"; names ember has no device for ("xpu") pass through."""
    return device.type if isinstance(device, ember.device) else str(device).split(":")[0]


def get_default_backend_for_device(device):
    """The backend name used for ``device`` (a device or its name) when init_process_group is given none."""
    kind = _device_type(device)
    backend = Backend.default_device_backend_map.get(kind)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend


# the backends named by PyTorch (and "cpu"): made by ember's registry (_backends) when it has them
_BUILT_IN = {Backend.GLOO: "Gloo", Backend.CPU: "the CPU backend", Backend.NCCL: "NCCL", Backend.UCC: "UCC",
             Backend.MPI: "MPI", Backend.XCCL: "XCCL"}


def is_gloo_available():
    return _backends.available("gloo")


def is_nccl_available():
    return _backends.available("nccl")


def is_mpi_available():
    return False


def is_ucc_available():
    return False


def is_xccl_available():
    return False


def is_backend_available(backend):
    """Whether ``backend`` (a name, or "device:name,..." pairs) can be used here."""
    names = BackendConfig(Backend(backend)).device_backend_map.values() if ":" in backend else [backend]
    return all(_backends.available(name) if name.lower() in _BUILT_IN else name.lower() in Backend.backend_list
               for name in names)


# ------------------------------------------------------------------------------------------------------- debug level

class DebugLevel(enum.Enum):
    """How much the package checks and logs (TORCH_DISTRIBUTED_DEBUG): OFF, INFO, or DETAIL (collectives are
    fingerprinted and checked across ranks)."""
    OFF = 0
    INFO = 1
    DETAIL = 2

    def __int__(self):
        return self.value


_debug_level = DebugLevel.OFF


def get_debug_level():
    return _debug_level


def set_debug_level(level):
    global _debug_level
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level(): expected a DebugLevel, got {type(level).__name__}")
    _debug_level = level


def set_debug_level_from_env():
    """Set the debug level from TORCH_DISTRIBUTED_DEBUG (OFF when unset; any case)."""
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper()
    if value not in DebugLevel.__members__:
        raise ValueError("The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL.")
    set_debug_level(DebugLevel[value])


# ------------------------------------------------------------------------------------------------------ ProcessGroup

class ProcessGroup(CollectiveMethods):
    """A set of ranks running collectives together: this process's ``rank()`` in it, its ``size()``, the backend
    serving each device type (``backend`` is the one of the group's default device) and its store. Its methods
    (``allreduce``, ``broadcast``, ... see _process_group_ops) run collectives on it, taking group ranks."""

    def __init__(self, store, rank, size):
        self._store, self._rank, self._size = store, rank, size
        self._backends = {}  # device type -> backend object
        self._default_device = None
        self._backend_name = Backend.UNDEFINED
        self.group_name = ""
        self.group_desc = "undefined"
        self.bound_device_id = None

    def __repr__(self):
        return f"<ProcessGroup {self.group_name!r} rank={self._rank} size={self._size} backend={self._backend_name}>"

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        """The name of the backend of the group's default device, e.g. "gloo"."""
        return self._backend_name

    _get_backend_name = name

    @property
    def backend(self):
        """The backend object of the group's default device (the one collectives on that device use)."""
        return self._backends[self._default_device]

    def _get_backend(self, device):
        """The backend serving tensors of ``device`` (a device or its name)."""
        kind = _device_type(device)
        try:
            return self._backends[kind]
        except KeyError:
            raise RuntimeError(f"No backend type associated with device type {kind}") from None

    def _register_backend(self, device, name, backend):
        kind = _device_type(device)
        self._backends[kind] = backend
        if self._default_device is None or name == Backend.NCCL:
            self._default_device, self._backend_name = kind, name

    def _set_group_name(self, name):
        self.group_name = name

    def _set_group_desc(self, desc):
        self.group_desc = desc

    def get_group_store(self):
        return self._store

    def _each_backend(self):
        seen = {}
        for backend in self._backends.values():
            seen.setdefault(id(backend), backend)
        return seen.values()

    def shutdown(self):
        """Release the group's backends (their threads, connections, shared memory)."""
        for backend in self._each_backend():
            backend.shutdown()

    def abort(self):
        """Stop the group's backends at once, failing their pending work."""
        for backend in self._each_backend():
            (getattr(backend, "abort", None) or backend.shutdown)()


class ProcessGroupGloo(ProcessGroup):
    """A group served by ember's CPU backend, made directly from a store (private to it) by each of its ``size``
    processes, without init_process_group: ``ProcessGroupGloo(store, rank, size, timeout)``."""

    def __init__(self, store, rank, size, timeout=default_pg_timeout):
        _check_valid_timeout(timeout)
        super().__init__(store, rank, size)
        backend = _backends.create(Backend.GLOO, store, rank, size, timeout, list(range(size)))
        for device in Backend.backend_capability[Backend.GLOO]:
            self._register_backend(device, Backend.GLOO, backend)


class _World:
    """The state about process groups that destroy_process_group clears."""

    def __init__(self):
        self.default_pg = None
        self.pg_map = {}  # group -> (backend name, its store)
        self.pg_names = {}  # group -> group name
        self.pg_group_ranks = {}  # group -> {global rank: group rank}
        self.pg_backend_config = {}  # group -> "cpu:gloo,..."
        self.group_count = 0
        self.split_counts = {}  # group -> how many times split_group split it
        self.rendezvous_store = None  # the store init_process_group made (released on destroy)


_world = _World()


class _WorldMeta(type):
    @property
    def WORLD(cls):
        return _world.default_pg

    @WORLD.setter
    def WORLD(cls, pg):
        _world.default_pg = pg


class group(metaclass=_WorldMeta):
    """``group.WORLD``: the default process group (None before init)."""


class GroupMember(metaclass=_WorldMeta):
    """``GroupMember.WORLD``, and ``NON_GROUP_MEMBER``: what new_group returns to ranks outside the new group."""
    NON_GROUP_MEMBER = -100


# --------------------------------------------------------------------------------------------- queries on the groups

def is_initialized():
    """Whether the default process group exists."""
    return _world.default_pg is not None


def is_torchelastic_launched():
    """Whether the elastic launcher (torchrun) started this process (it sets TORCHELASTIC_RUN_ID)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def _get_default_group():
    if _world.default_pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _world.default_pg


def _get_default_store():
    return _world.pg_map[_get_default_group()][1]


def _rank_not_in_group(group):
    return group is not None and group is not GroupMember.WORLD and group == GroupMember.NON_GROUP_MEMBER


def _warn_not_in_group(op_name):
    rank = -1 if _world.default_pg is None else _world.default_pg.rank()
    warnings.warn(f"Running {op_name} on global rank {rank} which does not belong to the given group.", stacklevel=3)


def _resolve_group(group):
    """The ProcessGroup a collective runs on: the default group for None or WORLD (ValueError before init), None
    when this process is not a member of ``group`` (the collective then warns and returns, as PyTorch's do)."""
    if group is None or group is GroupMember.WORLD:
        return _get_default_group()
    if _rank_not_in_group(group):
        return None
    return group


def get_group_rank(group, global_rank):
    """The rank in ``group`` of the process of global rank ``global_rank``."""
    if group is GroupMember.WORLD:
        return global_rank
    if group not in _world.pg_group_ranks:
        raise ValueError(f"Group {group} is not registered, please create group with "
                         "ember.distributed.new_group API")
    ranks = _world.pg_group_ranks[group]
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return ranks[global_rank]


def get_global_rank(group, group_rank):
    """The global rank of the process of rank ``group_rank`` in ``group``."""
    if group is GroupMember.WORLD:
        return group_rank
    if group not in _world.pg_group_ranks:
        raise ValueError(f"Group {group} is not registered, please create group with "
                         "ember.distributed.new_group API")
    for global_rank, rank in _world.pg_group_ranks[group].items():
        if rank == group_rank:
            return global_rank
    raise ValueError(f"Group rank {group_rank} is not part of group {group}")


def get_process_group_ranks(group):
    """The global ranks of ``group``'s members (None: the default group), in group rank order."""
    return list(_world.pg_group_ranks[group or _get_default_group()])


def get_rank(group=None):
    """This process's rank in ``group`` (default: the default group); -1 if it is not a member."""
    if _rank_not_in_group(group):
        return -1
    default = _get_default_group()
    if group is None or group is GroupMember.WORLD:
        return default.rank()
    return get_group_rank(group, default.rank())


def get_world_size(group=None):
    """The number of processes in ``group`` (default: the default group); -1 if this process is not a member."""
    if _rank_not_in_group(group):
        return -1
    if group is None or group is GroupMember.WORLD:
        return _get_default_group().size()
    return group.size()


def get_backend(group=None):
    """The backend name of ``group`` (default: the default group), as given at its creation ("undefined" if none
    was)."""
    pg = group or _get_default_group()
    if _rank_not_in_group(pg):
        raise ValueError("Invalid process group specified")
    entry = _world.pg_map.get(pg)
    if entry is None:
        raise ValueError(f"Process group {pg} is not initialized in the world group map. Please initialize the "
                         "group first.")
    return Backend(entry[0])


def get_backend_config(group=None):
    """Which backend serves each device type in ``group``, e.g. "cpu:gloo"."""
    pg = group or _get_default_group()
    if _rank_not_in_group(pg):
        raise ValueError("Invalid process group specified")
    return _world.pg_backend_config[pg]


def get_pg_count():
    """How many process groups were named since the default group's init (new_group calls included)."""
    return _world.group_count


def _set_pg_timeout(timeout, group=None):
    """Make ``timeout`` the timeout of ``group``'s (default: the default group's) later calls."""
    _check_valid_timeout(timeout)
    pg = _get_default_group() if group is None or group is GroupMember.WORLD else group
    if _rank_not_in_group(pg):
        return
    for backend in pg._each_backend():
        backend.timeout = timeout.total_seconds()


def get_node_local_rank(fallback_rank=None):
    """This process's rank on its host: LOCAL_RANK (set by the launcher), else ``fallback_rank``."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
                       "want the code to run locally instead.")


# ------------------------------------------------------------------------------------------------- making the groups

def _default_timeout(backend):
    return default_pg_nccl_timeout if backend == Backend.NCCL else default_pg_timeout


def _check_valid_timeout(timeout):
    if not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {timeout}")


def _process_group_name(ranks, use_hashed_name):
    """A name every rank computes alike: the count of groups made so far, or (for groups made by their members
    alone) a hash of the ranks."""
    if use_hashed_name:
        text = "_".join(map(str, ranks)) + "_" + str(len(_world.pg_names))
        return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
    name = str(_world.group_count)
    _world.group_count += 1
    return name


class _BackendOptions:
    """What a third-party backend registered with ``extended_api=True`` receives."""

    def __init__(self, store, group_rank, group_size, timeout, group_id, global_ranks_in_group):
        self.store, self.group_rank, self.group_size, self.timeout = store, group_rank, group_size, timeout
        self.group_id, self.global_ranks_in_group = group_id, global_ranks_in_group


def _create_backend(name, store, rank, size, timeout, global_ranks, group_name, options):
    plugin = Backend._plugins.get(name.upper())
    if plugin is not None:
        creator, extended_api = plugin
        if extended_api:
            return creator(_BackendOptions(store, rank, size, timeout, group_name, global_ranks), options)
        return creator(store, rank, size, timeout)
    if name in _BUILT_IN:
        if not _backends.available(name):
            raise RuntimeError(f"Distributed package doesn't have {_BUILT_IN[name]} built in")
        return _backends.create(name, store, rank, size, timeout, global_ranks, group_name)
    raise AssertionError(f"Unknown c10d backend type {name.upper()}")


def _new_process_group_helper(group_size, group_rank, global_ranks, backend, store, group_name, backend_options=None,
                              timeout=None, device_id=None, group_desc=None):
    """Create and register a group (every process of the default group calls it; non-members get
    NON_GROUP_MEMBER). ``global_ranks`` is empty for the default group."""
    if group_name in _world.pg_names.values():
        raise ValueError("The specified group name has already been created, please use a different group name")
    if device_id is not None and (device_id.index is None or device_id.type == "cpu"):
        raise ValueError("init_process_group device_id parameter must be an accelerator with an index")
    _check_valid_timeout(timeout)
    if global_ranks and _get_default_group().rank() not in global_ranks:
        return GroupMember.NON_GROUP_MEMBER, None
    prefix_store = PrefixStore(f"{group_name}/", store)
    pg = ProcessGroup(prefix_store, group_rank, group_size)
    config = BackendConfig(backend)
    if "," not in backend and ":" not in backend and backend not in Backend.backend_list:
        raise AssertionError(f"Unknown backend type {backend}")
    members = list(global_ranks) or list(range(group_size))
    made = {}  # backend name -> object: one per name, serving each of its devices
    try:
        for device, name in config.device_backend_map.items():
            if name not in made:
                made[name] = _create_backend(name, PrefixStore(f"{device}/", prefix_store), group_rank, group_size,
                                             timeout, members, group_name, backend_options)
            pg._register_backend(device, name, made[name])
    except BaseException:
        for made_backend in made.values():
            made_backend.shutdown()
        raise
    pg._set_group_name(group_name)
    pg._set_group_desc("undefined" if group_desc is None else group_desc)
    if device_id is not None:
        pg.bound_device_id = device_id
    _world.pg_map[pg] = (backend, prefix_store)
    _world.pg_names[pg] = group_name
    _world.pg_backend_config[pg] = str(config)
    return pg, prefix_store


def _store_based_barrier(rank, store, group_name, count, timeout):
    """Wait until ``count`` processes reached this point (for TORCH_DIST_INIT_BARRIER=1)."""
    key = f"store_based_barrier_key:{group_name}"
    if store.add(key, 1) == count:
        store.set(f"{key}:last_worker", "1")
    try:
        store.wait([f"{key}:last_worker"], timeout)
    except RuntimeError as e:
        raise DistStoreError(f"Timed out initializing process group in store based barrier on rank {rank}, for key: "
                             f"{key} (world_size={count}, num_workers_joined={store.add(key, 0)}, "
                             f"timeout={timeout} error={e})") from None


def _barrier_after_init():
    return int(os.getenv("TORCH_DIST_INIT_BARRIER", "0")) == 1


def _device(device_id):
    if isinstance(device_id, int):
        if not ember.cuda.is_available():
            raise ValueError("device_id is an int, but no accelerator support is found from the current "
                             "compilation. Please use a different compiled version that supports your accelerator.")
        return ember.device("cuda", device_id)
    device = ember.device(device_id)
    if device.type != "cpu":
        if device.type != "cuda" or not ember.cuda.is_available():
            raise ValueError(f"device_id {device} does not match the accelerator support of this process.")
        if device.index is None:
            raise ValueError("Please use a device_id with index.")
        if device.index >= ember.cuda.device_count():
            raise ValueError(f"device_id {device} is out of range. Please use a device index less than the number "
                             f"of accelerators available: {ember.cuda.device_count()}.")
    return device


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Create the default process group: through ``init_method`` (a URL: "env://" by default, "tcp://host:port",
    "file://path") or an explicit ``store`` with ``rank`` and ``world_size``. ``backend`` None picks the default
    backend of each device type present ("cpu:gloo", plus "cuda:nccl" with a GPU); ``group_name`` is ignored, as
    in PyTorch."""
    if _world.default_pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None and init_method is not None:
        raise AssertionError("Cannot specify both init_method and store.")
    if store is not None:
        if not world_size > 0:
            raise AssertionError("world_size must be positive if using store")
        if not rank >= 0:
            raise AssertionError("rank must be non-negative if using store")
    elif init_method is None:
        init_method = "env://"
    if device_id is not None:
        device_id = _device(device_id)
        if backend is None:
            backend = Backend.default_device_backend_map.get(device_id.type)
    backend = Backend(backend or Backend.UNDEFINED)
    timeout = _default_timeout(backend) if timeout is None else timeout
    _check_valid_timeout(timeout)
    name = _process_group_name([], use_hashed_name=False)
    if store is None:
        store, rank, world_size = next(rendezvous(init_method, rank, world_size, timeout=timeout))
        store.set_timeout(timeout)
        _world.rendezvous_store = store
        store = PrefixStore("default_pg", store)
    try:
        pg, _ = _new_process_group_helper(world_size, rank, [], backend, store, name, backend_options=pg_options,
                                          timeout=timeout, device_id=device_id, group_desc="default_pg")
    except BaseException:
        _release_rendezvous_store()
        raise
    _world.default_pg = pg
    _world.pg_group_ranks[pg] = {i: i for i in range(pg.size())}
    _install_excepthook()
    if _barrier_after_init():
        _store_based_barrier(rank, store, name, world_size, timeout)


def _release_rendezvous_store(world_size=None):
    """Stop using the store init_process_group made, so that a new init may reuse the port at once. With
    ``world_size`` (destroy_process_group), rank 0's server serves on until every rank is done with it (or gone):
    ranks slower than rank 0 may still be initialising or destroying; a re-init of rank 0 stops it at once."""
    store, _world.rendezvous_store = _world.rendezvous_store, None
    if isinstance(store, TCPStore):
        store._release(world_size)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None, sort_ranks=True, *, _group_name=None):
    """A group of the processes of global ranks ``ranks`` (None: all). Every process of the default group calls it,
    in the same order, members or not (non-members get NON_GROUP_MEMBER) — unless ``use_local_synchronization``,
    where only members call it (others get None). (``_group_name``: split_group's name for it.)"""
    default = _get_default_group()
    if device_id is None:
        device_id = default.bound_device_id
    elif default.bound_device_id is not None and device_id != default.bound_device_id:
        raise AssertionError("Mismatched bound device between new pg and the default pg.")
    default_backend, default_store = _world.pg_map[default]
    global_rank, global_size = default.rank(), default.size()
    backend = Backend(backend or default_backend)
    timeout = _default_timeout(backend) if timeout is None else timeout
    _check_valid_timeout(timeout)
    if use_local_synchronization:
        if backend == Backend.MPI:
            raise ValueError("MPI backend doesn't support use_local_synchronization=True")
        if ranks is not None and global_rank not in ranks:
            return None
    if ranks is not None:
        ranks = sorted(ranks) if sort_ranks else list(ranks)
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ranks list must not contain duplicate entries, got {ranks}")
        if len(ranks) > global_size:
            raise ValueError("the new group's world size should be less or equal to the world size set by "
                             "init_process_group")
        for r in ranks:
            if r < 0 or r >= global_size:
                raise ValueError(f"Rank {r} is out of range. Valid ranks are 0 to {global_size - 1} "
                                 f"(world_size={global_size})")
        group_rank = ranks.index(global_rank) if global_rank in ranks else None
    else:
        ranks, group_rank = list(range(global_size)), global_rank
    name = _group_name or _process_group_name(ranks, use_hashed_name=use_local_synchronization)
    pg, pg_store = _new_process_group_helper(len(ranks), group_rank, ranks, backend, default_store, name,
                                             backend_options=pg_options, timeout=timeout, device_id=device_id,
                                             group_desc=group_desc)
    if pg is not GroupMember.NON_GROUP_MEMBER:
        _world.pg_group_ranks[pg] = {g: r for r, g in enumerate(ranks)}
    if _barrier_after_init():
        if use_local_synchronization:
            _store_based_barrier(global_rank, pg_store, name, len(ranks), timeout)
        else:
            _store_based_barrier(global_rank, default_store, name, global_size, timeout)
    return pg


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Split ``group`` (default: the default group) into consecutive subgroups of ``group_size`` ranks (default:
    the number of GPUs of a host); returns (this process's subgroup, all of them)."""
    if group_size is None:
        if not ember.cuda.is_available():
            raise ValueError("Default group size only takes effect when CUDA is available. If your subgroup uses a "
                             "backend that does not depend on CUDA, please pass in 'group_size' correctly.")
        group_size = ember.cuda.device_count()
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    world_size = get_world_size(group=group)
    if world_size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({world_size})")
    if world_size % group_size != 0:
        raise ValueError(f"The world size ({world_size}) must be divisible by '{group_size=}'")
    ranks = get_process_group_ranks(group=group)
    return new_subgroups_by_enumeration([ranks[i:i + group_size] for i in range(0, len(ranks), group_size)],
                                        timeout=timeout, backend=backend, pg_options=pg_options, group_desc=group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    """One group per list of ranks (disjoint lists; a rank may be in none); returns (this process's subgroup or
    None, all of them)."""
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    subgroups, mine, owner = [], None, {}
    for ranks in ranks_per_subgroup_list:
        subgroup = new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options,
                             group_desc=group_desc)
        subgroups.append(subgroup)
        for r in ranks:
            if r in owner:
                raise ValueError(f"Rank {r} has appeared in both subgroup {owner[r]} and {ranks}")
            owner[r] = ranks
            if r == get_rank():
                mine = subgroup
    return mine, subgroups


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None, backend=None):
    """Subgroups of ``parent_pg`` (default: the default group), made by all its processes together: ``split_ranks``
    lists disjoint lists of ranks in the parent group; returns this process's subgroup (None if in none of them). Its
    backend is the parent's (or ``backend``). PyTorch splits NCCL groups only; ember splits any."""
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    default = _get_default_group()
    parent_pg = parent_pg or default
    if parent_pg not in _world.pg_group_ranks:
        raise ValueError(f"Group {parent_pg} is not registered")
    to_group = _world.pg_group_ranks[parent_pg]
    if default.rank() not in to_group:
        raise ValueError(f"Global rank {default.rank()} is not part of the parent group {parent_pg}")
    to_global = {r: g for g, r in to_group.items()}
    me, mine = to_group[default.rank()], None
    for ranks in split_ranks:
        if len(ranks) == 0:
            raise ValueError("the split group cannot be empty")
        if len(ranks) != len(set(ranks)):
            raise ValueError("the split group cannot have duplicate ranks")
        outside = [r for r in ranks if r not in to_global]
        if outside:
            raise ValueError(f"Ranks {outside} of split group {list(ranks)} are not ranks of the parent group "
                             f"(of size {parent_pg.size()})")
        if me in ranks and mine is None:
            mine = sorted(ranks)
    # the name: the same on the members (every process of the parent counts its splits alike; the number of groups
    # each process made, which new_group's hashed names count, may differ between them)
    count = _world.split_counts[parent_pg] = _world.split_counts.get(parent_pg, 0) + 1
    if mine is None:
        return None
    ranks = [to_global[r] for r in mine]
    name = hashlib.sha1(f"{_world.pg_names[parent_pg]}/split {count}/{ranks}".encode(), usedforsecurity=False)
    return new_group(ranks, timeout=timeout, backend=backend or _world.pg_map[parent_pg][0], pg_options=pg_options,
                     use_local_synchronization=True, group_desc=group_desc, _group_name=name.hexdigest())


def destroy_process_group(group=None):
    """Shut down ``group``'s backends and forget it; with None (or WORLD), every group, the default one included
    (init_process_group may then be called again)."""
    if _rank_not_in_group(group):
        return
    pg = _world.default_pg if group is None else group
    if pg is None:
        raise AssertionError("Process group cannot be None")
    if pg not in _world.pg_map:
        raise ValueError("Invalid process group specified")
    if group is None or group is GroupMember.WORLD:
        world_size = _world.default_pg.size()
        try:
            for each in reversed(list(_world.pg_names)):
                each.shutdown()
        finally:
            _world.default_pg = None
            for table in (_world.pg_map, _world.pg_names, _world.pg_group_ranks, _world.pg_backend_config,
                          _world.split_counts):
                table.clear()
            _world.group_count = 0
            _release_rendezvous_store(world_size)
    else:
        try:
            pg.shutdown()
        finally:
            for table in (_world.pg_map, _world.pg_names, _world.pg_group_ranks, _world.pg_backend_config,
                          _world.split_counts):
                table.pop(pg, None)


# ------------------------------------------------------------------------------------------------------------- misc

_hook_installed = False


def _install_excepthook():
    """Prefix uncaught tracebacks with this process's rank ("[rank1]: ..."), as PyTorch does after init."""
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed, previous = True, sys.excepthook

    def hook(*args):
        if _world.default_pg is None:
            return previous(*args)
        stderr, sys.stderr = sys.stderr, io.StringIO()
        try:
            previous(*args)
        finally:
            text, sys.stderr = sys.stderr.getvalue(), stderr
        prefix = f"[rank{_world.default_pg.rank()}]"
        sys.stderr.write("\n".join(f"{prefix}: {line}" if line else "" for line in text.split("\n")))
        sys.stderr.flush()

    sys.excepthook = hook


set_debug_level_from_env()

__all__ = ["Backend", "BackendConfig", "DebugLevel", "GroupMember", "ProcessGroup", "Store", "default_pg_timeout",
           "destroy_process_group", "get_backend", "get_backend_config", "get_debug_level",
           "get_default_backend_for_device", "get_global_rank", "get_group_rank", "get_node_local_rank",
           "get_pg_count", "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group",
           "is_backend_available", "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
           "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "new_group", "new_subgroups",
           "new_subgroups_by_enumeration", "set_debug_level", "set_debug_level_from_env", "split_group"]
