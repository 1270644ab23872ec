"""DistributedDataParallel: one replica of a module per process, kept identical by averaging gradients.

Construction checks that every rank holds the same parameters and broadcasts rank 0's parameters and buffers.
Each forward broadcasts the buffers again (``broadcast_buffers``), runs the module and arms the Reducer
(``ember.distributed._reducer``), whose autograd hooks reduce the gradients in buckets while backward runs.
``no_sync()`` skips the reduction (gradients accumulate locally); ``join()`` lets ranks with fewer inputs shadow
the collectives of the ranks still training.
"""
import dataclasses
import inspect
import warnings
from contextlib import contextmanager

import ember
import ember.distributed as dist
from ember.distributed import _reducer
from ember.distributed.algorithms.join import Join, Joinable, JoinHook
from ember.nn.modules.module import Module

__all__ = ["DistributedDataParallel"]

_MB = 1024 * 1024
_DEFAULT_BUCKET_CAP_MB = 25


def _find_tensors(obj):
    """The tensors in a forward's output (nested in lists, tuples, dicts and dataclasses)."""
    if isinstance(obj, ember.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _find_tensors(item)]
    if isinstance(obj, dict):
        return [t for item in obj.values() for t in _find_tensors(item)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in _find_tensors(getattr(obj, f.name))]
    return []


def _to_device(obj, device):
    """``obj`` with its tensors moved to ``device`` (DDP's inputs, with ``device_ids``)."""
    if isinstance(obj, ember.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_device(x, device) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, device)) for k, v in obj.items())
    return obj


class _DDPJoinHook(JoinHook):
    """What a rank that has run out of inputs does for DDP while others still train: the collectives of their
    forward and backward (with zero gradients), and at the end the final model's broadcast."""

    def __init__(self, ddp, divide_by_initial_world_size):
        if not isinstance(ddp, DistributedDataParallel):
            raise AssertionError("DDP join hook requires passing in a DistributedDataParallel instance as the state, "
                                 f"got {type(ddp).__name__}")
        self.ddp = ddp
        self.ddp._divide_by_initial_world_size = divide_by_initial_world_size
        super().__init__()

    def main_hook(self):
        ddp = self.ddp
        ddp.reducer._rebuild_buckets()
        ddp._check_and_sync_module_buffers()
        should_sync_backwards = ddp._check_global_requires_backward_grad_sync(is_joined_rank=True)
        ddp.require_forward_param_sync = should_sync_backwards
        if not should_sync_backwards:
            return
        ddp._match_all_reduce_for_bwd_pass()
        if ddp.find_unused_parameters:
            ddp._match_unused_params_allreduce()
        ddp.reducer._push_all_rebuilt_params()

    def post_hook(self, is_last_joiner):
        self.ddp._sync_final_model(is_last_joiner)


class DistributedDataParallel(Module, Joinable):
    """Data parallelism across processes: wraps ``module``, whose gradients are averaged over ``process_group``
    (default: the default group) during backward. Arguments as torch.nn.parallel.DistributedDataParallel."""

    _active_ddp_module = None

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=None, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 skip_all_reduce_unused_params=False, bucket_cap_mb_list=None, batched_grad_copy=False,
                 forward_sync_buffers=None):
        super().__init__()
        Joinable.__init__(self)
        if (delay_all_reduce_named_params is not None) != (param_to_hook_all_reduce is not None):
            raise ValueError("delay_all_reduce_named_params and param_to_hook_all_reduce need to be set at the same "
                             "time.")
        if process_group and device_mesh is not None:
            raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
        if device_mesh is not None:
            if device_mesh.ndim != 1:
                raise RuntimeError(f"Only 1D device mesh is supported, but got {device_mesh}.")
            self.device_mesh = device_mesh
            process_group = device_mesh.get_group(mesh_dim=0)
        self.process_group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        if mixed_precision is not None:
            raise NotImplementedError("DistributedDataParallel(mixed_precision=...) is not supported by ember yet")

        self._delay_all_reduce_params = []
        self.parameters_to_ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        if delay_all_reduce_named_params is not None:
            for name, param in delay_all_reduce_named_params:
                self.parameters_to_ignore.add(name)
                self._delay_all_reduce_params.append(param)
        self._module_parameters = [p for n, p in module.named_parameters() if n not in self.parameters_to_ignore]
        if not any(p.requires_grad for p in self._module_parameters) and not self._delay_all_reduce_params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        self.is_multi_device_module = len({p.device for p in self._module_parameters}) > 1
        device_types = {p.device.type for p in self._module_parameters}
        if len(device_types) != 1:
            raise ValueError("DistributedDataParallel's input module must be on the same type of devices, but input "
                             f"module parameters locate in {device_types}.")
        self.device_type = next(iter(device_types))
        if not device_ids or self.device_type == "cpu" or self.is_multi_device_module:
            if device_ids or output_device:
                devices = {p.device for p in self._module_parameters}
                raise ValueError("DistributedDataParallel device_ids and output_device arguments only work with "
                                 "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                                 f"{device_ids}, output_device {output_device}, and module parameters {devices}.")
            self.device_ids = self.output_device = None
        else:
            self.device_ids = [_device_index(d) for d in device_ids]
            self.output_device = _device_index(output_device if output_device is not None else device_ids[0])

        self.static_graph = False
        self.dim = dim
        self.module = module
        self.device = self._module_parameters[0].device
        if broadcast_buffers is not None:
            if forward_sync_buffers is not None:
                warnings.warn("Both `broadcast_buffers` and `forward_sync_buffers` were specified. "
                              "`broadcast_buffers` is deprecated and its value is ignored when `forward_sync_buffers` "
                              "is provided.", FutureWarning, stacklevel=2)
            else:
                warnings.warn("`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead. IMPORTANT: "
                              "unlike `broadcast_buffers=False`, `forward_sync_buffers=False` still syncs buffers at "
                              "init. If you rely on buffers NOT being synced at init (e.g. rank-local buffers), keep "
                              "using `broadcast_buffers=False` until `init_sync_buffers` is available.",
                              FutureWarning, stacklevel=2)
        if forward_sync_buffers is not None:
            self.forward_sync_buffers, init_sync_buffers = forward_sync_buffers, True
        else:
            self.forward_sync_buffers = init_sync_buffers = broadcast_buffers if broadcast_buffers is not None \
                else True
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.batched_grad_copy = batched_grad_copy
        self.mixed_precision = mixed_precision
        if check_reduction:
            warnings.warn("The `check_reduction` argument in `DistributedDataParallel` module is deprecated. Please "
                          "avoid using it.", FutureWarning, stacklevel=2)
        if any(isinstance(p, ember.nn.UninitializedParameter) for p in self._module_parameters):
            raise RuntimeError("Modules with uninitialized parameters can't be used with `DistributedDataParallel`. "
                               "Run a dummy forward pass to correctly initialize the modules")
        self.broadcast_bucket_size = 250 * _MB
        self._set_bucket_caps(bucket_cap_mb, bucket_cap_mb_list)

        self._delay_grad_buffer = None
        self._delay_grad_views = []
        self._delay_all_reduce_all_params = False
        self._delay_work = None
        if self._delay_all_reduce_params:
            self._register_delay_all_reduce_hook(param_to_hook_all_reduce)
            if self._delay_all_reduce_all_params:
                return
        self.skip_all_reduce_unused_params = skip_all_reduce_unused_params
        parameters, expect_sparse_gradient = self._build_params_for_reducer()
        if init_sync:
            _reducer._verify_params_across_processes(self.process_group, parameters)
            self._sync_module_states(0, init_sync_buffers)
        param_to_name_mapping = self._build_debug_param_to_name_mapping(parameters)
        self._ddp_init_helper(parameters, expect_sparse_gradient, param_to_name_mapping, static_graph)
        self._comm_hooks = []
        self._has_rebuilt_buckets = False
        if static_graph:
            self._set_static_graph()
        self._lazy_init_ran = False
        self._ddp_sink_clone = True

    # ---- construction -----------------------------------------------------------------------------------------
    def _set_bucket_caps(self, bucket_cap_mb, bucket_cap_mb_list):
        default = bucket_cap_mb is None and not bucket_cap_mb_list
        cap_mb = bucket_cap_mb if bucket_cap_mb is not None else _DEFAULT_BUCKET_CAP_MB
        self.bucket_bytes_cap_list = [int(c * _MB) for c in bucket_cap_mb_list or ()]
        if bucket_cap_mb_list:
            cap_mb = max(bucket_cap_mb_list)
        self.bucket_bytes_cap = int(cap_mb * _MB)
        self._first_bucket_bytes_cap = dist._DEFAULT_FIRST_BUCKET_BYTES if default else self.bucket_bytes_cap
        self.bucket_bytes_cap_default = self._first_bucket_bytes_cap < self.bucket_bytes_cap

    def _bucket_size_limits(self, static_graph):
        """The caps of the first bucket assignment: one bucket for everything until the buckets are rebuilt from
        the first iteration's order (unless unused parameters are searched for, whose buckets stay as made)."""
        if self.bucket_bytes_cap_list:
            return list(self.bucket_bytes_cap_list)
        if static_graph or not self.find_unused_parameters:
            return [2 ** 63 - 1]
        if self.bucket_bytes_cap_default:
            return [self._first_bucket_bytes_cap, self.bucket_bytes_cap]
        return [self.bucket_bytes_cap]

    def _ddp_init_helper(self, parameters, expect_sparse_gradient, param_to_name_mapping, static_graph):
        indices, limits = dist._compute_bucket_assignment_by_size(
            parameters, self._bucket_size_limits(static_graph), expect_sparse_gradient)
        self.reducer = dist.Reducer(parameters, list(reversed(indices)), list(reversed(limits)), self.process_group,
                                    expect_sparse_gradient, self.bucket_bytes_cap, self.find_unused_parameters,
                                    self.gradient_as_bucket_view, param_to_name_mapping,
                                    self._first_bucket_bytes_cap, self.skip_all_reduce_unused_params)

    def _build_params_for_reducer(self):
        seen, pairs = set(), []
        for module_name, module in self.module.named_modules():
            for param_name, param in module.named_parameters(recurse=False):
                fqn = f"{module_name}.{param_name}" if module_name else param_name
                if param.requires_grad and fqn not in self.parameters_to_ignore and id(param) not in seen:
                    seen.add(id(param))
                    pairs.append((module, param))
        parameters = [p for _, p in pairs]
        expect_sparse = [isinstance(m, (ember.nn.Embedding, ember.nn.EmbeddingBag)) and bool(m.sparse)
                         for m, _ in pairs]
        self._assign_modules_buffers()
        return parameters, expect_sparse

    def _assign_modules_buffers(self):
        named = [(name, b) for name, b in self.module.named_buffers() if name not in self.parameters_to_ignore]
        self.modules_buffers = [b for _, b in named]
        self.named_module_buffers = dict(named)

    def _build_debug_param_to_name_mapping(self, parameters):
        index = {id(p): i for i, p in enumerate(parameters)}
        mapping = {}
        for module_name, module in self.module.named_modules():
            for param_name, param in module.named_parameters(recurse=False):
                fqn = f"{module_name}.{param_name}" if module_name else param_name
                if fqn not in self.parameters_to_ignore and param.requires_grad and id(param) in index:
                    mapping.setdefault(index[id(param)], fqn)
        return mapping

    def _sync_module_states(self, src, with_buffers):
        """Broadcast the parameters (and buffers) of rank ``src`` to every rank."""
        states = [p.detach() for n, p in self.module.named_parameters() if n not in self.parameters_to_ignore]
        if with_buffers:
            states += [b.detach() for n, b in self.module.named_buffers() if n not in self.parameters_to_ignore]
        dist._broadcast_coalesced(self.process_group, states, self.broadcast_bucket_size, src)

    def _register_delay_all_reduce_hook(self, param_to_hook_all_reduce):
        """The parameters of ``delay_all_reduce_named_params`` take views of one flat gradient buffer, all-reduced
        when ``param_to_hook_all_reduce``'s gradient is computed."""
        self._delay_grad_buffer = ember.zeros(sum(p.numel() for p in self._delay_all_reduce_params),
                                              device=self._delay_all_reduce_params[0].device)
        dist._broadcast_coalesced(self.process_group, [p.detach() for p in self._delay_all_reduce_params],
                                  self.broadcast_bucket_size, 0)
        param_to_hook_all_reduce.register_hook(self._delayed_all_reduce_hook)
        lo = 0
        for p in self._delay_all_reduce_params:
            self._delay_grad_views.append(self._delay_grad_buffer[lo:lo + p.numel()].view(p.shape))
            lo += p.numel()
        self._delay_all_reduce_all_params = not any(
            p.requires_grad for n, p in self.module.named_parameters() if n not in self.parameters_to_ignore)

    def _delayed_all_reduce_hook(self, grad):
        self._delay_grad_buffer.div_(self.process_group.size())
        self._delay_work = dist.all_reduce(self._delay_grad_buffer, group=self.process_group, async_op=True)
        ember.autograd.Variable._execution_engine.queue_callback(self._wait_delayed_all_reduce)
        return grad

    def _wait_delayed_all_reduce(self):
        if self._delay_work is not None:
            self._delay_work.wait()
            self._delay_work = None

    def _clear_grad_buffer(self):
        """Point the delayed parameters' ``.grad`` at their views of the flat buffer before backward."""
        if self._delay_grad_buffer is None:
            return
        all_none = all(p.grad is None for p in self._delay_all_reduce_params)
        with ember.no_grad():
            for p, view in zip(self._delay_all_reduce_params, self._delay_grad_views):
                if p.grad is None:
                    p.grad = view
                    if not all_none:
                        p.grad.zero_()
            if all_none:
                self._delay_grad_buffer.zero_()

    # ---- forward ----------------------------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        inputs, kwargs = self._pre_forward(*inputs, **kwargs)
        if self._delay_all_reduce_all_params:
            output = self.module.forward(*inputs, **kwargs)
        else:
            with self._inside_ddp_forward():
                output = self.module(*inputs, **kwargs)
        return self._post_forward(output)

    @contextmanager
    def _inside_ddp_forward(self):
        old = DistributedDataParallel._active_ddp_module
        DistributedDataParallel._active_ddp_module = self
        try:
            yield
        finally:
            DistributedDataParallel._active_ddp_module = old

    @classmethod
    def _get_active_ddp_module(cls):
        return cls._active_ddp_module

    def _pre_forward(self, *inputs, **kwargs):
        if self._delay_work is not None:
            self._wait_delayed_all_reduce()
        self._lazy_init_ran = True
        if self._delay_all_reduce_all_params:
            return inputs, kwargs
        grad_enabled = ember.is_grad_enabled()
        if grad_enabled and self.require_backward_grad_sync:
            self.reducer.prepare_for_forward()
        work = Join.notify_join_context(self)
        if work:
            self.reducer._set_forward_pass_work_handle(work, self._divide_by_initial_world_size)
        if grad_enabled and self.reducer._rebuild_buckets():
            self._has_rebuilt_buckets = True
        if self._check_sync_bufs_pre_fwd():
            self._sync_buffers()
        if self._join_config.enable:
            self._check_global_requires_backward_grad_sync(is_joined_rank=False)
        if self.device_ids:
            device = ember.device(self.device_type, self.device_ids[0])
            return _to_device(inputs, device), _to_device(kwargs, device)
        return inputs, kwargs

    def _post_forward(self, output):
        if self._delay_all_reduce_all_params:
            self._clear_grad_buffer()
            return output
        if self._check_sync_bufs_post_fwd():
            self._sync_buffers()
        if ember.is_grad_enabled() and self.require_backward_grad_sync:
            self.require_forward_param_sync = True
            searching = self.find_unused_parameters and not self.static_graph
            self.reducer.prepare_for_backward(_find_tensors(output) if searching else [])
        else:
            self.require_forward_param_sync = False
        self._clear_grad_buffer()
        return output

    def scatter(self, inputs, kwargs, device_ids):
        from .scatter_gather import scatter_kwargs
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def to_kwargs(self, inputs, kwargs, device_id):
        device = ember.device(self.device_type, device_id)
        return (_to_device(inputs, device),), (_to_device(kwargs, device),)

    def gather(self, outputs, output_device):
        from .scatter_gather import gather
        return gather(outputs, output_device, dim=self.dim)

    def train(self, mode=True):
        super().train(mode)
        return self

    @contextmanager
    def no_sync(self):
        """Inside, forward/backward passes accumulate gradients locally; the first synchronised backward after it
        averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- buffers ----------------------------------------------------------------------------------------------
    @property
    def broadcast_buffers(self):
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value):
        self.forward_sync_buffers = value

    def will_sync_module_buffers(self):
        return self.require_forward_param_sync and self.forward_sync_buffers and len(self.modules_buffers) > 0

    def _check_sync_bufs_pre_fwd(self):
        return self.will_sync_module_buffers() and (
            not hasattr(self, "buffer_hook") or self.buffer_hook[2] == _BufferCommHookLocation.PRE_FORWARD)

    def _check_sync_bufs_post_fwd(self):
        return self.will_sync_module_buffers() and hasattr(self, "buffer_hook") and \
            self.buffer_hook[2] == _BufferCommHookLocation.POST_FORWARD

    def _find_common_rank(self, input_rank, rank_cond):
        """The largest rank among those where ``rank_cond`` holds (all_reduce MAX)."""
        rank = ember.tensor([input_rank if rank_cond else -1], device=self.device)
        dist.all_reduce(rank, op=dist.ReduceOp.MAX, group=self.process_group)
        if rank.item() == -1:
            raise ValueError("BUG! Expected rank_cond to be true for at least one process. This indicates a bug in "
                             "PyTorch, please report an issue.")
        return int(rank.item())

    def _sync_buffers(self):
        with ember.no_grad():
            rank = self._find_common_rank(self._distributed_rank, True) if self._join_config.enable else 0
            self._assign_modules_buffers()
            self._sync_module_buffers(rank)

    def _sync_module_buffers(self, authoritative_rank):
        if not hasattr(self, "buffer_hook"):
            self._default_broadcast_coalesced(authoritative_rank=authoritative_rank)
        else:
            hook, state, _ = self.buffer_hook
            futs = hook(state, self.named_module_buffers)
            for fut in futs or ():
                fut.wait()

    def _default_broadcast_coalesced(self, bufs=None, bucket_size=None, authoritative_rank=0):
        dist._broadcast_coalesced(self.process_group, self.modules_buffers if bufs is None else bufs,
                                  self.broadcast_bucket_size if bucket_size is None else bucket_size,
                                  authoritative_rank)

    def _check_and_sync_module_buffers(self):
        if self._check_sync_bufs_pre_fwd():
            self._sync_module_buffers(self._find_common_rank(self._distributed_rank, False))

    def _register_buffer_comm_hook(self, state, hook, comm_hook_location=None):
        """``hook(state, {name: buffer})`` synchronises the buffers instead of the broadcast from rank 0 (before
        or after forward); it may return futures, waited for before the forward goes on."""
        if not callable(hook):
            raise AssertionError(f"hook must be callable, got {type(hook).__name__}")
        self.buffer_hook = (hook, state, comm_hook_location or _BufferCommHookLocation.POST_FORWARD)

    # ---- uneven inputs ----------------------------------------------------------------------------------------
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """A context manager for training with uneven inputs: ranks out of inputs shadow the others' collectives
        until all have joined (see ember.distributed.algorithms.Join)."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        return _DDPJoinHook(self, divide_by_initial_world_size=kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return self.device

    @property
    def join_process_group(self):
        return self.process_group

    @property
    def _distributed_rank(self):
        return dist.get_rank(self.process_group)

    def _check_global_requires_backward_grad_sync(self, is_joined_rank):
        """Every rank learns whether some rank will synchronise gradients in this iteration."""
        wants = not is_joined_rank and self.require_backward_grad_sync
        flag = ember.ones(1, device=self.device) if wants else ember.zeros(1, device=self.device)
        work = dist.all_reduce(flag, group=self.process_group, async_op=True)
        if is_joined_rank:
            work.wait()
            return flag.item() != 0
        return None

    def _sync_final_model(self, is_last_joiner):
        self._authoritative_rank = self._find_common_rank(self._distributed_rank, is_last_joiner)
        self._sync_module_states(self._authoritative_rank, self.forward_sync_buffers)

    def _match_all_reduce_for_bwd_pass(self):
        futures = []
        for bucket in self.reducer._get_zeros_like_grad_buckets():
            futures.append(self.reducer._run_comm_hook(bucket))
            if self.reducer._hook_serial:  # (one bucket's chain of collectives at a time, as the others run them)
                futures[-1].wait()
        for fut in futures:
            fut.wait()

    def _match_unused_params_allreduce(self):
        dist.all_reduce(self.reducer._get_local_used_map(), group=self.process_group)

    # ---- comm hooks -------------------------------------------------------------------------------------------
    def register_comm_hook(self, state, hook):
        """``hook(state, bucket)`` reduces each GradBucket and returns a Future of the result (not divided by the
        world size beforehand). Once, before the first backward."""
        self._check_comm_hook(hook)
        self._comm_hooks.append((hook, state))
        dist._register_comm_hook(self.reducer, state, hook)

    def _register_builtin_comm_hook(self, comm_hook_type):
        dist._register_builtin_comm_hook(self.reducer, comm_hook_type)

    def _check_comm_hook(self, hook):
        if not callable(hook):
            raise TypeError("Communication hook must be callable.")
        sig = inspect.signature(hook)
        annotation = sig.parameters["bucket"].annotation
        if annotation is not inspect.Parameter.empty and annotation is not dist.GradBucket:
            raise ValueError("Communication hook: bucket annotation should be dist.GradBucket.")
        ret = sig.return_annotation
        if ret is not inspect.Signature.empty and getattr(ret, "__origin__", ret) is not _future_type():
            raise ValueError("Communication hook: return annotation should be torch.futures.Future[torch.Tensor].")

    # ---- static graph and private helpers ---------------------------------------------------------------------
    def _set_static_graph(self):
        if self.static_graph:
            warnings.warn("You've set static_graph to be True, no need to set it again.", stacklevel=2)
            return
        self.static_graph = True
        self.reducer._set_static_graph()
        if self.find_unused_parameters:
            warnings.warn("You passed find_unused_parameters=true to DistributedDataParallel, `_set_static_graph` "
                          "will detect unused parameters automatically, so you do not need to set "
                          "find_unused_parameters=true, just be sure these unused parameters will not change during "
                          "training loop while calling `_set_static_graph`.", stacklevel=2)

    def _check_reducer_finalized(self):
        self.reducer._check_reducer_finalized()

    def _remove_autograd_hooks(self):
        self.reducer._remove_autograd_hooks()

    def _set_ddp_sink_clone(self, val):
        self._ddp_sink_clone = val

    def _get_ddp_logging_data(self):
        return {"world_size": self.process_group.size(), "rank": self._distributed_rank,
                "module_name": type(self.module).__name__, "device_ids": self.device_ids or [],
                "output_device": -1 if self.output_device is None else self.output_device,
                "broadcast_buffers": int(self.forward_sync_buffers), "bucket_cap_bytes": self.bucket_bytes_cap,
                "find_unused_parameters": int(self.find_unused_parameters),
                "gradient_as_bucket_view": int(self.gradient_as_bucket_view), "static_graph": int(self.static_graph),
                "has_rebuilt_buckets": int(self._has_rebuilt_buckets),
                "backend_name": dist.get_backend(self.process_group)}

    @staticmethod
    def _get_data_parallel_params(module, named_params=False):
        for param in (module.named_parameters() if named_params else module.parameters()):
            if not hasattr(param[1] if named_params else param, "_ddp_ignored"):
                yield param

    @staticmethod
    def _set_params_and_buffers_to_ignore_for_model(module, params_and_buffers_to_ignore):
        """Leave the named parameters and buffers (fully qualified names) out of DDP's synchronisation."""
        module._ddp_params_and_buffers_to_ignore = params_and_buffers_to_ignore
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            if name in params_and_buffers_to_ignore:
                try:
                    t._ddp_ignored = True
                except AttributeError:  # (a plain tensor takes no attributes in ember: the module's list says it)
                    pass


class _BufferCommHookLocation:
    PRE_FORWARD = "pre_forward"
    POST_FORWARD = "post_forward"


def _device_index(device):
    if isinstance(device, int):
        return device
    return ember.device(device).index


def _future_type():
    try:
        import ember.futures
        return ember.futures.Future
    except ImportError:
        from ember.distributed._work import Future
        return Future

