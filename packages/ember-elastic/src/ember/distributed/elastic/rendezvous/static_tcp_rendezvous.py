"""The "static" rendezvous: a fixed number of nodes with fixed ranks (--node-rank), meeting at a TCPStore served by
node 0 at MASTER_ADDR:MASTER_PORT, which is also the workers' store. No heartbeats, no scaling."""
import datetime

from ember.distributed import PrefixStore, TCPStore
from ember.distributed.elastic.utils.logging import get_logger

from .api import RendezvousHandler, RendezvousInfo, RendezvousStoreInfo
from .utils import parse_rendezvous_endpoint

__all__ = ["StaticTCPRendezvous", "create_rdzv_handler"]

logger = get_logger(__name__)

_default_timeout_seconds = 600


class StaticTCPRendezvous(RendezvousHandler):
    """Node ``rank`` of ``world_size``. Every round returns the same store; each round after the first starts the
    workers on a clean store: node 0 deletes the keys the previous attempt's workers left (the agents' keys
    live under the run id)."""

    def __init__(self, master_addr, master_port, rank, world_size, run_id, timeout):
        self.master_addr, self.master_port = master_addr, master_port
        self.rank, self.world_size, self.run_id = rank, world_size, run_id
        self.timeout = datetime.timedelta(seconds=timeout)
        self._store = None
        self._round = 0

    def get_backend(self):
        return "static"

    @property
    def use_agent_store(self):
        return True

    def next_rendezvous(self):
        if self._store is None:
            logger.info("Creating TCPStore as the c10d::Store implementation")
            self._store = TCPStore(self.master_addr, self.master_port, self.world_size, self.rank == 0, self.timeout,
                                   multi_tenant=True)
        elif self.rank == 0:
            for key in self._store.list_keys():
                if not key.startswith(f"{self.run_id}/"):
                    self._store.delete_key(key)
        self._round += 1
        prefix = self.run_id if self._round == 1 else f"{self.run_id}/{self._round}"
        store = PrefixStore(prefix, self._store)
        return RendezvousInfo(store, self.rank, self.world_size,
                              RendezvousStoreInfo(self.master_addr, self.master_port))

    def is_closed(self):
        return False

    def set_closed(self):
        pass

    def num_nodes_waiting(self):
        return 0

    def get_run_id(self):
        return self.run_id

    def shutdown(self):
        return True


def create_rdzv_handler(params):
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters.Try add --node-rank to the cmd request")
    endpoint = params.endpoint.strip()
    if not endpoint:
        raise ValueError("endpoint is absent in RendezvousParametersTry add --master-port and --master-addr to the "
                         "cmd request")
    master_addr, master_port = parse_rendezvous_endpoint(endpoint, -1)
    if master_port == -1:
        raise ValueError(f"Port is absent in endpoint: {endpoint}. Try launching with --master-port")
    timeout = int(params.config["timeout"]) if "timeout" in params.config else _default_timeout_seconds
    return StaticTCPRendezvous(master_addr, master_port, int(params.config["rank"]), params.max_nodes,
                               params.run_id, timeout)
