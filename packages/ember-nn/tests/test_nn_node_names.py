"""Autograd behaviour that needs ember.nn (ember-autograd's own session has no ember-nn): the graph nodes of
nn.functional calls are named as PyTorch's, and leaf gradients are accumulated as soon as they are ready."""
import numpy as np
import pytest
import torch

import ember

CALLS = {
    "linear+bias": lambda L, x, b: L.nn.functional.linear(x, b[None, :].expand(2, 4) * 1, b[:2]),
    "layer_norm": lambda L, x, b: L.nn.functional.layer_norm(x, (4,)),
    "log_softmax": lambda L, x, b: L.nn.functional.log_softmax(x, 1),
    "cross_entropy": lambda L, x, b: L.nn.functional.cross_entropy(x, L.tensor([0, 1, 3])),
    "conv2d": lambda L, x, b: L.nn.functional.conv2d(x[None, None], x[None, None, :2, :2]),
}


@pytest.mark.parametrize("name", CALLS)
def test_node_names_of_functional_calls(name):
    seen = []
    for lib in (torch, ember):
        gen = np.random.default_rng(0)
        x = lib.tensor(gen.standard_normal((3, 4)), dtype=lib.float32, requires_grad=True)
        b = lib.tensor(gen.standard_normal(4), dtype=lib.float32, requires_grad=True)
        seen.append(type(CALLS[name](lib, x, b).grad_fn).__name__)
    assert seen[1] == seen[0]


@pytest.mark.parametrize("lib", [torch, ember])
def test_leaf_gradients_land_before_earlier_layers_run(lib):
    # as PyTorch: a leaf's accumulation runs as soon as its gradient is ready, so DDP's post-accumulate hooks fire
    # (and its all-reduces start) while backward goes on through earlier layers
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))
    events = []
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: events.append(name.split(".")[0]))
    for i in (0, 2):
        m[i].register_full_backward_hook(lambda mod, gi, go, i=i: events.append(f"backward {i}"))
    m(lib.randn(3, 4, requires_grad=True)).sum().backward()
    assert events == ["2", "2", "backward 2", "0", "0", "backward 0"]
