"""Bad input against torch: the same exception types and messages for a quantized tensor fed to float layers and
ops without a quantized kernel, a float tensor fed to quantized modules, a qconfig missing where convert needs one,
and wrong dtypes or axes for per-channel quantization; where PyTorch computes silently wrong values (a per-channel
weight quantized along the wrong axis), ember raises. Quantized CUDA tensors are refused."""
import numpy as np
import pytest
import torch

import ember


def errors(f):
    """(torch's exception, ember's) of ``f(torch)`` and ``f(ember)``; both must raise."""
    with pytest.raises(Exception) as t:
        f(torch)
    with pytest.raises(Exception) as e:
        f(ember)
    return t.value, e.value


def first_line(exc):
    """The message without PyTorch's appendices (the plea for better messages, the dispatcher's backend lists)."""
    text = str(exc).split("  (Could this error message be improved?")[0].split(" If you are a Facebook employee")[0]
    return text.splitlines()[0]


def assert_same_error(f):
    t, e = errors(f)
    assert type(e) is type(t), (t, e)
    assert first_line(e) == first_line(t).replace("torch.", "ember."), (first_line(t), first_line(e))


def assert_no_quantized_kernel(f):
    """A float op on a quantized tensor: NotImplementedError naming the QuantizedCPU backend (the aten names of the
    op differ: PyTorch names the kernel it reached, ember the op called)."""
    t, e = errors(f)
    assert type(e) is type(t) is NotImplementedError, (t, e)
    for exc in (t, e):
        assert str(exc).startswith("Could not run 'aten::") and "'QuantizedCPU' backend" in str(exc), exc


X = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)


def q(m, shape=(2, 3), dtype="quint8"):
    arr = X.reshape(-1)[:int(np.prod(shape))].reshape(shape)
    return m.quantize_per_tensor(m.tensor(arr), 0.1, 2 if dtype == "quint8" else 0, getattr(m, dtype))


def seeded(m):
    m.manual_seed(0)
    return m


# ---- a quantized tensor in float layers (a DeQuantStub missing) ----------------------------------------------
@pytest.mark.parametrize("f", [
    lambda m: seeded(m).nn.Linear(3, 2)(q(m)),
    lambda m: seeded(m).nn.Linear(3, 2)(q(m, dtype="qint8")),
    lambda m: m.nn.functional.linear(q(m), m.ones(2, 3), m.ones(2)),  # (the input's dtype against the weight's)
    lambda m: m.nn.functional.linear(m.ones(2, 3), q(m, (2, 3)), m.ones(2)),  # (the bias's against the weight's)
    lambda m: m.addmm(m.ones(2), q(m, (2, 3)), m.ones(3, 2)),
    lambda m: m.addmm(q(m, (2, 2)), m.ones(2, 3), m.ones(3, 2)),
    lambda m: seeded(m).nn.Conv1d(3, 2, 1)(q(m, (1, 3, 4))),
    lambda m: seeded(m).nn.Conv2d(3, 2, 3)(q(m, (1, 3, 4, 4))),
    lambda m: seeded(m).nn.Conv3d(3, 2, 1)(q(m, (1, 3, 2, 2, 2), "qint8")),
], ids=["Linear", "Linear-qint8", "linear", "linear-qweight", "addmm", "addmm-qself", "Conv1d", "Conv2d", "Conv3d"])
def test_float_layer_with_bias_on_quantized_input(f):
    assert_same_error(f)


@pytest.mark.parametrize("f", [
    lambda m: seeded(m).nn.Linear(3, 2, bias=False)(q(m)),
    lambda m: m.nn.functional.conv2d(q(m, (1, 3, 4, 4)), m.ones(2, 3, 1, 1)),
    lambda m: m.nn.BatchNorm2d(3).eval()(q(m, (1, 3, 4, 4))),
    lambda m: m.nn.functional.layer_norm(q(m), (3,)),
    lambda m: m.nn.functional.silu(q(m)),
    lambda m: m.nn.functional.dropout(q(m), 0.5, True),
    lambda m: m.softmax(q(m), 0),
    lambda m: q(m) + q(m),
    lambda m: q(m) - q(m),
    lambda m: q(m).sum(),
    lambda m: q(m).exp(),
    lambda m: q(m) @ q(m).t(),
    lambda m: m.bmm(q(m, (1, 2, 3)), q(m, (1, 3, 2))),
], ids=["Linear-nobias", "conv2d-nobias", "BatchNorm2d", "layer_norm", "silu", "dropout", "softmax", "add", "sub",
        "sum", "exp", "matmul", "bmm"])
def test_float_op_without_quantized_kernel(f):
    assert_no_quantized_kernel(f)


@pytest.mark.parametrize("f", [lambda m: q(m) * 2, lambda m: q(m) / 2, lambda m: q(m) + True, lambda m: q(m) + 1.5,
                               lambda m: 1.5 * q(m), lambda m: q(m).pow(0.5), lambda m: q(m) * m.ones(3),
                               lambda m: m.ones(3) * q(m)],
                         ids=["mul-int", "div-int", "add-bool", "add-float", "rmul-float", "pow-float", "mul-tensor",
                              "rmul-tensor"])
def test_arithmetic_with_a_number_or_float_tensor(f):
    """An integer number: PyTorch fails allocating the quantized result; a float number or tensor: in type
    promotion (ember's message for the first adds what to do)."""
    t, e = errors(f)
    assert type(e) is type(t) is RuntimeError
    if str(t).startswith("empty_strided"):
        assert str(e).startswith("empty_strided not supported on quantized tensors yet")
    else:
        assert str(e) == str(t)


def test_rows_of_a_quantized_weight():
    """embedding and index_select run on per-tensor quantized tensors and refuse per-channel ones, as PyTorch."""
    for m in (torch, ember):
        rows = m.nn.functional.embedding(m.tensor([[1, 0]]), q(m, (2, 3)))
        assert rows.is_quantized and tuple(rows.shape) == (1, 2, 3)
    ref = torch.nn.functional.embedding(torch.tensor([[1, 0]]), q(torch, (2, 3)))
    got = ember.nn.functional.embedding(ember.tensor([[1, 0]]), q(ember, (2, 3)))
    np.testing.assert_array_equal(got.int_repr().numpy(), ref.int_repr().numpy())

    def per_channel(m):
        return m.quantize_per_channel(m.ones(4, 3), m.tensor([0.1, 0.2, 0.3]), m.tensor([0, 1, 2]), 1, m.quint8)
    assert_same_error(lambda m: m.nn.functional.embedding(m.tensor([1]), per_channel(m)))
    assert_same_error(lambda m: per_channel(m).index_select(0, m.tensor([1])))


# ---- a float tensor in quantized modules (a QuantStub missing) -----------------------------------------------
@pytest.mark.parametrize("make,shape", [
    (lambda m: m.ao.nn.quantized.Linear(3, 2), (2, 3)),
    (lambda m: m.ao.nn.intrinsic.quantized.LinearReLU(3, 2), (2, 3)),
    (lambda m: m.ao.nn.quantized.Conv1d(3, 2, 1), (1, 3, 4)),
    (lambda m: m.ao.nn.quantized.Conv2d(3, 2, 1), (1, 3, 4, 4)),
    (lambda m: m.ao.nn.intrinsic.quantized.ConvReLU2d(3, 2, 1), (1, 3, 4, 4)),
    (lambda m: m.ao.nn.quantized.Conv3d(3, 2, 1), (1, 3, 2, 2, 2)),
    (lambda m: m.ao.nn.quantized.ConvTranspose1d(3, 2, 1), (1, 3, 4)),
    (lambda m: m.ao.nn.quantized.ConvTranspose2d(3, 2, 1), (1, 3, 4, 4)),
], ids=["Linear", "LinearReLU", "Conv1d", "Conv2d", "ConvReLU2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"])
def test_quantized_module_on_float_input(make, shape):
    assert_same_error(lambda m: make(m)(m.ones(*shape)))


def test_quantized_linear_on_qint8_input():
    assert_same_error(lambda m: m.ao.nn.quantized.Linear(3, 2)(q(m, dtype="qint8")))


# ---- qconfigs missing where convert needs them ----------------------------------------------------------------
def _model(m):
    tq = m.ao.quantization
    return m.nn.Sequential(tq.QuantStub(), m.nn.Linear(3, 2), tq.DeQuantStub()).eval()


def _converted_run(m, set_qconfig):
    seeded(m)
    model = _model(m)
    set_qconfig(m, model)
    m.ao.quantization.prepare(model, inplace=True)
    model(m.ones(2, 3))
    m.ao.quantization.convert(model, inplace=True)
    return model(m.ones(2, 3))


@pytest.mark.parametrize("set_qconfig", [
    lambda m, model: (setattr(model, "qconfig", m.ao.quantization.default_qconfig),
                      setattr(model[1], "qconfig", None)),  # the layer left float: a quantized tensor reaches it
    lambda m, model: setattr(model[0], "qconfig", m.ao.quantization.default_qconfig),
    lambda m, model: setattr(model, "qconfig", m.ao.quantization.default_dynamic_qconfig),  # no activation observer
], ids=["layer-without-qconfig", "stub-only", "dynamic-qconfig-in-static-convert"])
def test_convert_with_qconfig_missing(set_qconfig):
    assert_same_error(lambda m: _converted_run(m, set_qconfig))


@pytest.mark.filterwarnings("ignore:None of the submodule got qconfig applied")
def test_no_qconfig_leaves_the_model_float():
    for m in (torch, ember):
        model = _model(m)
        m.ao.quantization.prepare(model, inplace=True)
        m.ao.quantization.convert(model, inplace=True)
        assert [type(x).__name__ for x in model] == ["QuantStub", "Linear", "DeQuantStub"]
        assert type(model[1]) is m.nn.Linear


@pytest.mark.parametrize("f", [
    lambda m: m.ao.nn.quantized.Linear.from_float(seeded(m).nn.Linear(3, 2)),
    lambda m: m.ao.nn.quantized.dynamic.Linear.from_float(seeded(m).nn.Linear(3, 2)),
    lambda m: m.ao.nn.quantized.Conv2d.from_float(seeded(m).nn.Conv2d(3, 2, 1)),
    lambda m: m.ao.nn.quantized.dynamic.LSTM.from_float(seeded(m).nn.LSTM(3, 2)),
    lambda m: m.ao.nn.quantized.Linear.from_float(  # a qconfig but never prepared: no observer
        (lambda lin: (setattr(lin, "qconfig", m.ao.quantization.default_qconfig), lin)[1])(m.nn.Linear(3, 2))),
    lambda m: m.ao.quantization.quantize_dynamic(m.nn.Sequential(m.nn.Linear(3, 2)), dtype=m.qint32),
], ids=["Linear", "dynamic.Linear", "Conv2d", "dynamic.LSTM", "unprepared", "quantize_dynamic-qint32"])
def test_from_float_without_qconfig(f):
    assert_same_error(f)


# ---- per-channel quantization: dtypes and axes ------------------------------------------------------------------
def _per_channel(m, shape=(2, 3), axis=0, scales=None, zero_points=None, dtype="qint8", input_dtype="float32"):
    n = shape[axis] if 0 <= axis < len(shape) else 2
    scales = m.tensor(np.linspace(0.1, 0.2, n)) if scales is None else scales(m)
    zero_points = m.zeros(n, dtype=m.int64) if zero_points is None else zero_points(m)
    x = m.tensor(X.reshape(-1)[:int(np.prod(shape))].reshape(shape).astype(input_dtype))
    return m.quantize_per_channel(x, scales, zero_points, axis, getattr(m, dtype))


@pytest.mark.parametrize("kwargs", [
    dict(axis=2), dict(axis=-1), dict(shape=(), axis=0),
    dict(input_dtype="float64"), dict(input_dtype="float16"), dict(input_dtype="int64"),
    dict(input_dtype="float64", zero_points=lambda m: m.tensor([0.5, 0.0])),
    dict(input_dtype="float64", dtype="float32"), dict(dtype="float32"), dict(dtype="quint4x2"),
    dict(scales=lambda m: m.tensor([1, 2])), dict(scales=lambda m: m.tensor([[0.1, 0.2]])),
    dict(scales=lambda m: m.tensor([0.1, 0.2, 0.3])),
    dict(zero_points=lambda m: m.tensor([0, 200])),
], ids=lambda kw: ",".join(f"{k}={v if not callable(v) else 'f'}" for k, v in kw.items()))
def test_quantize_per_channel_errors(kwargs):
    assert_same_error(lambda m: _per_channel(m, **kwargs))


@pytest.mark.parametrize("f", [
    lambda m: m.fake_quantize_per_channel_affine(m.ones(2, 3), m.tensor([.1, .2]), m.zeros(2, dtype=m.int32), 2, 0,
                                                 255),
    lambda m: m.fake_quantize_per_channel_affine(m.ones(2, 3), m.tensor([.1, .2]), m.zeros(2, dtype=m.int64), 0, 0,
                                                 255),
    lambda m: m.fake_quantize_per_channel_affine(m.ones(2, 3), m.tensor([.1, .2], dtype=m.float64),
                                                 m.zeros(2, dtype=m.int32), 0, 0, 255),
    lambda m: m.fake_quantize_per_channel_affine(m.ones(2, 3), m.tensor([.1, .2, .3]), m.zeros(3, dtype=m.int32), 0,
                                                 0, 255),
    lambda m: m.fake_quantize_per_channel_affine(m.ones(2, 3), m.tensor([.1, .2]), m.tensor([0, 300], dtype=m.int32),
                                                 0, 0, 255),
    lambda m: m.ao.quantization.PerChannelMinMaxObserver(ch_axis=2)(m.ones(2, 3)),
], ids=["fq-axis", "fq-zero-point-int64", "fq-scale-float64", "fq-length", "fq-zero-point-range", "observer-axis"])
def test_per_channel_fake_quantize_and_observer_errors(f):
    assert_same_error(f)


@pytest.mark.parametrize("f", [
    lambda m: m.ao.nn.quantized.Linear(3, 2).set_weight_bias(_per_channel(m, dtype="quint8"), None),
    lambda m: m.ao.nn.quantized.Linear(3, 2).set_weight_bias(m.ones(2, 3), None),
    lambda m: m.ao.nn.quantized.Conv2d(3, 2, 1).set_weight_bias(m.ones(2, 3, 1, 1), None),
    lambda m: m.ao.nn.quantized.ConvTranspose2d(3, 2, 1).set_weight_bias(m.ones(3, 2, 1, 1), None),
    lambda m: m.ao.nn.quantized.Embedding(2, 3).set_weight(q(m, (2, 3))),
    lambda m: m.ao.nn.quantized.Embedding(2, 3).set_weight(
        _per_channel(m, zero_points=lambda m: m.zeros(2), dtype="qint8")),
    lambda m: m.ao.nn.quantized.EmbeddingBag(2, 3).set_weight(m.ones(2, 3)),
], ids=["Linear-quint8", "Linear-float", "Conv2d-float", "ConvTranspose2d-float", "Embedding-per-tensor",
        "Embedding-qint8", "EmbeddingBag-float"])
def test_quantized_weight_dtype_and_scheme(f):
    assert_same_error(f)


def test_weight_per_channel_along_the_wrong_axis_is_refused():
    """PyTorch takes the scales of a per-channel weight for the output channels whatever its axis (wrong values:
    all zeros here); ember refuses the weight."""
    def linear(m):
        weight = _per_channel(m, (3, 3), axis=1, scales=lambda m: m.tensor([0.01, 0.1, 1.0]))
        layer = m.ao.nn.quantized.Linear(3, 3)
        layer.set_weight_bias(weight, None)
        layer.scale = 0.05
        x = m.quantize_per_tensor(m.tensor(X.reshape(-1)[:6].reshape(2, 3)), 0.05, 128, m.quint8)
        return layer(x).dequantize(), (x.dequantize() @ weight.dequantize().t())
    got, expected = linear(torch)
    assert not np.allclose(got.numpy(), expected.numpy(), atol=0.1)
    for make in (lambda: linear(ember),
                 lambda: ember.ao.nn.quantized.Conv2d(3, 2, 1).set_weight_bias(_per_channel(ember, (2, 3, 1, 1), 1),
                                                                             None),
                 lambda: ember.ao.nn.quantized.Embedding(4, 3).set_weight(
                     _per_channel(ember, (4, 3), 1, zero_points=lambda m: m.zeros(3), dtype="quint8"))):
        with pytest.raises(RuntimeError, match="axis 1"):
            make()


# ---- quantized CUDA tensors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("f", [lambda t: t.cuda(), lambda t: t.to("cuda"), lambda t: t.to(device="cuda:0"),
                               lambda t: t.cpu().to("cuda", non_blocking=True)])
def test_quantized_cuda_tensors_are_refused(f):
    """ember has no quantized CUDA tensors (PyTorch runs its quantized kernels on the CPU); refused before any CUDA
    device is looked for, so the same on machines with and without one."""
    with pytest.raises(RuntimeError, match="ember has no quantized CUDA tensors"):
        f(q(ember))
