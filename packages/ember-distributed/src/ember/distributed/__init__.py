"""ember.distributed: stores, process groups and collectives, as torch.distributed."""
import pkgutil

# other distributions add subpackages (ember-elastic: ember.distributed.elastic, .launcher, .run), editable or not
__path__ = pkgutil.extend_path(__path__, __name__)

from ember._extensions import lazy_submodule

from ._breakpoint import breakpoint  # noqa: F401
from ._comm_name import record_comm  # noqa: F401
from ._errors import DistBackendError, DistError, DistNetworkError, DistStoreError, QueueEmptyError  # noqa: F401
from ._logger import Logger  # noqa: F401
from ._process_group_ops import (  # noqa: F401
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)
from ._reducer import (  # noqa: F401
    _DEFAULT_FIRST_BUCKET_BYTES,
    BuiltinCommHookType,
    GradBucket,
    Reducer,
    _broadcast_coalesced,
    _compute_bucket_assignment_by_size,
    _register_builtin_comm_hook,
    _register_comm_hook,
    _verify_params_across_processes,
)
from ._shrink import shrink_group  # noqa: F401
from ._store import FileStore, HashStore, PrefixStore, Store, TCPStore  # noqa: F401
from ._version import __version__  # noqa: F401
from .collectives import *  # noqa: F403
from .collectives import _make_nccl_premul_sum  # noqa: F401
from .device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from .distributed_c10d import (  # noqa: F401
    Backend,
    BackendConfig,
    DebugLevel,
    GroupMember,
    GroupName,
    ProcessGroup,
    ProcessGroupGloo,
    RankType,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_backend_config,
    get_debug_level,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_pg_count,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_backend_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    is_ucc_available,
    is_xccl_available,
    log,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    set_debug_level,
    set_debug_level_from_env,
    split_group,
    timedelta,
)
from .rendezvous import register_rendezvous_handler, rendezvous  # noqa: F401


def is_available():
    """True: ember's distributed package is installed."""
    return True


def __getattr__(name):
    """Submodules (e.g. ``elastic``, ``rpc``, ``algorithms``) load on first access."""
    return lazy_submodule(__name__, name)
