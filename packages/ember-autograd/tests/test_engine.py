"""The backward engine, grad modes, hooks, Function and safety checks, compared with PyTorch."""
import gc
import threading
import tracemalloc

import numpy as np
import pytest
import torch

import ember


def pair(values, requires_grad=True):
    arr = np.asarray(values, dtype=np.float64)
    return (ember.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad))


def close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_backward_accumulates_and_matches_torch():
    (x, tx), (w, tw) = pair([[1.0, 2.0], [3.0, -1.0]]), pair([[0.5], [-2.0]])
    for lib_x, lib_w in ((x, w), (tx, tw)):
        y = ((lib_x @ lib_w) * lib_x[:, :1] - lib_x.sum() / 3).exp().mean()
        y.backward()
        y2 = (lib_x * 2).sum()
        y2.backward()
    close(x.grad, tx.grad)
    close(w.grad, tw.grad)


def test_grad_fn_graph_structure():
    x = ember.ones(2, requires_grad=True)
    y = (x * 2).sum()
    assert y.grad_fn.name() == "SumBackward0" and not y.is_leaf and x.is_leaf
    mul, _ = y.grad_fn.next_functions[0]
    assert mul.name() == "MulBackward0"
    acc, _ = mul.next_functions[0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x


def test_broadcasting_and_dtype_of_gradients():
    x = ember.ones(3, 1, requires_grad=True)
    y = ember.ones(4, dtype=ember.float64, requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.shape == (3, 1) and x.grad.dtype is ember.float32 and x.grad.tolist() == [[4.0]] * 3
    assert y.grad.dtype is ember.float64 and y.grad.tolist() == [3.0] * 4


def test_autograd_grad_create_graph_and_higher_order():
    (x, tx) = pair([0.5, -1.5, 2.0])
    results = []
    for lib, v in ((ember, x), (torch, tx)):
        y = (v * v * v).sum()
        (g,) = lib.autograd.grad(y, v, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), v, create_graph=True)
        (ggg,) = lib.autograd.grad(gg.sum(), v)
        results.append((g, gg, ggg))
    for e, t in zip(*results):
        close(e, t)


def test_allow_unused_materialize_and_errors():
    x, y = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    out = (x * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        ember.autograd.grad(out, [x, y], retain_graph=True)
    gx, gy = ember.autograd.grad(out, [x, y], allow_unused=True, retain_graph=True)
    assert gy is None and gx.tolist() == [2.0, 2.0]
    gx, gy = ember.autograd.grad(out, [x, y], materialize_grads=True)
    assert gy.tolist() == [0.0, 0.0]
    assert x.grad is None  # autograd.grad does not accumulate


def test_backward_twice_needs_retain_graph():
    x = ember.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0] * 3
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_implicit_gradient_only_for_scalars():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(ember.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(1).backward()


def test_requires_grad_rules():
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype"):
        ember.ones(2, dtype=ember.int64, requires_grad=True)
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    assert ember.ones(2).requires_grad_().requires_grad


def test_grad_modes_are_thread_local_and_decorate():
    x = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        assert not (x * 2).requires_grad and not ember.is_grad_enabled()
        with ember.enable_grad():
            assert (x * 2).requires_grad
    seen = []
    with ember.no_grad():
        t = threading.Thread(target=lambda: seen.append(ember.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]

    @ember.no_grad()
    def f():
        return x * 2
    assert not f().requires_grad
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()


def test_inference_mode_tensors_refuse_autograd():
    x = ember.ones(2, requires_grad=True)
    with ember.inference_mode():
        assert ember.is_inference_mode_enabled()
        a = ember.ones(2) * 3
        b = x * 2
    assert a.is_inference() and b.is_inference() and not b.requires_grad
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        a * x
    with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
        a.requires_grad_()
    assert not (ember.ones(2) * 2).is_inference()


def test_version_counter_detects_inplace_change_of_saved_tensor():
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        y = x.exp()
        z = (y * y).sum()
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            z.backward()
    assert "is at version 1; expected version 0 instead" in str(info.value)
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    z = y + 1  # add does not need its inputs: changing y later is fine, as in PyTorch
    y.mul_(3)
    z.sum().backward()
    assert x.grad.tolist() == [2.0] * 3


def test_inplace_on_leaf_and_views_of_leaves_refused():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0].mul_(2)
    with ember.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0] * 3


def test_inplace_ops_are_differentiated():
    (x, tx) = pair([1.0, -2.0, 3.0])
    for v in (x, tx):
        y = v * 1
        y.mul_(v)
        y.add_(2)
        y.exp_() if hasattr(y, "exp_") else None
        y.sum().backward()
    close(x.grad, tx.grad)


def test_inplace_through_a_view_updates_the_base():
    (x, tx) = pair([[1.0, 2.0], [3.0, 4.0]])
    (w, tw) = pair([5.0, -1.0])
    for v, ww in ((x, w), (tx, tw)):
        base = v * 1
        base[0].mul_(ww)
        base[:, 1].add_(ww)
        (base * base).sum().backward()
    close(x.grad, tx.grad)
    close(w.grad, tw.grad)


def test_setitem_with_grad():
    (x, tx), (v, tv) = pair([1.0, 2.0, 3.0]), pair([10.0, 20.0])
    for a, b in ((x, v), (tx, tv)):
        y = a * 2
        y[1:] = b * b
        (y * y).sum().backward()
    close(x.grad, tx.grad)
    close(v.grad, tv.grad)


def test_out_refused_when_grad_is_needed():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        ember.add(x, 1, out=ember.empty(2))


def test_hooks():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    handle = x.register_hook(lambda g: g * 10)
    y.retain_grad()
    y.sum().backward()
    assert seen == [[1.0, 1.0]] and x.grad.tolist() == [30.0, 30.0] and y.grad.tolist() == [1.0, 1.0]
    assert y.retains_grad and not x.retains_grad
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    (x * 1).sum().backward()
    assert calls == [[4.0, 4.0]]
    node_calls = []
    z = x * 2
    z.grad_fn.register_hook(lambda gin, gout: node_calls.append(len(gin)))
    z.grad_fn.register_prehook(lambda gout: (gout[0] * 0,))
    x.grad = None
    z.sum().backward()
    assert node_calls == [1] and x.grad.tolist() == [0.0, 0.0]  # Python scalars are not graph inputs in ember
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.ones(1).register_hook(lambda g: g)



@pytest.mark.parametrize("lib", [torch, ember])
def test_queue_callback_runs_when_backward_ends(lib):
    engine = lib.autograd.Variable._execution_engine
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
        engine.queue_callback(lambda: None)
    w = lib.ones(2, requires_grad=True)
    seen = []

    def last():
        seen.append(("last", w.grad.tolist()))

    def first():
        seen.append(("first", w.grad.tolist()))
        engine.queue_callback(last)  # queued by a callback: runs in the same pass

    def hook(g):
        seen.append("hook")
        engine.queue_callback(first)
    y = w * 3
    y.register_hook(hook)
    y.sum().backward()
    assert seen == ["hook", ("first", [3.0, 3.0]), ("last", [3.0, 3.0])]

class Cube(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


class Split(ember.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2, (x > 0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, g, g_mask):
        assert g_mask is None
        return g * 2


def test_custom_function():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    a, mask = Split.apply(x)
    assert a.requires_grad and not mask.requires_grad
    x.grad = None
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]

    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return (g,)

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_anomaly_mode_names_the_forward_op():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning):
        with ember.autograd.detect_anomaly():
            y = (x / x).sum()  # 0/0: NaN gradient from DivBackward0
            with pytest.raises(RuntimeError, match="returned nan values"), pytest.warns(UserWarning, match="x / x"):
                y.backward()


def test_set_detect_anomaly_is_a_call_and_a_context_manager_as_torch():
    seen = []
    for m in (torch, ember):
        steps = [m.is_anomaly_enabled()]
        m.autograd.set_detect_anomaly(True)
        steps.append(m.is_anomaly_enabled())
        with m.autograd.set_detect_anomaly(False):
            steps.append(m.is_anomaly_enabled())
        steps.append(m.is_anomaly_enabled())
        m.autograd.set_detect_anomaly(False)
        with m.autograd.set_detect_anomaly(True, check_nan=False):
            steps.append((m.is_anomaly_enabled(), m.is_anomaly_check_nan_enabled()))
        steps.append(m.is_anomaly_enabled())
        seen.append(steps)
    assert seen[0] == seen[1]


def test_graph_is_freed_memory_stays_flat():
    w = ember.randn(64, 64, requires_grad=True)
    x = ember.randn(8, 64)

    def step():
        loss = ((x @ w).exp() * 0.001).sum()
        loss.backward()
        w.grad = None

    for _ in range(50):
        step()
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    for _ in range(2000):
        step()
    gc.collect()
    now, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert now - base < 200_000, f"memory grew by {now - base} bytes over 2000 iterations"


def test_graphs_make_no_reference_cycles():
    # a node holds its outputs' arrays, not the tensors (which hold the node): graphs are freed by reference
    # counting alone, also when never backpropagated and when built with create_graph (except backward with
    # create_graph, whose leaves hold their gradient's graph: a cycle in PyTorch too)
    x = ember.randn(5, requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        ref = ember.randn(5).requires_grad_()
        y = (x * ref).tanh().exp()
        values, indices = y.max(0)
        (values + y.sum()).backward()
        g, = ember.autograd.grad(x.sigmoid().sum(), x, create_graph=True)
        g.sum().backward()
        del y, values, indices, g, ref
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_vjps_keep_only_what_they_read():
    for lib in (ember, torch):
        x = lib.randn(4, requires_grad=True)
        a = x * 2
        b = a * 3  # a times a number: the gradient reads neither a nor b
        c = b.tanh()  # tanh reads its result, not b
        b.add_(1)
        a.mul_(2)
        c.sum().backward()
        expected = 6 * (1 - c.detach() ** 2)
        np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-4)
        # what a VJP reads is still checked
        y = x.exp()
        z = (x * y).sum()  # reads both operands
        y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()
        t = x.tanh()
        z = t.sum() * 1.0
        t.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            t.backward(ember.ones(4) if lib is ember else torch.ones(4))


def test_needs_input_grad_of_op_vjps():
    seen = []
    op = ember._registry.REGISTRY["mul"]
    vjp = op.vjp_fn

    def spy(ctx, g):
        seen.append(ctx.needs_input_grad)
        return vjp(ctx, g)

    op.vjp_fn = spy
    try:
        x, w = ember.randn(3, requires_grad=True), ember.randn(3)
        (x * w).sum().backward()
        (w * x).sum().backward()
        (x * 2.0).sum().backward()
        (x * x).sum().backward()
    finally:
        op.vjp_fn = vjp
    assert seen == [(True, False), (False, True), (True, False), (True, True)]
    np.testing.assert_allclose(x.grad.numpy(), (2 * w + 2 + 2 * x).detach().numpy(), rtol=1e-6)


def test_gradients_summed_at_a_node_keep_dtype_and_values():
    for dtype in ("float32", "float64", "float16", "bfloat16", "complex64"):
        e, t = ember.ones(3, dtype=getattr(ember, dtype)), torch.ones(3, dtype=getattr(torch, dtype))
        results = []
        for x in (e, t):
            x = (x * 1.5).requires_grad_()
            y = x * 3
            out = (y * 1.25 + y * 0.5 + y.exp() * 0.0)  # three gradients meet at y
            out.real.sum().backward() if dtype.startswith("complex") else out.sum().backward()
            results.append(x.grad)
        assert str(results[0].dtype).split(".")[-1] == dtype
        np.testing.assert_allclose(results[0].to(ember.complex128).numpy(), results[1].to(torch.complex128).numpy())
    x = ember.tensor(2.0, requires_grad=True)  # 0-d gradients (a plain array add would give a NumPy scalar)
    (x * 3 + x * 4).backward()
    assert x.grad.tolist() == 7.0 and isinstance(x.grad._data, np.ndarray)


def test_create_graph_reads_results_joined_to_the_graph():
    # VJPs that read ctx.out (rebuilt from the saved array) must give second-order gradients through it
    fns = (lambda v: v.tanh(), lambda v: v.exp(), lambda v: v.sigmoid(), lambda v: v.sqrt().relu())
    for f in fns:
        second = []
        for lib in (ember, torch):
            x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
            g, = lib.autograd.grad(f(x.abs()).sum(), x, create_graph=True)
            second.append(lib.autograd.grad(g.sum(), x)[0].numpy())
        np.testing.assert_allclose(*second, rtol=1e-12)
    y = ember.ones(3, requires_grad=True).exp()  # the saved result's version is still checked
    s = (y * 2).sum()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation: .* is at version 1; expected version 0"):
        s.backward()


def test_malloc_tuning_applies_on_glibc_and_can_be_turned_off():
    import os
    import platform
    import subprocess
    import sys
    code = "import ember, ember._allocator as a; print(a.tune())"
    env = {k: v for k, v in os.environ.items() if k != "EMBER_MALLOC_TUNING"}
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(glibc)
    out = subprocess.run([sys.executable, "-c", code], env={**env, "EMBER_MALLOC_TUNING": "0"}, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_fused_vjps_without_a_graph_match_torch(dtype):
    # tanh's and sigmoid's VJPs compute on NumPy temporaries when no graph is built: every layout and dtype
    rng = np.random.default_rng(0)
    for shape, transpose in (((5, 4), False), ((5, 4), True), ((0,), False), ((), False), ((3,), False)):
        v = rng.standard_normal(shape) * 3
        if v.ndim == 1 and v.size:
            v[0] = np.nan
        for name in ("tanh", "sigmoid"):
            grads = []
            for lib in (ember, torch):
                x = lib.tensor(v, dtype=getattr(lib, dtype))
                x = (x.t() if transpose else x).requires_grad_()
                g = lib.ones(x.shape[::-1], dtype=x.dtype).t() if transpose else lib.ones_like(x)
                getattr(x, name)().backward(g * 0.5)
                grads.append(x.grad.to(lib.float64).numpy())
            # (1 - y*y near y = 1 magnifies the last-bit differences of float32 tanh between NumPy and torch)
            rtol, atol = {"float64": (1e-10, 0), "float32": (1e-4, 1e-7)}.get(dtype, (2e-2, 1e-3))
            np.testing.assert_allclose(*grads, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_double_backward_of_tanh_and_sigmoid_matches_torch(dtype, name):
    # one fused node (the VJP op) whose VJP folds gradients broadcast from one value (sum's) into a scalar
    rng = np.random.default_rng(1)
    v, w, u = rng.standard_normal((3, 5)) * 2, rng.standard_normal((3, 5)), rng.standard_normal(5)
    v[0, 0] = np.nan
    for first, second in ((None, None), (w, None), (None, u), (w, u)):
        got = []
        for lib in (ember, torch):
            x = lib.tensor(v, dtype=getattr(lib, dtype), requires_grad=True)
            y = getattr(x, name)()
            out = y.sum() if first is None else (y * lib.tensor(first, dtype=x.dtype)).sum()
            g, = lib.autograd.grad(out, x, create_graph=True)
            (g.sum() if second is None else (g * lib.tensor(second, dtype=x.dtype)).sum()).backward()
            got.append((g.detach().to(lib.float64).numpy(), x.grad.to(lib.float64).numpy()))
        rtol, atol = {"float64": (1e-10, 0), "float32": (1e-4, 1e-6)}.get(dtype, (2e-2, 1e-3))
        for a, b in zip(*got):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def test_leaf_takes_an_unshared_gradient_and_adds_later_ones_in_place():
    x = ember.randn(6, requires_grad=True)
    (x * 3).sum().backward()  # the gradient only the engine holds becomes x.grad without a copy
    grad = x.grad
    (x * 2).sum().backward()  # added in place, as torch's (a holder of the old .grad sees the sum)
    assert x.grad is grad
    np.testing.assert_allclose(grad.numpy(), np.full(6, 5.0))
    # a gradient also held elsewhere is copied: the user's tensor, or one a VJP hands to two leaves
    a, b = ember.randn(4, requires_grad=True), ember.randn(4, requires_grad=True)
    root = ember.ones(4)
    (a + 0).backward(root)
    (a + b).backward(root)
    a.grad.add_(1), b.grad.add_(10)
    np.testing.assert_allclose(root.numpy(), np.ones(4))
    np.testing.assert_allclose(a.grad.numpy(), np.full(4, 3.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 11.0))
    # as torch's, also a .grad that requires grad (from create_graph) is added to in place
    for lib in (ember, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        (x * x).sum().backward(create_graph=True)
        kept = x.grad
        (x * 1).sum().backward()
        assert x.grad is kept and x.grad.requires_grad
        np.testing.assert_allclose(x.grad.detach().numpy(), [3.0, -3.0, 7.0])


def test_leaf_takes_a_whole_view_of_an_unshared_array_without_a_copy():
    """A gradient that is a view of all of an array nothing else holds (a reshaped product, as a convolution's
    weight gradient) becomes .grad as it is; a view of an array also held elsewhere, or of part of one, is copied."""
    kept = []

    class Grad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, how):
            ctx.how = how
            return x * 1

        @staticmethod
        def backward(ctx, g):
            base = np.arange(12.0 if ctx.how != "part" else 24.0)
            if ctx.how == "kept":
                kept.append(base)
            return ember.from_numpy(base[:12].reshape(3, 4)), None

    for how in ("alone", "kept", "part"):
        x = ember.zeros(3, 4, dtype=ember.float64, requires_grad=True)
        Grad.apply(x, how).sum().backward()
        assert (x.grad._data.base is not None) == (how == "alone")
        x.grad.add_(1)
        np.testing.assert_array_equal(x.grad.numpy(), np.arange(12.0).reshape(3, 4) + 1)
    np.testing.assert_array_equal(kept[0], np.arange(12.0))


def test_vjps_write_into_donated_gradients_only_when_nobody_else_holds_them():
    # mul's and exp's VJPs reuse the array of a gradient only the engine holds; one a hook, retain_grad or
    # autograd.grad keeps stays as it was
    rng = np.random.default_rng(2)
    v, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    got = []
    for lib in (ember, torch):
        x = lib.tensor(v, dtype=lib.float32, requires_grad=True)
        seen = []
        a = (x * 1.5).exp()
        a.retain_grad()
        b = a * lib.tensor(w, dtype=lib.float32)
        b.register_hook(seen.append)
        c = (b * 2).exp() * 0.5
        c.sum().backward()
        y = (x * 3).exp() * 2
        gy, = lib.autograd.grad(y.sum(), y, retain_graph=True)
        y.backward(gy)
        got.append([x.grad, a.grad, seen[0], gy])
    for e, t in zip(*got):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5)
