"""``replicate``: copies of a module, one per device, whose parameters and buffers are copies of the original's on
that device. The copies are made by differentiable moves, so gradients computed through a replica reach the
original's parameters."""
import copy

from .scatter_gather import as_device

__all__ = ["replicate"]


def _replica(module, device, detach, made):
    """A shallow copy of ``module`` (and its submodules) holding its tensors moved to ``device``."""
    if id(module) in made:  # (a submodule used twice stays one module in the replica)
        return made[id(module)]
    replica = made[id(module)] = copy.copy(module)
    d = replica.__dict__
    d["_parameters"] = {k: None if p is None else _moved(p, device, detach) for k, p in module._parameters.items()}
    d["_buffers"] = {k: None if b is None else _moved(b, device, True) for k, b in module._buffers.items()}
    d["_modules"] = {k: None if m is None else _replica(m, device, detach, made) for k, m in module._modules.items()}
    d["_is_replica"] = True
    return replica


def _moved(t, device, detach):
    moved = t.detach().to(device) if detach else t.to(device)
    # (on the original's device too a new tensor: a replica never holds the original Parameter object)
    return moved.view_as(moved) if moved is t else moved


def replicate(network, devices, detach=False):
    """One replica of ``network`` per device in ``devices``; with ``detach`` the replicas' parameters carry no
    gradient to the original."""
    return [_replica(network, as_device(d), detach, {}) for d in devices]
