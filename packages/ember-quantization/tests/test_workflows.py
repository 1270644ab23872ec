"""Eager-mode recipes end to end against torch: fuse, prepare, calibrate, convert (per engine), QAT, quantize and
quantize_dynamic on the same float models; outputs' integers, qparams, module types, state_dict keys and values,
and the errors of a missing qconfig or a train-mode fusion."""
import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
from _torch_compare import assert_agrees, copy_float_model, ints, numpy, to_ember

import ember
import ember.ao.quantization as eq


def _model(nn, q):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu1 = nn.ReLU()
            self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
            self.relu2 = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 10)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.relu1(self.bn1(self.conv1(self.quant(x))))
            x = self.relu2(self.conv2(x))
            return self.dequant(self.fc(self.pool(x).flatten(1)))
    return Net()


def _pair():
    torch.manual_seed(0)
    t = _model(torch.nn, tq)
    with torch.no_grad():  # (batch norm statistics that fusion folds in)
        t.bn1.running_mean.uniform_(-0.5, 0.5)
        t.bn1.running_var.uniform_(0.5, 2)
        t.bn1.weight.uniform_(0.5, 1.5)
    return t.eval(), copy_float_model(t, _model(ember.nn, eq)).eval()


FUSE = [["conv1", "bn1", "relu1"], ["conv2", "relu2"]]


@pytest.mark.parametrize("engine", ["x86", "fbgemm", "qnnpack", "onednn"])
def test_post_training_static_quantization(engine):
    torch.backends.quantized.engine = ember.backends.quantized.engine = engine
    t, e = _pair()
    t = tq.fuse_modules(t, FUSE)
    e = eq.fuse_modules(e, FUSE)
    t.qconfig, e.qconfig = tq.get_default_qconfig(engine), eq.get_default_qconfig(engine)
    tq.prepare(t, inplace=True)
    eq.prepare(e, inplace=True)
    calib = torch.randn(16, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    t(calib)
    e(to_ember(calib))
    for (name, tm), (_, em) in zip(t.named_modules(), e.named_modules()):
        assert type(em).__name__ == type(tm).__name__, name
        if hasattr(tm, "activation_post_process") and name:  # (float convolutions differ in their last bits)
            ts, tz = tm.activation_post_process.calculate_qparams()
            es, ez = em.activation_post_process.calculate_qparams()
            np.testing.assert_allclose(numpy(es), numpy(ts), rtol=1e-5, err_msg=name)
            assert abs(int(ez) - int(tz)) <= 1, name
    # the rest with torch's observer statistics, so that both quantize with the same qparams
    eq.load_observer_state_dict(e, to_ember(dict(tq.get_observer_state_dict(t))))
    tq.convert(t, inplace=True)
    eq.convert(e, inplace=True)
    for (name, tm), (_, em) in zip(t.named_modules(), e.named_modules()):
        assert type(em).__name__ == type(tm).__name__, name
        assert em._get_name() == tm._get_name(), name
    tsd, esd = t.state_dict(), e.state_dict()
    assert list(esd) == list(tsd)
    for key, tv in tsd.items():
        ev = esd[key]
        if isinstance(tv, tuple):  # (linear packed params: weight, bias)
            for a, b in zip(ev, tv):
                np.testing.assert_array_equal(ints(a) if b.is_quantized else numpy(a),
                                              ints(b) if b.is_quantized else numpy(b))
        elif isinstance(tv, torch.Tensor):
            np.testing.assert_array_equal(ints(ev) if tv.is_quantized else numpy(ev),
                                          ints(tv) if tv.is_quantized else numpy(tv))
    x = torch.randn(4, 3, 10, 10, generator=torch.Generator().manual_seed(2))
    t_fc_in, e_fc_in = {}, {}
    t.fc.register_forward_hook(lambda m, i, o: t_fc_in.update(out=o))
    e.fc.register_forward_hook(lambda m, i, o: e_fc_in.update(out=o))
    np.testing.assert_allclose(numpy(e(to_ember(x))), numpy(t(x)), atol=2 * t.fc.scale + 1e-6)
    assert_agrees(e_fc_in["out"], t_fc_in["out"])


def test_qat_prepare_forward_and_convert():
    t, e = _pair()
    t.train()
    e.train()
    t = tq.fuse_modules_qat(t, FUSE)
    e = eq.fuse_modules_qat(e, FUSE)
    assert type(e.conv1).__name__ == "ConvBnReLU2d"
    t.qconfig, e.qconfig = tq.get_default_qat_qconfig("x86"), eq.get_default_qat_qconfig("x86")
    tq.prepare_qat(t, inplace=True)
    eq.prepare_qat(e, inplace=True)
    for (name, tm), (_, em) in zip(t.named_modules(), e.named_modules()):
        assert type(em).__name__ == type(tm).__name__, name
    x = torch.randn(8, 3, 10, 10, generator=torch.Generator().manual_seed(3))
    np.testing.assert_allclose(numpy(e(to_ember(x))), numpy(t(x)), rtol=1e-4, atol=1e-4)
    for tm, em in zip(t.modules(), e.modules()):
        if isinstance(tm, tq.FakeQuantizeBase):
            np.testing.assert_allclose(numpy(em.scale), numpy(tm.scale), rtol=1e-5)
            np.testing.assert_allclose(numpy(em.zero_point), numpy(tm.zero_point), atol=1)
    t.eval()
    e.eval()
    tq.convert(t, inplace=True)
    eq.convert(e, inplace=True)
    assert [type(m).__name__ for m in e.modules()] == [type(m).__name__ for m in t.modules()]
    np.testing.assert_allclose(numpy(e(to_ember(x))), numpy(t(x)), atol=2 * t.fc.scale + 1e-6)


def test_quantize_one_call_and_quant_wrapper():
    torch.manual_seed(4)
    t_lin = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    e_lin = copy_float_model(t_lin, ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.ReLU(),
                                                         ember.nn.Linear(5, 3)))
    t, e = tq.QuantWrapper(t_lin), eq.QuantWrapper(e_lin)
    t.qconfig, e.qconfig = tq.default_qconfig, eq.default_qconfig
    data = [(torch.randn(10, 6, generator=torch.Generator().manual_seed(5)), None)]
    tqm = tq.quantize(t, tq.default_eval_fn, [data])
    eqm = eq.quantize(e, eq.default_eval_fn, [[(to_ember(x), y) for x, y in data]])
    assert type(eqm.module[0]).__name__ == "Linear" and eqm.module[0]._get_name() == "QuantizedLinear"
    x = torch.randn(4, 6)
    np.testing.assert_allclose(numpy(eqm(to_ember(x))), numpy(tqm(x)), atol=2 * tqm.module[2].scale + 1e-6)


def test_quantize_dynamic_defaults_and_qconfig_spec():
    torch.manual_seed(6)
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    e = copy_float_model(t, ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2)))
    tq_, eq_ = tq.quantize_dynamic(t), eq.quantize_dynamic(e)
    assert [m._get_name() for m in eq_.modules()] == [m._get_name() for m in tq_.modules()]
    x = torch.randn(5, 4)
    np.testing.assert_allclose(numpy(eq_(to_ember(x))), numpy(tq_(x)), rtol=1e-5, atol=1e-6)
    only_first = eq.quantize_dynamic(e, {"0"})
    assert only_first[0]._get_name() == "DynamicQuantizedLinear" and only_first[2]._get_name() == "Linear"
    fp16 = eq.quantize_dynamic(e, dtype=ember.float16)
    np.testing.assert_allclose(numpy(fp16(to_ember(x))), numpy(tq.quantize_dynamic(t, dtype=torch.float16)(x)),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Don't know how to quantize with default settings"):
        eq.quantize_dynamic(e, dtype=ember.int8)


def test_embedding_weight_only_quantization():
    torch.manual_seed(7)
    t = torch.nn.ModuleDict({"bag": torch.nn.EmbeddingBag(30, 6, mode="sum")})
    e = copy_float_model(t, ember.nn.ModuleDict({"bag": ember.nn.EmbeddingBag(30, 6, mode="sum")}))
    tq_, eq_ = tq.quantize_dynamic(t, dtype=torch.quint8), eq.quantize_dynamic(e, dtype=ember.quint8)
    assert eq_["bag"]._get_name() == tq_["bag"]._get_name() == "QuantizedEmbeddingBag"
    idx, offsets = torch.randint(0, 30, (12,)), torch.tensor([0, 4, 7])
    np.testing.assert_array_equal(numpy(eq_["bag"](to_ember(idx), to_ember(offsets))),
                                  numpy(tq_["bag"](idx, offsets)))


def test_errors():
    _, e = _pair()
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        eq.fuse_modules(e.train(), FUSE)
    with pytest.raises(AssertionError, match="prepare_qat only works on models in training mode"):
        eq.prepare_qat(e.eval())
    with pytest.warns(UserWarning, match="None of the submodule got qconfig applied"):
        eq.prepare(e)
    with pytest.raises(AssertionError, match="did not find fuser method for"):
        eq.fuse_modules(e.eval(), [["conv1", "fc"]])
    with pytest.raises(AssertionError, match="backend: tpu not supported"):
        eq.get_default_qconfig("tpu")
    with pytest.raises(ValueError, match="QConfig received observer instance"):
        eq.QConfig(activation=eq.MinMaxObserver(), weight=eq.default_weight_observer)
    with pytest.raises(AssertionError, match="Input float module must have qconfig defined"):
        ember.ao.nn.quantized.Linear.from_float(ember.nn.Linear(2, 2))
    converted = eq.convert(_pair()[1])  # no qconfig anywhere: nothing is swapped
    assert type(converted.fc).__name__ == "Linear" and converted.fc._get_name() == "Linear"
