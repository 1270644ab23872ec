"""ember.nn.utils: gradient clipping, parameters <-> vector, packed-sequence helpers."""
import numpy as np
import pytest
import torch
import torch.nn.utils as tutils
from _torch_compare import assert_same, to_ember

import ember
import ember.nn as nn
import ember.nn.utils as utils
import ember.nn.utils.rnn as ernn


def _with_grads():
    torch.manual_seed(0)
    t_params = [torch.randn(3, 4, requires_grad=True), torch.randn(5, requires_grad=True)]
    for p in t_params:
        p.grad = torch.randn(p.shape) * 3
    e_params = [to_ember(p) for p in t_params]
    for e, t in zip(e_params, t_params):
        e.grad = to_ember(t.grad, False)
    return t_params, e_params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    t_params, e_params = _with_grads()
    t_total = tutils.clip_grad_norm_(t_params, max_norm, norm_type)
    e_total = utils.clip_grad_norm_(e_params, max_norm, norm_type)
    assert_same(e_total, t_total, rtol=1e-5)
    for e, t in zip(e_params, t_params):
        assert_same(e.grad, t.grad, rtol=1e-5)


def test_clip_grad_norm_nonfinite_and_value():
    t_params, e_params = _with_grads()
    e_params[0].grad[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        utils.clip_grad_norm_(e_params, 1.0, error_if_nonfinite=True)
    t_params, e_params = _with_grads()
    tutils.clip_grad_value_(t_params, 0.7)
    utils.clip_grad_value_(e_params, 0.7)
    for e, t in zip(e_params, t_params):
        assert_same(e.grad, t.grad)
    single = nn.Parameter(ember.ones(2))
    single.grad = ember.tensor([3.0, 4.0])
    assert float(utils.clip_grad_norm_(single, 1.0)) == pytest.approx(5.0)
    np.testing.assert_allclose(single.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    assert float(utils.get_total_norm([ember.tensor([3.0]), ember.tensor([4.0])])) == pytest.approx(5.0)


def test_parameters_vector_round_trip():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    vec = utils.parameters_to_vector(model.parameters())
    assert tuple(vec.shape) == (3 * 4 + 4 + 4 * 2 + 2,)
    utils.vector_to_parameters(ember.arange(vec.numel(), dtype=ember.float32), model.parameters())
    assert model[0].weight[0].tolist() == [0.0, 1.0, 2.0] and model[1].bias.tolist() == [24.0, 25.0]
    with pytest.raises(TypeError):
        utils.vector_to_parameters([1.0], model.parameters())
    # the flattening is differentiable
    w = nn.Parameter(ember.ones(2, 2))
    (utils.parameters_to_vector([w]) * ember.arange(4.0)).sum().backward()
    assert w.grad.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_sequence_helpers_match_torch():
    torch.manual_seed(0)
    seqs = [torch.randn(n, 2, dtype=torch.float64, requires_grad=True) for n in (3, 5, 1)]
    e_seqs = to_ember(seqs)
    for side in ("right", "left"):
        for batch_first in (True, False):
            assert_same(ernn.pad_sequence(e_seqs, batch_first, -1.0, side),
                        torch.nn.utils.rnn.pad_sequence(seqs, batch_first, -1.0, side))
    t_packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    e_packed = ernn.pack_sequence(e_seqs, enforce_sorted=False)
    assert_same(e_packed.data, t_packed.data)
    assert e_packed.sorted_indices.tolist() == t_packed.sorted_indices.tolist()
    assert e_packed.unsorted_indices.tolist() == t_packed.unsorted_indices.tolist()
    for e, t in zip(ernn.unpack_sequence(e_packed), torch.nn.utils.rnn.unpack_sequence(t_packed)):
        assert_same(e, t)
    padded, lengths = ernn.pad_packed_sequence(e_packed, padding_value=9.0, total_length=6)
    t_padded, t_lengths = torch.nn.utils.rnn.pad_packed_sequence(t_packed, padding_value=9.0, total_length=6)
    assert_same(padded, t_padded)
    assert lengths.tolist() == t_lengths.tolist()
    padded.sum().backward()
    assert all(s.grad.tolist() == np.ones(tuple(s.shape)).tolist() for s in e_seqs)
    assert ernn.invert_permutation(ember.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert e_packed.double().data.dtype == ember.float64 and not e_packed.is_cuda
