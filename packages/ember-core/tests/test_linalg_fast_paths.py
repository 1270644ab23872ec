"""The matmul family's gradients when only some inputs require grad (the VJPs skip and don't save the others),
in-place add* forms, and half-precision add* with a broadcast input, against PyTorch."""
import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember

# name, input shape (None: no input), operand shapes
CASES = [("mm", None, (3, 4), (4, 5)), ("bmm", None, (2, 3, 4), (2, 4, 5)), ("matmul", None, (2, 3, 4), (4, 5)),
         ("matmul", None, (4,), (2, 4, 5)), ("matmul", None, (3, 4), (4,)), ("mv", None, (3, 4), (4,)),
         ("dot", None, (4,), (4,)), ("outer", None, (3,), (4,)), ("addmm", (5,), (3, 4), (4, 5)),
         ("addbmm", (3, 1), (2, 3, 4), (2, 4, 5)), ("baddbmm", (3, 5), (2, 3, 4), (2, 4, 5)),
         ("addmv", (), (3, 4), (4,)), ("addr", (3, 1), (3,), (4,))]
KW = {"beta": 0.5, "alpha": -2.0}


def _leaves(lib, arrays, want):
    return [lib.tensor(a, requires_grad=w) for a, w in zip(arrays, want)]


@pytest.mark.parametrize("name,inp,sa,sb", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
@pytest.mark.parametrize("want", [(True, False), (False, True), (True, True)], ids=["a", "b", "ab"])
@pytest.mark.parametrize("input_grad", [False, True])
@needs_autograd
def test_partial_grads_match_torch(name, inp, sa, sb, want, input_grad):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((inp,) if inp is not None else ()) + (sa, sb)]
    want = ((input_grad,) if inp is not None else ()) + want
    kw = KW if inp is not None else {}
    res = []
    for lib in (torch, ember):
        ts = _leaves(lib, arrays, want)
        out = getattr(lib, name)(*ts, **kw)
        g = lib.tensor(np.cos(np.arange(out.numel()).reshape(tuple(out.shape))))
        (out * g).sum().backward()
        res.append([None if t.grad is None else t.grad.numpy() for t in ts])
    for i, (t, e) in enumerate(zip(*res)):
        assert (t is None) == (e is None), i
        if t is not None:
            np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)


@needs_autograd
def test_factor_dropped_when_unneeded_can_change_in_place():
    # like PyTorch, mm keeps the data operand (for the weight's gradient) but not the weight
    x, w = ember.ones(2, 3), ember.ones(3, 4, requires_grad=True)
    out = ember.mm(x, w)
    with ember.no_grad():
        w.add_(1)  # not saved: no version error
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 4), 2.0))
    x.add_(1)  # saved: changing it breaks the backward, as in PyTorch
    w2 = ember.ones(3, 4, requires_grad=True)
    out = ember.mm(x, w2)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        out.sum().backward()


@needs_autograd
def test_addmm_input_not_saved():
    bias = ember.zeros(4, requires_grad=True)
    a, b = ember.ones(2, 3, requires_grad=True), ember.ones(3, 4)
    out = ember.addmm(bias, a, b, beta=2)
    with ember.no_grad():
        bias.add_(1)  # PyTorch's addmm keeps no copy of its input either
    out.sum().backward()
    np.testing.assert_array_equal(bias.grad.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 4.0))


@pytest.mark.parametrize("name", ["addmm_", "addmv_", "addr_", "baddbmm_", "addbmm_"])
@needs_autograd
def test_inplace_forms_grads(name):
    shapes = {"addmm_": ((3, 5), (3, 4), (4, 5)), "addmv_": ((3,), (3, 4), (4,)), "addr_": ((3, 4), (3,), (4,)),
              "baddbmm_": ((2, 3, 5), (2, 3, 4), (2, 4, 5)), "addbmm_": ((3, 5), (2, 3, 4), (2, 4, 5))}[name]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in shapes]
    res = []
    for lib in (torch, ember):
        ts = _leaves(lib, arrays, (True, True, False))
        out = ts[0].clone()
        getattr(out, name)(ts[1], ts[2], **KW)
        (out * out).sum().backward()
        res.append([ts[0].grad.numpy(), ts[1].grad.numpy()])
    for t, e in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
# exact for the ops rounding once (addr and addbmm round intermediate results in PyTorch: the op table's
# tolerance covers them)
@pytest.mark.parametrize("name,inp,sa,sb", [c for c in CASES if c[0] in ("addmm", "baddbmm", "addmv")])
@pytest.mark.parametrize("beta", [1, 0.5, 0])
def test_half_add_with_broadcast_input(dtype, name, inp, sa, sb, beta):
    rng = np.random.default_rng(2)
    arrays = [np.asarray(rng.standard_normal(s), dtype=np.float32) for s in (inp, sa, sb)]
    if beta == 0:  # beta 0 ignores the input, NaN included
        arrays[0].reshape(-1)[0] = np.nan
    got, want = ([getattr(lib, name)(*[lib.tensor(a).to(getattr(lib, dtype)) for a in arrays], beta=beta)
                  for lib in (ember, torch)])
    assert str(got.dtype)[6:] == str(want.dtype)[6:]
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_products_exact_casts(dtype):
    # float16 widens and rounds through bit operations: transposed operands, subnormals, inf and NaN
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((6, 7)).astype(np.float32) * 300
    a[0, 0], a[1, 1], a[2, 2], b[3, 3] = np.inf, np.nan, 3e-7, -1e-6
    got, want = ([lib.matmul(lib.tensor(a).to(getattr(lib, dtype)).T, lib.tensor(b).to(getattr(lib, dtype)))
                  for lib in (ember, torch)])
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
