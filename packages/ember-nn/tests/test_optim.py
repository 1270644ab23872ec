"""Optimisers against PyTorch: 20-step trajectories from the same weights and gradients, state_dict
round trips in both directions (through checkpoint files), param groups, hooks, zero_grad, LBFGS."""
import io

import numpy as np
import pytest
import torch

import ember
import ember.optim as optim

SHAPES = [(3, 4), (5,), (2, 3, 2), ()]  # () : 0-d parameters, whose ufunc results are NumPy scalars

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.3, amsgrad=True, eps=1e-6)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, betas=(0.9, 0.9))),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, t0=5, lambd=0.01, weight_decay=0.1)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("Adafactor", dict()),
    ("Adafactor", dict(lr=0.05, weight_decay=0.1, beta2_decay=-0.5, d=1.5)),
]


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def _grads(steps=20, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def _make(lib, name, kwargs, weights, groups):
    params = [lib.nn.Parameter(lib.tensor(w.copy())) for w in weights]
    if groups:  # a second group with its own learning rate
        lr2 = kwargs.get("lr", 0.01) * 0.5
        arg = [{"params": params[:2]}, {"params": params[2:], "lr": lr2}]
    else:
        arg = params
    return params, getattr(lib.optim, name)(arg, **kwargs)


def _run(params, opt, grads):
    out = []
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = _tensor_like(p, g)
        opt.step()
        out.append([np.array(p.detach().numpy(), copy=True) for p in params])
    return out


def _tensor_like(p, g):
    return (ember if isinstance(p, ember.Tensor) else torch).tensor(g.copy())


def _same(a, b, rtol=1e-6):
    for sa, sb in zip(a, b):
        for x, y in zip(sa, sb):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("groups", [False, True])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_trajectory_matches_torch(name, kwargs, groups):
    w, grads = _weights(), _grads()
    ep, eo = _make(ember, name, kwargs, w, groups)
    tp, to = _make(torch, name, kwargs, w, groups)
    e, t = _run(ep, eo, grads), _run(tp, to, grads)
    assert not np.allclose(e[-1][0], w[0])  # the optimiser moved the weights
    _same(e, t)
    assert eo.state_dict()["param_groups"] == to.state_dict()["param_groups"]


def _to_file(lib, obj):
    buf = io.BytesIO()
    lib.save(obj, buf)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_state_dict_round_trips_with_torch(name, kwargs):
    w, grads = _weights(), _grads(20)
    # torch runs 10 steps, its state_dict goes to ember, both continue for 10 more
    tp, to = _make(torch, name, kwargs, w, True)
    _run(tp, to, grads[:10])
    ep, eo = _make(ember, name, kwargs, [p.detach().numpy() for p in tp], True)
    eo.load_state_dict(ember.load(_to_file(torch, to.state_dict())))
    t_rest, e_rest = _run(tp, to, grads[10:]), _run(ep, eo, grads[10:])
    _same(e_rest, t_rest)
    # and back: ember's state_dict into a fresh torch optimiser, both continue
    tp2, to2 = _make(torch, name, kwargs, [p.detach().numpy() for p in ep], True)
    sd = eo.state_dict()
    to2.load_state_dict(torch.load(_to_file(ember, sd), weights_only=True))
    assert to2.state_dict()["param_groups"] == sd["param_groups"]
    _same(_run(ep, eo, grads[:5]), _run(tp2, to2, grads[:5]))
    # ember -> ember keeps stepping identically to an uninterrupted run
    ep3, eo3 = _make(ember, name, kwargs, [p.detach().numpy() for p in ep], True)
    eo3.load_state_dict(ember.load(_to_file(ember, eo.state_dict())))
    _same(_run(ep, eo, grads[5:8]), _run(ep3, eo3, grads[5:8]))


def test_state_dict_layout_and_errors():
    p = [ember.nn.Parameter(ember.ones(2)), ember.nn.Parameter(ember.ones(3))]
    opt = optim.Adam([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.1}])
    p[0].grad = ember.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert list(sd["state"]) == [0] and sd["param_groups"][1]["params"] == [1] and sd["param_groups"][1]["lr"] == 0.1
    assert sd["state"][0]["step"].dtype == ember.float32 and sd["state"][0]["step"].item() == 1
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.Adam(p).load_state_dict(sd)
    other = optim.Adam([{"params": [p[0], p[1]]}, {"params": [ember.nn.Parameter(ember.ones(1))]}])
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(sd)
    q = ember.nn.Parameter(ember.ones(2, dtype=ember.float64))  # state follows the parameter's dtype
    o2 = optim.Adam([{"params": [q]}, {"params": [ember.nn.Parameter(ember.ones(3))]}])
    o2.load_state_dict(sd)
    assert o2.state[q]["exp_avg"].dtype == ember.float64 and o2.state[q]["step"].dtype == ember.float32
    assert o2.param_groups[1]["lr"] == 0.1


def test_constructor_checks_and_param_groups():
    p = ember.nn.Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}])
    q = ember.nn.Parameter(ember.ones(3))
    opt = optim.SGD([p], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": q, "lr": 0.01})
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.01
    named = optim.AdamW([("w", p), ("v", q)])
    assert named.param_groups[0]["param_names"] == ["w", "v"]
    assert named.state_dict()["param_groups"][0]["param_names"] == ["w", "v"]
    assert "Parameter Group 0" in repr(opt) and "momentum: 0.5" in repr(opt)


def test_zero_grad_and_parameter_identity():
    model = ember.nn.Module()
    model.w = ember.nn.Parameter(ember.ones(3))
    opt = optim.SGD(model.parameters(), lr=0.5)
    w = model.w
    (model.w * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    opt.step()
    assert model.w is w and w.tolist() == [0.5, 0.0, -0.5] and w.grad_fn is None and w.requires_grad
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None
    opt.step()  # parameters without gradients are skipped
    assert w.tolist() == [0.5, 0.0, -0.5]


def test_step_hooks_and_closure():
    p = ember.nn.Parameter(ember.tensor([1.0, -2.0]))
    opt = optim.SGD([p], lr=0.1)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", o is opt)))
    opt.register_step_post_hook(lambda o, a, k: calls.append(("post", p.tolist())))
    h3 = optim.optimizer.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global"))

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 5.0
    assert calls == ["global", ("pre", True), ("post", [pytest.approx(0.8), pytest.approx(-1.6)])]
    h1.remove()
    h3.remove()
    calls.clear()
    opt.step(closure)
    assert [c[0] for c in calls] == ["post"]
    seen = []
    opt.register_load_state_dict_post_hook(lambda o: seen.append("loaded"))
    opt.register_state_dict_pre_hook(lambda o: seen.append("saving"))
    opt.load_state_dict(opt.state_dict())
    assert seen == ["saving", "loaded"]


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_matches_torch(line_search):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal(6)

    def run(lib):
        x = lib.nn.Parameter(lib.zeros(4, dtype=lib.float64))
        A, B = lib.tensor(a), lib.tensor(b)
        opt = lib.optim.LBFGS([x], lr=0.5 if line_search is None else 1, max_iter=5, history_size=3,
                              line_search_fn=line_search)

        def closure():  # a Rosenbrock-flavoured least squares problem: curved enough to need history
            opt.zero_grad()
            r = A @ x - B
            loss = (r * r).sum() + ((x[1:] - x[:-1] * x[:-1]) ** 2).sum()
            loss.backward()
            return loss

        losses = [opt.step(closure).item() for _ in range(6)]
        return losses, x.detach().numpy().copy(), opt.state_dict()["state"][0]["func_evals"]

    (el, ex, ee), (tl, tx, te) = run(ember), run(torch)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    np.testing.assert_allclose(ex, tx, rtol=1e-6, atol=1e-10)
    assert ee == te and el[-1] < el[0]


def test_lbfgs_needs_closure_and_one_group():
    p = ember.nn.Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [ember.nn.Parameter(ember.ones(1))]}])
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([p]).step(None)


def test_float32_training_reduces_loss():
    ember.manual_seed(0)
    x = ember.randn(64, 3)
    y = x @ ember.tensor([[1.0], [-2.0], [0.5]])
    w = ember.nn.Parameter(ember.zeros(3, 1))
    opt = optim.Adam([w], lr=0.1)
    for _ in range(100):
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3 and w.dtype == ember.float32


@pytest.mark.parametrize("name,kwargs", [c for c in CASES if c[0] in ("SGD", "Adam", "AdamW")],
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES) if n in ("SGD", "Adam", "AdamW")])
def test_float32_steps_skip_parameters_without_gradient(name, kwargs):
    # float32 parameters of several shapes (one non-contiguous gradient); the middle parameter gets a gradient
    # only from step 5 on (its momentum/moments start there); every update is counted on the version counter
    w, grads = _weights(), _grads(12)
    runs = []
    for lib in (ember, torch):
        params = [lib.nn.Parameter(lib.tensor(a.astype(np.float32))) for a in w]
        opt = getattr(lib.optim, name)(params, **kwargs)
        traj, versions = [], []
        for i, gs in enumerate(grads):
            for j, (p, g) in enumerate(zip(params, gs)):
                g32 = lib.tensor(g.astype(np.float32))
                if g.ndim == 2:
                    g32 = g32.mT.contiguous().mT  # the same values in column-major layout
                p.grad = None if (j == 1 and i < 5) else g32
            before = [p._version for p in params]
            opt.step()
            after = [p._version for p in params]
            versions.append([b < a for b, a in zip(before, after)])
            traj.append([p.detach().numpy().copy() for p in params])
        runs.append((traj, versions))
    (et, ev), (tt, tv) = runs
    assert ev == tv
    for se, st in zip(et, tt):
        for x, y in zip(se, st):
            assert x.dtype == np.float32
            np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("lr", [0.1, 1.0, 0.0])
def test_plain_sgd_mixed_dtypes_matches_torch(lr):
    # plain SGD looks its lr operand up again only when the dtype changes: alternate dtypes and sizes,
    # include a non-contiguous parameter and one without a gradient
    rng = np.random.default_rng(3)
    dtypes = ["float32", "float64", "float32", "bfloat16", "float32", "float16"]
    data = [rng.standard_normal(n) for n in (4, 3, 5, 2, 3, 6)]
    strided = rng.standard_normal((3, 4))
    results = []
    for lib in (torch, ember):
        params = [lib.nn.Parameter(lib.tensor(d, dtype=getattr(lib, t))) for d, t in zip(data, dtypes)]
        params.append(lib.nn.Parameter(lib.tensor(strided).t()))
        params.append(lib.nn.Parameter(lib.ones(2)))
        for p in params[:-1]:
            p.grad = (lib.arange(p.numel(), dtype=p.dtype).reshape(p.shape) - 1.5) * 0.3
        versions = [p._version for p in params]
        opt = lib.optim.SGD(params, lr=lr)
        opt.step()
        opt.step()
        after = [p._version for p in params]
        results.append([(str(p.dtype).split(".")[-1], p.detach().double().tolist()) for p in params])
        assert all(a > v for a, v in zip(after[:-1], versions[:-1])) and after[-1] == versions[-1]
    rtol = {"bfloat16": 1e-2, "float16": 1e-3, "float32": 1e-6, "float64": 1e-12}  # a rounding step apart
    for (want_dtype, want), (dtype, got) in zip(*results):
        assert dtype == want_dtype
        np.testing.assert_allclose(got, want, rtol=rtol[dtype], atol=rtol[dtype])
