"""A list where a functional takes a tensor: PyTorch's TypeError naming the argument, not an AttributeError from
inside ember (registry ops refuse such arguments themselves; these functionals work on them first)."""
import pytest
import torch

import ember

L = [[1.0, 2.0], [3.0, 4.0]]
CALLS = {
    "linear": lambda m: m.nn.functional.linear(L, m.ones(2, 2)),
    "linear(weight)": lambda m: m.nn.functional.linear(m.ones(2, 2), L),
    "cross_entropy": lambda m: m.nn.functional.cross_entropy(L, m.tensor([0, 1])),
    "cross_entropy(target)": lambda m: m.nn.functional.cross_entropy(m.ones(2, 2), [0, 1]),
    "nll_loss": lambda m: m.nn.functional.nll_loss(L, m.tensor([0, 1])),
    "embedding": lambda m: m.nn.functional.embedding([0, 1], m.ones(3, 2)),
    "one_hot": lambda m: m.nn.functional.one_hot([0, 1], 3),
    "pad": lambda m: m.nn.functional.pad(L, (1, 1)),
    "unfold": lambda m: m.nn.functional.unfold(L, 2),
    "grid_sample": lambda m: m.nn.functional.grid_sample(L, m.zeros(1, 1, 1, 2)),
    "multi_margin_loss": lambda m: m.nn.functional.multi_margin_loss(L, m.tensor([0, 1])),
    "multilabel_margin_loss": lambda m: m.nn.functional.multilabel_margin_loss(L, m.tensor([[0, 1], [1, 0]])),
    "gumbel_softmax": lambda m: m.nn.functional.gumbel_softmax(L),
    "gelu": lambda m: m.nn.functional.gelu(L),
    "softplus": lambda m: m.nn.functional.softplus(L),
    "kl_div": lambda m: m.nn.functional.kl_div(L, m.ones(2, 2), reduction="batchmean"),
}


@pytest.mark.parametrize("name", CALLS)
def test_a_list_for_a_tensor_is_torchs_typeerror(name):
    with pytest.raises(TypeError) as expected:
        CALLS[name](torch)
    with pytest.raises(TypeError, match=r"must be Tensor, not list") as got:
        CALLS[name](ember)
    # the same argument named, where PyTorch reports its Python signature's names (for the others it names its C++
    # schema's: embedding's weight first, cross_entropy_loss, one_hot's and gumbel_softmax's "input")
    if name not in ("embedding", "cross_entropy", "cross_entropy(target)", "one_hot", "gumbel_softmax"):
        assert str(got.value).split("(): ", 1)[1] == str(expected.value).split("(): ", 1)[1]
