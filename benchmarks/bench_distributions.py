"""ember.distributions against torch.distributions on 1M float32 values (CPU, same thread count): a Normal's
``sample()`` and ``rsample()`` (parameters requiring grad: the graph is recorded) each with ``log_prob`` of the
draw, and a Categorical over 100 classes (logits of shape (10_000, 100)) ``sample()`` with ``log_prob``.

    python benchmarks/run.py -k distributions
"""
import numpy as np
from _harness import benchmark, interleaved

N, CLASSES = 1_000_000, 100


def _normal_params(lib, requires_grad):
    rng = np.random.default_rng(0)
    loc = lib.tensor(rng.standard_normal(N).astype(np.float32), requires_grad=requires_grad)
    scale = lib.tensor(rng.uniform(0.5, 2.0, N).astype(np.float32), requires_grad=requires_grad)
    return loc, scale


def _compare(make):
    """``make(lib)`` gives the call to time; both are warmed up once, then timed alternately."""
    import torch

    import ember
    fe, ft = make(ember), make(torch)
    fe(), ft()
    return interleaved(fe, ft, repeats=7, budget=0.2)


@benchmark("distributions: Normal(loc, scale).sample() + log_prob, 1M float32", goal=1.5)
def normal_sample():
    def make(lib):
        loc, scale = _normal_params(lib, False)

        def run():
            d = lib.distributions.Normal(loc, scale)
            return d.log_prob(d.sample())
        return run
    return _compare(make)


@benchmark("distributions: Normal(loc, scale).rsample() + log_prob (params require grad), 1M float32", goal=1.5)
def normal_rsample():
    def make(lib):
        loc, scale = _normal_params(lib, True)

        def run():
            d = lib.distributions.Normal(loc, scale)
            return d.log_prob(d.rsample())
        return run
    return _compare(make)


@benchmark("distributions: Categorical(logits (10k, 100)).sample() + log_prob", goal=1.5)
def categorical_sample():
    def make(lib):
        rng = np.random.default_rng(1)
        logits = lib.tensor(rng.standard_normal((N // CLASSES, CLASSES)).astype(np.float32))

        def run():
            d = lib.distributions.Categorical(logits=logits)
            return d.log_prob(d.sample())
        return run
    return _compare(make)

