"""Distributed autograd, DistributedOptimizer and RemoteModule on three workers, against the same model run in
one process."""
import numpy as np
import pytest

import ember
import ember.distributed.autograd as dist_autograd
import ember.distributed.rpc as rpc
from ember import nn
from ember.distributed.nn import RemoteModule
from ember.distributed.optim import DistributedOptimizer


class Stage(nn.Module):
    """A seeded Linear + tanh (the same weights wherever it is made)."""

    def __init__(self, seed, n_in, n_out):
        super().__init__()
        ember.manual_seed(seed)
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return ember.tanh(self.fc(x))


class Chained(nn.Module):
    """A stage that sends its output on to a stage on another worker (a nested RPC inside the context)."""

    def __init__(self, seed, n_in, n_out, next_rref):
        super().__init__()
        self.stage = Stage(seed, n_in, n_out)
        self.next = next_rref

    def forward(self, x):
        return self.next.rpc_sync().forward(self.stage(x))


def _sum_of_squares(t):
    return (t ** 2).sum()


def _grads_of(module_rref, context_id):
    grads = dist_autograd.get_gradients(context_id)
    return [grads[p].numpy() for p in module_rref.local_value().parameters()]


def _params_of(module_rref):
    return [p.detach().numpy() for p in module_rref.local_value().parameters()]


def _reference(x, w0, target):
    """The model in one process: x @ w0 -> Stage(1) -> Stage(2) -> mse; gradients and the SGD step."""
    w0 = ember.tensor(w0, requires_grad=True)
    s1, s2 = Stage(1, 4, 5), Stage(2, 5, 3)
    loss = ((s2(s1(ember.tensor(x) @ w0)) - ember.tensor(target)) ** 2).mean()
    loss.backward()
    params = [w0, *s1.parameters(), *s2.parameters()]
    grads = [p.grad.numpy().copy() for p in params]
    opt = ember.optim.SGD(params, lr=0.1, momentum=0.9)
    opt.step()
    return float(loss), grads, [p.detach().numpy() for p in params]


def _model(rank, world):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    out = {}
    if rank == 0:
        rng = np.random.default_rng(0)
        x, w0, target = (rng.standard_normal(s).astype(np.float32) for s in ((6, 3), (3, 4), (6, 3)))
        out["reference"] = _reference(x, w0, target)
        # the seed page's example
        with dist_autograd.context() as context_id:
            t1 = ember.rand((3, 3), requires_grad=True)
            t2 = ember.rand((3, 3), requires_grad=True)
            loss = rpc.rpc_sync("worker1", ember.add, args=(t1, t2)).sum()
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
            out["add"] = (grads[t1].numpy(), grads[t2].numpy(), t1.grad is None)
        with pytest.raises(RuntimeError, match="Could not find autograd context"):
            dist_autograd.get_gradients(context_id)
        # a pipeline over workers 1 and 2 (worker 1's stage calls worker 2's), then the optimizer
        last = RemoteModule("worker2/cpu", Stage, args=(2, 5, 3))
        first = RemoteModule("worker1", Chained, args=(1, 4, 5, last.get_module_rref()))
        w0_param = ember.tensor(w0, requires_grad=True)
        with dist_autograd.context() as context_id:
            pred = first(ember.tensor(x) @ w0_param)
            loss = ((pred - ember.tensor(target)) ** 2).mean()
            dist_autograd.backward(context_id, [loss])
            out["loss"] = float(loss)
            out["grads"] = [dist_autograd.get_gradients(context_id)[w0_param].numpy(),
                            *rpc.rpc_sync("worker1", _grads_of, args=(first.get_module_rref(), context_id)),
                            *rpc.rpc_sync("worker2", _grads_of, args=(last.get_module_rref(), context_id))]
            params = [rpc.RRef(w0_param), *first.remote_parameters(), *last.remote_parameters()]
            opt = DistributedOptimizer(ember.optim.SGD, params, lr=0.1, momentum=0.9)
            opt.step(context_id)
        out["stepped"] = [w0_param.detach().numpy(),
                          *rpc.rpc_sync("worker1", _params_of, args=(first.get_module_rref(),)),
                          *rpc.rpc_sync("worker2", _params_of, args=(last.get_module_rref(),))]
        out["async"] = first.forward_async(ember.tensor(x) @ w0_param).wait().shape
        # RRef.backward: a loss made on worker 1 by remote(), backpropagated from there
        with dist_autograd.context() as context_id:
            u = ember.arange(3.0, requires_grad=True)
            loss_rref = rpc.remote("worker1", _sum_of_squares, args=(u * 2,))
            loss_rref.backward(context_id)
            out["rref_backward"] = dist_autograd.get_gradients(context_id)[u].numpy()
    rpc.shutdown()
    return out


def test_distributed_backward_and_optimizer_equal_one_process(workers):
    out = workers(3).run(_model)[0]
    g1, g2, untouched = out["add"]
    np.testing.assert_array_equal(g1, np.ones((3, 3)))
    np.testing.assert_array_equal(g2, np.ones((3, 3)))
    assert untouched  # gradients go to the context, not to .grad
    ref_loss, ref_grads, ref_params = out["reference"]
    assert out["loss"] == pytest.approx(ref_loss, rel=1e-6)
    assert len(out["grads"]) == 5  # w0, stage 1 (weight, bias), stage 2 (weight, bias)
    for got, want in zip(out["grads"], ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert len(out["stepped"]) == 5
    for got, want in zip(out["stepped"], ref_params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert out["async"] == (6, 3)
    np.testing.assert_allclose(out["rref_backward"], 8 * np.arange(3.0))  # d/du sum((2u)^2) = 8u
