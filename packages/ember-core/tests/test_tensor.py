"""Tensor metadata, conversions, dtypes, devices and Size, compared with PyTorch."""
import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128"]


@pytest.mark.parametrize("name", DTYPES)
def test_dtype_properties_match_torch(name):
    e, t = getattr(ember, name), getattr(torch, name)
    assert (e.is_floating_point, e.is_complex, e.is_signed, e.itemsize) == (
        t.is_floating_point, t.is_complex, t.is_signed, t.itemsize)
    assert repr(e) == repr(t).replace("torch", "ember")
    assert str(e.to_real()).split(".")[1] == str(t.to_real()).split(".")[1]
    assert pickle.loads(pickle.dumps(e)) is e


def test_dtype_aliases():
    assert ember.float is ember.float32 and ember.double is ember.float64 and ember.half is ember.float16
    assert ember.long is ember.int64 and ember.int is ember.int32 and ember.short is ember.int16
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, attr) == getattr(t, attr), attr
    assert ember.finfo().eps == torch.finfo().eps


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    assert (e.bits, e.min, e.max) == (t.bits, t.min, t.max)
    assert repr(e) == repr(t)


def test_finfo_iinfo_refuse_wrong_kind():
    with pytest.raises(TypeError):
        ember.finfo(ember.int32)
    with pytest.raises(TypeError):
        ember.iinfo(ember.float32)


def test_device():
    d = ember.device("cuda:1")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert ember.device("cuda", 1) == d and ember.device(1) == d and d == "cuda:1"
    assert repr(ember.device("cpu")) == repr(torch.device("cpu"))
    assert ember.device("cpu").index is None
    with pytest.raises(RuntimeError):
        ember.device("tpu")
    with pytest.raises(RuntimeError):
        ember.device("cuda:x")
    assert pickle.loads(pickle.dumps(d)) == d


def test_size():
    s = ember.Size([2, 3])
    assert s == (2, 3) and isinstance(s, tuple) and s.numel() == 6 and repr(s) == "ember.Size([2, 3])"
    assert isinstance(s[1:], ember.Size) and s + (4,) == (2, 3, 4)
    with pytest.raises(TypeError):
        ember.Size([2.5])


def test_metadata():
    t = ember.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == ember.Size([2, 3, 4]) and t.size(-1) == 4
    assert t.dim() == t.ndim == 3 and t.numel() == 24 and t.dtype is ember.float32
    assert t.device == ember.device("cpu") and t.is_cpu and not t.is_cuda
    assert t.stride() == torch.zeros(2, 3, 4).stride()
    assert t.transpose(0, 2).stride() == torch.zeros(2, 3, 4).transpose(0, 2).stride()
    assert not t.transpose(0, 2).is_contiguous() and t.is_contiguous()
    assert t.element_size() == 4 and t.nbytes == 96
    assert t.requires_grad is False and t.grad is None and t.grad_fn is None and t.is_leaf
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"):
        t.size(3)


def test_empty_tensors_report_contiguous_strides():
    for shape in [(0,), (0, 3), (2, 0, 4), (0, 1, 3)]:
        assert ember.empty(shape).stride() == torch.empty(shape).stride()
        assert ember.zeros(shape).contiguous().stride() == torch.zeros(shape).contiguous().stride()
    assert ember.zeros(4, 3)[2:2].stride() == torch.zeros(4, 3)[2:2].stride()  # a view keeps its own layout
    assert ember.zeros(2, 3)[:0].t().stride() == torch.zeros(2, 3)[:0].t().stride()
    assert ember.zeros(5, 5).expand(2, 5, 5).stride() == (0, 5, 1)  # non-empty broadcasts keep their zero strides


def test_views_share_version_counter_and_memory():
    base = ember.zeros(3, 4)
    v = base[1]
    w = base.view(12).reshape(4, 3).transpose(0, 1)
    assert v._vc is base._vc is w._vc
    v.add_(1)
    assert base._version == 1 and base.sum().item() == 4
    base[0, 0] = 5
    assert base._version == 2 and w[0, 0].item() == 5
    c = base.clone()
    assert c._vc is not base._vc
    assert v._base is base and w._base is base


def test_to_and_conversions():
    t = ember.tensor([1.5, -2.0])
    assert t.to(ember.int32).dtype is ember.int32 and t.to(ember.int32).tolist() == [1, -2]
    assert t.to("cpu") is t and t.to(ember.float32) is t and t.to(ember.float32, copy=True) is not t
    assert t.double().dtype is ember.float64 and t.half().dtype is ember.float16
    assert t.bfloat16().tolist() == [1.5, -2.0] and t.long().dtype is ember.int64 and t.bool().tolist() == [True, True]
    assert t.to(ember.zeros(1, dtype=ember.float64)).dtype is ember.float64
    assert t.cpu() is t
    assert t.type() == "torch.FloatTensor" and t.type(ember.float64).dtype is ember.float64
    assert ember.tensor(3.0).item() == 3.0 and isinstance(ember.tensor(3).item(), int)
    assert isinstance(ember.tensor(True).item(), bool)
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        t.item()
    assert float(ember.tensor([2.5])) == 2.5 and int(ember.tensor(3)) == 3
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    assert [1, 2, 3][ember.tensor(1)] == 2
    with pytest.raises(TypeError):
        [1, 2][ember.tensor(1.0)]
    np.testing.assert_array_equal(t.numpy(), np.array([1.5, -2.0], dtype=np.float32))
    assert t.numpy().base is t._data or t.numpy() is t._data


def test_cuda_request_without_gpu_is_a_clear_error():
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.ones(2).cuda()
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.zeros(2, device="cuda")


def test_len_iter_and_python_protocols():
    t = ember.arange(6).reshape(3, 2)
    assert len(t) == 3 and [r.tolist() for r in t] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ember.tensor(1))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(ember.tensor(1))
    assert f"{ember.tensor(2.5):.2f}" == "2.50"
    assert hash(t) == id(t) and t in {t}
    assert (t == None) is False and (t != "x") is True  # noqa: E711
    assert np.float32(2) * ember.ones(2, dtype=ember.float32) is not None
    assert (np.float32(2) * ember.ones(2)).tolist() == [2.0, 2.0]


def test_deepcopy_and_numpy_interop():
    t = ember.arange(4.0)
    c = copy.deepcopy(t)
    c[0] = 10
    assert t[0].item() == 0 and c[0].item() == 10
    assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_legacy_constructor():
    assert ember.Tensor(2, 3).shape == (2, 3) and ember.Tensor(2, 3).dtype is ember.float32
    assert ember.Tensor([1, 2]).dtype is ember.float32 and ember.Tensor().shape == (0,)
    assert isinstance(ember.ones(1), ember.Tensor) and ember.is_tensor(ember.ones(1)) and not ember.is_tensor(1)


def test_requires_grad_without_autograd_names_the_package():
    from ember import _extensions
    if "set_requires_grad" in _extensions.hooks:
        pytest.skip("ember-autograd is installed")
    with pytest.raises(RuntimeError, match="pip install ember-autograd"):
        ember.ones(2, requires_grad=True)
    with pytest.raises(AttributeError, match="ember-autograd"):
        ember.ones(2).backward()
    with pytest.raises(AttributeError, match="ember-special"):
        ember.special  # noqa: B018


@pytest.mark.parametrize("make", [
    lambda m, np: [np.float64(1.5), 2.0],  # NumPy takes np.float64 for a Python float: PyTorch keeps float64
    lambda m, np: [1.0, np.float64(2)], lambda m, np: [[np.float64(1)], [2.0]], lambda m, np: [1, np.float32(2)],
    lambda m, np: [np.int32(1), 2], lambda m, np: [np.float16(1)], lambda m, np: [np.bool_(True), False],
    lambda m, np: [np.uint8(1), np.int8(2)], lambda m, np: (1.5, np.complex64(1j)), lambda m, np: [True, 2],
    lambda m, np: [1, 2.5], lambda m, np: [1j, 2], lambda m, np: [], lambda m, np: [[]], lambda m, np: 1.5,
    lambda m, np: 1j, lambda m, np: [m.tensor(1.5), m.tensor(2.5)], lambda m, np: [m.tensor(1, dtype=m.int32), 2],
    lambda m, np: [np.array([1, 2], dtype=np.int16), [3, 4]],
])
def test_dtype_inferred_from_nested_data_as_torch(make):
    # policy-gradient returns built from NumPy float64 rewards: torch.tensor(returns) is float64 in PyTorch
    results = []
    for m in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (PyTorch's warning about lists of arrays)
            t = m.tensor(make(m, np))
        results.append((str(t.dtype).split(".")[1], t.tolist()))
    assert results[1] == results[0]
    assert str(ember.as_tensor(make(ember, np)).dtype) == "ember." + results[0][0]


@pytest.mark.parametrize("make", [
    lambda m: m.empty(size=(2, 3)), lambda m: m.zeros(size=[2]), lambda m: m.ones(size=(1, 2)),
    lambda m: m.rand(size=(2,)), lambda m: m.randn(size=(3,)), lambda m: m.zeros(size=()),
    lambda m: m.ones(2).new_zeros(size=(2, 1)), lambda m: m.ones(2).new_ones(size=[3]),
    lambda m: m.ones(2).new_empty(size=(0,)),
])
def test_factories_take_size_as_a_keyword_as_torch(make):
    # pytorch/examples gat: nn.Parameter(torch.empty(size=(in_features, out_features)))
    shapes = []
    for m in (torch, ember):
        m.manual_seed(0)
        t = make(m)
        shapes.append((tuple(t.shape), t.tolist() if "rand" in str(make.__code__.co_names) else None))
    assert shapes[1] == shapes[0]


def test_size_given_twice_is_a_type_error_as_torch():
    for m in (torch, ember):
        with pytest.raises(TypeError, match="multiple values for argument 'size'"):
            m.zeros(2, size=(3,))
    with pytest.raises(TypeError):
        ember.ones(1).new_ones(2, size=(2,))
