"""gradcheck/gradgradcheck: pass where the derivatives are right, fail (with the Jacobians in the
message) where a custom backward is wrong; same verdicts as torch.autograd.gradcheck."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
A, B = RNG.random((3, 4)), RNG.random((4, 2))


def _leaf(lib, a):
    return lib.tensor(a).requires_grad_()


def _function_classes(lib):
    class HalfGrad(lib.autograd.Function):  # d(x*x)/dx reported as x instead of 2x
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x

    class DetachedBackward(lib.autograd.Function):  # right first derivative, not differentiable again
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x.detach()

    return HalfGrad, DetachedBackward


def smooth(x, w):
    return ((x.sin() * x.exp()).tanh() @ w, x.sum(), (x * 2).long())


@pytest.mark.parametrize("fast_mode", [False, True])
def test_correct_gradients_pass(fast_mode):
    x, w = _leaf(ember, A), _leaf(ember, B)
    assert gradcheck(smooth, (x, w), fast_mode=fast_mode)
    assert gradcheck(smooth, (x, w), fast_mode=fast_mode, check_forward_ad=True, check_batched_grad=True,
                     check_grad_dtypes=True)
    assert gradcheck(lambda x: x.pow(3), _leaf(ember, A[0]), fast_mode=fast_mode)  # a single tensor input
    assert gradgradcheck(lambda x, w: (x.sin() @ w).exp(), (x, w), fast_mode=fast_mode)
    assert gradgradcheck(lambda x, w: (x.sin() @ w).exp(), (x, w), gen_non_contig_grad_outputs=True)


def test_complex_inputs():
    z = ember.tensor(A[0] + 1j * A[1]).requires_grad_()
    assert gradcheck(lambda z: (z * z).exp(), (z,), check_forward_ad=True)
    assert gradcheck(lambda z: (z * z.conj()).real, (z,), check_forward_ad=True)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_wrong_backward_fails_like_torch(fast_mode):
    for lib, check in ((ember, gradcheck), (torch, torch.autograd.gradcheck)):
        bad, _ = _function_classes(lib)
        x = _leaf(lib, A)
        with pytest.raises(RuntimeError) as info:
            check(bad.apply, (x,), fast_mode=fast_mode)
        assert type(info.value).__name__ == "GradcheckError"
        assert "Jacobian mismatch for output 0 with respect to input 0" in str(info.value)
        assert check(bad.apply, (x,), fast_mode=fast_mode, raise_exception=False) is False
    message = str(pytest.raises(GradcheckError, gradcheck, _function_classes(ember)[0].apply, (_leaf(ember, A),),
                                fast_mode=fast_mode).value)
    numerical = message.split("numerical:")[1].split("analytical:")[0]
    analytical = message.split("analytical:")[1]
    assert f"{2 * A[0, 0]:.4f}" in numerical and f"{A[0, 0]:.4f}" in analytical


def test_wrong_second_derivative_fails_gradgradcheck_like_torch():
    for lib, check, gg in ((ember, gradcheck, gradgradcheck),
                           (torch, torch.autograd.gradcheck, torch.autograd.gradgradcheck)):
        _, detached = _function_classes(lib)
        x = _leaf(lib, A)
        assert check(detached.apply, (x,))
        assert gg(detached.apply, (x,), raise_exception=False) is False


def test_other_checks():
    x = _leaf(ember, A)

    class Noisy(ember.autograd.Function):  # nondeterministic backward
        calls = 0

        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            Noisy.calls += 1
            return g * (1 + 1e-9 * Noisy.calls)

    with pytest.raises(GradcheckError, match="not reentrant"):
        gradcheck(Noisy.apply, (x,))
    assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-6)

    class Constant(ember.autograd.Function):  # gradient that ignores the output gradient
        @staticmethod
        def forward(ctx, x):
            return x * 0

        @staticmethod
        def backward(ctx, g):
            return g * 0 + 1

    with pytest.raises(GradcheckError, match="zero"):
        gradcheck(Constant.apply, (x,), atol=10, rtol=10)
    assert gradcheck(Constant.apply, (x,), atol=10, rtol=10, check_undefined_grad=False)

    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(lambda t: t * 2, (ember.tensor(A),))
    with pytest.warns(UserWarning, match="double precision"):
        gradcheck(lambda t: t * 2, (ember.tensor(A, dtype=ember.float32).requires_grad_(),), eps=1e-2, atol=1e-2)
    # non-differentiable outputs: numerically constant functions pass, others fail
    assert gradcheck(lambda t: (t > 0.5).long(), (x,))
    with pytest.raises(GradcheckError, match="expected to be zero"):
        gradcheck(lambda t: (t * 1000).detach(), (x,))


def test_forward_ad_checked_against_numerical():
    x = _leaf(ember, A)
    assert gradcheck(lambda t: (t.cumprod(1) * t).sin(), (x,), check_forward_ad=True, check_backward_ad=False)


def test_public_spelling():
    assert ember.autograd.gradcheck(lambda t: t * 2, (_leaf(ember, A),))
