"""The driver of an elastic job on Ray (``emberrun --ray-address ADDR``, ``ray_launch``).

The driver (the launcher's process) asks Ray for one placement group per node of the job, each one bundle of
nproc-per-node CPUs (or GPUs), preferably on a Ray node the job does not use yet (spread), and starts a NodeActor
in each; the job's rounds and restart budget live in the JobCoordinator actor. It polls the nodes every monitor
interval:

* a worker failed, or a node's actor died (its Ray node was lost: Ray reports it within seconds): one restart of
  the job's budget (``--max-restarts``), then a new round on the nodes there are, once at least MIN are;
* fewer than MAX nodes: the missing nodes' placement groups wait in Ray's queue, so a scheduling delay is never
  taken for a failure; when Ray places one (a node joined or freed its resources), a new round takes it in without
  using the budget;
* every node's workers succeeded: their return values by global rank.
"""
import json
import os
import sys
import tempfile
import threading
import time
import uuid

import ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ember.distributed.elastic.multiprocessing.api import _install_signal_handlers
from ember.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from ember.distributed.elastic.rendezvous import RendezvousTimeoutError
from ember.distributed.elastic.utils.logging import get_logger
from ember.distributed.launcher.api import _get_entrypoint_name

from .coordinator import NAMESPACE, JobCoordinator, coordinator_name
from .node import NodeActor

__all__ = ["connect", "ray_launch"]

logger = get_logger(__name__)

_RemoteNode = ray.remote(NodeActor)
# variables of the launcher's environment not passed on to the workers: Ray's own, and the launcher host's
_HOST_ONLY = ("HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "CUDA_VISIBLE_DEVICES")
_DEFAULT_PREFIX = "[${role_name}${rank}]:"


def connect(address="local"):
    """Connect this process to Ray: ``"local"`` starts a Ray instance on this machine (for this process only),
    ``"auto"`` joins the cluster this machine is part of, ``"ray://host:port"`` uses Ray Client, ``"host:port"``
    a cluster's GCS. Nothing happens when Ray is up in this process already."""
    if ray.is_initialized():
        return
    if address == "local":
        ray.init(address="local", include_dashboard=False)
    else:
        ray.init(address=address)


class _Slot:
    """A node of the job: its placement group, then its actor and where that runs."""

    def __init__(self, seq, pg, target):
        self.seq, self.pg, self.target = seq, pg, target
        self.name = self.actor = self.booting = self.info = self.poll = self.group_rank = None
        self.started, self.state, self.values = False, None, {}


class _RayJob:
    def __init__(self, config, entrypoint, args, placement, gpus, env):
        if placement not in ("spread", "pack"):
            raise ValueError(f"placement must be 'spread' or 'pack', got {placement!r}")
        self.config, self.entrypoint, self.args = config, entrypoint, list(args)
        self.run_id = config.run_id if config.run_id not in ("", "none") else str(uuid.uuid4())
        self.prefix = coordinator_name(self.run_id)
        self.placement, self.gpus = placement, gpus
        n = config.nproc_per_node
        self.bundle = {"GPU": n} if gpus else {"CPU": n}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k not in _HOST_ONLY}
        self.env.update(env or {})
        self.interval = config.monitor_interval
        self.join_timeout = float(config.rdzv_configs.get("join_timeout", 600))
        self.slots, self.members = [], []
        self.lost = {}  # nodes lost since the last round: {name: group rank}
        self.seq = self.round = 0
        self.coord = None

    # ---------------------------------------------------------------------------------------------- nodes

    def _request(self):
        """Ask Ray for one more node's bundle; spread: preferably on a Ray node the job does not use yet."""
        target = None
        if self.placement == "spread":
            used = {s.info["node_id"] if s.info else s.target for s in self.slots}
            for node in ray.nodes():
                if node["Alive"] and node["NodeID"] not in used and all(
                        node["Resources"].get(k, 0) >= v for k, v in self.bundle.items()):
                    target = node["NodeID"]
                    break
        pg = placement_group([self.bundle], strategy="STRICT_PACK", name=f"{self.prefix}:pg{self.seq}",
                             _soft_target_node_id=target)
        self.slots.append(_Slot(self.seq, pg, target))
        self.seq += 1

    def _start_actor(self, slot):
        c = self.config
        slot.name = f"{self.prefix}:node{slot.seq}"
        spec = {"role": c.role, "local_world_size": c.nproc_per_node, "entrypoint": self.entrypoint,
                "args": tuple(self.args), "max_restarts": c.max_restarts, "monitor_interval": c.monitor_interval,
                "event_log_handler": c.event_log_handler, "duplicate_stdout_filters": c.duplicate_stdout_filters,
                "duplicate_stderr_filters": c.duplicate_stderr_filters, "virtual_local_rank": c.virtual_local_rank}
        resources = {"num_gpus": c.nproc_per_node, "num_cpus": 0} if self.gpus else {"num_cpus": c.nproc_per_node}
        slot.actor = _RemoteNode.options(
            name=slot.name, namespace=NAMESPACE, max_restarts=0, **resources,
            scheduling_strategy=PlacementGroupSchedulingStrategy(slot.pg, 0)).remote(
            slot.name, self.run_id, spec, c.logs_specs, c.start_method,
            c.log_line_prefix_template or _DEFAULT_PREFIX, c.shutdown_timeout, self.env, os.getcwd(), sys.executable)
        slot.booting = slot.actor.where.remote()

    def _fill(self):
        """Start an actor in each placement group Ray placed; keep requests for the nodes missing up to MAX."""
        for slot in self.slots:
            if slot.actor is None and placement_group_table(slot.pg)["state"] == "CREATED":
                self._start_actor(slot)
        while len(self.slots) < self.config.max_nodes:
            self._request()

    def _settle(self, timeout):
        """Wait up to ``timeout`` seconds for actors that are starting; drop those that died."""
        booting = [s for s in self.slots if s.booting is not None]
        if not booting:
            return
        done, _ = ray.wait([s.booting for s in booting], num_returns=len(booting), timeout=timeout)
        for slot in booting:
            if slot.booting in done:
                try:
                    slot.info = ray.get(slot.booting)
                except ray.exceptions.RayError:
                    self._drop(slot)
                slot.booting = None

    def _drop(self, slot):
        """Forget a node (its actor died or it is not needed): kill its actor, free its placement group."""
        if slot.actor is not None:
            ray.kill(slot.actor)
        remove_placement_group(slot.pg)
        self.slots.remove(slot)
        if slot in self.members:
            self.members.remove(slot)
        if slot.started:
            self.lost[slot.name] = slot.group_rank

    # --------------------------------------------------------------------------------------------- rounds

    def _form_round(self):
        """Wait for at least MIN nodes (and the actors Ray is starting), then start every node's workers."""
        deadline = time.monotonic() + self.join_timeout
        while True:
            self._fill()
            self._settle(self.interval)
            ready = [s for s in self.slots if s.info is not None]
            booting = any(s.booting is not None for s in self.slots)
            if len(ready) >= self.config.min_nodes and not booting:
                members = self._arrange(ready[:self.config.max_nodes])
                if self._start_round(members):
                    return
                continue
            if time.monotonic() > deadline:
                raise RendezvousTimeoutError(
                    f"only {len(ready)} of at least {self.config.min_nodes} nodes of {self.bundle} were placed by "
                    f"Ray within join_timeout={self.join_timeout}s")
            if not booting:
                time.sleep(self.interval)

    def _arrange(self, ready):
        """The nodes of the next round by group rank: a node keeps its rank where it can, so that its workers keep
        their global ranks (and their per-rank state); a new node takes the rank of a lost one."""
        n = len(ready)
        order = [None] * n
        movers = []
        for slot in sorted(ready, key=lambda s: (s.group_rank is None, s.group_rank or 0, s.seq)):
            if slot.group_rank is not None and slot.group_rank < n and order[slot.group_rank] is None:
                order[slot.group_rank] = slot
            else:
                movers.append(slot)
        holes = [i for i, s in enumerate(order) if s is None]
        for i, slot in zip(holes, movers):
            order[i] = slot
        return order

    def _start_round(self, members):
        """Start round ``self.round + 1`` on ``members``; False if a node died meanwhile (dropped)."""
        n = len(members)
        calls = []
        try:
            addr, port = ray.get(members[0].actor.open_round_store.remote())
            restarts = ray.get(self.coord.begin_round.remote(self.round + 1, [m.name for m in members]))
            self._seed(members)
            for i, m in enumerate(members):
                info = {"group_rank": i, "group_world_size": n, "master_addr": addr, "master_port": port,
                        "restarts": restarts}
                calls.append((m, m.actor.start.remote(info, members[(i + 1) % n].actor if n > 1 else None)))
            ray.get([ref for _, ref in calls])
        except ray.exceptions.RayActorError:
            for m in members:
                try:
                    ray.get(m.actor.where.remote(), timeout=30)
                except ray.exceptions.RayError:
                    self._drop(m)
            for m, _ in calls:
                if m in self.slots:
                    m.actor.stop.remote()
            return False
        self.round += 1
        self.members, self.lost = members, {}
        for rank, m in enumerate(members):
            m.started, m.group_rank, m.state, m.values, m.poll = True, rank, None, {}, None
        logger.info("Round %s of job %s: %s nodes (%s), %s restarts used", self.round, self.run_id, n,
                    ", ".join(f"{m.name} on {m.info['node_id'][:8]}" for m in members), restarts)
        return True

    def _seed(self, members):
        """Give new nodes the last commits of the nodes lost since the previous round (copies held by others)."""
        if not self.lost:
            return
        copies = {}
        for m in members:
            if m.started:
                copies.update(ray.get(m.actor.take_kept.remote(list(self.lost))))
        for rank, m in enumerate(members):
            origin = next((o for o, r in self.lost.items() if r == rank), None)
            if not m.started and origin in copies:
                ray.get(m.actor.seed.remote(copies[origin]))

    def _monitor(self):
        """Poll the round's nodes until it ends: ("succeeded", values), ("failed", failures, lost nodes) or
        ("grow",)."""
        while True:
            running = [m for m in self.members if m.state != "SUCCEEDED"]
            for m in running:
                if m.poll is None:
                    m.poll = m.actor.poll.remote(self.interval)
            done, _ = ray.wait([m.poll for m in running], num_returns=len(running), timeout=self.interval + 1.0)
            failures, lost = {}, []
            for m in running:
                if m.poll not in done:
                    continue  # slow to answer (a busy node): asked again when it does
                ref, m.poll = m.poll, None
                try:
                    m.state, values, failed, output = ray.get(ref)
                    _echo(output)
                except ray.exceptions.RayActorError as e:
                    lost.append((m, e))
                    continue
                m.values.update(values)
                failures.update(failed)
            if failures or lost:
                return "failed", failures, lost
            if all(m.state == "SUCCEEDED" for m in self.members):
                return ("succeeded", {r: v for m in self.members for r, v in m.values.items()})
            if all(m.state == "HEALTHY" for m in self.members) and len(self.members) < self.config.max_nodes:
                self._fill()
                self._settle(0)
                if any(s.info is not None and s not in self.members for s in self.slots):
                    logger.info("A node joined job %s: new round", self.run_id)
                    return ("grow",)

    def _lost_report(self, slot, error):
        """Failures standing for the workers of a lost node."""
        n = self.config.nproc_per_node
        rank = slot.group_rank * n
        out = {}
        for lr in range(n):
            failure = ProcessFailure(local_rank=lr, pid=-1, exitcode=-9, error_file="")
            failure.message = f"node lost: its Ray node {slot.info['node_id']} or its agent actor died ({error})"
            failure.host = f"{slot.info['host']} (Ray node {slot.info['node_id'][:16]}, {slot.info['ip']})"
            out[rank + lr] = failure
        return out

    def _stop_members(self):
        refs = [(m, m.actor.stop.remote()) for m in self.members]
        for m, ref in refs:
            try:
                _echo(ray.get(ref))
            except ray.exceptions.RayError:
                self._drop(m)

    def run(self):
        self.coord = JobCoordinator.options(name=self.prefix, namespace=NAMESPACE).remote(
            self.run_id, self.config.max_restarts)
        try:
            while True:
                self._form_round()
                outcome = self._monitor()
                if outcome[0] == "succeeded":
                    return outcome[1]
                if outcome[0] == "grow":
                    self._stop_members()
                    continue
                _, failures, lost = outcome
                for slot, error in lost:
                    failures.update(self._lost_report(slot, error))
                for slot, _ in lost:
                    self._drop(slot)
                granted = ray.get(self.coord.use_restart.remote(self.round))
                self._stop_members()
                if not granted:
                    raise ChildFailedError(name=_get_entrypoint_name(self.entrypoint, self.args),
                                           failures=_local_error_files(failures))
                logger.warning("Job %s: %s failed, %s node(s) lost; restarting (%s)", self.run_id,
                               sorted(failures), len(lost), ray.get(self.coord.state.remote()))
        finally:
            self._release()

    def _release(self):
        """Stop every node's workers, then kill the actors and free the placement groups."""
        refs = [s.actor.shutdown.remote() for s in self.slots if s.actor is not None]
        if refs:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=self.config.shutdown_timeout + 5)
            for ref in done:
                try:
                    _echo(ray.get(ref))
                except ray.exceptions.RayError:
                    pass
        for slot in list(self.slots):
            if slot.actor is not None:
                ray.kill(slot.actor)
            remove_placement_group(slot.pg)
        self.slots, self.members = [], []
        if self.coord is not None:
            try:
                ray.get(self.coord.forget.remote(), timeout=30)
            except ray.exceptions.RayError:
                pass
            ray.kill(self.coord, no_restart=True)


def _echo(output):
    """Print a node's teed worker lines (stdout, stderr) on this console."""
    for text, stream in zip(output, (sys.stdout, sys.stderr)):
        if text:
            stream.write(text)
            stream.flush()


def _local_error_files(failures):
    """Error files written on other machines, copied here (the launcher's @record reads the root cause's)."""
    for failure in failures.values():
        if failure.error_file != "<N/A>" and not os.path.exists(failure.error_file):
            fd, path = tempfile.mkstemp(prefix="ember_elastic_error_", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(failure.error_file_data, f)
            failure.error_file = path
    return failures


class ray_launch:
    """``ray_launch(config, entrypoint, address="local")(*args)``: run ``entrypoint`` (a command such as
    ``sys.executable`` with the script in ``args``, or an importable function) on a Ray cluster as ``config``
    (a LaunchConfig) says: ``min_nodes``..``max_nodes`` nodes of ``nproc_per_node`` workers, ``max_restarts``
    for the whole job; {global rank: return value}, or ChildFailedError. ``address``: see ``connect``;
    ``placement``: "spread" (nodes on distinct Ray nodes where possible) or "pack"; ``gpus``: bundles of GPUs
    rather than CPUs; ``env``: variables added to the workers' environment (which is this process's, less Ray's
    variables and host-specific ones)."""

    def __init__(self, config, entrypoint, address="local", placement="spread", gpus=False, env=None):
        self._job = (config, entrypoint, placement, gpus, env)
        self._address = address

    def __call__(self, *args):
        config, entrypoint, placement, gpus, env = self._job
        connect(self._address)
        os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = config.signals_to_handle
        if threading.current_thread() is threading.main_thread():
            _install_signal_handlers()  # a signal stops the job's nodes before the launcher exits
        return _RayJob(config, entrypoint, args, placement, gpus, env).run()
