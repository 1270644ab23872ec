"""nn.Module mechanics: registration, traversal, state_dict, hooks, modes, moves and repr."""
import collections

import numpy as np
import pytest

import ember
import ember.nn as nn


class Affine(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(ember.ones(n_out, n_in))
        self.bias = nn.Parameter(ember.zeros(n_out))
        self.register_buffer("steps", ember.zeros((), dtype=ember.int64))
        self.register_buffer("scratch", ember.zeros(2), persistent=False)

    def forward(self, x):
        return x @ self.weight.t() + self.bias

    def extra_repr(self):
        return f"in_features={self.weight.shape[1]}, out_features={self.weight.shape[0]}"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Affine(3, 4)
        self.b = nn.Sequential(Affine(4, 2), Affine(2, 1))
        self.shared = self.a

    def forward(self, x):
        return self.b(self.a(x))


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["a.weight", "a.bias", "b.0.weight", "b.0.bias", "b.1.weight", "b.1.bias"]
    assert len(list(net.parameters())) == 6
    assert [n for n, _ in net.named_buffers()] == ["a.steps", "a.scratch", "b.0.steps", "b.0.scratch", "b.1.steps",
                                                   "b.1.scratch"]
    assert [n for n, _ in net.named_modules()] == ["", "a", "b", "b.0", "b.1"]
    assert [n for n, _ in net.named_children()] == ["a", "b"]
    assert net.get_submodule("b.1") is net.b[1] and net.get_parameter("b.0.bias") is net.b[0].bias
    with pytest.raises(AttributeError):
        net.get_submodule("b.7")
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'missing'"):
        net.missing  # noqa: B018
    with pytest.raises(TypeError, match="cannot assign"):
        net.a.weight = ember.ones(4, 3)
    net.a.weight = None
    assert "a.weight" not in dict(net.named_parameters())
    with pytest.raises(KeyError, match="contain"):
        net.register_buffer("x.y", ember.ones(1))


def test_state_dict_round_trip_strict_and_non_strict():
    net = Net()
    sd = net.state_dict()
    # as in torch, the module registered twice appears under both names
    assert list(sd) == ["a.weight", "a.bias", "a.steps", "b.0.weight", "b.0.bias", "b.0.steps", "b.1.weight",
                        "b.1.bias", "b.1.steps", "shared.weight", "shared.bias", "shared.steps"]
    assert not sd["a.weight"].requires_grad and sd["a.weight"].grad_fn is None
    other = Net()
    with ember.no_grad():
        for p in other.parameters():
            p.add_(1)
    other.load_state_dict(sd)
    assert all(ember.equal(p, q) for p, q in zip(net.parameters(), other.parameters()))
    partial = collections.OrderedDict((k, v) for k, v in sd.items() if not k.startswith("b."))
    assert "shared.weight" in partial
    partial["extra.weight"] = ember.ones(1)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "b.0.weight"') as info:
        other.load_state_dict(partial)
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in str(info.value)
    result = other.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["extra.weight"] and "b.0.weight" in result.missing_keys
    bad = dict(sd, **{"a.bias": ember.zeros(5)})
    with pytest.raises(RuntimeError, match="size mismatch for a.bias"):
        other.load_state_dict(bad, strict=False)


def test_state_dict_interoperates_with_torch(tmp_path):
    torch = pytest.importorskip("torch")

    class TorchAffine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4, 3))
            self.bias = torch.nn.Parameter(torch.randn(4))
            self.register_buffer("steps", torch.tensor(7))

    t = TorchAffine()
    torch.save(t.state_dict(), tmp_path / "t.pt")
    e = Affine(3, 4)
    e.load_state_dict(ember.load(tmp_path / "t.pt"))
    np.testing.assert_array_equal(e.weight.detach().numpy(), t.weight.detach().numpy())
    assert e.steps.item() == 7
    ember.save(e.state_dict(), tmp_path / "e.pt")
    t2 = TorchAffine()
    t2.load_state_dict(torch.load(tmp_path / "e.pt"))
    np.testing.assert_array_equal(t2.bias.detach().numpy(), e.bias.detach().numpy())


def test_forward_hooks_and_pre_hooks():
    m = Affine(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h2 = m.register_forward_hook(lambda mod, args, out: out + 100)
    m.register_forward_hook(lambda mod, args, out: calls.append("first"), prepend=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(sorted(kwargs)), with_kwargs=True)
    out = m(ember.ones(1, 2))
    assert out.tolist() == [[104.0, 104.0]] and calls == ["first", []]
    h1.remove()
    h2.remove()
    assert m(ember.ones(1, 2)).tolist() == [[2.0, 2.0]]


def test_full_backward_hooks():
    m = Affine(2, 1)
    seen = {}

    def hook(mod, grad_input, grad_output):
        seen["in"] = [g.tolist() if g is not None else None for g in grad_input]
        seen["out"] = [g.tolist() for g in grad_output]

    m.register_full_backward_hook(hook)
    m.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 3,))
    x = ember.tensor([[1.0, 2.0]], requires_grad=True)
    m(x).sum().backward()
    assert seen["out"] == [[[3.0]]] and seen["in"] == [[[3.0, 3.0]]]
    assert x.grad.tolist() == [[3.0, 3.0]] and m.weight.grad.tolist() == [[3.0, 6.0]]
    seen.clear()
    m(ember.ones(1, 2)).sum().backward()  # no input needs a gradient: grad_input is (None,)
    assert seen["in"] == [None]


def test_modes_zero_grad_and_requires_grad():
    net = Net()
    assert net.training and not net.eval().b[0].training and net.train().b[1].training
    net(ember.ones(2, 3)).sum().backward()
    assert net.a.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.a.weight.grad.abs().sum().item() == 0
    net.zero_grad()
    assert net.a.weight.grad is None
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_keeps_parameter_objects_and_casts_floats_only():
    m = Affine(2, 2)
    w = m.weight
    m.to(ember.float64)
    assert m.weight is w and w.dtype is ember.float64 and m.steps.dtype is ember.int64
    m.half()
    assert m.bias.dtype is ember.float16
    with pytest.raises(TypeError, match="floating point"):
        m.to(ember.int32)
    assert m.cpu() is m


def test_repr_matches_torch_layout():
    net = nn.Sequential(Affine(2, 3), nn.ModuleList([Affine(3, 1)]))
    assert repr(net) == ("Sequential(\n  (0): Affine(in_features=2, out_features=3)\n  (1): ModuleList(\n"
                         "    (0): Affine(in_features=3, out_features=1)\n  )\n)")
    assert repr(nn.Module()) == "Module()"


def test_parameter_container_repr_matches_torch_layout():
    # PyTorch's lines (dtype names aside): a ParameterList names the dtype, a ParameterDict the tensor type; each
    # line carries two spaces of its own, so a one-entry container prints on one line with them
    pl = nn.ParameterList([nn.Parameter(ember.ones(2, 3, dtype=ember.float64)), 7])
    assert repr(pl) == ("ParameterList(\n    (0): Parameter containing: [ember.float64 of size 2x3]\n"
                        "    (1): Object of type: int\n)")
    assert repr(nn.ParameterList([nn.Parameter(ember.ones(2))])) == \
        "ParameterList(  (0): Parameter containing: [ember.float32 of size 2])"
    assert repr(nn.ParameterList()) == "ParameterList()"
    assert repr(nn.ParameterDict({"w": ember.ones(2)})) == \
        "ParameterDict(  (w): Parameter containing: [torch.FloatTensor of size 2])"
    net = nn.Sequential(nn.ParameterList([ember.ones(1), ember.ones(1)]))
    assert repr(net) == ("Sequential(\n  (0): ParameterList(\n"
                         "      (0): Parameter containing: [ember.float32 of size 1]\n"
                         "      (1): Parameter containing: [ember.float32 of size 1]\n  )\n)")


def test_containers():
    seq = nn.Sequential(collections.OrderedDict([("x", Affine(1, 1)), ("y", Affine(1, 1))]))
    assert [n for n, _ in seq.named_children()] == ["x", "y"] and isinstance(seq[:1], nn.Sequential)
    seq.append(Affine(1, 1))
    assert len(seq) == 3 and seq[-1] is seq[2]
    ml = nn.ModuleList([Affine(1, 1)])
    ml += [Affine(1, 1)]
    ml.insert(0, Affine(1, 2))
    assert len(ml) == 3 and ml[0].weight.shape == (2, 1)
    md = nn.ModuleDict({"a": Affine(1, 1)})
    md["b"] = Affine(1, 1)
    assert list(md.keys()) == ["a", "b"] and "a" in md
    pl = nn.ParameterList([ember.ones(2)])
    pl.append(nn.Parameter(ember.zeros(1)))
    assert len(pl) == 2 and isinstance(pl[0], nn.Parameter) and len(list(pl.parameters())) == 2
    pd = nn.ParameterDict({"w": ember.ones(1)})
    assert isinstance(pd["w"], nn.Parameter) and list(dict(pd.named_parameters())) == ["w"]
    with pytest.raises(IndexError):
        seq[5]


def test_parameter_basics():
    p = nn.Parameter(ember.ones(2))
    assert p.requires_grad and isinstance(p, ember.Tensor) and repr(p).startswith("Parameter containing:\n")
    assert not nn.Parameter(ember.ones(1), requires_grad=False).requires_grad
    import copy
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q is not p and q.requires_grad


def test_compile_in_place_checks_its_arguments_like_torch():
    """``Module.compile`` returns None and raises PyTorch's RuntimeError for an unknown mode; the module runs as
    before."""
    m, x = nn.Linear(2, 2), ember.randn(3, 2)
    assert m.compile(mode="max-autotune-no-cudagraphs") is None
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        m.compile(mode="fastest")
    assert ember.allclose(m(x), x @ m.weight.t() + m.bias)
