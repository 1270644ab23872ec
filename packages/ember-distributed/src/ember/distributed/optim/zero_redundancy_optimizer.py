"""``ZeroRedundancyOptimizer``: the optimizer state sharded over the ranks of a process group (ZeRO stage 1).

Each rank keeps a local optimizer over its share of the parameters only; after it steps them, every rank broadcasts
its share so that all replicas hold the same parameters again. The shares are torch's: within each parameter group,
the parameters sorted by size (largest first, stable) go one by one to the rank with the fewest elements so far,
so ``optim.param_groups`` and the state layout of each rank are those torch's ZeroRedundancyOptimizer builds.
"""
import copy
import itertools
import logging

import ember
import ember.distributed as dist
from ember import optim as _optim
from ember.distributed import distributed_c10d
from ember.distributed.algorithms.join import Join, Joinable, JoinHook

from .utils import functional_optim_map

__all__ = ["ZeroRedundancyOptimizer"]

logger = logging.getLogger(__name__)


def _to_cpu(value):
    """``value`` (a state_dict or any part of it) with its tensors on the CPU (those there already: as they are)."""
    if isinstance(value, ember.Tensor):
        return value.to("cpu")
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def _to_device(value, device):
    if isinstance(value, ember.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


class _ZeROJoinHook(JoinHook):
    """A joined rank still steps its share (it has no new gradients) and broadcasts it for the others."""

    def __init__(self, zero):
        if not isinstance(zero, ZeroRedundancyOptimizer):
            raise AssertionError("ZeRO join hook requires passing in a ZeroRedundancyOptimizer instance as the state")
        self.zero = zero
        super().__init__()

    def main_hook(self):
        self.zero.step()


class ZeroRedundancyOptimizer(_optim.Optimizer, Joinable):
    """``ZeroRedundancyOptimizer(params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
    overlap_with_ddp=False, **defaults)``: ``optimizer_class(this rank's param groups, **defaults)`` is
    ``self.optim``; ``step()`` steps it and broadcasts every rank's share (with ``parameters_as_bucket_view``, each
    rank's share lives in one flat buffer per device, broadcast at once). ``consolidate_state_dict(to)`` (on every
    rank) gathers the shards' state on rank ``to``, whose ``state_dict()`` is then the whole optimizer's, indexed as
    a plain optimizer over ``params`` would be; ``load_state_dict`` takes such a dict on every rank.
    ``overlap_with_ddp=True`` (stepping inside DDP's communication hook) is not implemented in ember."""

    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        params = self._verify_and_init_params(params)
        self._verify_same_dense_param_type()
        self.initialized = False
        _optim.Optimizer.__init__(self, params, defaults)
        Joinable.__init__(self)
        self._partition_parameters_cache = []
        self._param_to_rank_cache = {}
        self._param_to_index_cache = {}
        self._index_to_param_cache = []
        self._device_to_params_per_rank_cache = {}
        self._is_trainable_mask = self._get_is_trainable_mask()
        self._default_device = self._all_params[0].device
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.world_size = dist.get_world_size(self.process_group)
        self.rank = dist.get_rank(self.process_group)
        self.global_rank = distributed_c10d.get_global_rank(self.process_group, self.rank)
        self._overlap_with_ddp = overlap_with_ddp
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not implemented in ember: "
                                      "step the optimizer after the backward pass (overlap_with_ddp=False)")
        self._optim_defaults = defaults
        self._optim_constructor = self._get_optimizer_constructor(optimizer_class)
        self._init_local_optimizer()
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._buckets = []
        self._build_param_buckets()
        self._all_state_dicts = []
        self.initialized = True

    # ---- arguments ----------------------------------------------------------------------------------------------
    def _verify_and_init_params(self, params):
        """``params`` as a list (tensors, or parameter groups); sets ``_all_params``."""
        if isinstance(params, ember.Tensor):
            raise TypeError(f"`params` argument should be an iterable of Tensors, but got {params.type()}")
        try:
            all_params = list(params)
        except TypeError as e:
            kind = type(params)
            name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            raise TypeError(f"`params` argument should be an iterable of Tensors or dicts, but got {name}") from e
        if not all_params:
            raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
        if all(isinstance(p, ember.Tensor) for p in all_params):
            self._all_params = all_params
        elif all(isinstance(p, dict) for p in all_params):
            self._all_params = []
            for group in all_params:
                if "params" not in group:
                    raise ValueError("Each parameter group passed-in via `params` must have a 'params' key mapping "
                                     "to the parameters in the group")
                self._all_params.extend(group["params"])
        else:
            raise TypeError("`params` argument should be an iterable of Tensors or dicts")
        return all_params

    def _verify_same_dense_param_type(self):
        first = self._all_params[0]
        typename = first.type()
        if first.is_sparse:
            raise ValueError(f"ZeroRedundancyOptimizer only supports using the same dense type for all parameters "
                             f"but got {typename}")
        for param in self._all_params[1:]:
            other = param.type()
            if other != typename:
                raise ValueError("ZeroRedundancyOptimizer only supports using the same dense type for all "
                                 f"parameters but got both {typename} and {other}")

    def _get_optimizer_constructor(self, optimizer_class):
        if optimizer_class in functional_optim_map.values():
            raise ValueError(f"Passing in a functional optimizer {optimizer_class} when `overlap_with_ddp=False`")
        return optimizer_class

    def _get_is_trainable_mask(self):
        return [p.requires_grad for p in self._all_params]

    # ---- the partition --------------------------------------------------------------------------------------------
    def _clear_cache(self):
        self._partition_parameters_cache.clear()
        self._param_to_rank_cache.clear()
        self._index_to_param_cache.clear()
        self._param_to_index_cache.clear()
        self._device_to_params_per_rank_cache.clear()

    def _partition_parameters(self, params_per_rank=None):
        """Per rank, its parameter groups (copies of ``param_groups`` holding that rank's share of each group's
        parameters); ``params_per_rank`` (one group only) gives the shares instead of the greedy assignment."""
        if params_per_rank is None:
            if not self._partition_parameters_cache:
                self._partition_parameters_cache = [[] for _ in range(self.world_size)]
                sizes = [0] * self.world_size
                for group in self.param_groups:
                    shares = [[] for _ in range(self.world_size)]
                    for param in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                        rank = sizes.index(min(sizes))  # the first of the least loaded ranks
                        shares[rank].append(param)
                        sizes[rank] += param.numel()
                    self._partition_param_group(group, shares)
            return self._partition_parameters_cache
        if self._partition_parameters_cache:
            raise AssertionError("Specifying `params_per_rank` should only be done when the parameters have not "
                                 "been partitioned yet")
        if len(self.param_groups) != 1:
            raise RuntimeError("Specifying `params_per_rank` only supports a single parameter group")
        self._verify_params_per_rank(params_per_rank)
        self._partition_parameters_cache = [[] for _ in range(self.world_size)]
        self._partition_param_group(self.param_groups[0], params_per_rank)
        return self._partition_parameters_cache

    def _verify_params_per_rank(self, params_per_rank):
        if len(params_per_rank) != self.world_size:
            raise ValueError("`params_per_rank` must have length equal to the world size")
        known = set(self._all_params)
        if any(p not in known for params in params_per_rank for p in params):
            raise ValueError("Passing a new parameter in `params_per_rank` that was not passed into the "
                             "ZeroRedundancyOptimizer constructor")

    def _partition_param_group(self, param_group, params_per_rank):
        for rank, params in enumerate(params_per_rank):
            share = copy.copy(param_group)
            share["params"] = params
            self._partition_parameters_cache[rank].append(share)

    @property
    def _param_to_rank(self):
        if not self._param_to_rank_cache:
            for rank, groups in enumerate(self._partition_parameters()):
                for group in groups:
                    for param in group["params"]:
                        self._param_to_rank_cache[param] = rank
        return self._param_to_rank_cache

    @property
    def _param_to_index(self):
        """Parameter -> its index in the whole optimizer's state_dict (numbered through the groups in order)."""
        if not self._param_to_index_cache:
            self._param_to_index_cache = {p: i for i, p in enumerate(self._index_to_param)}
        return self._param_to_index_cache

    @property
    def _index_to_param(self):
        if not self._index_to_param_cache:
            self._index_to_param_cache = list(itertools.chain.from_iterable(g["params"] for g in self.param_groups))
        return self._index_to_param_cache

    @property
    def _device_to_params_per_rank(self):
        """Device -> per rank, the parameters of its share on that device (for the buckets)."""
        if not self._device_to_params_per_rank_cache:
            for rank, groups in enumerate(self._partition_parameters()):
                for group in groups:
                    for param in group["params"]:
                        per_rank = self._device_to_params_per_rank_cache.setdefault(
                            param.device, [[] for _ in range(self.world_size)])
                        per_rank[rank].append(param)
        return self._device_to_params_per_rank_cache

    def _init_local_optimizer(self):
        self.optim = self._optim_constructor(self._partition_parameters()[self.rank], **self._optim_defaults)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)

    def _build_param_buckets(self):
        """With ``parameters_as_bucket_view``: per device and rank, one flat buffer holding that rank's trainable
        parameters, whose data become views of it (frozen ones get data of their own)."""
        if not self.parameters_as_bucket_view:
            return
        self._buckets = []
        for device, params_per_rank in self._device_to_params_per_rank.items():
            buckets = []
            for params in params_per_rank:
                trainable = [p for p in params if p.requires_grad]
                for p in params:
                    if not p.requires_grad:
                        p.data = p.data.detach().clone()
                size = sum(p.numel() for p in trainable)
                if size == 0:
                    bucket = ember.zeros(1, device=device)
                else:
                    bucket = ember.empty(size, dtype=params[-1].dtype, device=device)
                    offset = 0
                    for p in trainable:
                        end = offset + p.numel()
                        bucket[offset:end].copy_(p.data.flatten())
                        p.data = bucket[offset:end].view_as(p.data)
                        offset = end
                buckets.append(bucket)
            self._buckets.append(buckets)

    @staticmethod
    def _sync_param_groups(src_param_groups, dst_param_groups):
        """Copy the options (lr, ...) of each source group into the matching destination group."""
        if len(src_param_groups) != len(dst_param_groups):
            raise AssertionError("Mismatch between number of source and destination parameter groups")
        for src, dst in zip(src_param_groups, dst_param_groups):
            for k, v in src.items():
                if k != "params":
                    dst[k] = v

    # ---- stepping ---------------------------------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a group (on every rank): it is partitioned anew, and this rank's share of it goes to ``optim``."""
        super().add_param_group(param_group)
        if self.initialized:
            self._clear_cache()
            groups = self._partition_parameters()[self.rank]
            if len(groups) == len(self.optim.param_groups) + 1:
                self.optim.add_param_group(groups[-1])
            if self.parameters_as_bucket_view:
                self._build_param_buckets()

    def _local_step(self, closure=None, **kwargs):
        Join.notify_join_context(self)
        mask = self._get_is_trainable_mask()
        if mask != self._is_trainable_mask:  # parameters were frozen or unfrozen: the buckets change
            logger.warning("ZeroRedundancyOptimizer detected that the trainable parameters changed; rebuilding the "
                           "parameter buckets if enabled")
            self._build_param_buckets()
            self._is_trainable_mask = mask
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        return loss

    def _broadcast_params_from_rank(self, rank):
        """Start broadcasting ``rank``'s share (its buckets, or its parameters one by one); the Works."""
        src = distributed_c10d.get_global_rank(self.process_group, rank)
        if self.parameters_as_bucket_view:
            tensors = [buckets[rank] for buckets in self._buckets]
        else:
            tensors = [p.data for group in self._partition_parameters()[rank] for p in group["params"]]
        return [dist.broadcast(t, src=src, group=self.process_group, async_op=True) for t in tensors]

    def _sync_params(self):
        works = [w for rank in range(self.world_size) for w in self._broadcast_params_from_rank(rank)]
        for w in works:
            w.wait()

    def step(self, closure=None, **kwargs):
        """Step this rank's share (extra keyword arguments go to the local optimizer), then bring every rank's
        updated share to all ranks; the closure's loss, if any."""
        loss = self._local_step(closure=closure, **kwargs)
        self._sync_params()
        return loss

    # ---- Join ---------------------------------------------------------------------------------------------------
    def join_hook(self, **kwargs):
        """A hook that keeps stepping (and broadcasting) this rank's share while others still train."""
        return _ZeROJoinHook(self)

    @property
    def join_device(self):
        return self._default_device

    @property
    def join_process_group(self):
        return self.process_group

    # ---- state_dict ---------------------------------------------------------------------------------------------
    def consolidate_state_dict(self, to=0):
        """Gather every rank's local optimizer state on rank ``to`` (group rank) for ``state_dict()``; call it on
        every rank."""
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        self._all_state_dicts = []
        for rank in range(self.world_size):
            if rank == to:  # rank ``to``'s own shard needs no broadcast
                if self.rank == to:
                    self._all_state_dicts.append(_to_cpu(self.optim.state_dict()))
                continue
            # every rank takes part in each broadcast of another shard, as in torch's consolidation
            src = distributed_c10d.get_global_rank(self.process_group, rank)
            box = [self.optim.state_dict() if rank == self.rank else None]
            dist.broadcast_object_list(box, src=src, group=self.process_group)
            if self.rank == to:
                self._all_state_dicts.append(_to_cpu(box[0]))

    def state_dict(self):
        """The whole optimizer's state as last consolidated on this rank (RuntimeError if it was not)."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant to "
                               "save the global state.")
        state_dict = super().state_dict()
        for rank, local in enumerate(self._all_state_dicts):
            shares = self._partition_parameters()[rank]
            if len(local["param_groups"]) != len(shares):
                raise AssertionError("Mismatch between number of local and global parameter groups")
            for local_group, share in zip(local["param_groups"], shares):
                if len(local_group["params"]) != len(share["params"]):
                    raise AssertionError("Mismatch between number of local and global parameters in parameter "
                                         "group")
                for local_index, param in zip(local_group["params"], share["params"]):
                    if local_index in local["state"]:
                        state_dict["state"][self._param_to_index[param]] = local["state"][local_index]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict):
        """Load a whole optimizer's state_dict (as ``state_dict()`` gives): this rank keeps the state of its share
        (the others' entries become None, in ``state_dict`` too, as torch does) and takes the groups' options."""
        for index, value in state_dict["state"].items():
            param = self._index_to_param[index]
            if self._param_to_rank[param] != self.rank:
                state_dict["state"][index] = None
            else:
                self.optim.state[param] = state = _to_device(value, param.device)
                for name, v in state.items():  # 0-d state (step counters) stays on the CPU
                    if isinstance(v, ember.Tensor) and v.dim() == 0:
                        state[name] = v.cpu()
        super().load_state_dict(state_dict)
        self._sync_param_groups(state_dict["param_groups"], self.param_groups)
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
