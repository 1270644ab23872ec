"""One node of a job on Ray: a Ray actor, placed in its own placement-group bundle, that runs the node's workers
with the local agent's machinery (environment, log files, tee, error files, timer watchdog, in-memory state
store) for rounds its driver decides (ember.distributed.elastic.ray.launcher).

The actor also keeps its workers' last ``State`` commit in Ray's object store, with a copy in the object store of
the next node of the round: a worker's commit returns only once both copies exist, so a node lost with its workers
leaves their last commit behind, and a node that takes its place starts from it.
"""
import os
import socket
import sys
import threading
import time

import ray

from ember.distributed import TCPStore
from ember.distributed.elastic.agent.server.api import Worker, WorkerSpec
from ember.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from ember.distributed.elastic.rendezvous import RendezvousHandler

__all__ = ["NodeActor"]

# how often the actor looks for new commits of its workers (a commit waits for the copies)
_MIRROR_POLL = 0.01


class _DriverRounds(RendezvousHandler):
    """The rendezvous as a node of a job on Ray sees it: its driver forms the rounds, the nodes only follow."""

    def __init__(self, run_id):
        self._run_id, self._closed = run_id, False

    def get_backend(self):
        return "ray"

    @property
    def use_agent_store(self):
        return True

    def next_rendezvous(self):
        raise RuntimeError("the rounds of a job on Ray are formed by its driver")

    def is_closed(self):
        return self._closed

    def set_closed(self):
        self._closed = True

    def num_nodes_waiting(self):
        return 0

    def get_run_id(self):
        return self._run_id

    def shutdown(self):
        return True


class _Lines:
    """A text stream keeping what is written to it: the node's teed worker lines, which the driver fetches with
    each poll and prints (Ray's own forwarding of an actor's output may lag behind the end of the job)."""

    def __init__(self):
        self._lock, self._parts = threading.Lock(), []

    def write(self, text):
        with self._lock:
            self._parts.append(text)
        return len(text)

    def flush(self):
        pass

    def drain(self):
        with self._lock:
            text, self._parts = "".join(self._parts), []
        return text


class _NodeAgent(LocalElasticAgent):
    """The local agent with the round and the job's restart count given from outside."""

    round = None  # {"group_rank", "group_world_size", "master_addr", "master_port", "restarts"}

    def _restart_count(self):
        return self.round["restarts"] if self.round else 0

    def _rendezvous(self, worker_group):
        r, n = self.round, worker_group.spec.local_world_size
        world = r["group_world_size"] * n
        base = r["group_rank"] * n
        worker_group.workers = [Worker(local_rank=i, global_rank=base + i, role_rank=base + i, world_size=world,
                                       role_world_size=world) for i in range(n)]
        worker_group.group_rank, worker_group.group_world_size = r["group_rank"], r["group_world_size"]
        worker_group.master_addr, worker_group.master_port = r["master_addr"], r["master_port"]
        worker_group.store = (r["master_addr"], r["master_port"])  # served by the node of group rank 0


class NodeActor:
    """A node's agent. ``spec`` holds WorkerSpec's fields (without the rendezvous handler), ``env`` the
    launcher's environment for the workers, ``cwd`` its working folder."""

    def __init__(self, name, run_id, spec, logs_specs, start_method, log_line_prefix_template, shutdown_timeout,
                 env, cwd, launcher_python):
        os.environ.update(env)
        os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = ""  # Ray owns this process's signals
        os.environ["EMBER_ELASTIC_STATE_MIRROR"] = "1"  # commits wait for their copies (the workers inherit it)
        if os.path.isdir(cwd):
            os.chdir(cwd)
        if spec["entrypoint"] == launcher_python:
            spec = dict(spec, entrypoint=sys.executable)  # this node's interpreter
        self._name = name
        self._agent = _NodeAgent(WorkerSpec(rdzv_handler=_DriverRounds(run_id), **spec), logs_specs=logs_specs,
                                 start_method=start_method, log_line_prefix_template=log_line_prefix_template,
                                 shutdown_timeout=shutdown_timeout, exit_barrier_timeout=0)
        self._nproc = spec["local_world_size"]
        self._round_store = None
        self._started = False
        self._out = _Lines(), _Lines()
        # state copies: my workers' last commits {local rank: (version, ref)}, other nodes' {origin: {...}}
        self._lock = threading.Lock()
        self._buddy = None
        self._commits, self._kept = {}, {}
        self._mirror = None

    def __repr__(self):  # Ray prefixes the lines this actor prints with it
        return self._name

    def where(self):
        """This node: {"node_id", "ip", "host"}."""
        return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
                "host": socket.gethostname()}

    def open_round_store(self):
        """Serve the workers' store of a new round on this node; (address, port)."""
        self._close_round_store()
        ip = ray.util.get_node_ip_address()
        self._round_store = TCPStore(ip, 0, is_master=True, wait_for_workers=False)
        return ip, self._round_store.port

    def _close_round_store(self):
        if self._round_store is not None:
            self._round_store._release()
            self._round_store = None

    def start(self, round_info, buddy):
        """Start this node's workers for a round (stopping any still running); {local rank: pid}. ``buddy``: the
        actor holding copies of this node's commits (None: no other node)."""
        agent = self._agent
        group = agent.get_worker_group()
        if self._started:
            agent._stop_workers(group)
        agent.round = round_info
        with self._lock:
            self._buddy = buddy
        # the workers' console tails are made with the workers: they write to the streams set now
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._out
        try:
            agent._initialize_workers(group)
        finally:
            sys.stdout, sys.stderr = streams
        self._started = True
        if self._mirror is None:
            self._mirror = threading.Thread(target=self._mirror_commits, name="ember-state-mirror", daemon=True)
            self._mirror.start()
        return {w.local_rank: w.id for w in group.workers}

    def output(self):
        """(stdout, stderr): the teed worker lines written since the last call."""
        return self._out[0].drain(), self._out[1].drain()

    def poll(self, timeout):
        """Wait up to ``timeout`` seconds for a change, then the workers' state: (state name, return values by
        global rank, failures by global rank, each failure's ``host`` naming this node, (stdout, stderr) lines)."""
        agent = self._agent
        group = agent.get_worker_group()
        agent._wait_workers(group, timeout)
        result = agent._monitor_workers(group)
        if result.failures:
            where = self.where()
            for failure in result.failures.values():
                failure.host = f"{where['host']} (Ray node {where['node_id'][:16]}, {where['ip']})"
        return result.state.value, result.return_values, result.failures, self.output()

    def stop(self):
        """Stop the workers; (stdout, stderr) lines not fetched yet."""
        if self._started:
            self._agent._stop_workers(self._agent.get_worker_group())
        return self.output()

    def shutdown(self):
        """Stop everything; (stdout, stderr) lines not fetched yet."""
        self._agent._shutdown(timeout=self._agent._shutdown_timeout)
        self._close_round_store()
        self._started = False
        return self.output()

    # ------------------------------------------------------------------------------ copies of State commits

    def _mirror_commits(self):
        """Copy each new commit of a local rank into Ray's object store, here and on the buddy's node, then let the
        committing worker go on (it waits for key ``<local rank>/m<version>``)."""
        seen = dict.fromkeys(range(self._nproc), -1)
        while True:
            time.sleep(_MIRROR_POLL)
            store = self._agent._state_store
            if store is None:
                continue
            try:
                for lr in range(self._nproc):
                    key = f"{lr}/latest"
                    if not store.check([key]):
                        continue
                    version = int(store.get(key))
                    if version == seen[lr]:
                        continue
                    blob = store.get(f"{lr}/v{version}")
                    with self._lock:
                        self._commits[lr] = (version, ray.put(blob))
                        buddy = self._buddy
                    if buddy is not None:
                        try:
                            ray.get(buddy.keep.remote(self._name, lr, version, blob))
                        except ray.exceptions.RayError:
                            pass  # the buddy's node is gone: the job restarts anyway
                    store.set(f"{lr}/m{version}", b"")
                    if seen[lr] >= 0:
                        store.delete_key(f"{lr}/m{seen[lr]}")
                    seen[lr] = version
            except Exception:  # the store went away (shutdown): look again later
                continue

    def keep(self, origin, local_rank, version, blob):
        """Hold a copy of node ``origin``'s last commit of ``local_rank`` in this node's object store."""
        with self._lock:
            self._kept.setdefault(origin, {})[local_rank] = (version, ray.put(blob))

    def take_kept(self, origins):
        """The copies held for ``origins`` (nodes that are gone), forgotten here: {origin: {local rank: (version,
        bytes)}}."""
        with self._lock:
            taken = {o: self._kept.pop(o) for o in origins if o in self._kept}
        return {o: {lr: (v, ray.get(ref)) for lr, (v, ref) in commits.items()} for o, commits in taken.items()}

    def seed(self, commits):
        """Take over a lost node's last commits {local rank: (version, bytes)}: the workers restore them."""
        self._agent._serve_state()
        store = self._agent._state_store
        for lr, (version, blob) in commits.items():
            store.set(f"{lr}/v{version}", blob)
            store.set(f"{lr}/latest", str(version))

    def commits(self):
        """{local rank: version} of the commits this node holds in Ray's object store."""
        with self._lock:
            return {lr: v for lr, (v, _) in self._commits.items()}
