"""Helpers of the differential tests: moving tensors, quantized tensors and float models between torch and ember,
and measuring how far two quantized outputs' integers agree."""
import numpy as np
import torch

import ember

DTYPES = {torch.quint8: ember.quint8, torch.qint8: ember.qint8, torch.qint32: ember.qint32,
          torch.quint4x2: ember.quint4x2}


def to_ember(t):
    """A torch tensor (float or quantized; also in lists, tuples and dicts) as an ember tensor."""
    if isinstance(t, (list, tuple)):
        return type(t)(to_ember(x) for x in t)
    if isinstance(t, dict):
        return {k: to_ember(v) for k, v in t.items()}
    if not isinstance(t, torch.Tensor):
        return t
    if not t.is_quantized:
        return ember.tensor(t.detach().numpy())
    if t.dtype == torch.quint4x2:  # (two values a byte, low nibble first)
        return _quint4x2(t)
    ints = ember.tensor(t.int_repr().numpy())
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        q = ember._make_per_tensor_quantized_tensor(ints, t.q_scale(), t.q_zero_point())
    else:
        q = ember._make_per_channel_quantized_tensor(ints, ember.tensor(t.q_per_channel_scales().numpy()),
                                                     ember.tensor(t.q_per_channel_zero_points().numpy()),
                                                     t.q_per_channel_axis())
    assert q.dtype == DTYPES[t.dtype]
    return q


def _quint4x2(t):
    """A per-row quint4x2 torch tensor as ember's (made through core's constructor: torch has no public way to
    build one from integers)."""
    from ember import _quantized
    packed = t.int_repr().numpy().reshape(-1)
    values = np.stack([packed & 15, packed >> 4], -1).reshape(-1)[:t.numel()].reshape(t.shape)
    q = _quantized._Quantizer(ember.quint4x2, ember.per_channel_affine_float_qparams,
                              scales=t.q_per_channel_scales().numpy().astype(np.float64),
                              zero_points=t.q_per_channel_zero_points().numpy(), axis=0)
    return _quantized._new(np.ascontiguousarray(values, np.uint8), q)


def numpy(t):
    """Values of a float tensor (torch or ember) as an array."""
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach().numpy()


def ints(t):
    """The integers of a quantized tensor (torch or ember)."""
    return t.int_repr().numpy().astype(np.int64)


def copy_float_model(torch_model, ember_model):
    """Load ``torch_model``'s float state into ``ember_model`` (same structure)."""
    ember_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
    return ember_model


def agreement(e, t):
    """(fraction of equal integers, largest difference) of two quantized tensors' integers; the qparams must be
    equal."""
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert e.q_scale() == t.q_scale() and e.q_zero_point() == t.q_zero_point(), \
        ((e.q_scale(), e.q_zero_point()), (t.q_scale(), t.q_zero_point()))
    d = np.abs(ints(e) - ints(t))
    return float((d == 0).mean()) if d.size else 1.0, int(d.max(initial=0))


def assert_agrees(e, t, at_least=0.999):
    """PyTorch's agreement bar: equal integers on ``at_least`` of the elements, within one step everywhere."""
    frac, worst = agreement(e, t)
    assert worst <= 1 and frac >= at_least, (frac, worst)
    return frac
