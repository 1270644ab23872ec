"""Memory formats against torch: the format objects, is_contiguous/contiguous/to/clone with ``memory_format=``, the
layout of ``empty``, the ``*_like`` factories and ``clone`` (preserve_format keeps a dense layout and reads a sparse
4-d one as channels-last), and the errors."""
import itertools
import pickle

import numpy as np
import pytest
import torch

import ember

FORMATS = ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


def _views(shape, strides, offset=0):
    """The same strided view of the same values in both libraries."""
    n = offset + sum((s - 1) * st for s, st in zip(shape, strides)) + 1
    base = np.arange(n, dtype=np.float32)
    return (ember.tensor(base).as_strided(shape, strides, offset),
            torch.tensor(base).as_strided(shape, strides, offset))


# (shape, strides): dense and sparse layouts, permuted axes, size-1 axes, broadcast (zero) strides
LAYOUTS = [
    ((3, 4), (4, 1)), ((3, 4), (1, 3)), ((4, 3), (6, 1)), ((3, 4), (1, 0)),
    ((2, 3, 4), (1, 8, 2)), ((2, 3, 4), (12, 1, 3)),
    ((2, 3, 4, 5), (60, 20, 5, 1)), ((2, 3, 4, 5), (60, 1, 15, 3)), ((2, 3, 4, 5), (120, 1, 30, 6)),
    ((2, 3, 4, 5), (60, 1, 5, 20)), ((2, 3, 4, 5), (1, 2, 6, 24)), ((2, 3, 4, 5), (60, 2, 15, 3)),
    ((2, 1, 4, 5), (20, 20, 5, 1)), ((2, 1, 4, 5), (20, 1, 5, 1)), ((2, 3, 1, 1), (3, 1, 3, 3)),
    ((2, 3, 1, 5), (15, 1, 15, 3)), ((1, 3, 4, 5), (60, 1, 15, 3)), ((2, 3, 4, 5), (0, 1, 15, 3)),
    ((2, 3, 4, 5, 6), (360, 1, 90, 18, 3)), ((2, 3, 4, 5, 6), (360, 120, 30, 6, 1)),
    ((2, 3, 4, 5, 6), (720, 1, 180, 36, 6)),
]


def _strides_without_unit_axes(t):
    """Strides of the axes longer than 1 (PyTorch and NumPy may differ on the others, which never step)."""
    return [s for s, n in zip(t.stride(), t.shape) if n != 1]


def test_format_objects():
    for name in FORMATS:
        fmt = getattr(ember, name)
        assert isinstance(fmt, ember.memory_format)
        assert repr(fmt) == str(fmt) == f"ember.{name}" and repr(getattr(torch, name)) == f"torch.{name}"
        assert pickle.loads(pickle.dumps(fmt)) is fmt
    assert ember.legacy_contiguous_format is ember.contiguous_format
    assert torch.legacy_contiguous_format is torch.contiguous_format


@pytest.mark.parametrize("shape,strides", LAYOUTS)
def test_is_contiguous_per_format(shape, strides):
    e, t = _views(shape, strides)
    for name in FORMATS:
        assert e.is_contiguous(memory_format=getattr(ember, name)) == \
            t.is_contiguous(memory_format=getattr(torch, name)), name


@pytest.mark.parametrize("shape,strides", LAYOUTS)
def test_new_tensors_keep_the_layout_pytorch_gives_them(shape, strides):
    e, t = _views(shape, strides)
    made = [
        (lambda lib, x: x.clone(), None), (lambda lib, x: lib.empty_like(x), None),
        (lambda lib, x: lib.zeros_like(x), 0.0), (lambda lib, x: lib.ones_like(x), 1.0),
        (lambda lib, x: lib.full_like(x, 2.5), 2.5), (lambda lib, x: lib.rand_like(x), None),
        (lambda lib, x: lib.randn_like(x), None), (lambda lib, x: lib.randint_like(x, 5), None),
    ]
    for name in FORMATS[:3]:
        made.append((lambda lib, x, name=name: x.clone(memory_format=getattr(lib, name)), None))
        made.append((lambda lib, x, name=name: lib.zeros_like(x, memory_format=getattr(lib, name)), 0.0))
    for fn, value in made:
        try:
            rt = fn(torch, t)
        except RuntimeError as err:
            with pytest.raises(RuntimeError, match="required rank"):
                fn(ember, e)
            assert "required rank" in str(err)
            continue
        re_ = fn(ember, e)
        assert _strides_without_unit_axes(re_) == _strides_without_unit_axes(rt)
        assert re_.shape == rt.shape and re_.dtype == ember.float32
        if value is not None:
            assert (re_.numpy() == value).all()
    np.testing.assert_array_equal(e.clone().numpy(), t.clone().numpy())


@pytest.mark.parametrize("shape,strides", LAYOUTS)
def test_contiguous_and_to(shape, strides):
    e, t = _views(shape, strides)
    for name in FORMATS:
        fe, ft = getattr(ember, name), getattr(torch, name)
        for call in (lambda x, f: x.contiguous(memory_format=f), lambda x, f: x.to(memory_format=f),
                     lambda x, f: x.to(x.dtype, memory_format=f), lambda x, f: x.to(torch.float64, memory_format=f)
                     if isinstance(x, torch.Tensor) else x.to(ember.float64, memory_format=f)):
            try:
                rt = call(t, ft)
            except RuntimeError as err:
                with pytest.raises(RuntimeError) as info:
                    call(e, fe)
                assert str(info.value) == str(err).replace("Preserve", "Preserve")
                continue
            re_ = call(e, fe)
            assert (re_ is e) == (rt is t), name
            assert _strides_without_unit_axes(re_) == _strides_without_unit_axes(rt), name
            np.testing.assert_array_equal(re_.numpy(), rt.numpy())


def test_empty_with_a_format():
    for shape, name in itertools.product([(2, 3, 4, 5), (2, 3, 4, 5, 6), (3, 4)], FORMATS):
        fe, ft = getattr(ember, name), getattr(torch, name)
        try:
            expected = torch.empty(shape, memory_format=ft).stride()
        except RuntimeError as err:
            with pytest.raises(RuntimeError) as info:
                ember.empty(shape, memory_format=fe)
            assert str(info.value) == str(err)
            continue
        assert ember.empty(shape, memory_format=fe).stride() == expected


def test_errors():
    x, y = ember.ones(3, 4, 5), torch.ones(3, 4, 5)
    for e_call, t_call in [(lambda: x.contiguous(memory_format=ember.channels_last),
                            lambda: y.contiguous(memory_format=torch.channels_last)),
                           (lambda: x.to(memory_format=ember.channels_last_3d),
                            lambda: y.to(memory_format=torch.channels_last_3d)),
                           (lambda: x.t().contiguous(memory_format=ember.preserve_format),
                            lambda: y.t().contiguous(memory_format=torch.preserve_format)),
                           (lambda: ember.empty_like(x, memory_format=ember.channels_last),
                            lambda: torch.empty_like(y, memory_format=torch.channels_last))]:
        with pytest.raises(RuntimeError) as expected:
            t_call()
        with pytest.raises(RuntimeError) as got:
            e_call()
        assert str(got.value) == str(expected.value)
    for call in (lambda lib, t: t.is_contiguous(memory_format="channels_last"),
                 lambda lib, t: t.contiguous(memory_format=3), lambda lib, t: t.clone(memory_format=1),
                 lambda lib, t: lib.empty(2, memory_format="x")):
        with pytest.raises(TypeError):
            call(torch, y)
        with pytest.raises(TypeError, match="memory_format"):
            call(ember, x)


@pytest.mark.autograd
def test_layout_changes_carry_gradients():
    x = ember.randn(2, 3, 4, 5, requires_grad=True)
    y = x.contiguous(memory_format=ember.channels_last)
    assert y.grad_fn is not None and y.is_contiguous(memory_format=ember.channels_last)
    (y * ember.arange(120.0).reshape(2, 3, 4, 5)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(120.0).reshape(2, 3, 4, 5))


def test_elementwise_results_keep_channels_last():
    e = ember.randn(2, 3, 4, 5).contiguous(memory_format=ember.channels_last)
    for out in (e + 1, ember.exp(e), e * e):
        assert out.is_contiguous(memory_format=ember.channels_last)


# N, C, O, size, kernel, stride, padding: the stem, Winograd-sized, strided, 1x1 and 5x5 convolutions
CONVS = [(4, 3, 64, 32, 7, 2, 3), (2, 16, 32, 16, 3, 1, 1), (2, 64, 64, 16, 3, 1, 1), (2, 32, 64, 16, 3, 2, 1),
         (2, 32, 16, 9, 1, 1, 0), (2, 8, 8, 12, 5, 1, 2)]


def _conv_pair(case, x_format, w_format, requires_grad=False):
    N, C, O, H, k, s, p = case
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((N, C, H, H)), rng.standard_normal((O, C, k, k)), rng.standard_normal(O)
    out = {}
    for lib in (ember, torch):
        xs = lib.tensor(x).to(memory_format=getattr(lib, x_format)).requires_grad_(requires_grad)
        ws = lib.tensor(w).to(memory_format=getattr(lib, w_format)).requires_grad_(requires_grad)
        out[lib] = xs, ws, lib.conv2d(xs, ws, lib.tensor(b), stride=s, padding=p)
    return out


@pytest.mark.parametrize("case", CONVS)
@pytest.mark.parametrize("x_format,w_format", [("channels_last", "contiguous_format"),
                                               ("contiguous_format", "channels_last"),
                                               ("contiguous_format", "contiguous_format")])
def test_convolution_output_layout(case, x_format, w_format):
    out = _conv_pair(case, x_format, w_format)
    (_, _, ye), (_, _, yt) = out[ember], out[torch]
    assert ye.stride() == yt.stride()
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.autograd
@pytest.mark.parametrize("case", CONVS)
@pytest.mark.parametrize("x_format,w_format", [("channels_last", "contiguous_format"),
                                               ("contiguous_format", "channels_last")])
def test_convolution_gradients_take_their_tensors_layouts(case, x_format, w_format):
    out = _conv_pair(case, x_format, w_format, requires_grad=True)
    g = np.random.default_rng(1).standard_normal(tuple(out[torch][2].shape))
    for lib, (_, _, y) in out.items():
        y.backward(lib.tensor(g).to(memory_format=getattr(lib, x_format)))
    (xe, we, _), (xt, wt, _) = out[ember], out[torch]
    for e, t in ((xe.grad, xt.grad), (we.grad, wt.grad)):
        assert e.stride() == t.stride()
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.autograd
def test_leaf_gradients_follow_dense_layouts_only():
    base = np.random.default_rng(2).standard_normal((4, 6))
    for view in (lambda lib, a: a.t(), lambda lib, a: a[:, ::2]):
        grads = []
        for lib in (ember, torch):
            leaf = view(lib, lib.tensor(base)).detach().requires_grad_()
            (leaf * 2).sum().backward()
            grads.append(leaf.grad)
        assert grads[0].stride() == grads[1].stride()
        np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())
