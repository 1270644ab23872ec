"""``DistributedOptimizer`` (ember-rpc's part of ``ember.distributed.optim``, which ember-distributed provides): one
local optimiser per owner of the parameters it is given as RRefs, stepped with the gradients of a distributed
autograd context."""
import threading
from collections import defaultdict

import ember.distributed.autograd as dist_autograd
import ember.distributed.rpc as rpc
from ember.futures import wait_all

__all__ = ["DistributedOptimizer"]


class _LocalOptimizer:
    """On a parameters' owner: the optimiser over them (steps of concurrent trainers take turns)."""

    def __init__(self, optim_cls, local_params_rref, *args, **kwargs):
        self._lock = threading.Lock()
        self.params = [r.local_value() for r in local_params_rref]
        self.optim = optim_cls(self.params, *args, **kwargs)

    def step(self, autograd_ctx_id):
        grads = dist_autograd.get_gradients(autograd_ctx_id)
        with self._lock:
            for p in self.params:  # a parameter without gradient in the context is left as it is
                p.grad = grads.get(p)
            self.optim.step()


def _new_local_optimizer(optim_cls, local_params_rref, args, kwargs):
    return rpc.RRef(_LocalOptimizer(optim_cls, local_params_rref, *args, **kwargs))


def _local_optimizer_step(local_optim_rref, autograd_ctx_id):
    local_optim_rref.local_value().step(autograd_ctx_id)


class DistributedOptimizer:
    """``DistributedOptimizer(optimizer_class, params_rref, *args, **kwargs)``: ``optimizer_class(params, *args,
    **kwargs)`` made on each worker owning some of ``params_rref`` (RRefs of parameters); ``step(context_id)``
    steps all of them with the gradients the context accumulated there, and returns when all are done."""

    def __init__(self, optimizer_class, params_rref, *args, **kwargs):
        per_worker = defaultdict(list)
        for param in params_rref:
            per_worker[param.owner()].append(param)
        futures = [rpc.rpc_async(worker, _new_local_optimizer, args=(optimizer_class, params, args, kwargs))
                   for worker, params in per_worker.items()]
        self.remote_optimizers = wait_all(futures)

    def step(self, context_id):
        dist_autograd._context.lookup(context_id)  # a valid context here
        futures = [rpc.rpc_async(opt.owner(), _local_optimizer_step, args=(opt, context_id))
                   for opt in self.remote_optimizers]
        wait_all(futures)
