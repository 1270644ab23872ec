"""Observers against torch.ao.quantization's: running statistics, histograms and calculate_qparams (values and
dtypes), state_dicts, factories and errors."""
import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
from _torch_compare import copy_float_model, numpy, to_ember

import ember
import ember.ao.quantization as eq

QSCHEMES = {torch.per_tensor_affine: ember.per_tensor_affine, torch.per_tensor_symmetric: ember.per_tensor_symmetric,
            torch.per_channel_affine: ember.per_channel_affine,
            torch.per_channel_symmetric: ember.per_channel_symmetric,
            torch.per_channel_affine_float_qparams: ember.per_channel_affine_float_qparams}
DTYPES = {torch.quint8: ember.quint8, torch.qint8: ember.qint8, torch.qint32: ember.qint32}


def _kwargs(kwargs):
    """torch observer arguments as ember's."""
    return {k: QSCHEMES.get(v, DTYPES.get(v, v)) if not isinstance(v, (int, float)) else v
            for k, v in kwargs.items()}


def _inputs(n, shape=(4, 6, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) * (1 + i) + 0.3 * i for i in range(n)]


def _same_qparams(e, t):
    (es, ez), (ts, tz) = e, t
    assert es.dtype == getattr(ember, str(ts.dtype).split(".")[-1]) and tuple(es.shape) == tuple(ts.shape)
    assert ez.dtype == getattr(ember, str(tz.dtype).split(".")[-1]), (ez.dtype, tz.dtype)
    np.testing.assert_array_equal(numpy(es), numpy(ts))
    np.testing.assert_array_equal(numpy(ez), numpy(tz))


def _run(t_obs, e_obs, inputs):
    for x in inputs:
        t_obs(x)
        e_obs(to_ember(x))
    return t_obs, e_obs


PER_TENSOR = [
    {}, {"dtype": torch.qint8, "qscheme": torch.per_tensor_symmetric}, {"reduce_range": True},
    {"dtype": torch.qint8, "qscheme": torch.per_tensor_symmetric, "quant_min": -127, "quant_max": 127},
    {"quant_min": 0, "quant_max": 127}, {"dtype": torch.qint8}, {"qscheme": torch.per_tensor_symmetric},
    {"dtype": torch.qint32},
]


@pytest.mark.parametrize("kwargs", PER_TENSOR)
@pytest.mark.parametrize("cls", ["MinMaxObserver", "MovingAverageMinMaxObserver"])
def test_per_tensor_observers(cls, kwargs):
    t, e = _run(getattr(tq, cls)(**kwargs), getattr(eq, cls)(**_kwargs(kwargs)), _inputs(3))
    np.testing.assert_array_equal(numpy(e.min_val), numpy(t.min_val))
    np.testing.assert_array_equal(numpy(e.max_val), numpy(t.max_val))
    assert (e.quant_min, e.quant_max) == (t.quant_min, t.quant_max)
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())


PER_CHANNEL = [
    {}, {"ch_axis": 1}, {"dtype": torch.qint8, "qscheme": torch.per_channel_symmetric},
    {"qscheme": torch.per_channel_affine_float_qparams}, {"ch_axis": 2, "reduce_range": True},
    {"dtype": torch.qint8, "qscheme": torch.per_channel_symmetric, "quant_min": -127, "quant_max": 127,
     "eps": 2 ** -12},
]


@pytest.mark.parametrize("kwargs", PER_CHANNEL)
@pytest.mark.parametrize("cls", ["PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver"])
def test_per_channel_observers(cls, kwargs):
    t, e = _run(getattr(tq, cls)(**kwargs), getattr(eq, cls)(**_kwargs(kwargs)), _inputs(3))
    np.testing.assert_array_equal(numpy(e.min_val), numpy(t.min_val))
    np.testing.assert_array_equal(numpy(e.max_val), numpy(t.max_val))
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())


def test_symmetric_zero_input_gives_eps_scale():
    t, e = _run(tq.MinMaxObserver(qscheme=torch.per_tensor_symmetric), eq.MinMaxObserver(
        qscheme=ember.per_tensor_symmetric), [torch.zeros(5)])
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())
    assert e.calculate_qparams()[0].item() == np.finfo(np.float32).eps


@pytest.mark.parametrize("kwargs", [{}, {"reduce_range": True}, {"dtype": torch.qint8,
                                                                 "qscheme": torch.per_tensor_symmetric},
                                    {"quant_min": 0, "quant_max": 127}, {"bins": 512}])
def test_histogram_observer(kwargs):
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2000, generator=g), torch.randn(3000, generator=g) * 3 + 1,  # range grows both ways
              torch.rand(1000, generator=g) - 0.5,  # inside the range: histograms added
              torch.randn(500, generator=g) * 10]
    t, e = _run(tq.HistogramObserver(**kwargs), eq.HistogramObserver(**_kwargs(kwargs)), inputs)
    np.testing.assert_array_equal(numpy(e.min_val), numpy(t.min_val))
    np.testing.assert_array_equal(numpy(e.max_val), numpy(t.max_val))
    np.testing.assert_allclose(numpy(e.histogram), numpy(t.histogram), rtol=1e-5, atol=1e-3)
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())


def test_histogram_observer_constant_then_wider_and_inf():
    inputs = [torch.full((10,), 0.5), torch.tensor([0.0, 2.0, float("inf")])]
    with pytest.warns(UserWarning, match="inf detected"):
        t, e = _run(tq.HistogramObserver(), eq.HistogramObserver(), inputs)
    np.testing.assert_allclose(numpy(e.histogram), numpy(t.histogram))
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())


@pytest.mark.parametrize("cls", ["MinMaxObserver", "PerChannelMinMaxObserver", "HistogramObserver"])
def test_unobserved_gives_default_qparams(cls):
    with pytest.warns(UserWarning, match="must run observer"):
        _same_qparams(getattr(eq, cls)().calculate_qparams(), getattr(tq, cls)().calculate_qparams())


def test_errors():
    with pytest.raises(NotImplementedError, match="MinMaxObserver's qscheme only support"):
        eq.MinMaxObserver(qscheme=ember.per_channel_affine)
    with pytest.raises(NotImplementedError, match="PerChannelMinMaxObserver's qscheme"):
        eq.PerChannelMinMaxObserver(qscheme=ember.per_tensor_affine)
    with pytest.raises(NotImplementedError, match="Cannot reduce range for symmetric"):
        eq.MinMaxObserver(qscheme=ember.per_tensor_symmetric, reduce_range=True)
    with pytest.raises(AssertionError, match="Default Observer only works for"):
        eq.MinMaxObserver(dtype=ember.float32)
    with pytest.raises(AssertionError, match="must include 0"):
        eq.MinMaxObserver(quant_min=1, quant_max=10)
    with pytest.raises(NotImplementedError, match="doesn't support dynamic quantization"):
        eq.HistogramObserver(is_dynamic=True)
    obs = eq.MinMaxObserver()
    obs.min_val.fill_(2.0)
    obs.max_val.fill_(1.0)
    with pytest.raises(AssertionError, match="should be less than max"):
        obs.calculate_qparams()
    with pytest.raises(Exception, match="should not be called for PlaceholderObserver"):
        eq.PlaceholderObserver().calculate_qparams()


@pytest.mark.parametrize("cls", ["MinMaxObserver", "PerChannelMinMaxObserver", "HistogramObserver",
                                 "MovingAveragePerChannelMinMaxObserver"])
def test_state_dict_keys_and_loading_torch_state(cls):
    t, _ = _run(getattr(tq, cls)(), getattr(eq, cls)(), _inputs(2))
    e = getattr(eq, cls)()
    sd = t.state_dict()
    assert list(e.state_dict()) == list(getattr(tq, cls)().state_dict())
    e.load_state_dict(to_ember(dict(sd)))
    _same_qparams(e.calculate_qparams(), t.calculate_qparams())
    assert e.state_dict()._metadata[""]["version"] == sd._metadata[""]["version"] == 3


def test_with_args_and_callable_args():
    factory = eq.MinMaxObserver.with_args(dtype=ember.qint8).with_args(qscheme=ember.per_tensor_symmetric)
    a, b = factory(), factory()
    assert a is not b and a.dtype == ember.qint8 and a.qscheme == ember.per_tensor_symmetric
    calls = []
    factory = eq.MinMaxObserver.with_callable_args(eps=lambda: calls.append(1) or 0.5)
    assert factory().eps.item() == 0.5 and factory(eps=0.25).eps.item() == 0.25 and len(calls) == 1


@pytest.mark.parametrize("name", [n for n in dir(tq.observer) if n.startswith(("default_", "weight_observer",
                                                                              "per_channel_weight"))])
def test_default_observers_match(name):
    t, e = getattr(tq.observer, name)(), getattr(eq.observer, name)()
    assert type(e).__name__ == type(t).__name__
    for attr in ("quant_min", "quant_max", "reduce_range", "is_dynamic", "ch_axis", "has_customized_qrange"):
        assert getattr(e, attr, None) == getattr(t, attr, None), attr
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    if hasattr(t, "qscheme"):
        assert repr(e.qscheme).split(".")[-1] == repr(t.qscheme).split(".")[-1]


def test_observer_state_dict_helpers():
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 3))
    e_model = copy_float_model(t_model, ember.nn.Sequential(ember.nn.Linear(3, 3)))
    for m, mod in ((t_model, tq), (e_model, eq)):
        m.qconfig = mod.default_qconfig
        mod.prepare(m, inplace=True)
    x = torch.randn(4, 3)
    t_model(x)
    e_model(to_ember(x))
    sd = eq.get_observer_state_dict(e_model)
    assert list(sd) == list(tq.get_observer_state_dict(t_model))
    fresh = ember.nn.Sequential(ember.nn.Linear(3, 3))
    fresh.qconfig = eq.default_qconfig
    eq.prepare(fresh, inplace=True)
    eq.load_observer_state_dict(fresh, sd)
    # the loaded observer is the trained one (the Linear's outputs may differ from torch's in the last bit)
    es, ez = fresh[0].activation_post_process.calculate_qparams()
    ts, tz = e_model[0].activation_post_process.calculate_qparams()
    np.testing.assert_array_equal(numpy(es), numpy(ts))
    np.testing.assert_array_equal(numpy(ez), numpy(tz))
