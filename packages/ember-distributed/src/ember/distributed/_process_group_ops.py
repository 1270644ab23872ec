"""The collective methods of a ProcessGroup object (``pg.allreduce(tensors, opts)``, ...) and their option
structures, as torch's ProcessGroup and ProcessGroupGloo have them.

Each method takes group ranks, runs asynchronously and returns its Work; it goes through the function of
``collectives`` of the same call (``group=pg``), so arguments are checked and complex tensors handled alike. The
group's timeout applies to every call (as for the functions, an option's ``timeout`` does not shorten it).
"""
from datetime import timedelta

import ember

from . import collectives as C
from ._reduce_op import ReduceOp

_UNSET_TIMEOUT = timedelta(milliseconds=-1)  # torch's default: the group's timeout


class _Options:
    def __init__(self):
        self.timeout = _UNSET_TIMEOUT
        self.asyncOp = True

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class AllreduceOptions(_Options):
    def __init__(self):
        super().__init__()
        self.reduceOp = ReduceOp.SUM


class AllreduceCoalescedOptions(AllreduceOptions):
    pass


class BroadcastOptions(_Options):
    def __init__(self):
        super().__init__()
        self.rootRank, self.rootTensor = 0, 0


class ReduceOptions(_Options):
    def __init__(self):
        super().__init__()
        self.reduceOp, self.rootRank, self.rootTensor = ReduceOp.SUM, 0, 0


class AllgatherOptions(_Options):
    pass


class GatherOptions(_Options):
    def __init__(self):
        super().__init__()
        self.rootRank = 0


class ScatterOptions(GatherOptions):
    pass


class ReduceScatterOptions(_Options):
    def __init__(self):
        super().__init__()
        self.reduceOp = ReduceOp.SUM


class AllToAllOptions(_Options):
    pass


class BarrierOptions(_Options):
    def __init__(self):
        super().__init__()
        self.device_ids, self.device = [], None


def _one(tensors, method):
    """The tensor of a call given one tensor, or a list of one (torch's multi-device lists are gone)."""
    if isinstance(tensors, ember.Tensor):
        return tensors
    tensors = list(tensors)
    if len(tensors) != 1:
        raise ValueError(f"ProcessGroup.{method}: expected one tensor, got a list of {len(tensors)}")
    return tensors[0]


def _inner(lists, method):
    """The list of a call given a list of tensors, or a list holding one such list."""
    lists = list(lists)
    if lists and not isinstance(lists[0], ember.Tensor):
        if len(lists) != 1:
            raise ValueError(f"ProcessGroup.{method}: expected one list of tensors, got {len(lists)}")
        return list(lists[0])
    return lists


def _op(opts, kind, default=ReduceOp.SUM):
    return opts.reduceOp if isinstance(opts, kind) else (default if opts is None else opts)


def _root(opts, kind):
    return opts.rootRank if isinstance(opts, kind) else (0 if opts is None else int(opts))


class CollectiveMethods:
    """What a ProcessGroup can run itself; ``self`` must be a group this process belongs to."""

    def allreduce(self, tensors, opts=None):
        return C.all_reduce(_one(tensors, "allreduce"), _op(opts, AllreduceOptions), group=self, async_op=True)

    def allreduce_coalesced(self, tensors, opts=None):
        return C._all_reduce_coalesced(list(tensors), _op(opts, AllreduceOptions), self, True)

    def broadcast(self, tensors, opts=None):
        return C.broadcast(_one(tensors, "broadcast"), group=self, async_op=True,
                           group_src=_root(opts, BroadcastOptions))

    def reduce(self, tensors, opts=None, op=ReduceOp.SUM):
        """``reduce(tensors, ReduceOptions)`` or ``reduce(tensor, root, op)``."""
        red = opts.reduceOp if isinstance(opts, ReduceOptions) else op
        return C.reduce(_one(tensors, "reduce"), op=red, group=self, async_op=True,
                        group_dst=_root(opts, ReduceOptions))

    def allgather(self, output_tensors, input_tensors, opts=None):
        return C.all_gather(_inner(output_tensors, "allgather"), _one(input_tensors, "allgather"), group=self,
                            async_op=True)

    def _allgather_base(self, output, input, opts=None):
        return C.all_gather_single(output, input, group=self, async_op=True)

    def gather(self, output_tensors, input_tensors, opts=None):
        """``gather(outputs, inputs, GatherOptions)`` or ``gather(outputs, input, root)``: the outputs are empty
        off the root."""
        root = _root(opts, GatherOptions)
        outs = _inner(output_tensors, "gather")
        return C.gather(_one(input_tensors, "gather"), outs if self.rank() == root else None, group=self,
                        async_op=True, group_dst=root)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """``scatter(outputs, inputs, ScatterOptions)`` or ``scatter(output, inputs, root)``: the inputs are empty
        off the root."""
        root = _root(opts, ScatterOptions)
        ins = _inner(input_tensors, "scatter")
        return C.scatter(_one(output_tensors, "scatter"), ins if self.rank() == root else None, group=self,
                         async_op=True, group_src=root)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        return C.reduce_scatter(_one(output_tensors, "reduce_scatter"), _inner(input_tensors, "reduce_scatter"),
                                _op(opts, ReduceScatterOptions), group=self, async_op=True)

    def _reduce_scatter_base(self, output, input, opts=None):
        return C.reduce_scatter_single(output, input, _op(opts, ReduceScatterOptions), group=self, async_op=True)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return C.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=self, async_op=True)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return C.all_to_all(list(output_tensors), list(input_tensors), group=self, async_op=True)

    def barrier(self, opts=None):
        return C.barrier(group=self, async_op=True)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        return C.monitored_barrier(group=self, timeout=timeout, wait_all_ranks=wait_all_ranks)

    def send(self, tensors, dstRank, tag):  # noqa: N803 - torch's argument names
        return C.isend(_one(tensors, "send"), group=self, tag=tag, group_dst=dstRank)

    def recv(self, tensors, srcRank, tag):  # noqa: N803
        return C.irecv(_one(tensors, "recv"), group=self, tag=tag, group_src=srcRank)

    def recv_anysource(self, tensors, tag):
        return C.irecv(_one(tensors, "recv_anysource"), group=self, tag=tag)
