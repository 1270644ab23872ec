"""Multi-output ops against PyTorch: which outputs require grad and carry a grad_fn, and the gradients that
reach the inputs. broadcast_tensors, meshgrid and atleast_{1,2,3}d (list inputs) make each output from its own
input, so only the outputs of inputs that require grad do; unbind, split and chunk make every output from the
one input, so all do."""
import numpy as np
import pytest
import torch

import ember

SHAPES = {"broadcast_tensors": [(3, 1), (1, 4), (4,)], "meshgrid": [(3,), (4,), (2,)],
          "atleast_1d": [(), (3,), (2, 2)], "atleast_2d": [(), (3,), (2, 2)], "atleast_3d": [(), (3,), (2, 2)]}
CALLS = {
    "broadcast_tensors": lambda lib, xs: lib.broadcast_tensors(*xs),
    "meshgrid": lambda lib, xs: lib.meshgrid(*xs, indexing="ij"),
    "meshgrid_list_xy": lambda lib, xs: lib.meshgrid(list(xs), indexing="xy"),
    "atleast_1d": lambda lib, xs: lib.atleast_1d(list(xs)),
    "atleast_2d": lambda lib, xs: lib.atleast_2d(list(xs)),
    "atleast_3d": lambda lib, xs: lib.atleast_3d(list(xs)),
    "atleast_3d_args": lambda lib, xs: lib.atleast_3d(*xs),
}


def _inputs(lib, shapes, needs):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.standard_normal(s), requires_grad=n) for s, n in zip(shapes, needs)]


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True),
                                   (True, False, True)])
@pytest.mark.parametrize("name", list(CALLS))
def test_each_output_follows_its_own_input(name, needs):
    shapes = SHAPES[name.split("_list")[0].removesuffix("_args")]
    results = {}
    for lib in (ember, torch):
        xs = _inputs(lib, shapes, needs)
        outs = CALLS[name](lib, xs)
        # (PyTorch's atleast_nd hands back an input that has the dims already, a leaf without grad_fn; ember's
        # output is a view of it with a node of its own: grad_fn compared for the other outputs only)
        flags = [(o.requires_grad, o.grad_fn is not None or (o is x and x.requires_grad)) for o, x in zip(outs, xs)]
        # weights per output, so each input's gradient is told apart from the others'
        loss = sum((o * (k + 1.0)).pow(2).sum() for k, o in enumerate(outs) if o.requires_grad)
        loss.backward()
        results[lib] = flags, [None if x.grad is None else x.grad.numpy() for x in xs]
    (eflags, egrads), (tflags, tgrads) = results[ember], results[torch]
    assert eflags == tflags
    assert eflags == [(n, n) for n in needs]  # (so each output's flags are its input's)
    for e, t in zip(egrads, tgrads):
        assert (e is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(e, t, rtol=1e-12)


@pytest.mark.parametrize("name", ["unbind", "split", "chunk"])
def test_outputs_of_one_input_all_require_grad(name):
    results = {}
    for lib in (ember, torch):
        x = lib.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        outs = x.unbind(0) if name == "unbind" else x.split([1, 3], dim=1) if name == "split" else x.chunk(3)
        flags = [(o.requires_grad, o.grad_fn is not None) for o in outs]
        (outs[0] * 3).sum().backward()  # one output used: the others' gradients are zero
        results[lib] = flags, x.grad.numpy()
    assert results[ember][0] == results[torch][0] and all(f == (True, True) for f in results[ember][0])
    np.testing.assert_array_equal(results[ember][1], results[torch][1])


def test_constant_output_takes_no_history_when_used():
    # the output of an input that does not require grad stays a plain view: a later op on it alone records nothing
    a = ember.ones(3, 1, requires_grad=True)
    b = ember.arange(4.0)
    x, y = ember.broadcast_tensors(a, b)
    z = y * 2
    assert not z.requires_grad and z.grad_fn is None and y.is_leaf
    (x * y).sum().backward()
    assert a.grad.flatten().tolist() == [6.0, 6.0, 6.0]
