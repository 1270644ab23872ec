"""``ember.distributed.replica``: torch_xla's ``xla_model`` API (``import torch_xla.core.xla_model as xm``) on
ember's devices and process groups.

A replica is a process (its ordinal: its rank in the default process group), its device is ``cuda:LOCAL_RANK``
when CUDA is there, else the CPU. The collectives (``all_reduce``, ``all_gather``, ``reduce_scatter``,
``all_to_all``, ``collective_permute``, ``collective_broadcast``, ``send``/``recv``) run on the default process
group, or on subgroups for ``groups=[[0, 1], [2, 3]]`` (every replica passes the same ``groups``; each list is a
group, its order the order of the results). Nothing is compiled: ``mark_step`` marks the end of a step (it runs
the step closures), ``pin_layout`` is accepted and has no effect.

Launch with ``spawn(fn, args, nprocs)`` (like ``torch_xla.distributed.xla_multiprocessing.spawn``), or with a
launcher that sets MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE: the first collective then joins the default process
group (env://) if the script has not. Without either the world is this one process and the collectives return
their input's values.
"""
import contextlib
import io
import operator
import os
import queue
import socket
import sys
import threading
import time
import warnings
from typing import TypedDict

import numpy as np

import ember

from . import distributed_c10d as _c10d
from .collectives import (
    P2POp,
    ReduceOp,
    all_gather_object,
    all_gather_single,
    batch_isend_irecv,
    irecv,
    isend,
    reduce_scatter_single,
)
from .collectives import all_reduce as _all_reduce
from .collectives import all_to_all as _all_to_all
from .collectives import recv as _recv
from .collectives import send as _send

__all__ = ["REDUCE_SUM", "REDUCE_MUL", "REDUCE_AND", "REDUCE_OR", "REDUCE_MIN", "REDUCE_MAX", "RateTracker",
           "CoalescingBuckets", "MemoryInfo", "add_step_closure", "all_gather", "all_gather_bucketized",
           "all_reduce", "all_reduce_bucketized_gradients", "all_to_all", "broadcast_master_param",
           "check_view_sharing", "collective_broadcast", "collective_permute", "do_on_ordinals", "fork_rng",
           "get_local_ordinal", "get_memory_info", "get_ordinal", "get_rng_state", "get_xla_supported_devices",
           "is_master_ordinal", "mark_step", "master_print", "mesh_reduce", "optimizer_step", "recv",
           "reduce_gradients", "reduce_scatter", "reduce_scatter_bucketized", "rendezvous", "save", "send",
           "send_cpu_data_to_device", "set_rng_state", "spawn", "wait_device_ops", "xla_device", "xla_device_hw",
           "xla_rendezvous", "xrt_world_size"]

REDUCE_SUM = "sum"
REDUCE_MUL = "mul"
REDUCE_AND = "and"
REDUCE_OR = "or"
REDUCE_MIN = "min"
REDUCE_MAX = "max"

_OPS = {REDUCE_SUM: ReduceOp.SUM, REDUCE_MUL: ReduceOp.PRODUCT, REDUCE_AND: ReduceOp.BAND,
        REDUCE_OR: ReduceOp.BOR, REDUCE_MIN: ReduceOp.MIN, REDUCE_MAX: ReduceOp.MAX}


# ---- ordinals and devices --------------------------------------------------------------------------------------------
def _env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def get_ordinal():
    """This replica's global ordinal: its rank in the default process group (RANK before init; 0 alone)."""
    if _c10d.is_initialized():
        return _c10d.get_rank()
    return _env_int("RANK", 0)


def get_local_ordinal():
    """This replica's ordinal among the replicas of its host (LOCAL_RANK, else the global ordinal)."""
    return _env_int("LOCAL_RANK", get_ordinal())


def xrt_world_size():
    """The number of replicas: the default process group's size (WORLD_SIZE before init; 1 alone)."""
    if _c10d.is_initialized():
        return _c10d.get_world_size()
    return _env_int("WORLD_SIZE", 1)


def is_master_ordinal(local=True):
    """Whether this replica is ordinal 0 of its host (``local``) or of the whole world."""
    return (get_local_ordinal() if local else get_ordinal()) == 0


def master_print(*args, fd=sys.stdout, local=False, flush=False):
    """``print`` on the master ordinal only (of the world, or of each host with ``local``)."""
    if is_master_ordinal(local=local):
        print(*args, file=fd, flush=flush)


def _devices():
    if ember.cuda.is_available():
        return [f"cuda:{i}" for i in range(ember.cuda.device_count())]
    return ["cpu"]


def get_xla_supported_devices(devkind=None, max_devices=None):
    """The devices replicas run on, as strings: "cuda:0", "cuda:1", ... with CUDA, else ["cpu"]. ``devkind``
    ("CUDA"/"GPU" or "CPU"; deprecated in torch_xla) keeps one kind (None when there is none of it)."""
    devices = _devices()
    if devkind:
        warnings.warn("`devkind` argument is deprecated and will be removed in a future release.", stacklevel=2)
        kind = {"GPU": "cuda"}.get(devkind.upper(), devkind.lower())
        devices = [d for d in devices if d.split(":")[0] == kind]
        if not devices:
            return None
    return devices[:max_devices] if max_devices else devices


def xla_device(n=None, devkind=None):
    """This replica's device (``n`` None): ``cuda:LOCAL_RANK`` (modulo the GPU count) with CUDA, else the CPU;
    or the ``n``-th device of ``get_xla_supported_devices(devkind)``."""
    devices = get_xla_supported_devices(devkind) if devkind else _devices()
    if not devices:
        raise RuntimeError(f"No devices of kind {devkind!r}: the devices are {_devices()}")
    if n is None:
        n = get_local_ordinal() % len(devices)
    elif not 0 <= n < len(devices):
        raise RuntimeError(f"Device ordinal {n} out of range: the devices are {devices}")
    return ember.device(devices[n])


def xla_device_hw(device):
    """The hardware of ``device`` (a device or its name): "CPU" or "CUDA"."""
    kind = str(device).split(":")[0].lower()
    if kind not in ("cpu", "cuda"):
        raise RuntimeError(f"Invalid device format: {device}")
    return kind.upper()


# ---- the replica group of a collective -------------------------------------------------------------------------------
_subgroups = {"owner": None, "groups": {}}  # subgroups made for ``groups=`` arguments, of the current default group


def _join():
    """Join the default process group from the launcher's environment if the script has not; True when there is
    a process group to run collectives on."""
    if not _c10d.is_initialized() and _env_int("WORLD_SIZE", 1) > 1:
        _c10d.init_process_group()
    return _c10d.is_initialized()


def _group(groups):
    """``(group, size, index)``: the process group of this replica for ``groups`` (None: every replica), its size
    and this replica's index in it. Subgroups are made once (every replica makes all of them, in order)."""
    joined = _join()
    me, world = get_ordinal(), xrt_world_size()
    if not groups:
        return None, world, me
    key = tuple(tuple(int(r) for r in g) for g in groups)
    if sorted(r for g in key for r in g) != list(range(world)):
        raise ValueError(f"the groups {[list(g) for g in key]} must hold each of the {world} replicas once")
    mine = [g for g in key if me in g]
    if not joined or key == (tuple(range(world)),):
        return None, world, mine[0].index(me)
    default = _c10d._get_default_group()
    if _subgroups["owner"] is not default:
        _subgroups["owner"], _subgroups["groups"] = default, {}
    made = _subgroups["groups"]
    if key not in made:
        made[key] = [_c10d.new_group(ranks=list(g), sort_ranks=False) for g in key][key.index(mine[0])]
    return made[key], len(mine[0]), mine[0].index(me)


def _op(reduce_type):
    try:
        return _OPS[reduce_type]
    except (KeyError, TypeError):
        raise ValueError(f"Invalid reduce type {reduce_type!r}: one of {', '.join(map(repr, _OPS))}") from None


def _check_tensor_list(value, name):
    if not isinstance(value, list) or not all(isinstance(v, ember.Tensor) for v in value):
        raise TypeError(f"`{name}` needs to be a list of Tensors, but given {type(value)}.")


# ---- collectives -----------------------------------------------------------------------------------------------------
def _reduce_in_place(tensors, op, scale, pg):
    """All-reduce ``tensors`` in place over ``pg``, then multiply by ``scale``: one call per dtype and device (the
    tensors of a kind go through one flat buffer)."""
    kinds = {}
    for t in tensors:
        kinds.setdefault((t.dtype, str(t.device)), []).append(t)
    with ember.no_grad():
        for same in kinds.values():
            if len(same) == 1 and same[0].is_contiguous():
                flat = same[0]
            else:
                flat = ember.cat([t.reshape(-1) for t in same])
            _all_reduce(flat, op, group=pg)
            if scale != 1.0:
                flat.mul_(scale)
            if flat is not same[0]:
                lo = 0
                for t in same:
                    n = t.numel()
                    t.copy_(flat[lo:lo + n].view(t.shape))
                    lo += n


def all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):
    """Reduce over the replicas (``REDUCE_SUM``, ``REDUCE_MUL``, ``REDUCE_AND``, ``REDUCE_OR``, ``REDUCE_MIN``,
    ``REDUCE_MAX``), then multiply by ``scale``.

    A tensor: returns a new tensor with the result (the input is unchanged). A list of tensors: reduces each in
    place and returns the list. ``groups`` (e.g. ``[[0, 1], [2, 3]]``) reduces within each group. Alone in the
    world nothing is reduced or scaled: a tensor comes back as a copy, a list as it was."""
    op = _op(reduce_type)
    pg, _, _ = _group(groups)
    if xrt_world_size() == 1:
        return inputs.clone() if isinstance(inputs, ember.Tensor) else inputs
    if isinstance(inputs, ember.Tensor):
        with ember.no_grad():
            result = inputs.detach().clone()
        _reduce_in_place([result], op, scale, pg)
        return result
    if inputs:
        _reduce_in_place(list(inputs), op, scale, pg)
    return inputs


def _gather_one(value, dim, pg, n, local):
    """The values of the group's replicas concatenated along ``dim``."""
    if local:
        return value.clone()
    shape = tuple(value.shape)
    value = value.detach().contiguous()
    flat_shape = (n * shape[0], *shape[1:]) if shape else (n,)
    out = ember.empty(flat_shape, dtype=value.dtype, device=value.device)
    all_gather_single(out, value, group=pg)
    stacked = out.view((n, *shape))
    if not shape:
        return stacked
    moved = stacked.movedim(0, dim)
    return moved.reshape(shape[:dim] + (n * shape[dim],) + shape[dim + 1:])


def all_gather(value, dim=0, groups=None, output=None, pin_layout=True):
    """The values of the replicas (of this replica's group), concatenated along ``dim`` in ordinal (group) order.

    ``value`` may be a list of tensors (with ``pin_layout=False``): then a list of gathered tensors. ``output``
    (a tensor, or a list for a list): written with the result and returned."""
    if isinstance(value, list) and pin_layout:
        raise RuntimeError("For xm.all_gather with list of tensors input, pin_layout=True is not yet supported.")
    if groups:
        if any(len(g) != len(groups[0]) for g in groups):
            raise AssertionError("Replica groups must have the same number of replicas/shards.")
    pg, n, _ = _group(groups)
    local = not _c10d.is_initialized()
    if isinstance(value, ember.Tensor):
        d = dim + value.dim() if dim < 0 else dim
        result = _gather_one(value, d, pg, n, local)
        if output is not None:
            with ember.no_grad():
                output.copy_(result)
            return output
        return result
    if isinstance(value, list) and all(isinstance(v, ember.Tensor) for v in value):
        results = [_gather_one(v, dim + v.dim() if dim < 0 else dim, pg, n, local) for v in value]
        if output is not None:
            _check_tensor_list(output, "output")
            if len(output) != len(value):
                raise ValueError(f"`output` length doesn't match `input` length: {len(output)} vs {len(value)}.")
            with ember.no_grad():
                for o, r in zip(output, results):
                    o.copy_(r)
            return output
        return results
    raise TypeError(f"`value` needs to be a Tensor or a list of Tensors, but given {type(value)}.")


def _scatter_one(reduce_type, value, scale, dim, shard_count, pg, n, index, local):
    if shard_count != n:
        raise ValueError(f"shard_count ({shard_count}) must be the number of replicas of the group ({n})")
    d = dim + value.dim() if dim < 0 else dim
    size = value.shape[d]
    if size % n:
        raise ValueError(f"the size of dimension {d} ({size}) must divide into {shard_count} shards")
    op = _op(reduce_type)
    with ember.no_grad():
        if local:
            result = value.detach().clone()
        else:
            moved = value.detach().movedim(d, 0)
            stacked = moved.reshape((n, size // n, *moved.shape[1:])).contiguous()
            out = ember.empty(stacked.shape[1:], dtype=value.dtype, device=value.device)
            reduce_scatter_single(out, stacked, op, group=pg)
            result = out.movedim(0, d)
        if scale != 1.0:
            result = result * scale
    return result


def reduce_scatter(reduce_type, input, scale, scatter_dim, shard_count, groups=None, output=None, pin_layout=True):
    """Reduce over the replicas of the group and keep this replica's shard: ``input`` is cut along
    ``scatter_dim`` into ``shard_count`` (the group's size) shards, replica ``i`` of the group gets the reduction
    of shard ``i``, multiplied by ``scale``. A list of tensors gives a list; ``output`` receives the result."""
    pg, n, index = _group(groups)
    local = not _c10d.is_initialized()
    if isinstance(input, ember.Tensor):
        result = _scatter_one(reduce_type, input, scale, scatter_dim, shard_count, pg, n, index, local)
        if output is not None:
            with ember.no_grad():
                output.copy_(result)
            return output
        return result
    if isinstance(input, list) and all(isinstance(v, ember.Tensor) for v in input):
        if output is not None:
            _check_tensor_list(output, "output")
            if len(output) != len(input):
                raise ValueError(f"`output` length doesn't match `input` length: {len(output)} vs {len(input)}.")
        results = [_scatter_one(reduce_type, v, scale, scatter_dim, shard_count, pg, n, index, local) for v in input]
        if output is not None:
            with ember.no_grad():
                for o, r in zip(output, results):
                    o.copy_(r)
            return output
        return results
    raise TypeError(f"`input` needs to be a Tensor or a list of Tensors, but given {type(input)}.")


def all_to_all(value, split_dimension, concat_dimension, split_count, groups=None, pin_layout=True):
    """Cut ``value`` along ``split_dimension`` into ``split_count`` (the group's size) blocks, send block ``j`` to
    the group's replica ``j``, and concatenate the blocks received along ``concat_dimension`` (in the group's
    order)."""
    pg, n, _ = _group(groups)
    if split_count != n:
        raise ValueError(f"split_count ({split_count}) must be the number of replicas of the group ({n})")
    size = value.shape[split_dimension]
    if size % n:
        raise ValueError(f"the size of dimension {split_dimension} ({size}) must divide into {split_count} blocks")
    with ember.no_grad():
        blocks = [b.contiguous() for b in value.detach().split(size // n, dim=split_dimension)]
        if not _c10d.is_initialized():
            return ember.cat(blocks, concat_dimension)
        received = [ember.empty_like(b) for b in blocks]
        _all_to_all(received, blocks, group=pg)
        return ember.cat(received, concat_dimension)


def collective_permute(value, pairs):
    """Move ``value`` along ``pairs`` of (source, target) ordinals: a replica gets the value of the replica whose
    pair targets it, or zeros when none does. ``[[0, 1], [1, 2], [2, 0]]`` rotates among three replicas."""
    me = get_ordinal()
    sources = [int(s) for s, t in pairs if int(t) == me]
    targets = [int(t) for s, t in pairs if int(s) == me]
    if len(sources) > 1 or len(targets) > 1:
        raise ValueError(f"replica {me} may be the source of one pair and the target of one pair at most: {pairs}")
    if (targets and targets[0] != me) or (sources and sources[0] != me):
        _join()
    with ember.no_grad():
        value = value.detach().contiguous()
        result = ember.zeros_like(value)
        ops = []
        if targets and targets[0] != me:
            ops.append(P2POp(isend, value, targets[0]))
        if sources:
            if sources[0] == me:
                result.copy_(value)
            else:
                ops.append(P2POp(irecv, result, sources[0]))
        if ops:
            for work in batch_isend_irecv(ops):
                work.wait()
    return result


def collective_broadcast(tensors, root_ordinal=0, groups=None, pin_layout=True):
    """Overwrite ``tensors`` in place with those of replica ``root_ordinal``. With ``groups``, the group holding
    the root gets its values and the other groups zeros (as torch_xla, which sums the root's values with the
    others' zeros)."""
    if get_ordinal() != root_ordinal:
        with ember.no_grad():
            for t in tensors:
                t.zero_()
    all_reduce(REDUCE_SUM, list(tensors), groups=groups, pin_layout=pin_layout)


def send(value, channel_id):
    """Send ``value`` to the replica of ordinal ``channel_id`` (which calls ``recv(output, <this ordinal>)``);
    returns ``value``."""
    _join()
    _send(value.detach(), dst=int(channel_id))
    return value


def recv(output, channel_id):
    """Receive into ``output`` what the replica of ordinal ``channel_id`` sends; returns ``output``."""
    _join()
    with ember.no_grad():
        _recv(output, src=int(channel_id))
    return output


# ---- rendezvous and reductions of Python objects ---------------------------------------------------------------------
def xla_rendezvous(payload=b"", ordinals=None, tag=None):
    """Every replica's ``payload`` (bytes), in ordinal order, once all replicas got here. Ends the step first
    (``mark_step``). ``ordinals`` must name every replica (or be None)."""
    if ordinals and len(ordinals) != xrt_world_size():
        raise ValueError("Only global rendezvous is supported")
    if not isinstance(payload, bytes):
        raise TypeError(f"`payload` must be bytes, not {type(payload)}")
    mark_step()
    if not _join():
        return [payload]
    payloads = [None] * xrt_world_size()
    all_gather_object(payloads, payload)
    return payloads


def rendezvous(tag, payload=b"", replicas=[]):  # noqa: B006 - torch_xla's signature; the list is never changed
    """Wait until every replica reached the rendezvous ``tag``; returns their payloads, ordinal ``i``'s at ``i``."""
    return xla_rendezvous(payload, replicas or None, tag=tag)


def mesh_reduce(tag, data, reduce_fn):
    """``reduce_fn`` of the list of every replica's ``data`` (any picklable data; tensors arrive on the CPU), e.g.
    ``mesh_reduce("accuracy", acc, np.mean)``."""
    cpu_data = _to_cpu(data)
    buffer = io.BytesIO()
    ember.save(cpu_data, buffer)
    received = rendezvous(tag, buffer.getvalue())
    values = [ember.load(io.BytesIO(b), weights_only=False) for b in received]
    return reduce_fn(values) if values else cpu_data


def do_on_ordinals(target, data=(), ordinals=(0,)):
    """Run ``target(*data)`` (its tensors on the CPU) on the replicas of ``ordinals`` only, then meet the others at
    a rendezvous; the result there, None elsewhere."""
    if isinstance(ordinals, int):
        ordinals = (ordinals,)
    running = get_ordinal() in ordinals
    result = target(*_to_cpu(data)) if running else None
    rendezvous("ember.distributed.replica.do_on_ordinals")
    return result


# ---- gradients and optimizer steps -----------------------------------------------------------------------------------
def _fetch_gradients(optimizer):
    return [p.grad for group in optimizer.param_groups for p in group["params"]
            if isinstance(p, ember.Tensor) and p.grad is not None]


def all_reduce_bucketized_gradients(gradients, scale, groups, pin_layout, bucket_cap_mb=0):
    """Sum ``gradients`` over the replicas in place (times ``scale``), in buckets of about ``bucket_cap_mb`` MB:
    a bucket is reduced once the next gradient would take it over the cap."""
    cap = bucket_cap_mb * 1024 * 1024
    bucket, total = [], 0
    for grad in gradients:
        size = grad.numel() * grad.element_size()
        if bucket and total + size > cap:
            all_reduce(REDUCE_SUM, bucket, scale=scale, groups=groups, pin_layout=pin_layout)
            bucket, total = [], 0
        bucket.append(grad)
        total += size
    if bucket:
        all_reduce(REDUCE_SUM, bucket, scale=scale, groups=groups, pin_layout=pin_layout)


def reduce_gradients(optimizer, groups=None, pin_layout=True):
    """Average the gradients of ``optimizer``'s parameters over the replicas, in place: their sum divided by the
    world size (with ``groups`` too, as torch_xla). ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB > 0 reduces them in buckets
    of that size, the last layers' first."""
    count = xrt_world_size()
    if count <= 1:
        return
    gradients = _fetch_gradients(optimizer)
    bucket_cap_mb = int(os.environ.get("ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB", 0))
    if bucket_cap_mb > 0:
        all_reduce_bucketized_gradients(list(reversed(gradients)), 1.0 / count, groups, pin_layout, bucket_cap_mb)
    else:
        all_reduce(REDUCE_SUM, gradients, scale=1.0 / count, groups=groups, pin_layout=pin_layout)


def optimizer_step(optimizer, barrier=False, optimizer_args={}, groups=None, pin_layout=True):  # noqa: B006
    """Average the gradients over the replicas (``reduce_gradients``), then ``optimizer.step(**optimizer_args)``;
    with ``barrier``, end the step (``mark_step``) too. Returns what ``step`` returned."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    loss = optimizer.step(**optimizer_args)
    if barrier:
        mark_step()
    return loss


def broadcast_master_param(model):
    """Give every replica the parameters and buffers of replica 0's ``model``."""
    collective_broadcast(list(model.parameters()) + list(model.buffers()))
    mark_step()


# ---- bucketed (coalesced) collectives --------------------------------------------------------------------------------
class CoalescingBuckets:
    """Runs ``func`` on buckets of ``input_list`` of about ``bucket_cap_mb`` MB each (with the matching slice of
    ``output_list``), a single tensor alone; calling the object returns the outputs of all, in order.

    A tensor larger than the cap joins the current bucket when that is under half the cap and the two stay within
    twice the cap; otherwise a bucket is sent when the next tensor would take it over the cap."""

    def __init__(self, func, input_list, output_list=None, bucket_cap_mb=160):
        _check_tensor_list(input_list, "input_list")
        if output_list is not None:
            _check_tensor_list(output_list, "output_list")
            if len(output_list) != len(input_list):
                raise ValueError("`output_list` length doesn't match `input_list` length: "
                                 f"{len(output_list)} vs {len(input_list)}.")
        self._func, self._inputs, self._outputs = func, input_list, output_list
        self._cap = bucket_cap_mb * 1024 * 1024
        self._bucket, self._out_bucket, self._total = [], [], 0
        self._results = []

    def flush(self):
        if len(self._bucket) == 1:
            out = self._out_bucket[0] if self._outputs is not None else None
            self._results.append(self._func(self._bucket[0], out))
        elif self._bucket:
            self._results.extend(self._func(self._bucket, self._out_bucket if self._outputs is not None else None))
        self._bucket, self._out_bucket, self._total = [], [], 0

    def add(self, tensor, idx):
        self._total += tensor.numel() * tensor.element_size()
        self._bucket.append(tensor)
        if self._outputs is not None:
            self._out_bucket.append(self._outputs[idx])

    def __call__(self):
        for idx, tensor in enumerate(self._inputs):
            size = tensor.numel() * tensor.element_size()
            joined = self._total + size
            if size > self._cap and self._total < 0.5 * self._cap and joined <= 2 * self._cap:
                self.add(tensor, idx)
                self.flush()
                continue
            if joined > self._cap:
                self.flush()
            self.add(tensor, idx)
        self.flush()
        assert len(self._results) == len(self._inputs)
        return self._results


def all_gather_bucketized(input_list, dim=0, groups=None, output=None, pin_layout=False, bucket_cap_mb=160):
    """``all_gather`` of each tensor of ``input_list`` (into ``output``'s), in buckets of ``bucket_cap_mb`` MB."""
    if pin_layout:
        raise RuntimeError("For xm.all_gather_bucketized, pin_layout=True is not yet supported.")

    def gather(inputs, outputs=None):
        return all_gather(inputs, dim=dim, groups=groups, output=outputs, pin_layout=False)
    return CoalescingBuckets(gather, input_list, output, bucket_cap_mb=bucket_cap_mb)()


def reduce_scatter_bucketized(reduce_type, input_list, scale, scatter_dim, shard_count, groups=None, output=None,
                              pin_layout=False, bucket_cap_mb=160):
    """``reduce_scatter`` of each tensor of ``input_list`` (into ``output``'s), in buckets of ``bucket_cap_mb``
    MB."""
    def scatter(inputs, outputs=None):
        return reduce_scatter(reduce_type, inputs, scale, scatter_dim, shard_count, groups=groups, output=outputs,
                              pin_layout=pin_layout)
    return CoalescingBuckets(scatter, input_list, output, bucket_cap_mb=bucket_cap_mb)()


# ---- steps, closures and device waits --------------------------------------------------------------------------------
class _AsyncClosures:
    """Runs closures one after the other, in order, on a thread of its own; an error surfaces at the next
    ``run_all`` (a later ``mark_step``) or ``join``."""

    def __init__(self):
        self._queue = queue.Queue()
        self._errors = []
        threading.Thread(target=self._loop, daemon=True, name="ember-replica-step-closures").start()

    def _loop(self):
        while True:
            closure = self._queue.get()
            try:
                closure()
            except BaseException as e:  # noqa: BLE001 - raised on the training thread at the next step
                self._errors.append(e)
            finally:
                self._queue.task_done()

    def _raise(self):
        if self._errors:
            raise self._errors.pop(0)

    def run_all(self, closures):
        for closure in closures:
            self._queue.put(closure)
        self._raise()

    def join(self):
        self._queue.join()
        self._raise()


_closures = {"sync": [], "async": [], "runner": None}
_closures_lock = threading.Lock()


def add_step_closure(closure, args=(), run_async=False):
    """Run ``closure(*args)`` at the end of the step (the next ``mark_step``), after those added before it; with
    ``run_async`` on a thread of its own (in order with the other asynchronous closures) while training goes on."""
    with _closures_lock:
        _closures["async" if run_async else "sync"].append(lambda a=args: closure(*a))


def _run_step_closures():
    with _closures_lock:
        sync, _closures["sync"] = _closures["sync"], []
        pending, _closures["async"] = _closures["async"], []
        if pending and _closures["runner"] is None:
            _closures["runner"] = _AsyncClosures()
        runner = _closures["runner"]
    if runner is not None:
        runner.run_all(pending)
    for closure in sync:
        closure()


def _synchronize(device):
    device = ember.device(device)
    if device.type == "cuda" and ember.cuda.is_initialized():
        ember.cuda.synchronize(device)


def mark_step(wait=False, reset_scope=True):
    """End the step: with ``wait`` (or XLA_SYNC_WAIT=1) wait for this replica's device to finish its queued work;
    then run the step closures. (ember runs ops eagerly: there is no graph to cut.)"""
    if os.environ.get("XLA_EMIT_STEPLOG", "0").lower() in ("1", "true"):
        print("ember.distributed.replica::mark_step", file=sys.stderr, flush=True)
    if wait or os.environ.get("XLA_SYNC_WAIT", "0").lower() in ("1", "true"):
        _synchronize(xla_device())
    _run_step_closures()


def wait_device_ops(devices=[]):  # noqa: B006 - torch_xla's signature; the list is never changed
    """Wait until the queued work of ``devices`` (default: all of this process's) is done, the asynchronous step
    closures included."""
    for device in devices or _devices():
        _synchronize(device)
    runner = _closures["runner"]
    if runner is not None:
        runner.join()


# ---- data to and from the device -------------------------------------------------------------------------------------
def _map_tensors(data, select, fn):
    """``data`` with each tensor ``t`` for which ``select(t)`` replaced by ``fn(t)``, through lists, tuples
    (named ones too), sets and dicts."""
    if isinstance(data, ember.Tensor):
        return fn(data) if select(data) else data
    if isinstance(data, dict):
        items = [(k, _map_tensors(v, select, fn)) for k, v in data.items()]
        try:
            return type(data)(items)
        except TypeError:
            return dict(items)
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_map_tensors(v, select, fn) for v in data))
    if isinstance(data, (list, tuple, set, frozenset)):
        return type(data)(_map_tensors(v, select, fn) for v in data)
    return data


def _to_cpu(data, convert=True):
    if not convert:
        return data
    return _map_tensors(data, lambda t: t.device.type != "cpu", lambda t: t.cpu())


def save(data, file_or_path, master_only=True, global_master=False):
    """``ember.save`` of ``data`` (any nesting of lists, tuples, sets and dicts; tensors moved to the CPU) by the
    master replica only (of each host; of the world with ``global_master``), or by every replica when not
    ``master_only`` (then give each its own file)."""
    if not master_only or is_master_ordinal(local=not global_master):
        ember.save(_to_cpu(data), file_or_path)


def send_cpu_data_to_device(datas, device, input_sharding=None):
    """``datas`` with its CPU tensors moved to ``device`` (a tensor comes back in a list)."""
    if input_sharding is not None:
        raise NotImplementedError("input_sharding is XLA's SPMD sharding, which ember does not have")
    if isinstance(datas, ember.Tensor):
        datas = [datas]
    device = ember.device(device)
    return _map_tensors(datas, lambda t: t.device.type == "cpu", lambda t: t.to(device))


def check_view_sharing(obj):
    """Raise RuntimeError if two different tensors of ``obj`` (nested lists, tuples, sets, dicts) share memory
    (one is a view of the other, or both of a third): save them apart, or rebuild the views after loading."""
    seen, owners = set(), {}

    def info(t):
        return f"{t.dtype}{list(t.shape)}"

    def check(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        ptr = t.untyped_storage().data_ptr()
        other = owners.setdefault(ptr, t)
        if other is not t:
            raise RuntimeError(f"Tensor ID {id(t)} ({info(t)}) is sharing a view with tensor ID {id(other)} "
                               f"({info(other)})")
        return t
    _map_tensors(obj, lambda t: type(t) is ember.Tensor, check)


# ---- random numbers --------------------------------------------------------------------------------------------------
def _generator(device):
    device = ember.device(device) if device is not None else xla_device()
    if device.type == "cuda":
        index = device.index if device.index is not None else ember.cuda.current_device()
        return ember.cuda.default_generators[index]
    return ember.default_generator


def get_rng_state(device=None):
    """The state of ``device``'s (default: this replica's) random number generator, as one integer that
    ``set_rng_state`` takes back (the generator's state bytes, under a marker byte)."""
    state = bytes(_generator(device).get_state().numpy())
    return int.from_bytes(state + b"\x01", "little")


def set_rng_state(seed, device=None):
    """Set ``device``'s (default: this replica's) random number generator: to a state ``get_rng_state`` returned,
    or, for an integer below 2**64, to the start of that seed's stream."""
    generator = _generator(device)
    seed = operator.index(seed)
    if seed < 1 << 64:
        generator.manual_seed(seed)
        return
    raw = seed.to_bytes((seed.bit_length() + 7) // 8, "little")
    if raw[-1] != 1:
        raise ValueError("set_rng_state: the integer is neither a seed (below 2**64) nor a state from get_rng_state")
    generator.set_state(ember.from_numpy(np.frombuffer(raw[:-1], np.uint8).copy()))


@contextlib.contextmanager
def fork_rng(device=None, enabled=True):
    """Run a block with ``device``'s (default: this replica's) random number generator state restored after it."""
    if not enabled:
        yield
        return
    state = get_rng_state(device)
    try:
        yield
    finally:
        set_rng_state(state, device)


# ---- measurements ----------------------------------------------------------------------------------------------------
class RateTracker:
    """Counts per second: ``add(count)`` as work is done; ``rate()`` since the previous ``rate()`` (smoothed with
    the previous rate by ``smooth_factor``, default RATE_TRACKER_SMOOTHING or 0.4), ``global_rate()`` since the
    tracker was made."""

    def __init__(self, smooth_factor=None):
        if smooth_factor is None:
            smooth_factor = float(os.environ.get("RATE_TRACKER_SMOOTHING", 0.4))
        self._smooth_factor = smooth_factor
        self._start_time = self._partial_time = time.time()
        self._partial_count = 0.0
        self._partial_rate = None
        self._count = 0.0

    def add(self, count):
        self._count += count

    def rate(self):
        now = time.time()
        delta = now - self._partial_time
        rate = 0.0
        if delta > 0:
            rate = self._count / delta
            if self._partial_rate is not None:
                rate = (1 - self._smooth_factor) * rate + self._smooth_factor * self._partial_rate
        self._partial_count += self._count
        self._count = 0.0
        self._partial_time, self._partial_rate = now, rate
        return rate

    def global_rate(self):
        delta = time.time() - self._start_time
        return (self._partial_count + self._count) / delta if delta > 0 else 0.0


class MemoryInfo(TypedDict):
    bytes_used: int
    bytes_limit: int


def get_memory_info(device=None):
    """``{"bytes_used", "bytes_limit"}`` of ``device`` (default: this replica's): on CUDA the bytes ember's
    memory pool holds for tensors and the GPU's memory; on the CPU this process's resident memory and the host's
    physical memory."""
    device = ember.device(device) if device is not None else xla_device()
    if device.type == "cuda":
        return MemoryInfo(bytes_used=ember.cuda.memory_allocated(device),
                          bytes_limit=ember.cuda.mem_get_info(device)[1])
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[1]) * page
    except OSError:
        import resource
        used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return MemoryInfo(bytes_used=used, bytes_limit=page * os.sysconf("SC_PHYS_PAGES"))


# ---- launching -------------------------------------------------------------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(index, fn, args, nprocs, port):
    """A spawned replica: the environment of a launcher, the default process group, ``fn(index, *args)``."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(index), WORLD_SIZE=str(nprocs),
                      LOCAL_RANK=str(index), LOCAL_WORLD_SIZE=str(nprocs))
    if ember.cuda.is_available():
        ember.cuda.set_device(index % ember.cuda.device_count())
    _c10d.init_process_group()
    finished = False
    try:
        fn(index, *args)
        finished = True
    finally:
        # the process ends. After ``fn``, wait until every replica is done with the group, whose store replica 0
        # serves; a barrier that fails means another replica failed, which its own exit reports
        with contextlib.suppress(Exception):
            if finished and _c10d.is_initialized():
                _c10d.barrier()
        with contextlib.suppress(Exception):
            _c10d.destroy_process_group()


def spawn(fn, args=(), nprocs=None, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(index, *args)`` in ``nprocs`` replica processes of this host (default: one per GPU with CUDA,
    else CPU_NUM_DEVICES or 1), each in the default process group (over loopback) before ``fn`` starts.

    One process runs ``fn(0, *args)`` here, alone. A failing replica stops the others and raises (see
    ``ember.multiprocessing.spawn``); with ``join=False`` returns the processes' context."""
    if nprocs is None:
        nprocs = ember.cuda.device_count() if ember.cuda.is_available() else _env_int("CPU_NUM_DEVICES", 1)
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    if nprocs == 1:
        fn(0, *args)
        return None
    from ember.multiprocessing import start_processes
    return start_processes(_spawned, args=(fn, args, nprocs, _free_port()), nprocs=nprocs, join=join, daemon=daemon,
                           start_method=start_method)
