"""nn.utils.prune against PyTorch: masks (exact for the magnitude-based methods, counts and structure for the random
ones), pruned outputs and gradients, iterative pruning through a PruningContainer, state_dict keys, remove() and
the argument errors. Weights come from torch's normal draws, so magnitudes and norms have no ties."""
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401  (torch does not import it with nn.utils)
from _torch_compare import assert_same, to_ember

import ember

LIBS = (ember, torch)


def _pair(make, seed=0):
    """``make(lib)`` in ember and torch with torch's (tie-free) weights."""
    torch.manual_seed(seed)
    t = make(torch)
    e = make(ember)
    e.load_state_dict(to_ember(t.state_dict()))
    return e, t


def _linear(lib):
    return lib.nn.Linear(6, 4)


def _conv(lib):
    return lib.nn.Conv2d(3, 5, 3)


def _hooks(m):
    return [type(h).__name__ for h in m._forward_pre_hooks.values()]


@pytest.mark.parametrize("prune_fn", [
    lambda p, m: p.l1_unstructured(m, "weight", amount=0.3),
    lambda p, m: p.l1_unstructured(m, "weight", amount=7),
    lambda p, m: p.l1_unstructured(m, "bias", amount=0.0),
    lambda p, m: p.ln_structured(m, "weight", amount=2, n=2, dim=0),
    lambda p, m: p.ln_structured(m, "weight", amount=0.5, n=1, dim=-1),
    lambda p, m: p.ln_structured(m, "weight", amount=1, n=float("inf"), dim=1),
    lambda p, m: p.identity(m, "weight"),
])
@pytest.mark.parametrize("make", [_linear, _conv])
def test_deterministic_masks_outputs_and_grads(prune_fn, make):
    e, t = _pair(make)
    for lib, m in ((ember, e), (torch, t)):
        assert prune_fn(lib.nn.utils.prune, m) is m
    assert_same(e.weight_mask if hasattr(e, "weight_mask") else e.bias_mask,
                t.weight_mask if hasattr(t, "weight_mask") else t.bias_mask)
    assert list(e.state_dict()) == list(t.state_dict())
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert _hooks(e) == _hooks(t)
    x = torch.randn((2, 6) if make is _linear else (2, 3, 5, 5))
    out_t = t(x)
    out_e = e(to_ember(x))
    assert_same(out_e, out_t, rtol=1e-5, atol=1e-6)
    out_t.sum().backward()
    out_e.sum().backward()
    assert_same(e.weight_orig.grad if hasattr(e, "weight_orig") else e.bias_orig.grad,
                t.weight_orig.grad if hasattr(t, "weight_orig") else t.bias_orig.grad, rtol=1e-5, atol=1e-6)


def test_iterative_pruning_combines_masks():
    e, t = _pair(_conv)
    for lib, m in ((ember, e), (torch, t)):
        p = lib.nn.utils.prune
        p.l1_unstructured(m, "weight", amount=20)
        p.ln_structured(m, "weight", amount=2, n=2, dim=0)  # norms of the already pruned weight
        p.l1_unstructured(m, "weight", amount=0.25)  # a quarter of what is still kept
        scores = lib.arange(135.0).flip(0).reshape(5, 3, 3, 3)  # prunes the last kept entries
        p.l1_unstructured(m, "weight", amount=3, importance_scores=scores)
        p.custom_from_mask(m, "bias", mask=lib.tensor([1.0, 0.0, 1.0, 1.0, 0.0]))
    assert_same(e.weight_mask, t.weight_mask)
    assert_same(e.bias_mask, t.bias_mask)
    hook = next(h for h in e._forward_pre_hooks.values() if h._tensor_name == "weight")
    assert isinstance(hook, ember.nn.utils.prune.PruningContainer) and len(hook) == 4
    assert [type(h).__name__ for h in hook] == ["L1Unstructured", "LnStructured", "L1Unstructured", "L1Unstructured"]
    assert list(e.state_dict()) == list(t.state_dict())
    x = torch.randn(1, 3, 4, 4)
    assert_same(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-6)
    # the pre-hook recomputes the pruned weight from a changed original
    for m in (e, t):
        with (ember if m is e else torch).no_grad():
            m.weight_orig.mul_(2)
    assert_same(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-6)
    for lib, m in ((ember, e), (torch, t)):
        lib.nn.utils.prune.remove(m, "weight")
        assert lib.nn.utils.prune.is_pruned(m)
        lib.nn.utils.prune.remove(m, "bias")
        assert not lib.nn.utils.prune.is_pruned(m)
    assert list(e.state_dict()) == list(t.state_dict()) == ["weight", "bias"]
    assert isinstance(e.weight, ember.nn.Parameter) and not e._forward_pre_hooks
    assert_same(e.weight, t.weight)


def test_random_methods_counts_and_structure():
    for lib in LIBS:
        lib.manual_seed(0)
        m = _conv(lib)
        p = lib.nn.utils.prune
        p.random_unstructured(m, "bias", amount=0.4)
        assert int(m.bias_mask.sum()) == 3 and (m.bias == m.bias_orig * m.bias_mask).all()
        p.random_unstructured(m, "bias", amount=2)  # two more of the three kept
        assert int(m.bias_mask.sum()) == 1
        p.random_structured(m, "weight", amount=2, dim=0)
        per_channel = m.weight_mask.sum(dim=(1, 2, 3))
        assert sorted(per_channel.tolist()) == [0.0, 0.0, 27.0, 27.0, 27.0]
        p.random_structured(m, "weight", amount=0.34, dim=0)  # of the 3 kept channels: round(0.34 * 3) = 1
        per_channel = m.weight_mask.sum(dim=(1, 2, 3))
        assert sorted(per_channel.tolist()) == [0.0, 0.0, 0.0, 27.0, 27.0]


def test_global_unstructured():
    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(5, 4), lib.nn.ReLU(), lib.nn.Linear(4, 3))
    e, t = _pair(build)
    for lib, m in ((ember, e), (torch, t)):
        p = lib.nn.utils.prune
        p.l1_unstructured(m[0], "weight", amount=4)
        params = [(m[0], "weight"), (m[0], "bias"), (m[2], "weight")]
        assert p.global_unstructured(params, pruning_method=p.L1Unstructured, amount=0.5) is None
    for a, b in zip(e.state_dict().items(), t.state_dict().items()):
        assert a[0] == b[0]
        assert_same(a[1], b[1])
    assert _hooks(e[0]) == _hooks(t[0]) == ["PruningContainer", "CustomFromMask"]
    assert [type(h).__name__ for h in next(iter(e[0]._forward_pre_hooks.values()))] == ["L1Unstructured",
                                                                                         "CustomFromMask"]
    x = torch.randn(3, 5)
    assert_same(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-6)


def test_prune_method_on_tensor_and_apply():
    w = torch.randn(4, 5)
    for cls_name, args in (("L1Unstructured", (0.5,)), ("LnStructured", (2, 2, 0))):
        te = getattr(ember.nn.utils.prune, cls_name)(*args)
        tt = getattr(torch.nn.utils.prune, cls_name)(*args)
        assert_same(te.prune(to_ember(w)), tt.prune(w))
        dm = torch.ones(4, 5)
        dm[0, 0] = 0
        assert_same(te.compute_mask(to_ember(w), to_ember(dm)), tt.compute_mask(w, dm))
    e, t = _pair(_linear)
    me = ember.nn.utils.prune.L1Unstructured.apply(e, "weight", amount=5)
    mt = torch.nn.utils.prune.L1Unstructured.apply(t, "weight", amount=5)
    assert me._tensor_name == mt._tensor_name == "weight"
    assert_same(me.apply_mask(e), mt.apply_mask(t))


def _raises(fn):
    """The exception types (and messages) both libraries raise for ``fn(lib, module)``."""
    got = []
    for lib in LIBS:
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2)
        with pytest.raises(Exception) as info:
            fn(lib.nn.utils.prune, m, lib)
        got.append((type(info.value), str(info.value).replace(repr(m), "M").replace("torch.", "ember.")))
        assert "weight" in dict(m.named_parameters()) or "weight_orig" in dict(m.named_parameters())
    assert got[0][0] is got[1][0], got
    return got


@pytest.mark.parametrize("fn, same_message", [
    (lambda p, m, lib: p.l1_unstructured(m, "weight", amount=-1), True),
    (lambda p, m, lib: p.l1_unstructured(m, "weight", amount=1.5), True),
    (lambda p, m, lib: p.l1_unstructured(m, "weight", amount="a"), True),
    (lambda p, m, lib: p.l1_unstructured(m, "weight", amount=7), True),
    (lambda p, m, lib: p.random_unstructured(m, "weight", amount=-0.1), True),
    (lambda p, m, lib: p.ln_structured(m, "bias", amount=1, n=2, dim=0), True),
    (lambda p, m, lib: p.ln_structured(m, "weight", amount=1, n=2, dim=2), True),
    (lambda p, m, lib: p.random_structured(m, "weight", amount=3, dim=0), True),
    (lambda p, m, lib: p.remove(m, "weight"), True),
    (lambda p, m, lib: p.l1_unstructured(m, "weight", amount=1, importance_scores=lib.ones(3)), False),
    (lambda p, m, lib: p.global_unstructured(3, p.L1Unstructured, amount=1), True),
    (lambda p, m, lib: p.global_unstructured([(m, "weight")], p.L1Unstructured, importance_scores=[], amount=1),
     True),
    (lambda p, m, lib: p.global_unstructured([(m, "weight")], p.LnStructured, amount=1, n=2, dim=0), False),
])
def test_errors(fn, same_message):
    got = _raises(fn)
    if same_message:
        assert got[0][1] == got[1][1]


def test_failed_first_pruning_restores_parameter():
    e, t = _pair(_linear)
    for lib, m in ((ember, e), (torch, t)):
        with pytest.raises(ValueError):
            lib.nn.utils.prune.l1_unstructured(m, "weight", amount=30)
        assert not m._forward_pre_hooks and not m._buffers
    assert list(e.state_dict()) == list(t.state_dict())
    x = torch.randn(2, 6)
    assert_same(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-6)
