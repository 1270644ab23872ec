"""Small Tensor APIs against torch: as_subclass (an alias keeping the autograd history), output_nr,
const_data_ptr, chalf (ember stores no complex32: a clear refusal), ccol_indices/row_indices (no column compressed
layouts: PyTorch's layout error)."""
import pytest
import torch

import ember


class _TorchSub(torch.Tensor):
    pass


class _EmberSub(ember.Tensor):
    pass


@pytest.mark.autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_as_subclass_is_an_alias_with_history():
    for lib, cls in ((torch, _TorchSub), (ember, _EmberSub)):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.as_subclass(cls)
        assert type(y) is cls and y.requires_grad and not y.is_leaf and y.grad_fn is not None
        assert y.data_ptr() == x.data_ptr()
        (y * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert x.grad.tolist() == [1.0, 2.0, 3.0]
        z = lib.zeros(2)
        w = z.as_subclass(cls)
        z.add_(1)
        assert w.tolist() == [1.0, 1.0] and w._version == z._version and not w.requires_grad
        p = lib.zeros(2).as_subclass(lib.nn.Parameter)  # no __init__ runs: a Parameter not requiring grad
        assert type(p) is lib.nn.Parameter and not p.requires_grad
        with pytest.raises(TypeError, match="does not inherit from Tensor"):
            x.as_subclass(int)


@pytest.mark.autograd
def test_output_nr():
    for lib in (torch, ember):
        x = lib.randn(4, 3, requires_grad=True)
        assert [t.output_nr for t in x.unbind(0)] == [0, 1, 2, 3]
        a, b = x.chunk(2)
        assert (a.output_nr, b.output_nr, x.output_nr, (x * 2).output_nr, lib.zeros(2).output_nr) == (0, 1, 0, 0, 0)
        m = x.max(1)
        assert (m.values.output_nr, m.indices.output_nr) == (0, 0)


def test_const_data_ptr_chalf_and_column_compressed_indices():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.const_data_ptr() == x.data_ptr() and x[1].const_data_ptr() == x[1].data_ptr()
    with pytest.raises(TypeError, match="complex32"):
        x.chalf()
    for lib in (torch, ember):
        t = lib.zeros(2, 2)
        for layout, name in ((t, "Strided"), (t.to_sparse(), "Sparse"), (t.to_sparse_csr(), "SparseCsr")):
            for method in ("ccol_indices", "row_indices"):
                with pytest.raises(RuntimeError, match=f"{method} expected sparse column compressed tensor layout "
                                                       f"but got {name}$"):
                    getattr(layout, method)()
