"""ember.func.vmap against torch.func.vmap: values, shapes, errors, nesting, randomness, grad inside and outside,
and that ops with a batching rule run once on the batch (no per-example fallback)."""
import functools
import warnings

import numpy as np
import pytest
import torch
import torch.func as TF

import ember
import ember.func as F

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape)


def both(*arrays):
    return [ember.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def close(got, want, tol=1e-10):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for a, b in zip(got, want):
            close(a, b, tol)
        return
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            close(got[k], want[k], tol)
        return
    assert isinstance(got, ember.Tensor), type(got)
    assert type(got) is ember.Tensor  # no batched tensor escapes vmap
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol)


def no_fallback():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.filterwarnings("error", message="There is a performance drop")
    return w


# (function of the module M being ember or torch, in_dims, input shapes)
CASES = [
    (lambda M, x, y: x * y + 2, 0, [(3, 4), (3, 4)]),
    (lambda M, x, y: M.add(x, y, alpha=2), (0, None), [(3, 4), (4,)]),
    (lambda M, x, y: x - y, (None, 1), [(2, 1, 4), (4, 5)]),
    (lambda M, x, y: M.where(x > 0, x, y), (0, None), [(3, 4), (2, 1, 4)]),
    (lambda M, x, y: M.max(x, y) + x.amax(-1, keepdim=True) + x.max(-1).values.unsqueeze(-1), (0, 1), [(3, 4), (4, 3)]),
    (lambda M, x: x.sum(), 0, [(3, 4, 5)]),
    (lambda M, x: x.sum(-1, keepdim=True), 1, [(3, 4, 5)]),
    (lambda M, x: x.mean((0, -1)), 2, [(3, 4, 5)]),
    (lambda M, x: x.max(), 0, [(3, 4, 5)]),
    (lambda M, x: x.max(1)[1], 0, [(3, 4, 5)]),
    (lambda M, x: x.argmax(), 0, [(3, 4, 5)]),
    (lambda M, x: x.var(0), 0, [(3, 4, 5)]),
    (lambda M, x: x.softmax(-1) + x.log_softmax(0), 1, [(3, 4, 5)]),
    (lambda M, x: x.cumsum(1), 0, [(3, 4, 5)]),
    (lambda M, x: x.reshape(-1, 2), 0, [(3, 4, 5)]),
    (lambda M, x: x.view(5, 4), 0, [(3, 4, 5)]),
    (lambda M, x: x.permute(1, 0).transpose(0, -1) + x.permute(-1, 0).mT, 1, [(3, 4, 5)]),
    (lambda M, x: x.unsqueeze(-1).squeeze(), 0, [(3, 1, 5)]),
    (lambda M, x: x.flatten().unflatten(0, (5, 4)), 0, [(3, 4, 5)]),
    (lambda M, x: x.expand(2, 4, 5) + x.T.T, 0, [(3, 4, 5)]),
    (lambda M, x: x[1:, None, ..., 0], 0, [(3, 4, 5)]),
    (lambda M, x: x[M.tensor([0, 2, 2])], 0, [(3, 4, 5)]),
    (lambda M, x, i: x[i % 4, 1:] + x[(i % 4)[:1]].sum(), (None, 0), [(4, 5), "labels"]),
    (lambda M, x, i: x[i % 4], 0, [(3, 4, 5), "labels"]),
    (lambda M, x: M.cat([x, x * 2], -1), 0, [(3, 4, 5)]),
    (lambda M, x, y: M.stack([x, y], 1), (0, None), [(3, 4, 5), (4, 5)]),
    (lambda M, x, y: M.cat([x, y]), (0, None), [(3, 4, 5), (4, 5)]),
    (lambda M, x: x.unbind(1)[2] + x.chunk(5, -1)[0].squeeze(-1) + x.narrow(1, 1, 1).squeeze(1), 0, [(3, 4, 5)]),
    (lambda M, x, y: x @ y, (0, None), [(3, 4, 5), (5, 2)]),
    (lambda M, x, y: x @ y, (None, 0), [(4, 5), (3, 5)]),
    (lambda M, x, y: x @ y, 0, [(3, 5), (3, 5)]),
    (lambda M, x, y: M.mm(x, y) + M.mv(x, y[:, 0]).unsqueeze(-1), (0, 0), [(3, 4, 5), (3, 5, 2)]),
    (lambda M, x, y: M.bmm(x, y), (1, None), [(2, 3, 4, 5), (2, 5, 3)]),
    (lambda M, x, y: M.einsum("ij,jk->ik", x, y), (0, None), [(3, 4, 5), (5, 2)]),
    (lambda M, x, y: M.outer(x, y) + M.dot(x, x), (0, None), [(3, 4), (4,)]),
    (lambda M, x, w, b: M.nn.functional.linear(x, w, b), (0, None, None), [(3, 2, 4), (5, 4), (5,)]),
    (lambda M, x, w, b: M.nn.functional.linear(x, w, b), (0, 0, 0), [(3, 4), (3, 5, 4), (3, 5)]),
    (lambda M, x: M.nn.functional.gelu(x).relu().sigmoid().tanh().exp().log1p(), 0, [(3, 4)]),
    (lambda M, x: M.nn.functional.layer_norm(x, (5,)), 0, [(3, 4, 5)]),
    (lambda M, x, w, b: M.nn.functional.layer_norm(x, (5,), w, b), (0, 0, None), [(3, 4, 5), (3, 5), (5,)]),
    (lambda M, x, w: M.nn.functional.conv2d(x, w, padding=1), (0, None), [(3, 2, 2, 5, 5), (4, 2, 3, 3)]),
    (lambda M, x, w: M.nn.functional.conv2d(x, w), (0, None), [(3, 2, 5, 5), (4, 2, 3, 3)]),
    (lambda M, x, w, b: M.nn.functional.conv2d(x, w, b, stride=2), (0, 0, 0),
     [(3, 2, 2, 5, 5), (3, 4, 2, 3, 3), (3, 4)]),
    (lambda M, x, w: M.nn.functional.conv1d(x, w), (None, 0), [(2, 2, 6), (3, 4, 2, 3)]),
    (lambda M, x: M.nn.functional.max_pool2d(x, 2) + M.nn.functional.avg_pool2d(x, 2), 0, [(3, 2, 2, 4, 4)]),
    (lambda M, x, t: M.nn.functional.cross_entropy(x, t), 0, [(3, 4, 5), "labels"]),
    (lambda M, x, y: M.nn.functional.mse_loss(x, y), (0, None), [(3, 4, 5), (4, 5)]),
    (lambda M, x, y: M.nn.functional.binary_cross_entropy_with_logits(x, y), (0, 0), [(3, 4), (3, 4)]),
    (lambda M, x: M.zeros_like(x) + M.ones_like(x) * x, 0, [(3, 4)]),
    (lambda M, x, w: M.nn.functional.batch_norm(x, None, None, w, training=True), (0, None), [(3, 2, 4, 5), (4,)]),
    (lambda M, x, m, v: M.nn.functional.batch_norm(x, m, v.exp()), (0, 0, 0), [(3, 2, 4, 5), (3, 4), (3, 4)]),
    (lambda M, x: M.nn.functional.group_norm(x, 2) + M.nn.functional.pad(x, (1, 1))[..., 1:-1], 0, [(3, 2, 4, 5)]),
    (lambda M, x: M.nn.functional.interpolate(x, scale_factor=2), 0, [(3, 2, 4, 5)]),
    (lambda M, x, y: M.nn.functional.cosine_similarity(x, y, dim=-1) + M.trace(x), (0, None), [(3, 4, 4), (4,)]),
    (lambda M, x, i: x.gather(0, i % 4) + x.scatter_add(0, i % 4, x) + M.take_along_dim(x, i % 4, 0), 0,
     [(3, 4), "labels"]),
    (lambda M, x, y: x.index_add(0, M.tensor([0, 2]), y).index_fill(1, M.tensor([1]), 0.5), (0, None),
     [(3, 4, 5), (2, 5)]),
    (lambda M, a: M.linalg.svd(a)[1] + M.linalg.matrix_norm(a) + M.dist(a, a.mT) + M.diag(a) + M.aminmax(a)[1],
     0, [(3, 4, 4)]),
    (lambda M, a: a.unfold(1, 2, 1).sum((-1, -2)) + a.repeat_interleave(2, dim=1)[:, ::2] + M.msort(a), 0, [(3, 4, 4)]),
    (lambda M, w, v, i: M.nn.functional.embedding(i, w, padding_idx=1) + M.nn.functional.embedding(i, v),
     (0, None, 0), [(3, 5, 4), (5, 4), "labels"]),
]


def _inputs(shapes, dims):
    arrays = []
    for s in shapes:
        arrays.append(RNG.integers(0, 5, (3, 4)) if s == "labels" else arr(*s))
    mine, theirs = both(*arrays)
    if isinstance(dims, int):
        dims = (dims,) * len(shapes)
    for i, s in enumerate(shapes):  # sigmoid targets for binary cross entropy
        if s != "labels" and mine[i].dtype is ember.float64 and dims[i] is not None and i == 1 and s == (3, 4):
            mine[i], theirs[i] = mine[i].sigmoid(), theirs[i].sigmoid()
    return mine, theirs


@pytest.mark.nn
@pytest.mark.parametrize("case", range(len(CASES)))
def test_batched_ops_match_torch(case):
    import ember.nn.functional  # noqa: F401
    fn, dims, shapes = CASES[case]
    mine, theirs = _inputs(shapes, dims)
    want = TF.vmap(lambda *a: fn(torch, *a), in_dims=dims)(*theirs)
    w = no_fallback()
    try:
        got = F.vmap(lambda *a: fn(ember, *a), in_dims=dims)(*mine)
    finally:
        w.__exit__(None, None, None)
    close(got, want)


def test_in_out_dims_pytrees_and_none():
    x, y = arr(3, 4), arr(4, 3)
    (ex, ey), (tx, ty) = both(x, y)

    def fn(M, pair, scale):
        a, b = pair["a"], pair["b"]
        return {"s": a * b.sum() * scale, "t": (a, b)}, 7

    want = TF.vmap(lambda p, s: fn(torch, p, s), in_dims=({"a": 0, "b": 1}, None), out_dims=({"s": 1, "t": 0}, None))(
        {"a": tx, "b": ty}, 2.0)
    got = F.vmap(lambda p, s: fn(ember, p, s), in_dims=({"a": 0, "b": 1}, None), out_dims=({"s": 1, "t": 0}, None))(
        {"a": ex, "b": ey}, 2.0)
    close(got[0], want[0])
    assert got[1] == want[1] == 7
    # an output that is not batched is expanded along the out dim
    close(F.vmap(lambda a: ember.ones(2), out_dims=-1)(ex), torch.ones(2, 3))
    close(F.vmap(lambda a: a)(ex.T.contiguous().T), tx)


def test_logical_shape_inside():
    seen = []

    def fn(a):
        seen.append((tuple(a.shape), a.dim(), a.size(-1), a.ndim, a.numel(), len(a)))
        return a

    F.vmap(fn, in_dims=1)(ember.zeros(2, 3, 4))
    assert seen == [((2, 4), 2, 4, 2, 8, 2)]


def _nested(M, mod, a, b):
    def fn(a, b):
        return (a * b).sum(-1) + a.mean()

    r1 = mod.vmap(mod.vmap(fn, in_dims=(0, None)), in_dims=(0, None))(a, b)
    r2 = mod.vmap(mod.vmap(fn, in_dims=(0, None)), in_dims=(1, 0), out_dims=1)(a, b)
    return r1, r2


def test_nested_vmap():
    x, y = arr(2, 3, 4), arr(3, 4)
    (ex, ey), (tx, ty) = both(x, y)
    close(_nested(ember, F, ex, ey), _nested(torch, TF, tx, ty))


def test_chunk_size():
    x = arr(7, 3)
    (ex,), (tx,) = both(x)
    close(F.vmap(lambda a: a.sum() * a, chunk_size=3, out_dims=1)(ex),
          TF.vmap(lambda a: a.sum() * a, chunk_size=3, out_dims=1)(tx))


def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return info.type, str(info.value)


@pytest.mark.parametrize("call", [
    lambda M, mod, x, y: mod.vmap(M.add, in_dims=(0,))(x, x),
    lambda M, mod, x, y: mod.vmap(M.add)(x, y),
    lambda M, mod, x, y: mod.vmap(M.add, in_dims=(None, None))(x, x),
    lambda M, mod, x, y: mod.vmap(M.add, in_dims=(5, 0))(x, x),
    lambda M, mod, x, y: mod.vmap(lambda a: 3)(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, out_dims=(0, 1))(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, out_dims=None)(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, out_dims=5)(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a.item())(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, in_dims=1.5)(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, in_dims=0)(3),
    lambda M, mod, x, y: mod.vmap(lambda a: a, randomness="foo")(x),
    lambda M, mod, x, y: mod.vmap(lambda a: a, chunk_size=0)(x),
    lambda M, mod, x, y: mod.vmap(lambda: 1)(),
    lambda M, mod, x, y: mod.vmap(lambda a: a.normal_())(x),
    lambda M, mod, x, y: mod.vmap(lambda a, b: b.add_(a), in_dims=(0, None))(x, y[0]),
])
def test_errors_match_torch(call):
    x, y = arr(3, 4), arr(5, 4)
    (ex, ey), (tx, ty) = both(x, y)
    want = _error(lambda: call(torch, TF, tx, ty))
    got = _error(lambda: call(ember, F, ex, ey))
    assert got[0] is want[0], (got, want)
    key = want[1].split("(")[0].split(":")[0]
    assert key in got[1], (got, want)


def test_randomness():
    x = ember.zeros(4, 1000)
    different = F.vmap(lambda a: a + ember.ones_like(a).bernoulli_(0.5), randomness="different")(x)
    assert not (different[0] == different[1]).all()
    same = F.vmap(lambda a: a.clone().normal_(), randomness="same")(x)
    assert (same[0] == same[3]).all() and same.std() > 0.5
    for draw in (lambda a: a + ember.rand(1000), ember.randn_like, lambda a: ember.dropout(a + 1, 0.5, True)):
        same = F.vmap(draw, randomness="same")(x)
        different = F.vmap(draw, randomness="different")(x)
        assert (same[0] == same[1]).all() and not (different[0] == different[1]).all()
        with pytest.raises(RuntimeError, match="randomness error mode"):
            F.vmap(draw)(x)
    close(F.vmap(lambda a: ember.dropout(a, 0.5, False))(x), torch.zeros(4, 1000))


def test_inplace_on_batched():
    x, y = arr(3, 4), arr(4)
    for M, mod in ((torch, TF), (ember, F)):
        a, b = M.tensor(x), M.tensor(y)

        def fn(a, b):
            c = a.clone()
            c.mul_(b)
            c[1:] = b[:3]
            c.add_(1)
            return c
        r = mod.vmap(fn, in_dims=(0, None))(a, b)
        if M is torch:
            want = r
        else:
            got = r
    close(got, want)


def test_no_loop_for_ops_with_rules():
    """A batched call of an op with a rule reaches the op's implementation once, not once per example."""
    from ember._registry import REGISTRY
    calls = []
    op = REGISTRY["softmax"]
    impl = op.impl

    @functools.wraps(impl)  # (the rules bind arguments by the implementation's signature)
    def counting(*a, **k):
        calls.append(1)
        return impl(*a, **k)
    op.impl = counting
    try:
        F.vmap(lambda a: ember.softmax(a, -1))(ember.zeros(16, 5))
    finally:
        op.impl = impl
    assert len(calls) == 1


def test_fallback_warns_once_and_matches():
    x = arr(3, 5)
    (ex,), (tx,) = both(x)
    from ember.func import _vmap
    _vmap._warned.discard("cummax")
    from ember.func._batching_rules import RULES
    saved = RULES.pop("cummax")
    try:
        with pytest.warns(UserWarning, match="batching rule for cummax"):
            got = F.vmap(lambda a: a.cummax(0)[0])(ex)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F.vmap(lambda a: a.cummax(0)[0])(ex)
    finally:
        RULES["cummax"] = saved
    close(got, TF.vmap(lambda a: a.cummax(0)[0])(tx))


def test_grad_of_vmapped_function_and_vmap_of_grad():
    x, w = arr(5, 3), arr(3)
    (ex, ew), (tx, tw) = both(x, w)
    ew.requires_grad_()
    tw.requires_grad_()

    def loss(M, mod, x, w):
        return mod.vmap(lambda r: (r * w).sin().sum())(x).pow(2).sum()
    loss(ember, F, ex, ew).backward()
    loss(torch, TF, tx, tw).backward()
    close(ew.grad, tw.grad)

    def per(M, w, r):
        return ((r * w).tanh() ** 2).sum()
    close(F.vmap(F.grad(lambda w, r: per(ember, w, r)), in_dims=(None, 0))(ew.detach(), ex),
          TF.vmap(TF.grad(lambda w, r: per(torch, w, r)), in_dims=(None, 0))(tw.detach(), tx))
    # second order inside vmap
    close(F.vmap(F.grad(lambda r: F.grad(lambda s: (s.sin() * s).sum())(r).pow(2).sum()))(ex),
          TF.vmap(TF.grad(lambda r: TF.grad(lambda s: (s.sin() * s).sum())(r).pow(2).sum()))(tx))


def _cnn(M):
    nn = M.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.fc1 = nn.Linear(4 * 3 * 3, 8)
            self.fc2 = nn.Linear(8, 10)

        def forward(self, x):
            x = nn.functional.relu(self.conv1(x))
            x = nn.functional.max_pool2d(x, 2)
            x = M.flatten(x, 1)
            x = nn.functional.relu(self.fc1(x))
            return nn.functional.log_softmax(self.fc2(x), dim=1)

    return Net().double()


def _per_sample_grads(M, mod, model, data, targets):
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = mod.functional_call(model, (params, buffers), (batch,))
        return M.nn.functional.nll_loss(predictions, targets)  # (the model ends in log_softmax)

    ft_compute_grad = mod.grad(compute_loss)
    ft_compute_sample_grad = mod.vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    return ft_compute_sample_grad(params, buffers, M.tensor(data), M.tensor(targets))


@pytest.mark.nn
def test_per_sample_gradients_cnn():
    """PyTorch's per-sample-gradients recipe, run unchanged with ember as torch."""
    import ember.nn  # noqa: F401
    tm, em = _cnn(torch), _cnn(ember)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    data, targets = arr(6, 1, 8, 8), RNG.integers(0, 10, 6)
    close(_per_sample_grads(ember, F, em, data, targets), _per_sample_grads(torch, TF, tm, data, targets), 1e-8)


def _ensemble(M, mod, models, x):
    params, buffers = mod.stack_module_state(models)
    base = models[0]

    def fmodel(params, buffers, x):
        return mod.functional_call(base, (params, buffers), (x,))
    return (mod.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, M.tensor(x)),
            mod.vmap(fmodel)(params, buffers, M.tensor(np.stack([x] * 3))))


@pytest.mark.nn
def test_model_ensembling():
    import ember.nn as enn
    models_t = [torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2)).double()
                for _ in range(3)]
    models_e = [enn.Sequential(enn.Linear(4, 6), enn.ReLU(), enn.Linear(6, 2)).double() for _ in range(3)]
    for me, mt in zip(models_e, models_t):
        me.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    x = arr(5, 4)
    close(_ensemble(ember, F, models_e, x), _ensemble(torch, TF, models_t, x))


@pytest.mark.nn
def test_replace_all_batch_norm_modules_():
    import ember.nn as enn
    net = enn.Sequential(enn.Linear(3, 3), enn.BatchNorm1d(3))
    assert F.replace_all_batch_norm_modules_(net) is net
    bn = net[1]
    assert bn.running_mean is None and bn.running_var is None and not bn.track_running_stats


@pytest.mark.parametrize("pattern, lengths", [
    ("b c h w -> b (h w) c", {}), ("b ... w -> w b ...", {}), ("b c (h1 h2) w -> b h1 (c h2 w)", {"h1": 2}),
    ("b c h w -> (b c) 1 h w", {}), ("b c h w -> b c h", {}), ("b c h -> b c h", {}),
])
def test_rearrange(pattern, lengths):
    x = arr(2, 3, 4, 5)
    (ex,), (tx,) = both(x)
    try:
        want = TF.rearrange(tx, pattern, **lengths)
    except ValueError:
        with pytest.raises(ValueError):
            F.rearrange(ex, pattern, **lengths)
        return
    close(F.rearrange(ex, pattern, **lengths), want)


def test_functionalize_and_debug_unwrap():
    x = arr(2, 3, 4)
    (ex,), (tx,) = both(x)

    def f(a):
        b = a.clone()
        b.add_(1)
        return b * 2
    close(F.functionalize(f)(ex), TF.functionalize(f)(tx))
    with pytest.raises(RuntimeError, match="remove"):
        F.functionalize(f, remove="x")
    close(F.vmap(lambda a: F.debug_unwrap(a, recurse=False) * 1)(ex),
          TF.vmap(lambda a: TF.debug_unwrap(a, recurse=False) * 1)(tx))
    close(F.vmap(F.vmap(lambda a: F.debug_unwrap(a) * 1))(ex), TF.vmap(TF.vmap(lambda a: TF.debug_unwrap(a) * 1))(tx))


def test_top_level_vmap():
    x = arr(3, 4)
    (ex,), (tx,) = both(x)
    close(ember.vmap(lambda a: a.sum(), in_dims=1)(ex), torch.vmap(lambda a: a.sum(), in_dims=1)(tx))


@pytest.mark.nn
@pytest.mark.parametrize("make", ["transformer", "lstm", "gru"])
def test_modules_batch_without_fallback(make):
    """vmap of whole modules (attention, recurrent layers) equals their per-example results, with no op looped."""
    import ember.nn as nn
    ember.manual_seed(0)
    model = {"transformer": lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
             "lstm": lambda: nn.LSTM(8, 5, batch_first=True), "gru": lambda: nn.GRU(8, 5, batch_first=True)}[make]()

    def run(a):
        out = model(a)
        return out[0] if isinstance(out, tuple) else out
    x = ember.tensor(arr(3, 2, 4, 8).astype(np.float32))
    w = no_fallback()
    try:
        got = F.vmap(run)(x)
    finally:
        w.__exit__(None, None, None)
    want = ember.stack([run(x[i]) for i in range(3)])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
