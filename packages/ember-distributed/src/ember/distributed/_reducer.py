"""DistributedDataParallel's engine: gradient buckets, the autograd hooks that fill them, and their reduction.

Parameters are grouped into buckets (flat buffers of one dtype and device, at most ``bucket_bytes_cap`` each, the
first one smaller) in roughly the reverse of their registration order, the order backward produces their
gradients. A post-accumulate-grad hook on each parameter copies its gradient into its bucket once autograd has
accumulated it; when every parameter of a bucket is ready, and every bucket before it has been launched, the bucket's
reduction starts asynchronously (an all_reduce on the group's communication thread, or the registered comm hook)
while backward computes the gradients of earlier layers. Buckets launch in index order on every rank, so the
collectives match. When the last one is launched, a callback queued on the autograd engine waits for the results at
the end of backward and writes them into ``.grad``.

After the first iteration the buckets are rebuilt in the order gradients actually arrived (rank 0's order, which it
broadcasts), as torch does. With ``find_unused_parameters`` the parameters the forward output does not reach are
marked ready at the first hook, those still without a gradient when backward ends are marked then, and a map of
the parameters each rank used is all-reduced: a parameter no rank used keeps its ``.grad``. With a static graph the
first iteration reduces everything at the end of backward and learns how many times each parameter's hook fires.
"""
import enum
import os
import warnings
import weakref

import numpy as np

import ember

_DEFAULT_FIRST_BUCKET_BYTES = 1 << 20

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that "
    "your module has parameters that were not used in producing loss. You can enable unused parameter detection by "
    "passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and "
    "by \nmaking sure all `forward` function outputs participate in calculating loss. \nIf you already have done the "
    "above, then the distributed data parallel module wasn't able to locate the output tensors in the return value "
    "of your module's `forward` function. Please include the loss function and the structure of the return value of "
    "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\n")
_UNFINISHED_HINT = (" In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or "
                    "DETAIL to print out information about which particular parameters did not receive gradient on "
                    "this rank as part of this error")
_TWICE = (
    "Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a "
    "module parameter outside the `forward` function. Please make sure model parameters are not shared across "
    "multiple concurrent forward-backward passes. or try to use _set_static_graph() as a workaround if this module "
    "graph does not change during training loop.2) Reused parameters in multiple reentrant backward passes. For "
    "example, if you use multiple `checkpoint` functions to wrap the same part of your model, it would result in the "
    "same set of parameters been used by different reentrant backward passes multiple times, and hence marking a "
    "variable ready multiple times. DDP does not support such use cases in default. You can try to use "
    "_set_static_graph() as a workaround if your module graph does not change over iterations.\n")
_GRAPH_CHANGED = ("Your training graph has changed in this iteration, e.g., one parameter is unused in first "
                  "iteration, but then got used in the second iteration. this is not compatible with static_graph set "
                  "to True.")


def _c10d():
    from . import distributed_c10d
    return distributed_c10d


def _debug_names():
    """Whether errors name parameters (TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL)."""
    c10d = _c10d()
    return c10d.get_debug_level() != c10d.DebugLevel.OFF or \
        os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() in ("INFO", "DETAIL")


class BuiltinCommHookType(enum.Enum):
    """The comm hooks DDP can register by name (``ddp._register_builtin_comm_hook``)."""
    ALLREDUCE = 1
    FP16_COMPRESS = 2


# ---- bucket assignment and coalesced broadcasts (torch.distributed's private helpers of the same names) ------------
def _compute_bucket_assignment_by_size(tensors, bucket_size_limits, expect_sparse_gradient=None, tensor_indices=None):
    """Group ``tensors`` (in the given order) into buckets of one dtype and device: a bucket closes once it holds at
    least its limit of bytes (each dtype/device key takes the limits in turn, the last one repeating); a tensor
    expecting sparse gradients gets a bucket of its own. Returns (buckets as lists of indices, each bucket's limit).

    Without ``tensor_indices`` the indices are positions in ``tensors`` and the buckets are sorted by their smallest
    index; with them (the rebuilt order) ``tensor_indices[k]`` names tensor k and the buckets keep the order they
    closed in."""
    if not bucket_size_limits:
        raise RuntimeError("Expected at least one size limit")
    if expect_sparse_gradient and len(expect_sparse_gradient) != len(tensors):
        raise RuntimeError("Expected the same number of tensors and sparse-gradient flags")
    labels = list(tensor_indices) if tensor_indices else list(range(len(tensors)))
    done = []  # (indices, limit)
    open_buckets = {}  # key -> [indices, bytes, limit position]
    for k, t in enumerate(tensors):
        if expect_sparse_gradient and expect_sparse_gradient[k]:
            done.append(([labels[k]], 0))
            continue
        key = (t.dtype, str(t.device))
        slot = open_buckets.setdefault(key, [[], 0, 0])
        slot[0].append(labels[k])
        slot[1] += t.numel() * t.element_size()
        limit = bucket_size_limits[min(slot[2], len(bucket_size_limits) - 1)]
        if slot[1] >= limit:
            done.append((slot[0], limit))
            open_buckets[key] = [[], 0, slot[2] + 1]
    for indices, _, pos in open_buckets.values():
        if indices:
            done.append((indices, bucket_size_limits[min(pos, len(bucket_size_limits) - 1)]))
    if not tensor_indices:
        done.sort(key=lambda b: min(b[0]))
    return [b[0] for b in done], [b[1] for b in done]


def _broadcast_coalesced(process_group, tensors, buffer_size, src=0):
    """Broadcast ``tensors`` from rank ``src`` of the group, flattened into one buffer per dtype and device of at
    most ``buffer_size`` bytes (one collective per buffer), written back in place on the other ranks."""
    tensors = list(tensors)
    if not tensors:
        return
    group_src = _c10d().get_group_rank(process_group, src)
    chunks, sizes = {}, {}
    for t in tensors:
        key = (t.dtype, str(t.device))
        nbytes = t.numel() * t.element_size()
        if key not in chunks or (sizes[key] + nbytes > buffer_size and chunks[key][-1]):
            chunks.setdefault(key, []).append([])
            sizes[key] = 0
        chunks[key][-1].append(t)
        sizes[key] += nbytes
    receiving = process_group.rank() != group_src
    with ember.no_grad():
        for parts in chunks.values():
            for part in parts:
                flat = ember.cat([t.detach().reshape(-1) for t in part]) if len(part) > 1 else \
                    part[0].detach().reshape(-1).contiguous()
                _c10d().broadcast(flat, group=process_group, group_src=group_src)
                if receiving:
                    lo = 0
                    for t in part:
                        n = t.numel()
                        t.detach().copy_(flat[lo:lo + n].view(t.shape))
                        lo += n


def _verify_params_across_processes(process_group, params, logger=None):
    """Every rank has as many parameters as the others, of the same sizes and strides as rank 0's (else
    RuntimeError on every rank, naming the first difference: torch's messages)."""
    me = process_group.rank()
    mine = [(tuple(p.shape), tuple(p.stride())) for p in params]
    every = [None] * process_group.size()
    _c10d().all_gather_object(every, mine, group=process_group)
    for q, theirs in enumerate(every):
        if len(theirs) != len(mine):
            raise RuntimeError(f"DDP expects same model across all ranks, but Rank {me} has {len(mine)} params, "
                               f"while rank {q} has inconsistent {len(theirs)} params.")
    for q, theirs in enumerate(every):
        for i, ((shape, stride), (shape0, stride0)) in enumerate(zip(theirs, every[0])):
            if shape != shape0:
                raise RuntimeError(f"[{q}]: params[{i}] in this process with sizes {list(shape)} appears not to "
                                   f"match sizes of the same param in process 0.")
            if stride != stride0:
                raise RuntimeError(f"[{q}]: params[{i}] in this process with sizes {list(shape)} appears not to "
                                   f"match strides of the same param in process 0.")


# ---- the buckets --------------------------------------------------------------------------------------------------
class GradBucket:
    """What a comm hook receives: one bucket of gradients, flattened into ``buffer()``; ``gradients()`` are views of
    it shaped as ``parameters()``."""

    def __init__(self, index, buffer, gradients, parameters, is_last):
        self._index, self._buffer, self._gradients = index, buffer, gradients
        self._parameters, self._is_last = parameters, is_last

    def index(self):
        """The bucket's index (0 is the first launched: the last layers' gradients)."""
        return self._index

    def buffer(self):
        """The flat tensor of the bucket's gradients."""
        return self._buffer

    def gradients(self):
        """One view of ``buffer()`` per parameter of the bucket, shaped as the parameter."""
        return list(self._gradients)

    def parameters(self):
        return list(self._parameters)

    def is_last(self):
        """Whether this is the last bucket of the iteration (the first parameters' gradients)."""
        return self._is_last

    def set_buffer(self, buffer):
        """Replace the tensor ``buffer()`` returns (compression wrappers pass a cast copy to the hook they wrap)."""
        self._buffer = buffer


class _Bucket:
    __slots__ = ("index", "variables", "buffer", "views", "pending", "size_limit", "work", "future", "skipped")

    def __init__(self, index, variables, params, size_limit):
        self.index, self.variables, self.size_limit = index, variables, size_limit
        first = params[variables[0]]
        self.buffer = ember.zeros(sum(params[i].numel() for i in variables), dtype=first.dtype, device=first.device)
        self.views, lo = [], 0
        for i in variables:
            n = params[i].numel()
            self.views.append(self.buffer[lo:lo + n].view(params[i].shape))
            lo += n
        self.pending = len(variables)
        self.work = self.future = None
        self.skipped = False


def _is_view_of(t, view):
    """Whether tensor ``t`` is ``view`` (the same array object, or an array over exactly its memory)."""
    if t is view:
        return True
    a, b = t._data, view._data
    return a is b or (a.shape == b.shape and a.strides == b.strides and _address(a) == _address(b))


def _address(a):
    return a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr


class Reducer:
    """Reduces the gradients of ``params`` over ``process_group`` in buckets (``bucket_indices``: lists of
    parameter indices), from hooks fired during backward. ``DistributedDataParallel`` makes one; torch's
    ``dist.Reducer`` takes the same leading arguments."""

    def __init__(self, params, bucket_indices, per_bucket_size_limits, process_group, expect_sparse_gradients=None,
                 bucket_bytes_cap=25 * (1 << 20), find_unused_parameters=False, gradient_as_bucket_view=False,
                 param_to_name_mapping=None, first_bucket_bytes_cap=_DEFAULT_FIRST_BUCKET_BYTES,
                 skip_all_reduce_unused_params=False):
        self._params = list(params)
        n = len(self._params)
        self._pg = process_group
        self._world = process_group.size()
        self._expect_sparse = list(expect_sparse_gradients or [False] * n)
        self._bucket_bytes_cap, self._first_bucket_bytes_cap = bucket_bytes_cap, first_bucket_bytes_cap
        self._find_unused = find_unused_parameters
        self._as_view = gradient_as_bucket_view
        self._names = dict(param_to_name_mapping or {})
        self._skip_unused = skip_all_reduce_unused_params
        self._static = False
        self._comm_hook = None  # (state, hook)
        self._hook_serial = False  # a hook that chains collectives in callbacks: one bucket's hook at a time
        self._iterations = 0  # backward passes prepared for (synchronised ones)
        self._expect_hooks = False
        self._require_finalize = False
        self._marked = bytearray(n)
        self._next_bucket = 0
        self._unused = []  # parameters the output does not reach (or, static, that never get a gradient)
        self._has_marked_unused = False
        self._local_used = ember.zeros(n, dtype=ember.int32)
        self._used_work = None
        self._global_unused = None  # bool array after the first static iteration / each find_unused one
        self._static_hooks = None  # hooks per parameter per iteration (static graph, learnt in the first)
        self._hooks_left = None
        self._rebuilt = []  # the order parameters became ready in (to rebuild the buckets from)
        self._has_rebuilt = False
        self._finalize_queued = False
        self._join = None  # (Work of the join context's all_reduce of ones, whether to divide by the world size)
        self._div = None
        self._initialize_buckets(bucket_indices, per_bucket_size_limits)
        ref = weakref.ref(self)

        def hook(i):
            def fire(param):
                reducer = ref()
                if reducer is not None:
                    reducer._autograd_hook(i)
            return fire
        self._handles = [p.register_post_accumulate_grad_hook(hook(i)) for i, p in enumerate(self._params)]

    # ---- buckets ----------------------------------------------------------------------------------------------
    def _initialize_buckets(self, bucket_indices, size_limits=None):
        size_limits = list(size_limits or [self._bucket_bytes_cap] * len(bucket_indices))
        if sorted(i for b in bucket_indices for i in b) != list(range(len(self._params))):
            raise ValueError("The bucket assignment must hold every parameter exactly once")
        self._buckets = [_Bucket(k, list(b), self._params, size_limits[k]) for k, b in enumerate(bucket_indices)]
        self._where = [None] * len(self._params)
        for b in self._buckets:
            for k, i in enumerate(b.variables):
                self._where[i] = (b, k)
        if self._as_view:  # gradients already there move into their views
            with ember.no_grad():
                for i, p in enumerate(self._params):
                    if p.grad is not None:
                        b, k = self._where[i]
                        b.views[k].copy_(p.grad)
                        p.grad = b.views[k]

    def _should_rebuild(self):
        return (self._static or not self._find_unused) and not self._has_rebuilt

    def _rebuild_buckets(self):
        """Rebuild the buckets once, in the order gradients arrived in the last full iteration (rank 0's order, shared
        with the others); True if rebuilt."""
        if not self._should_rebuild() or len(self._rebuilt) != len(self._params):
            return False
        order = self._rebuilt
        params = [self._params[i] for i in order]
        sparse = [self._expect_sparse[i] for i in order]
        indices, limits = _compute_bucket_assignment_by_size(
            params, [self._first_bucket_bytes_cap, self._bucket_bytes_cap], sparse, order)
        indices, limits = self._sync_bucket_indices(indices, limits)
        self._initialize_buckets(indices, limits)
        self._has_rebuilt = True
        self._rebuilt = []
        return True

    def _sync_bucket_indices(self, indices, limits):
        """Rank 0's bucket assignment, on every rank (one broadcast: count, lengths, limits, indices)."""
        n = len(self._params)
        flat = ember.zeros(1 + 2 * n + n, dtype=ember.int64)
        if self._pg.rank() == 0:
            flat[0] = len(indices)
            flat[1:1 + len(indices)] = ember.tensor([len(b) for b in indices], dtype=ember.int64)
            flat[1 + n:1 + n + len(limits)] = ember.tensor(limits, dtype=ember.int64)
            flat[1 + 2 * n:] = ember.tensor([i for b in indices for i in b], dtype=ember.int64)
        _c10d().broadcast(flat, group=self._pg, group_src=0)
        values = flat.tolist()
        count = values[0]
        lengths, limits = values[1:1 + count], values[1 + n:1 + n + count]
        order, out, lo = values[1 + 2 * n:], [], 0
        for m in lengths:
            out.append(order[lo:lo + m])
            lo += m
        return out, limits

    def _push_all_rebuilt_params(self):
        """A joined rank's stand-in for an iteration's order (parameter order): lets it rebuild with the others."""
        if self._should_rebuild():
            self._rebuilt = list(range(len(self._params)))

    # ---- per iteration ----------------------------------------------------------------------------------------
    def prepare_for_forward(self):
        """Nothing to do before a forward (torch resets timers here)."""

    def prepare_for_backward(self, outputs):
        """Arm the hooks for the backward of this forward's ``outputs`` (searched for unused parameters when
        ``find_unused_parameters`` and the graph is not static)."""
        self._ensure_prior_reduction_finished()
        self._iterations += 1
        self._expect_hooks = True
        self._marked = bytearray(len(self._params))
        for b in self._buckets:
            b.pending, b.work, b.future, b.skipped = len(b.variables), None, None, False
        self._next_bucket = 0
        self._has_marked_unused = False
        self._finalize_queued = False
        self._used_work = None
        self._div = None
        if self._track_used():
            self._local_used.zero_()
        if self._find_unused and not self._static:
            self._unused = self._search_unused(outputs)
        elif self._static and self._iterations > 1:
            self._unused = [i for i, c in enumerate(self._static_hooks) if c == 0]
            self._hooks_left = list(self._static_hooks)
        else:
            self._unused = []

    def _track_used(self):
        return (self._find_unused and not self._static) or self._static_first()

    def _static_first(self):
        return self._static and self._iterations <= 1

    def _search_unused(self, outputs):
        """Indices of the parameters the autograd graph of ``outputs`` does not reach."""
        seen, stack, reached = set(), [], set()
        for t in outputs:
            if t.grad_fn is not None:
                stack.append(t.grad_fn)
            elif t.requires_grad:
                reached.add(id(t))
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            variable = getattr(node, "variable", None)
            if variable is not None:
                reached.add(id(variable))
            for nxt, _ in node.next_functions:
                if nxt is not None and nxt not in seen:
                    stack.append(nxt)
        return [i for i, p in enumerate(self._params) if id(p) not in reached]

    def _ensure_prior_reduction_finished(self):
        if not self._require_finalize:
            return
        missing = [i for i, m in enumerate(self._marked) if not m]
        me = self._pg.rank()
        msg = _UNFINISHED
        if _debug_names():
            names = ", ".join(self._names.get(i, str(i)) for i in reversed(missing))
            msg += f"Parameters which did not receive grad for rank {me}: {names}\n"
            msg += f"Parameter indices which did not receive grad for rank {me}: {' '.join(map(str, missing))}"
        else:
            msg += f"Parameter indices which did not receive grad for rank {me}: {' '.join(map(str, missing))}\n"
            msg += _UNFINISHED_HINT
        raise RuntimeError(msg)

    def _autograd_hook(self, i):
        if not self._expect_hooks:
            return
        if self._track_used():
            self._local_used[i] = 1
        if not self._has_marked_unused:
            self._has_marked_unused = True
            if self._static_first() or (self._find_unused and not self._static):
                self._queue(self._end_of_backward)
            for u in self._unused:
                self._mark_ready(u)
        if self._static_first():
            self._static_hooks[i] += 1
            return
        if self._hooks_left is not None:
            if not self._static_hooks[i]:
                raise RuntimeError(_GRAPH_CHANGED)
            self._hooks_left[i] -= 1
            if self._hooks_left[i] != 0:
                return
        self._mark_ready(i)

    def _queue(self, callback):
        ember.autograd.Variable._execution_engine.queue_callback(callback)

    def _mark_ready(self, i):
        if self._marked[i]:
            name = self._names.get(i, str(i))
            raise RuntimeError(_TWICE + f"Parameter at index {i} with name {name} has been marked as ready twice. "
                               "This means that multiple autograd engine  hooks have fired for this particular "
                               "parameter during this iteration.")
        self._marked[i] = 1
        self._require_finalize = True
        if self._should_rebuild() and not self._static_first():
            self._rebuilt.append(i)
        b, k = self._where[i]
        self._copy_grad_in(i, b, k)
        b.pending -= 1
        if b.pending == 0 and b.index == self._next_bucket:
            buckets = self._buckets
            while self._next_bucket < len(buckets) and buckets[self._next_bucket].pending == 0:
                self._launch(buckets[self._next_bucket])
                self._next_bucket += 1
            if self._next_bucket == len(buckets):
                if self._track_used() and not self._hook_serial:
                    self._start_used_reduction()
                if not self._finalize_queued:
                    self._finalize_queued = True
                    self._queue(self._finalize)

    def _div_factor(self):
        if self._div is None:
            self._div = self._world
            if self._join is not None and not self._join[1]:  # divide by the ranks still training
                self._div = int(self._join[0].result()[0].item())
        return self._div

    def _copy_grad_in(self, i, b, k):
        """Parameter ``i``'s gradient into its bucket view (divided by the world size unless a comm hook does the
        reduction); with gradient_as_bucket_view the view becomes its ``.grad``."""
        p, view = self._params[i], b.views[k]
        g = p.grad
        with ember.no_grad():
            if g is None:
                view.zero_()
                return
            if g.is_sparse:
                g = g.to_dense()
            if self._comm_hook is None:
                scale = 1.0 / self._div_factor()
                if _is_view_of(g, view):
                    view.mul_(scale)
                else:
                    ember.mul(g, scale, out=view)
            elif not _is_view_of(g, view):
                view.copy_(g)
            if self._as_view:
                p.grad = view

    def _launch(self, b):
        if self._skip_unused and self._find_unused and not any(self._local_used[i] for i in b.variables):
            b.skipped = True
            return
        if self._comm_hook is None:
            b.work = _c10d().all_reduce(b.buffer, group=self._pg, async_op=True)
            return
        if self._hook_serial and b.index > 0:
            prev = self._buckets[b.index - 1]
            if prev.future is not None:
                prev.future.wait()
        state, hook = self._comm_hook
        b.future = hook(state, self._grad_bucket(b, b.buffer))

    def _grad_bucket(self, b, buffer):
        views = b.views if buffer is b.buffer else [buffer[lo:lo + v.numel()].view(v.shape)
                                                    for lo, v in zip(_offsets(b.views), b.views)]
        return GradBucket(b.index, buffer, views, [self._params[i] for i in b.variables],
                          b.index == len(self._buckets) - 1)

    def _start_used_reduction(self):
        self._used_work = _c10d().all_reduce(self._local_used, group=self._pg, async_op=True)

    def _end_of_backward(self):
        """Parameters not ready when backward ends got no gradient here (find_unused_parameters), or were held back
        (the first iteration of a static graph, which reduces everything now): mark them."""
        for i in range(len(self._params)):
            if not self._marked[i]:
                self._mark_ready(i)

    def _finalize(self):
        """At the end of backward: wait for every bucket's reduction and write the results into ``.grad``."""
        with ember.no_grad():
            for b in self._buckets:
                if b.skipped:
                    continue
                if b.work is not None:
                    b.work.wait()
                    continue
                result = b.future.wait()
                if isinstance(result, (list, tuple)):
                    result = result[0]
                if not isinstance(result, ember.Tensor):
                    raise RuntimeError("Expected the comm hook's future to hold a tensor (or a list with one tensor), "
                                       f"got {type(result).__name__}")
                if result is not b.buffer:
                    b.buffer.copy_(result.reshape(b.buffer.shape))
            used = None
            if self._track_used() and self._used_work is None:  # (after chained hooks' collectives)
                self._start_used_reduction()
            if self._used_work is not None:
                self._used_work.wait()
                used = self._local_used.numpy() != 0
                if self._static_first():
                    self._global_unused = ~used
            elif self._static and self._global_unused is not None:
                used = ~self._global_unused
            for i, p in enumerate(self._params):
                if used is not None and not used[i]:
                    continue  # no rank used it: its gradient stays as it was
                b, k = self._where[i]
                if b.skipped:
                    continue
                view = b.views[k]
                if self._as_view:
                    if p.grad is None or not _is_view_of(p.grad, view):
                        p.grad = view
                elif p.grad is None:
                    p.grad = view.clone()
                else:
                    p.grad.copy_(view)
        self._expect_hooks = False
        self._require_finalize = False
        self._join = None  # (set again by the next forward inside a join context)

    # ---- comm hooks -------------------------------------------------------------------------------------------
    def _register_comm_hook(self, state, hook):
        if self._comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        self._comm_hook = (state, hook)
        self._hook_serial = not getattr(hook, "_ember_collectives_in_call", False)

    def _run_comm_hook(self, grad_bucket):
        """The registered hook (else an all_reduce, summing) on ``grad_bucket``: a Future of the result."""
        if self._comm_hook is None:
            work = _c10d().all_reduce(grad_bucket.buffer(), group=self._pg, async_op=True)
            return work.get_future().then(lambda fut: fut.value()[0])
        state, hook = self._comm_hook
        return hook(state, grad_bucket)

    def _get_zeros_like_grad_buckets(self):
        """One GradBucket of zeros per bucket (what a joined rank contributes)."""
        out = []
        for b in self._buckets:
            zeros = ember.zeros_like(b.buffer)
            out.append(self._grad_bucket(b, zeros))
        return out

    def _get_local_used_map(self):
        """This rank's map of used parameters (zeros on a rank that has joined and runs no forward)."""
        return ember.zeros(len(self._params), dtype=ember.int32)

    def _set_forward_pass_work_handle(self, work, use_static_world_size):
        """The join context's all_reduce of ones: with ``use_static_world_size`` False, gradients are divided by
        its result (the ranks still training) instead of the world size."""
        self._join = (work, use_static_world_size)

    def _set_static_graph(self):
        if self._iterations > 0:
            raise RuntimeError("Static graph must be set before the first forward pass.")
        self._static = True
        self._static_hooks = [0] * len(self._params)

    def _check_reducer_finalized(self):
        if self._require_finalize:
            raise RuntimeError("Expected to have finished reduction in the prior iteration before starting a new "
                               "one.")

    def _remove_autograd_hooks(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _get_bucket_indices(self):
        return [list(b.variables) for b in self._buckets]


def _offsets(views):
    lo, out = 0, []
    for v in views:
        out.append(lo)
        lo += v.numel()
    return out


def _register_comm_hook(reducer, state, comm_hook):
    """torch.distributed._register_comm_hook: ``comm_hook(state, bucket)`` reduces each bucket."""
    reducer._register_comm_hook(state, comm_hook)


def _register_builtin_comm_hook(reducer, comm_hook_type):
    """torch.distributed._register_builtin_comm_hook: the ALLREDUCE or FP16_COMPRESS hook on the reducer's group."""
    from .algorithms.ddp_comm_hooks import default_hooks
    hooks = {BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
             BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
    if comm_hook_type not in hooks:
        warnings.warn(f"Unknown built-in comm hook type {comm_hook_type}", stacklevel=2)
        raise ValueError(f"Unknown built-in comm hook type {comm_hook_type}")
    reducer._register_comm_hook(reducer._pg, hooks[comm_hook_type])
