"""The collective and point-to-point functions of torch.distributed, on the process groups of distributed_c10d.

Each function checks its arguments as torch does (TypeError for a non-tensor, ValueError for mixed dtypes or a
gather/scatter list on the wrong rank...), returns None on a rank outside ``group`` (with torch's warning),
translates global ranks (``src``/``dst``) to group ranks, views complex tensors as pairs of reals, and hands the
call to the group's backend. With ``async_op=True`` it returns the backend's ``Work``; otherwise it returns once
the call is done, raising its error. The object forms pickle the objects into byte tensors and use the tensor
collectives, as torch does.
"""
import datetime
import pickle
import warnings

import numpy as np

import ember

from ._profiling import observed
from ._reduce_op import ReduceOp, _make_nccl_premul_sum, op_type, reduce_op, supports_complex  # noqa: F401
from ._work import Work  # noqa: F401

__all__ = ["ReduceOp", "reduce_op", "supports_complex", "Work", "P2POp", "all_reduce", "all_reduce_coalesced",
           "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_single", "all_gather_coalesced",
           "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all",
           "all_to_all_single", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "batch_isend_irecv",
           "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list", "send_object_list",
           "recv_object_list"]


def _c10d():
    from . import distributed_c10d
    return distributed_c10d


# ---- argument checks and group helpers (torch's behaviour) -------------------------------------------------------
def _check_tensor(param, name):
    if not isinstance(param, ember.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type Tensor\n"
                        f"             but got {type(param)} instead.")


def _check_tensor_list(param, name):
    if not isinstance(param, list):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type List[Tensor]\n"
                        f"             but got {type(param)} instead.")
    if not all(isinstance(p, ember.Tensor) for p in param):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type List[Tensor]\n"
                        f"             but got {type(param)} with elements of type {[type(p) for p in param]}.")


def _same_dtype(*tensors):
    """All tensors of one dtype (a complex tensor counts as its real dtype's pairs) or ValueError."""
    last = None
    for t in (x for item in tensors for x in (item if isinstance(item, list) else (item,))):
        key = {ember.complex64: ember.float32, ember.complex128: ember.float64}.get(t.dtype, t.dtype)
        if last is not None and key != last:
            raise ValueError(f"Invalid usage of tensors with different dtypesFound {last} and  {t.dtype}")
        last = key


def _real(t):
    return ember.view_as_real(t) if t.is_complex() else t


def _member_group(group, name):
    """The process group ``group`` names (None: the default one), or None on a rank outside it (with torch's
    warning)."""
    c10d = _c10d()
    if c10d._rank_not_in_group(group):
        c10d._warn_not_in_group(name)
        return None
    return c10d._resolve_group(group)


def _group_rank(pg, global_rank, group_rank, default=None):
    """The group rank named by ``global_rank`` or ``group_rank`` (exactly one of them; ``default`` as a global
    rank when neither is given)."""
    if global_rank is None and group_rank is None:
        global_rank = default
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        return group_rank
    if global_rank is None:
        raise ValueError("Must specify global_rank or group_rank")
    return _c10d().get_group_rank(pg, global_rank)


def _backend(pg, tensor):
    """The backend of ``pg`` serving ``tensor``'s device type (a group may have one per device type, e.g.
    "cpu:gloo,cuda:nccl"); the group's default one when there is no tensor."""
    return observed(pg.backend if tensor is None else pg._get_backend(tensor.device))


def _finish(work, async_op):
    return work if async_op else None


def _red(op, fname):
    """The reduction the backend gets: the RedOpType, or the PREMUL_SUM ReduceOp itself (it carries its factor)."""
    red = op_type(op, fname)
    return op if red == ReduceOp.PREMUL_SUM and type(op) is ReduceOp else red


# ---- collectives -------------------------------------------------------------------------------------------------
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over the group in place on every rank."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "all_reduce")
    if pg is None:
        return None
    red = _red(op, "all_reduce")
    if tensor.is_complex():
        if not supports_complex(red):
            raise ValueError(f"all_reduce does not support {op} on complex tensors")
        tensor = _real(tensor)
    return _finish(_backend(pg, tensor).allreduce([tensor], red, async_op), async_op)


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """all_reduce of several tensors (one dtype) in one call; with ``async_op`` a Future."""
    warnings.warn("torch.distributed.all_reduce_coalesced will be deprecated. If you must use it, please revisit "
                  "our documentation later at https://pytorch.org/docs/main/distributed.html#collective-functions",
                  FutureWarning, stacklevel=2)
    work = _all_reduce_coalesced(tensors, op, group, async_op)
    return work.get_future() if async_op and work is not None else None


def _all_reduce_coalesced(tensors, op, group, async_op):
    """all_reduce_coalesced's call (without its deprecation warning): the Work, or None outside the group."""
    if isinstance(tensors, ember.Tensor):
        tensors = [tensors]
    _check_tensor_list(tensors, "tensor")
    _same_dtype(tensors)
    pg = _member_group(group, "all_reduce_coalesced")
    if pg is None:
        return None
    red = _red(op, "all_reduce_coalesced")
    if any(t.is_complex() for t in tensors) and not supports_complex(red):
        raise ValueError(f"all_reduce does not support {op} on complex tensors")
    return _backend(pg, tensors[0]).allreduce([_real(t) for t in tensors], red, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``tensor`` of rank ``src`` into ``tensor`` on every rank."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "broadcast")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src)
    return _finish(_backend(pg, tensor).broadcast([_real(tensor)], root, async_op), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` over the group into ``tensor`` of rank ``dst`` (other ranks' tensors are left as they
    were)."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "reduce")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst)
    red = _red(op, "reduce")
    if tensor.is_complex():
        if not supports_complex(red):
            raise ValueError(f"reduce does not support {op} on complex tensors")
        tensor = _real(tensor)
    return _finish(_backend(pg, tensor).reduce([tensor], root, red, async_op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[q]`` = ``tensor`` of rank q, on every rank."""
    _check_tensor_list(tensor_list, "tensor_list")
    _check_tensor(tensor, "tensor")
    _same_dtype(tensor_list, tensor)
    pg = _member_group(group, "all_gather")
    if pg is None:
        return None
    work = _backend(pg, tensor).allgather([[_real(t) for t in tensor_list]], [_real(tensor)], async_op)
    return _finish(work, async_op)


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (flat: world size times the input's elements) = the ranks' inputs, in rank order."""
    _check_tensor(input_tensor, "input_tensor")
    _check_tensor(output_tensor, "output_tensor")
    pg = _member_group(group, "all_gather_single")
    if pg is None:
        return None
    work = _backend(pg, input_tensor).allgather_into_tensor(_real(output_tensor), _real(input_tensor), async_op)
    return _finish(work, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """The former name of all_gather_single."""
    warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated. Please use "
                  "`torch.distributed.all_gather_single` instead.", FutureWarning, stacklevel=2)
    return all_gather_single(output_tensor, input_tensor, group, async_op)


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    """all_gather of several tensors in one call; with ``async_op`` a Future."""
    warnings.warn("torch.distributed.all_gather_coalesced will be deprecated. If you must use it, please revisit "
                  "our documentation later at https://pytorch.org/docs/main/distributed.html#collective-functions",
                  FutureWarning, stacklevel=2)
    pg = _member_group(group, "all_gather_coalesced")
    if pg is None:
        return None
    _check_tensor_list(input_tensor_list, "input_tensor_list")
    _same_dtype(input_tensor_list)
    if not isinstance(output_tensor_lists, list):
        raise TypeError("Invalid function argument: output_tensor_lists should be a list")
    for lst in output_tensor_lists:
        _check_tensor_list(lst, "output_tensor_lists")
        _same_dtype(lst)
    size = pg.size()
    if len(output_tensor_lists) != size:
        raise RuntimeError(f"all_gather_coalesced: expected {size} output lists (one per rank), got "
                           f"{len(output_tensor_lists)}")
    ins = [_real(t) for t in input_tensor_list]
    flat = ember.cat([t.reshape(-1) for t in ins]) if ins else ember.empty(0)
    out = ember.empty(flat.numel() * size, dtype=flat.dtype)
    work = _backend(pg, flat).allgather_into_tensor(out, flat, async_op)

    def unpack(_=None):
        n = flat.numel()
        for q, lst in enumerate(output_tensor_lists):
            lo = q * n
            for t, src in zip(lst, ins):
                k = src.numel()
                _real(t).copy_(out[lo:lo + k].reshape(src.shape))
                lo += k
        return output_tensor_lists
    if async_op:
        return work.get_future().then(unpack)
    unpack()
    return None


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """``gather_list[q]`` on rank ``dst`` = ``tensor`` of rank q."""
    _check_tensor(tensor, "tensor")
    if gather_list:
        _check_tensor_list(gather_list, "gather_list")
    else:
        gather_list = []
    _same_dtype(tensor, gather_list)
    pg = _member_group(group, "gather")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst, default=0)
    if root == pg.rank():
        if not gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    work = _backend(pg, tensor).gather([_real(t) for t in gather_list], _real(tensor), root, async_op)
    return _finish(work, async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """``tensor`` on rank q = ``scatter_list[q]`` of rank ``src``."""
    _check_tensor(tensor, "tensor")
    if scatter_list:
        _check_tensor_list(scatter_list, "scatter_list")
    else:
        scatter_list = []
    _same_dtype(tensor, scatter_list)
    pg = _member_group(group, "scatter")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, default=0)
    if root == pg.rank():
        if not scatter_list:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    work = _backend(pg, tensor).scatter(_real(tensor), [_real(t) for t in scatter_list], root, async_op)
    return _finish(work, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank q = the reduction over ranks of their ``input_list[q]``."""
    _check_tensor(output, "output")
    _check_tensor_list(input_list, "input_list")
    _same_dtype(output, input_list)
    pg = _member_group(group, "reduce_scatter")
    if pg is None:
        return None
    red = _red(op, "reduce_scatter")
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list must have one tensor per rank ({pg.size()}), got "
                         f"{len(input_list)}")
    if input_list[pg.rank()].numel() != output.numel():
        raise ValueError("reduce_scatter: this rank's input must have as many elements as its output")
    work = _backend(pg, output).reduce_scatter(_real(output), [_real(t) for t in input_list], red, async_op)
    return _finish(work, async_op)


def reduce_scatter_single(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank q = the reduction over ranks of block q of their flat ``input``."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _member_group(group, "reduce_scatter_single")
    if pg is None:
        return None
    red = _red(op, "reduce_scatter_single")
    work = _backend(pg, output).reduce_scatter_tensor(_real(output), _real(input), red, async_op)
    return _finish(work, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """The former name of reduce_scatter_single."""
    warnings.warn("`torch.distributed.reduce_scatter_tensor` is deprecated. Please use "
                  "`torch.distributed.reduce_scatter_single` instead.", FutureWarning, stacklevel=2)
    return reduce_scatter_single(output, input, op, group, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    """Rank q's block p of ``input`` (rows by ``input_split_sizes``, else equal) lands in block q of rank p's
    ``output``."""
    pg = _member_group(group, "all_to_all_single")
    if pg is None:
        return None
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    _same_dtype(output, input)
    work = _backend(pg, input).alltoall_base(_real(output), _real(input), output_split_sizes or [],
                                             input_split_sizes or [], async_op)
    return _finish(work, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """``output_tensor_list[p]`` on rank q = ``input_tensor_list[q]`` of rank p."""
    pg = _member_group(group, "all_to_all")
    if pg is None:
        return None
    _check_tensor_list(output_tensor_list, "output_tensor_list")
    _check_tensor_list(input_tensor_list, "input_tensor_list")
    _same_dtype(output_tensor_list, input_tensor_list)
    work = _backend(pg, output_tensor_list[0] if output_tensor_list else None).alltoall(
        [_real(t) for t in output_tensor_list], [_real(t) for t in input_tensor_list], async_op)
    return _finish(work, async_op)


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Wait until every rank of the group has reached the barrier."""
    pg = _member_group(group, "barrier")
    if pg is None:
        return None
    return _finish(_backend(pg, None).barrier(async_op), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that names the ranks that did not reach it within ``timeout``: rank 0 collects the others and
    raises RuntimeError("Rank 1 failed to pass monitoredBarrier in ... ms"); the ranks that arrived raise too.
    ``wait_all_ranks``: collect every missing rank ("Ranks 1, 2 failed ...") instead of the first."""
    pg = _member_group(group, "monitored_barrier")
    if pg is None:
        return None
    try:  # the group's CPU backend (gloo's), as torch's
        backend = observed(pg._get_backend("cpu"))
    except RuntimeError:
        backend = observed(pg.backend)
    if not hasattr(backend, "monitored_barrier"):
        raise ValueError("monitored_barrier is only implemented for GLOO backend.")
    if isinstance(timeout, float):
        warnings.warn(f"Please specify timeout arg as a timedelta. Converting current value of {timeout} assuming "
                      "it represents seconds", stacklevel=2)
        timeout = datetime.timedelta(seconds=timeout)
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {timeout}")
    backend.monitored_barrier(timeout, wait_all_ranks)
    return None


# ---- point to point ----------------------------------------------------------------------------------------------
def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to ``dst``; returns a Work (the tensor must stay unchanged until it completes)."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "isend")
    if pg is None:
        return None
    return _backend(pg, tensor).send([_real(tensor)], _group_rank(pg, dst, group_dst), tag, True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from ``src`` (None: any rank); returns a Work (``source_rank()`` names the
    sender)."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "irecv")
    if pg is None:
        return None
    if src is None and group_src is None:
        return _backend(pg, tensor).recv_anysource([_real(tensor)], tag, True)
    return _backend(pg, tensor).recv([_real(tensor)], _group_rank(pg, src, group_src), tag, True)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to ``dst`` and wait until it is sent."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "send")
    if pg is None:
        return
    peer = _group_rank(pg, dst, group_dst)
    if peer == pg.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same as the rank of the "
                         "current process.")
    _backend(pg, tensor).send([_real(tensor)], peer, tag, False)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's global rank (-1 outside the
    group)."""
    _check_tensor(tensor, "tensor")
    pg = _member_group(group, "recv")
    if pg is None:
        return -1
    if src is None and group_src is None:
        work = _backend(pg, tensor).recv_anysource([_real(tensor)], tag, False)
        return _c10d().get_global_rank(pg, work.source_rank())
    _backend(pg, tensor).recv([_real(tensor)], _group_rank(pg, src, group_src), tag, False)
    return src if src is not None else _c10d().get_global_rank(pg, group_src)


class P2POp:
    """One send or receive for ``batch_isend_irecv``: ``P2POp(isend or irecv, tensor, peer, group, tag)``."""

    def __new__(cls, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        _check_tensor(tensor, "tensor")
        return object.__new__(cls)

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        self.op, self.tensor, self.tag = op, tensor, tag
        self.group = _c10d()._resolve_group(group)
        self.group_peer = _group_rank(self.group, peer, group_peer)
        self.peer = peer if peer is not None else _c10d().get_global_rank(self.group, group_peer)

    def __repr__(self):
        me = self.group.rank()
        s, d = (me, self.group_peer) if self.op is isend else (self.group_peer, me)
        return (f"P2POp({self.op.__name__} pg={getattr(self.group, 'group_name', 'default_pg')}, group_src={s}, "
                f"group_dst={d},  {self.tensor.shape}, {self.tensor.dtype})")


def batch_isend_irecv(p2p_op_list):
    """Issue every P2POp of the list (sends never wait for receives); their Works, in order."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    group = p2p_op_list[0].group
    if not all(group == p.group for p in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    works = []
    for p in p2p_op_list:
        kw = {"group_dst": p.group_peer} if p.op is isend else {"group_src": p.group_peer}
        w = p.op(p.tensor, group=p.group, tag=p.tag, **kw)
        if w is not None:
            works.append(w)
    return works


# ---- objects -----------------------------------------------------------------------------------------------------
def _to_bytes(obj):
    data = pickle.dumps(obj)
    return ember.from_numpy(np.frombuffer(data, np.uint8).copy()), len(data)


def _from_bytes(t, n):
    return pickle.loads(t.numpy()[:n].tobytes())


def all_gather_object(object_list, obj, group=None):
    """``object_list[q]`` = ``obj`` of rank q (picklable objects)."""
    pg = _member_group(group, "all_gather_object")
    if pg is None:
        return None
    size = pg.size()
    data, n = _to_bytes(obj)
    sizes = ember.zeros(size, dtype=ember.int64)
    all_gather([sizes[q:q + 1] for q in range(size)], ember.tensor([n], dtype=ember.int64), group=group)
    longest = int(sizes.max())
    padded = ember.zeros(longest, dtype=ember.uint8)
    padded[:n] = data
    out = ember.empty(longest * size, dtype=ember.uint8)
    all_gather([out[q * longest:(q + 1) * longest] for q in range(size)], padded, group=group)
    for q in range(size):
        object_list[q] = _from_bytes(out[q * longest:(q + 1) * longest], int(sizes[q]))
    return None


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """``object_gather_list[q]`` on rank ``dst`` = ``obj`` of rank q."""
    pg = _member_group(group, "gather_object")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst, default=0)
    me, size = pg.rank(), pg.size()
    if root == me:
        if not object_gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    elif object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    data, n = _to_bytes(obj)
    sizes = ember.zeros(size, dtype=ember.int64)
    all_gather([sizes[q:q + 1] for q in range(size)], ember.tensor([n], dtype=ember.int64), group=group)
    longest = int(sizes.max())
    padded = ember.zeros(longest, dtype=ember.uint8)
    padded[:n] = data
    out = ember.empty(longest * size, dtype=ember.uint8) if root == me else None
    parts = [out[q * longest:(q + 1) * longest] for q in range(size)] if root == me else None
    gather(padded, parts, group=group, group_dst=root)
    if root == me:
        for q in range(size):
            object_gather_list[q] = _from_bytes(parts[q], int(sizes[q]))
    return None


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """The objects of ``object_list`` on rank ``src`` replace those of ``object_list`` on every rank."""
    pg = _member_group(group, "broadcast_object_list")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, default=0)
    if pg.rank() == root:
        parts = [_to_bytes(o) for o in object_list]
        sizes = ember.tensor([n for _, n in parts], dtype=ember.int64)
    else:
        sizes = ember.empty(len(object_list), dtype=ember.int64)
    broadcast(sizes, group=group, group_src=root)
    if pg.rank() == root:
        data = ember.cat([t for t, _ in parts]) if parts else ember.empty(0, dtype=ember.uint8)
    else:
        data = ember.empty(int(sizes.sum()), dtype=ember.uint8)
    broadcast(data, group=group, group_src=root)
    if pg.rank() != root:
        lo = 0
        for i, n in enumerate(sizes.tolist()):
            object_list[i] = _from_bytes(data[lo:lo + n], n)
            lo += n
    return None


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """``scatter_object_output_list[0]`` on rank q = ``scatter_object_input_list[q]`` of rank ``src``."""
    pg = _member_group(group, "scatter_object_list")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, default=0)
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    me = pg.rank()
    if me == root:
        if scatter_object_input_list is None:
            raise ValueError("source rank must provide non-None scatter_object_input_list")
        parts = [_to_bytes(o) for o in scatter_object_input_list]
        longest = ember.tensor([max(n for _, n in parts)], dtype=ember.int64)
    else:
        longest = ember.tensor([0], dtype=ember.int64)
    broadcast(longest, group=group, group_src=root)
    m = int(longest)
    out = ember.empty(m, dtype=ember.uint8)
    padded = None
    if me == root:
        padded = []
        for t, n in parts:
            p = ember.zeros(m, dtype=ember.uint8)
            p[:n] = t
            padded.append(p)
    scatter(out, padded, group=group, group_src=root)
    size = ember.tensor([0], dtype=ember.int64)
    scatter(size, [ember.tensor([n], dtype=ember.int64) for _, n in parts] if me == root else None, group=group,
            group_src=root)
    scatter_object_output_list[0] = _from_bytes(out, int(size))
    return None


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None, use_batch=False):
    """Send the objects of ``object_list`` to ``dst`` (its recv_object_list receives them)."""
    pg = _member_group(group, "send_object_list")
    if pg is None:
        return None
    peer = _group_rank(pg, dst, group_dst)
    if peer == pg.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same as the rank of the "
                         "current process.")
    parts = [_to_bytes(o) for o in object_list]
    send(ember.tensor([n for _, n in parts], dtype=ember.int64), group=group, group_dst=peer)
    send(ember.cat([t for t, _ in parts]) if parts else ember.empty(0, dtype=ember.uint8), group=group,
         group_dst=peer)
    return None


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False):
    """Receive objects sent by send_object_list into ``object_list``; returns the sender's global rank."""
    pg = _member_group(group, "recv_object_list")
    if pg is None:
        return -1
    peer = None
    if src is not None or group_src is not None:
        peer = _group_rank(pg, src, group_src)
        if peer == pg.rank():
            raise ValueError("Invalid source rank: source rank should not be the same as the rank of the current "
                             "process.")
    sizes = ember.empty(len(object_list), dtype=ember.int64)
    sender = recv(sizes, group=group, group_src=peer) if peer is not None else recv(sizes, group=group)
    data = ember.empty(int(sizes.sum()), dtype=ember.uint8)
    recv(data, src=sender, group=group)
    lo = 0
    for i, n in enumerate(sizes.tolist()):
        object_list[i] = _from_bytes(data[lo:lo + n], n)
        lo += n
    return sender
