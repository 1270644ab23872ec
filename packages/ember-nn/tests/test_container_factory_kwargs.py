"""nn.Container (PyTorch's deprecated first container) and nn.factory_kwargs against torch."""
import pytest
import torch

import ember
import ember.nn as nn


def test_container_warns_and_holds_modules():
    reprs = []
    for lib in (torch, ember):
        with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
            c = lib.nn.Container(a=lib.nn.Linear(2, 3), b=lib.nn.ReLU())
        assert isinstance(c, lib.nn.Module) and list(dict(c.named_children())) == ["a", "b"]
        assert [k for k, _ in c.named_parameters()] == ["a.weight", "a.bias"]
        reprs.append(repr(c))
    assert reprs[0] == reprs[1]


@pytest.mark.parametrize("kwargs", [None, {}, {"device": "cpu"}, {"dtype": 1, "factory_kwargs": {"device": "cpu"}},
                                    {"memory_format": 2, "factory_kwargs": {"anything": 3}},
                                    {"foo": 1}, {"device": "cpu", "factory_kwargs": {"device": "cpu"}}])
def test_factory_kwargs(kwargs):
    try:
        expected = torch.nn.factory_kwargs(kwargs)
    except TypeError as e:
        with pytest.raises(TypeError, match=str(e).split()[0]):
            nn.factory_kwargs(kwargs)
        return
    assert nn.factory_kwargs(kwargs) == expected
