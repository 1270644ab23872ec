"""Helpers for comparing ember.nn against PyTorch: tensor conversion, output and gradient comparison."""
import numpy as np
import torch

import ember


def to_ember(obj, requires_grad=None):
    """torch tensors (also inside lists, tuples and dicts) as ember tensors with the same requires_grad."""
    if isinstance(obj, torch.Tensor):
        t = ember.tensor(obj.detach().numpy())
        if obj.requires_grad if requires_grad is None else requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_ember(o, requires_grad) for o in obj)
    if isinstance(obj, dict):
        return {k: to_ember(v, requires_grad) for k, v in obj.items()}
    return obj


def to_numpy(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach().cpu().numpy()


def assert_same(e, t, rtol=1e-6, atol=1e-8):
    """ember result ``e`` equals torch result ``t`` (tensors, tuples of tensors, None) in shape, dtype and values."""
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            assert_same(a, b, rtol, atol)
        return
    if t is None:
        assert e is None
        return
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    np.testing.assert_allclose(to_numpy(e), to_numpy(t), rtol=rtol, atol=atol, equal_nan=True)


def leaves(obj):
    """The tensors requiring grad in ``obj`` (flattened)."""
    if isinstance(obj, (torch.Tensor, ember.Tensor)):
        return [obj] if obj.requires_grad else []
    if isinstance(obj, (list, tuple)):
        return [x for o in obj for x in leaves(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in leaves(o)]
    return []


def first_float(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def check_grads(e_out, t_out, e_inputs, t_inputs, rtol=1e-6, atol=1e-8):
    """Backpropagate the same random cotangent through both results and compare the input gradients."""
    t_out, e_out = first_float(t_out), first_float(e_out)
    cot = torch.randn(t_out.shape, dtype=t_out.dtype, generator=torch.Generator().manual_seed(0))
    t_leaves, e_leaves = leaves(t_inputs), leaves(e_inputs)
    t_grads = torch.autograd.grad((t_out * cot).sum(), t_leaves, allow_unused=True)
    (e_out * to_ember(cot, False)).sum().backward()
    for eg, tg in zip([x.grad for x in e_leaves], t_grads):
        if tg is None:
            assert eg is None or not np.any(to_numpy(eg))
        else:
            assert_same(eg, tg, rtol, atol)
