"""ember.ao.ns._numeric_suite against torch.ao.ns._numeric_suite: the same small models, quantized by each framework
from the same float weights and calibration data, give results with the same keys, list lengths, tuple structure,
dtypes and shapes, and values equal within one quantization step; bad input raises the same exception types."""
import copy
import inspect

import numpy as np
import pytest
import torch
import torch.ao.ns._numeric_suite as tns
from _models import dynamic_model, quantize_dynamic, quantize_static, static_model

import ember
import ember.ao.ns._numeric_suite as ens

FW = {"torch": torch, "ember": ember}
NS = {"torch": tns, "ember": ens}


def _same_floats(model_from, model_to):
    model_to.load_state_dict({k: ember.tensor(v.numpy()) for k, v in model_from.state_dict().items()})


@pytest.fixture(scope="module")
def static_models():
    """{framework: (fused float model, quantized model), "data": {framework: input}}."""
    torch.manual_seed(0)
    t_model = static_model(torch)
    with torch.no_grad():  # (statistics that make the folded batch norm matter)
        t_model.bn.running_mean.uniform_(-0.5, 0.5)
        t_model.bn.running_var.uniform_(0.5, 2.0)
        t_model.bn.weight.uniform_(0.5, 1.5)
    e_model = static_model(ember)
    _same_floats(t_model, e_model)
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((16, 2, 6, 6)).astype(np.float32)
    data = rng.standard_normal((3, 2, 6, 6)).astype(np.float32)
    return {"torch": quantize_static(torch, t_model, torch.from_numpy(calibration)),
            "ember": quantize_static(ember, e_model, ember.tensor(calibration)),
            "data": {"torch": torch.from_numpy(data), "ember": ember.tensor(data)}}


@pytest.fixture(scope="module")
def dynamic_models():
    torch.manual_seed(1)
    t_model = dynamic_model(torch)
    e_model = dynamic_model(ember)
    _same_floats(t_model, e_model)
    data = np.random.default_rng(1).standard_normal((5, 2, 4)).astype(np.float32)
    return {"torch": (t_model, quantize_dynamic(torch, t_model)), "ember": (e_model, quantize_dynamic(ember, e_model)),
            "data": {"torch": torch.from_numpy(data), "ember": ember.tensor(data)}}


def _copies(models, fw):
    return copy.deepcopy(models[fw][0]), copy.deepcopy(models[fw][1])


def _assert_close(t, e, where=""):
    """Same structure (dicts, lists, tuples), dtypes and shapes; floats within float32 rounding, quantized
    tensors with the same scale and values within one step."""
    if isinstance(t, dict):
        assert isinstance(e, dict) and list(t) == list(e), (where, list(t), list(e))
        for k in t:
            _assert_close(t[k], e[k], f"{where}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert type(e) is type(t) and len(e) == len(t), (where, type(t), type(e), len(t), len(e))
        for i, (a, b) in enumerate(zip(t, e)):
            _assert_close(a, b, f"{where}[{i}]")
    else:
        assert isinstance(t, torch.Tensor) and isinstance(e, ember.Tensor), (where, type(t), type(e))
        assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1], (where, t.dtype, e.dtype)
        assert tuple(e.shape) == tuple(t.shape), (where, t.shape, e.shape)
        if t.is_quantized:
            if t.qscheme() == torch.per_tensor_affine:
                assert e.q_scale() == pytest.approx(t.q_scale(), rel=1e-6), where
                assert e.q_zero_point() == t.q_zero_point(), where
                step = t.q_scale()
            else:
                np.testing.assert_allclose(e.q_per_channel_scales().numpy(), t.q_per_channel_scales().numpy(),
                                           rtol=1e-6, err_msg=where)
                step = t.q_per_channel_scales().max().item()
            np.testing.assert_allclose(e.dequantize().numpy(), t.dequantize().numpy(), rtol=0, atol=step * 1.001,
                                       err_msg=where)
        else:
            np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=where)


def _types(fw):
    """The float module types of the static model a Shadow is put at (fused conv-bn-relu, Linear,
    FloatFunctional)."""
    f = FW[fw]
    return {f.ao.nn.intrinsic.ConvReLU2d, f.nn.Linear, f.ao.nn.quantized.FloatFunctional}


def test_names():
    names = [n for n in dir(tns) if not n.startswith("_") and not inspect.ismodule(getattr(tns, n))]
    assert [n for n in names if not hasattr(ens, n)] == []
    assert sorted(c.__name__ for c in ens.NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST) == sorted(
        c.__name__ for c in tns.NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST)
    assert sorted(c.__name__ for c in ens.get_default_compare_output_module_list()) == sorted(
        c.__name__ for c in tns.get_default_compare_output_module_list())


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_compare_weights(kind, static_models, dynamic_models):
    models = static_models if kind == "static" else dynamic_models
    results = {fw: NS[fw].compare_weights(models[fw][0].state_dict(), models[fw][1].state_dict())
               for fw in ("torch", "ember")}
    expected_keys = {"static": ["conv.weight", "fc1._packed_params._packed_params",
                                "fc2._packed_params._packed_params"],
                     "dynamic": ["lstm._all_weight_values.0.param", "lstm._all_weight_values.1.param",
                                 "fc._packed_params._packed_params"]}[kind]
    assert list(results["torch"]) == expected_keys
    _assert_close(results["torch"], results["ember"])


def test_compare_weights_of_unfused_float_model(static_models):
    """The state_dict of the float model before fusion (with the batch norm's own entries) matches as in torch."""
    torch.manual_seed(0)
    t_float, e_float = static_model(torch), static_model(ember)
    _same_floats(t_float, e_float)
    _assert_close(tns.compare_weights(t_float.state_dict(), static_models["torch"][1].state_dict()),
                  ens.compare_weights(e_float.state_dict(), static_models["ember"][1].state_dict()))


def test_find_match_ignores_dots():
    """PyTorch joins the name parts without dots: "fc1.0.weight" finds "fc10.weight"'s module."""
    for ns in (tns, ens):
        float_dict = {"fc10.weight": 1, "fc1.weight": 2}
        assert ns.compare_weights(float_dict, {"fc1.0.weight": 3}) == {"fc1.0.weight": {"float": 1, "quantized": 3}}
        # a model's own "weight" has the empty stem, as any one-part name less two parts
        assert ns.compare_weights({"a.weight": 1}, {"b.weight": 2, "weight": 3}) == {
            "weight": {"float": 1, "quantized": 3}}


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_compare_model_outputs(kind, static_models, dynamic_models):
    models = static_models if kind == "static" else dynamic_models
    results = {}
    for fw in ("torch", "ember"):
        float_model, q_model = _copies(models, fw)
        results[fw] = NS[fw].compare_model_outputs(float_model, q_model, models["data"][fw])
    assert list(results["torch"]) == {"static": ["quant.stats", "conv.stats", "fc1.stats", "fc2.stats", "ff.stats"],
                                      "dynamic": ["lstm.stats", "fc.stats"]}[kind]
    if kind == "static":  # (the fused conv's logger runs twice per call in the float model; cat and add logged)
        assert [len(v["float"]) for v in results["torch"].values()] == [1, 2, 1, 1, 2]
    else:  # (a dynamic LSTM's whole output, (output, (h, c)), float in both models)
        assert isinstance(results["torch"]["lstm.stats"]["quantized"][0], tuple)
    _assert_close(results["torch"], results["ember"])


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_prepare_model_outputs_and_get_logger_dict(kind, static_models, dynamic_models):
    models = static_models if kind == "static" else dynamic_models
    found = {}
    for fw in ("torch", "ember"):
        float_model, q_model = _copies(models, fw)
        NS[fw].prepare_model_outputs(float_model, q_model)
        loggers = [[name for name, m in model.named_modules() if isinstance(m, NS[fw].OutputLogger)]
                   for model in (float_model, q_model)]
        float_model(models["data"][fw])
        q_model(models["data"][fw])
        found[fw] = (loggers, NS[fw].get_logger_dict(float_model), NS[fw].get_logger_dict(q_model, prefix="top"),
                     NS[fw].get_matching_activations(float_model, q_model))
    assert found["ember"][0] == found["torch"][0]
    assert all(k.startswith("top.") and k.endswith(".stats") for k in found["torch"][2])
    for t, e in zip(found["torch"][1:], found["ember"][1:]):
        _assert_close(t, e)


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_compare_model_stub(kind, static_models, dynamic_models):
    models = static_models if kind == "static" else dynamic_models
    results, shadows = {}, {}
    for fw in ("torch", "ember"):
        float_model, q_model = _copies(models, fw)
        swap = _types(fw) if kind == "static" else {FW[fw].nn.LSTM, FW[fw].nn.Linear}
        results[fw] = NS[fw].compare_model_stub(float_model, q_model, swap, models["data"][fw])
        shadows[fw] = [name for name, m in q_model.named_modules() if isinstance(m, NS[fw].Shadow)]
    assert shadows["ember"] == shadows["torch"]
    if kind == "static":
        assert list(results["torch"]) == ["conv.stats", "fc1.stats", "fc2.stats", "ff.stats"]
        # add, add_scalar and cat of the shadowed FloatFunctional; each output's first row only (ShadowLogger)
        assert [tuple(t.shape) for t in results["torch"]["ff.stats"]["float"]] == [(5,), (5,), (10,)]
    else:
        assert list(results["torch"]) == ["lstm.stats", "fc.stats"]
        assert tuple(results["torch"]["lstm.stats"]["quantized"][0].shape) == (5, 2, 6)  # (the output of the tuple)
    _assert_close(results["torch"], results["ember"])


def test_prepare_model_with_stubs_skips_modules_left_float(static_models):
    """A module kept in float (same module types in both models) gets no Shadow; a custom Logger records nothing
    and get_logger_dict still lists it."""
    found = {}
    for fw in ("torch", "ember"):
        float_model, q_model = _copies(static_models, fw)
        q_model.fc2 = copy.deepcopy(float_model.fc2)
        q_model.fc2_stays = q_model.fc2  # (not in the float model: skipped)
        NS[fw].prepare_model_with_stubs(float_model, q_model, _types(fw), NS[fw].Logger)
        found[fw] = ([type(m).__name__ for m in q_model.children()],
                     {k: v for k, v in NS[fw].get_logger_dict(q_model).items()})
    assert found["ember"] == found["torch"]
    assert found["torch"][0][5] == "Linear" and found["torch"][1] == {"conv.stats": {}, "fc1.stats": {},
                                                                     "ff.stats": {}}


def _raises_same(run):
    """run(fw) raises in both frameworks, the same exception type; returns the two exceptions."""
    errors = {}
    for fw in ("torch", "ember"):
        with pytest.raises(Exception) as info:
            run(fw)
        errors[fw] = info.value
    assert type(errors["ember"]) is type(errors["torch"]), (errors["torch"], errors["ember"])
    return errors


def test_errors(static_models):
    def outputs_with(logger_cls):
        def run(fw):
            float_model, q_model = _copies(static_models, fw)
            NS[fw].compare_model_outputs(float_model, q_model, static_models["data"][fw], logger_cls=logger_cls(fw))
        return run

    # a logger taking two outputs where one is given
    _raises_same(outputs_with(lambda fw: NS[fw].ShadowLogger))
    # a logger instance where the qconfig needs its class
    errors = _raises_same(outputs_with(lambda fw: NS[fw].OutputLogger()))
    assert "observer instance" in str(errors["ember"])
    # a quantized model whose loggers keep no "tensor_val"
    _raises_same(outputs_with(lambda fw: NS[fw].Logger))
    # ShadowLogger's len() of a 0-d output
    errors = _raises_same(lambda fw: NS[fw].ShadowLogger()(FW[fw].tensor(1.0), FW[fw].tensor(1.0)))
    assert str(errors["ember"]) == str(errors["torch"])

    def shadow_call(fw, method):
        nnq = FW[fw].ao.nn.quantized
        shadow = NS[fw].Shadow(nnq.QFunctional(), nnq.FloatFunctional(), NS[fw].ShadowLogger)
        x = FW[fw].quantize_per_tensor(FW[fw].ones(2), 0.1, 0, FW[fw].quint8)
        return getattr(shadow, method)(x) if method == "forward" else getattr(shadow, method)(x, x)

    # a Shadow has no matmul; a functional module has no forward
    _raises_same(lambda fw: shadow_call(fw, "matmul"))
    errors = _raises_same(lambda fw: shadow_call(fw, "forward"))
    assert str(errors["ember"]) == str(errors["torch"])
    # Shadow.forward of an argument that is not a tensor
    _raises_same(lambda fw: NS[fw].Shadow(FW[fw].nn.Identity(), FW[fw].nn.Identity(), NS[fw].ShadowLogger)(3))
