"""Graph nodes are named as PyTorch's: every differentiable op of the op table run under torch and ember with inputs
requiring grad gives a result whose ``type(grad_fn).__name__`` is torch's; plus the node API (name(), repr,
next_functions, AccumulateGrad.variable, custom Functions' ``<Name>Backward``)."""
import importlib
import pathlib
import re
import sys
import warnings

import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

CORE_TESTS = pathlib.Path(__file__).resolve().parents[2] / "ember-core" / "tests"
sys.path.insert(0, str(CORE_TESTS))
optable = importlib.import_module("optable")

# ops whose node legitimately differs from torch's: ember computes them as one op (one node) where torch chains
# several ATen ops whose last one depends on the arguments, or torch returns its input itself (no new node)
EXEMPT = {
    **dict.fromkeys(("kl_div", "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss",
                     "poisson_nll_loss", "triplet_margin_loss"), "a chain in torch ending in a mean, sum or the "
                    "unreduced loss's last op, by reduction"),
    **dict.fromkeys(("einsum", "inner", "matrix_power", "linalg_matrix_power", "linalg_multi_dot", "chain_matmul",
                     "linalg_matrix_norm", "linalg_norm", "norm", "nuclear_norm", "norm_except_dim", "cdist",
                     "linalg_svd", "svd", "linalg_tensorinv", "logdet", "rms_norm", "bilinear", "corrcoef", "cov",
                     "quantile", "nanquantile", "trapezoid", "trapz", "cumulative_trapezoid", "diff", "gradient",
                     "repeat_interleave", "stft", "istft", "diag", "lstm_cell", "atleast_1d", "atleast_2d",
                     "atleast_3d", "cartesian_prod", "combinations", "block_diag", "_normal_tensors", "movedim",
                     "moveaxis", "adjoint", "_upsample", "_upsample_backward"), "a chain of ATen ops in torch whose "
                    "last one depends on the arguments (or on the dtype)"),
    **dict.fromkeys(("fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_irfft",
                     "fft_irfft2", "fft_irfftn", "fft_hfft"), "torch picks R2C, C2C, C2R or a conj by the input's "
                    "dtype"),
    **dict.fromkeys(("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout", "positive", "conj",
                     "conj_physical", "resolve_conj", "resolve_neg", "real", "where", "broadcast_tensors"),
                    "torch returns the input itself for some arguments (no new node)"),
}
CASES = [pytest.param(line, id=line.name) for line in optable.all_lines()
         if line.grad and "float64" in line.dtypes and REGISTRY[line.name].differentiable and line.name not in EXEMPT]


def _leaves(lib, x):
    if isinstance(x, lib.Tensor):
        return x.detach().requires_grad_() if x.dtype == lib.float64 else x
    if isinstance(x, (list, tuple)):
        return type(x)(_leaves(lib, v) for v in x)
    if isinstance(x, dict):
        return {k: _leaves(lib, v) for k, v in x.items()}
    return x


def _first_node(lib, out):
    for o in out if isinstance(out, (list, tuple)) else (out,):
        if isinstance(o, (list, tuple)):
            found = _first_node(lib, o)
            if found != "-":
                return found
        elif isinstance(o, lib.Tensor) and o.grad_fn is not None:
            return type(o.grad_fn).__name__
    return "-"


def _node_name(lib, line, args, kwargs):
    args = _leaves(lib, optable.convert(lib, args, "float64"))
    kwargs = _leaves(lib, optable.convert(lib, kwargs, "float64"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _first_node(lib, line.call(lib, *args, **kwargs))


@pytest.mark.parametrize("line", CASES)
def test_node_name_is_torchs(line):
    compared = 0
    for args, kwargs in line.samples("float64", np.random.default_rng(7)):
        try:
            expected = _node_name(torch, line, args, kwargs)
        except Exception:  # noqa: BLE001 - the table's bad-input samples
            continue
        if expected == "-":
            continue
        assert _node_name(ember, line, args, kwargs) == expected, f"{line.name}{args!r:.120}"
        compared += 1
    if not compared:
        pytest.skip("no sample gives torch a node")


CALLS = {
    "sum()": lambda L, x, b: x.sum(), "sum(0)": lambda L, x, b: x.sum(0), "mean(1)": lambda L, x, b: x.mean(1),
    "pow(x, b)": lambda L, x, b: x.pow(b), "2 ** x": lambda L, x, b: 2 ** x, "x[0]": lambda L, x, b: x[0],
    "x[0:1]": lambda L, x, b: x[0:1], "x[None]": lambda L, x, b: x[None], "x[..., 1]": lambda L, x, b: x[..., 1],
    "x[idx]": lambda L, x, b: x[L.tensor([0, 1])], "x.t()": lambda L, x, b: x.t(), "clone": lambda L, x, b: x.clone(),
    "expand": lambda L, x, b: b.expand(3, 4), "view": lambda L, x, b: x.view(12), "mm": lambda L, x, b: x.mm(x.t()),
    "clamp(0, 1)": lambda L, x, b: x.clamp(0, 1), "clamp(b)": lambda L, x, b: x.clamp(b),
    "setitem": lambda L, x, b: _setitem(x * 1, b),
    "inplace view": lambda L, x, b: _in_place_view(x * 1),
    "to(float64)": lambda L, x, b: x.to(L.float64), "copy_": lambda L, x, b: (x * 1).copy_(b),
}  # (the nn.functional calls: ember-nn's test_nn_node_names.py, where ember-nn is installed)


def _setitem(y, b):
    y[0] = b
    return y


def _in_place_view(y):
    y[1].mul_(2)
    return y


@pytest.mark.parametrize("name", CALLS)
def test_node_names_of_common_calls(name):
    seen = []
    for lib in (torch, ember):
        gen = np.random.default_rng(0)
        x = lib.tensor(gen.standard_normal((3, 4)), dtype=lib.float32, requires_grad=True)
        b = lib.tensor(gen.standard_normal(4), dtype=lib.float32, requires_grad=True)
        seen.append(type(CALLS[name](lib, x, b).grad_fn).__name__)
    assert seen[1] == seen[0]


def test_node_api_as_torchs():
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        y = x * x
        fn = y.grad_fn
        assert fn.name() == type(fn).__name__ == "MulBackward0"
        assert re.fullmatch(r"<MulBackward0 object at 0x[0-9a-f]+>", repr(fn)) and str(fn) == repr(fn)
        (acc, i), (acc2, _) = fn.next_functions
        # (torch's name() of its two C++-named nodes is "torch::autograd::AccumulateGrad"; ember's the class name)
        assert type(acc).__name__ == "AccumulateGrad" and acc.name().endswith("AccumulateGrad") and i == 0
        assert acc is acc2 and acc.variable is x
        assert isinstance(fn, lib.autograd.graph.Node) if lib is ember else True
        z = (y * 2).sum()
        assert [type(n).__name__ for n, _ in z.grad_fn.next_functions] == ["MulBackward0"]
        view = (x * 1)[1:]  # a view's node, then the in-place change through it: CopySlices on the base
        base = view._base
        view.mul_(2)
        assert type(base.grad_fn).__name__ == "CopySlices" and type(view.grad_fn).__name__ == "AsStridedBackward0"
    # one class per name, made once, and no per-instance dict
    a, b = ember.ones(2, requires_grad=True) * 2, ember.ones(2, requires_grad=True) * 3
    assert type(a.grad_fn) is type(b.grad_fn) and not hasattr(a.grad_fn, "__dict__")


def test_custom_function_node_is_named_after_it():
    for lib in (torch, ember):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 3 * x ** 2 * g

        y = Cube.apply(lib.ones(2, requires_grad=True))
        assert type(y.grad_fn).__name__ == y.grad_fn.name() == "CubeBackward"
        assert isinstance(y.grad_fn, lib.autograd.function.BackwardCFunction)
        assert type(Cube.apply(lib.ones(2, requires_grad=True)).grad_fn) is type(y.grad_fn)
