"""optim.Muon and optim.swap_in_optimizer_params_and_state against PyTorch: Muon's trajectories (float32 and
float64, every option), its Newton–Schulz orthogonalisation, state_dict round trips, argument and step errors;
the swap-in context's effect on parameters, state and groups, and its errors."""
import io

import numpy as np
import pytest
import torch
from torch.optim import _muon as torch_muon

import ember
import ember.optim as optim
from ember.optim.muon import orthogonalise

SHAPES = [(3, 4), (6, 5), (2, 6), (4, 4)]
NS = (3.4445, -4.775, 2.0315)
# PyTorch's Newton–Schulz iteration runs in bfloat16, where a few roundings hinge on a matmul's summation order
# (or on the last bit of its float32 input), and the iteration amplifies such differences to a few bfloat16
# units. The trajectories are compared at 1e-6 with both libraries' iteration replaced by one float64
# reference, and with the real ones to a few bfloat16 units of each step's update.
CASES = [
    dict(),
    dict(lr=0.02, momentum=0.9, nesterov=False),
    dict(lr=0.05, weight_decay=0.01, adjust_lr_fn="match_rms_adamw"),
    dict(lr=0.05, weight_decay=0.0, adjust_lr_fn="original", eps=1e-3),
    dict(lr=0.1, momentum=0.0, ns_steps=3, ns_coefficients=(2.0, -1.5, 0.5)),
    dict(lr=0.03, momentum=0.8, ns_steps=0),
]


def _make(lib, kwargs, dtype, groups, seed=0):
    rng = np.random.default_rng(seed)
    params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(s).astype(dtype))) for s in SHAPES]
    if groups:  # a second group with its own learning rate
        arg = [{"params": params[:2]}, {"params": params[2:], "lr": kwargs.get("lr", 1e-3) * 0.5}]
    else:
        arg = params
    return params, lib.optim.Muon(arg, **kwargs)


def _grads(steps, dtype, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def _run(lib, params, opt, grads):
    out = []
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = lib.tensor(g.copy())
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out


def _same(a, b, dtype):
    # float32: a rounding of a number near 1 apart where a sum nearly cancels (PyTorch fuses some multiply-adds)
    atol = 1e-7 if dtype == np.float32 else 1e-15
    for sa, sb in zip(a, b):
        for x, y in zip(sa, sb):
            assert x.dtype == dtype
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=atol)


def _ns_reference(lib):
    """The Newton–Schulz iteration in float64 (NumPy), returning a ``lib`` tensor."""
    def ns(g, coefficients, steps, eps):
        a, b, c = coefficients
        x = g.detach().numpy().astype(np.float64)
        x = x.T if x.shape[0] > x.shape[1] else x
        x = x / max(np.linalg.norm(x), eps)
        for _ in range(steps):
            gram = x @ x.T
            x = a * x + (b * gram + c * gram @ gram) @ x
        return lib.tensor(x.T if g.shape[0] > g.shape[1] else x)
    return ns


@pytest.mark.parametrize("groups", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", CASES, ids=[str(i) for i in range(len(CASES))])
def test_trajectory_matches_torch(kwargs, dtype, groups, monkeypatch):
    monkeypatch.setattr(ember.optim.muon, "orthogonalise", _ns_reference(ember))
    monkeypatch.setattr(torch_muon, "_zeropower_via_newtonschulz", _ns_reference(torch))
    grads = _grads(8, dtype)
    (ep, eo), (tp, to) = _make(ember, kwargs, dtype, groups), _make(torch, kwargs, dtype, groups)
    e, t = _run(ember, ep, eo, grads), _run(torch, tp, to, grads)
    assert not np.allclose(e[-1][0], e[0][0])  # the optimiser moved the weights
    _same(e, t, dtype)
    assert eo.state_dict()["param_groups"] == to.state_dict()["param_groups"]
    assert list(eo.state[ep[0]]) == list(to.state[tp[0]]) == ["momentum_buffer"]
    _same([[eo.state[ep[2]]["momentum_buffer"].numpy()]], [[to.state[tp[2]]["momentum_buffer"].numpy()]], dtype)


@pytest.mark.parametrize("seed", [0, 4, 23])
@pytest.mark.parametrize("kwargs", CASES, ids=[str(i) for i in range(len(CASES))])
def test_trajectory_with_bfloat16_iteration_matches_torch(kwargs, seed):
    grads = _grads(8, np.float32, seed=100 + seed)
    (ep, eo), (tp, to) = _make(ember, kwargs, np.float32, False, seed), _make(torch, kwargs, np.float32, False, seed)
    e, t = _run(ember, ep, eo, grads), _run(torch, tp, to, grads)
    lr = kwargs.get("lr", 1e-3)
    for k, (se, st) in enumerate(zip(e, t), 1):
        for x, y, (rows, cols) in zip(se, st, SHAPES):
            ratio = (0.2 * max(rows, cols) ** 0.5 if kwargs.get("adjust_lr_fn") == "match_rms_adamw"
                     else max(1, rows / cols) ** 0.5)
            # entries of an update are below 1 (a bfloat16 unit at most 2**-8 there); seen: up to 4.5 units a step
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=k * lr * ratio * 2 ** -5)


def test_tensor_lr_and_skipped_parameters(monkeypatch):
    monkeypatch.setattr(ember.optim.muon, "orthogonalise", _ns_reference(ember))
    monkeypatch.setattr(torch_muon, "_zeropower_via_newtonschulz", _ns_reference(torch))
    grads = _grads(4, np.float32)
    runs = []
    for lib in (ember, torch):
        params, opt = _make(lib, dict(lr=lib.tensor(0.02)), np.float32, False)
        for i, gs in enumerate(grads):
            for j, (p, g) in enumerate(zip(params, gs)):
                p.grad = None if (j == 1 and i < 2) else lib.tensor(g)  # the second starts late
            opt.step()
        runs.append([p.detach().numpy() for p in params])
    _same([runs[0]], [runs[1]], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 7), (7, 3), (12, 12), (40, 24), (64, 128)])
def test_orthogonalise_matches_torch(shape, dtype):
    g = np.random.default_rng(5).standard_normal(shape).astype(dtype)
    got = orthogonalise(ember.tensor(g), NS, 5, 1e-7)
    want = torch_muon._zeropower_via_newtonschulz(torch.tensor(g), NS, 5, 1e-7)
    assert got.dtype == ember.bfloat16 and got.shape == want.shape
    got, want = got.float().numpy(), want.float().numpy()
    assert np.abs(got - want).max() <= 2 ** -7 * np.abs(want).max()  # about a bfloat16 unit at most
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)
    if min(shape) <= 3:  # (few summation orders: nearly all entries identical)
        assert (got == want).mean() >= 0.9
    s = np.linalg.svd(got.astype(np.float64), compute_uv=False)
    assert 0.6 < np.median(s) and s.max() < 1.3  # singular values pushed towards 1 (the gradient's spread widely)


def test_orthogonalise_keeps_zero_and_checks_arguments():
    assert (orthogonalise(ember.zeros(3, 4), NS, 5, 1e-7).float().numpy() == 0).all()  # eps: no NaN
    for args, message in [((NS, 100, 1e-7), "less than 100"), (((1.0, 2.0), 5, 1e-7), "exactly 3 values")]:
        with pytest.raises(ValueError, match=message):
            orthogonalise(ember.ones(3, 4), *args)
    with pytest.raises(ValueError, match="2D matrix"):
        orthogonalise(ember.ones(3), NS, 5, 1e-7)


def _to_file(lib, obj):
    buf = io.BytesIO()
    lib.save(obj, buf)
    buf.seek(0)
    return buf


def test_state_dict_round_trips_with_torch(monkeypatch):
    monkeypatch.setattr(ember.optim.muon, "orthogonalise", _ns_reference(ember))
    monkeypatch.setattr(torch_muon, "_zeropower_via_newtonschulz", _ns_reference(torch))
    kwargs, dtype = dict(lr=0.02, weight_decay=0.05), np.float32
    grads = _grads(12, dtype)
    tp, to = _make(torch, kwargs, dtype, True)
    _run(torch, tp, to, grads[:4])
    ep, eo = _make(ember, kwargs, dtype, True)
    for e, t in zip(ep, tp):
        e.data = ember.tensor(t.detach().numpy().copy())
    eo.load_state_dict(ember.load(_to_file(torch, to.state_dict())))
    _same(_run(ember, ep, eo, grads[4:8]), _run(torch, tp, to, grads[4:8]), dtype)
    tp2, to2 = _make(torch, kwargs, dtype, True)  # and back: ember's state_dict into a fresh torch Muon
    with torch.no_grad():
        for e, t in zip(ep, tp2):
            t.copy_(torch.tensor(e.detach().numpy()))
    sd = eo.state_dict()
    to2.load_state_dict(torch.load(_to_file(ember, sd), weights_only=True))
    assert to2.state_dict()["param_groups"] == sd["param_groups"]
    _same(_run(ember, ep, eo, grads[8:]), _run(torch, tp2, to2, grads[8:]), dtype)


def _error(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 (the type and message are what is compared)
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("make", [
    lambda lib, p: lib.optim.Muon([p], lr=-1.0),
    lambda lib, p: lib.optim.Muon([p], momentum=-0.5),
    lambda lib, p: lib.optim.Muon([p], weight_decay=-0.1),
    lambda lib, p: lib.optim.Muon([p], lr=lib.tensor([0.1, 0.2])),
    lambda lib, p: lib.optim.Muon([p], adjust_lr_fn="sqrt"),
    lambda lib, p: lib.optim.Muon([lib.nn.Parameter(lib.ones(3))]),
    lambda lib, p: lib.optim.Muon([p, lib.nn.Parameter(lib.ones(2, 3, 4))]),
    lambda lib, p: lib.optim.Muon([p], foreach=False),  # Muon takes no foreach/fused/differentiable/maximize
    lambda lib, p: lib.optim.Muon([p], differentiable=False),
    lambda lib, p: lib.optim.Muon([p], fused=None),
    lambda lib, p: lib.optim.Muon([p], maximize=True),
    lambda lib, p: lib.optim.Muon([], lr=0.1),
])
def test_constructor_errors_match_torch(make):
    got, want = (_error(make, lib, lib.nn.Parameter(lib.ones(3, 4))) for lib in (ember, torch))
    assert want is not None and got == (want[0], want[1].replace("torch.Size", "ember.Size"))


def test_constructor_accepts_what_torch_accepts():
    p = ember.nn.Parameter(ember.ones(3, 4))
    opt = optim.Muon([p], momentum=1.5, eps=0.0, ns_steps=200)  # checked only when stepping, if at all
    assert opt.defaults == dict(lr=1e-3, weight_decay=0.1, momentum=1.5, nesterov=True, ns_coefficients=NS,
                                eps=0.0, ns_steps=200, adjust_lr_fn=None)
    opt.add_param_group({"params": [ember.nn.Parameter(ember.ones(3))]})  # (not checked, as in PyTorch)
    assert "ns_steps: 200" in repr(opt)


def _step_error(lib, dtype="float32", grad=None, **kwargs):
    p = lib.nn.Parameter(lib.ones(3, 4, dtype=getattr(lib, dtype)))
    p.grad = lib.ones_like(p) if grad is None else grad(lib)
    return _error(lambda: lib.optim.Muon([p], **kwargs).step())


@pytest.mark.parametrize("case", [
    dict(ns_steps=100),
    dict(ns_coefficients=(1.0, 2.0)),
    dict(dtype="complex64"),
    dict(grad=lambda lib: lib.ones(3, 4).to_sparse()),
])
def test_step_errors_match_torch(case):
    got, want = (_step_error(lib, **case) for lib in (ember, torch))
    assert want is not None and got == want


def test_closure_and_training_reduces_loss():
    ember.manual_seed(0)
    x = ember.randn(64, 8)
    w_true = ember.randn(8, 4)
    y = x @ w_true
    w = ember.nn.Parameter(ember.zeros(8, 4))
    opt = optim.Muon([w], lr=0.05, weight_decay=0.0)

    def closure():
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        return loss

    first = opt.step(closure).item()
    for _ in range(60):
        last = opt.step(closure).item()
    assert last < 0.05 * first and w.grad_fn is None and w.requires_grad


# ---- swap_in_optimizer_params_and_state ------------------------------------------------------------------------

def _adam_setup(lib):
    params = [lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0])), lib.nn.Parameter(lib.tensor([[0.5, 0.25]]))]
    opt = lib.optim.Adam([{"params": params[:1]}, {"params": params[1:], "lr": 0.1}], lr=0.01)
    for p in params:
        p.grad = lib.ones_like(p)
    opt.step()
    return params, opt


def _swap_run(lib):
    params, opt = _adam_setup(lib)
    live = [p.detach().clone() for p in params]
    live_state = opt.state
    other = {"a": lib.tensor([10.0, 20.0, 30.0]), "b": lib.tensor([[-1.0, 4.0]])}
    for p in other.values():
        p.grad = lib.full_like(p, 0.5)
    sd = opt.state_dict()
    saved = {"state": {k: {n: v.clone() for n, v in s.items()} for k, s in sd["state"].items()},
             "param_groups": [dict(g, lr=g["lr"] * 10) for g in sd["param_groups"]]}
    seen = []
    with lib.optim.swap_in_optimizer_params_and_state(opt, other, saved):
        seen.append([g["lr"] for g in opt.param_groups])
        seen.append([g["params"][0] is p for g, p in zip(opt.param_groups, other.values())])
        opt.step()
        opt.state[other["a"]]["added"] = 1  # a new entry stays inside the block
    assert opt.state is live_state and opt.param_groups[0]["params"][0] is params[0]
    assert all((p.detach() == q).all() for p, q in zip(params, live))  # live parameters untouched
    assert "added" not in saved["state"][0]
    return (seen, [g["lr"] for g in opt.param_groups], [p.numpy().tolist() for p in other.values()],
            [float(saved["state"][k]["step"]) for k in (0, 1)], saved["state"][1]["exp_avg"].numpy().tolist())


def test_swap_in_matches_torch():
    got, want = _swap_run(ember), _swap_run(torch)
    assert got[:2] == want[:2] and got[1] == [0.01, 0.1] and got[0][0] == [0.1, 1.0]
    np.testing.assert_allclose(np.concatenate([np.ravel(x) for x in got[2]]),
                               np.concatenate([np.ravel(x) for x in want[2]]), rtol=1e-6)
    assert got[3] == want[3] == [2.0, 2.0]  # the state tensors were stepped in place
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)


def test_swap_in_restores_after_an_error():
    params, opt = _adam_setup(ember)
    groups = [dict(g) for g in opt.param_groups]
    sd = opt.state_dict()
    with pytest.raises(KeyError):
        with optim.swap_in_optimizer_params_and_state(opt, {"a": ember.ones(3), "b": ember.ones(1, 2)}, sd):
            raise KeyError("inside")
    assert opt.param_groups == groups and opt.state[params[0]]["step"].item() == 1


def _swap_errors(lib):
    out = []
    params, opt = _adam_setup(lib)
    fresh = lib.optim.SGD(params, lr=0.1)
    new = {"a": lib.ones(3), "b": lib.ones(1, 2)}

    def attempt(o, p, s):
        def run():
            with lib.optim.swap_in_optimizer_params_and_state(o, p, s):
                pass
        out.append(_error(run))

    attempt(fresh, new, fresh.state_dict())  # no state yet
    attempt(opt, new, [])
    attempt(opt, new, {"state": [], "param_groups": []})
    attempt(opt, new, {"state": {params[0]: {}}, "param_groups": []})
    attempt(opt, new, {"state": {0: 1}, "param_groups": []})
    attempt(opt, new, {"state": {}, "param_groups": ()})
    attempt(opt, new, {"state": {}, "param_groups": [{}]})
    good = opt.state_dict()
    attempt(opt, new, {"state": good["state"], "param_groups": [good["param_groups"][0], 5]})
    attempt(opt, new, {"state": good["state"], "param_groups": [dict(good["param_groups"][0], params=["x"]),
                                                                 good["param_groups"][1]]})
    attempt(opt, new, {"state": good["state"], "param_groups": [dict(good["param_groups"][0], params=[0, 1]),
                                                                 good["param_groups"][1]]})
    extra = dict(good["param_groups"][0], extra=1)
    del extra["lr"]
    attempt(opt, new, {"state": good["state"], "param_groups": [extra, good["param_groups"][1]]})
    attempt(opt, {"a": new["a"]}, good)  # too few parameters
    attempt(opt, new, {"state": {**good["state"], 7: {}}, "param_groups": good["param_groups"]})
    attempt(opt, new, good)  # fine
    return out


def test_swap_in_errors_match_torch():
    got, want = _swap_errors(ember), _swap_errors(torch)
    assert want[-1] is None and all(w is not None for w in want[:-1])
    assert got == want
