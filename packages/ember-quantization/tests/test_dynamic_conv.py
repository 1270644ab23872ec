"""Dynamically quantized convolutions against torch: the same float outputs for the same weights and inputs per
engine (float in and out; the input quantized from its own range, with and without reduce_range), names, reprs,
state_dict keys, PyTorch's warning and input checks."""
import numpy as np
import pytest
import torch
import torch.ao.nn.quantized.dynamic as tnnqd
import torch.ao.quantization as tq
from _torch_compare import numpy, to_ember

import ember
import ember.ao.nn.quantized.dynamic as nnqd

pytestmark = [pytest.mark.filterwarnings("ignore:The current implementation of the Dynamic"),
              pytest.mark.filterwarnings("ignore:Currently, qnnpack incorrectly ignores reduce_range")]

CASES = [("Conv1d", (2, 3, 9), 4, {}), ("Conv2d", (2, 3, 6, 6), 4, {"padding": 1}),
         ("Conv2d", (1, 4, 6, 5), 6, {"padding": 1, "padding_mode": "reflect", "stride": 2, "groups": 2}),
         ("Conv3d", (1, 3, 4, 4, 4), 4, {}),
         ("ConvTranspose1d", (2, 3, 5), 4, {"stride": 2}), ("ConvTranspose2d", (2, 3, 4, 4), 4, {"padding": 1}),
         ("ConvTranspose3d", (1, 3, 3, 3, 3), 4, {})]


def _pair(name, cin, cout, kwargs, seed=0):
    torch.manual_seed(seed)
    f = getattr(torch.nn, name)(cin, cout, 3, **kwargs)
    f.qconfig = tq.default_dynamic_qconfig
    t = getattr(tnnqd, name).from_float(f)
    e = getattr(nnqd, name)(cin, cout, 3, **kwargs)
    e.load_state_dict(to_ember(dict(t.state_dict())))
    return t, e


@pytest.mark.parametrize("engine", ["x86", "fbgemm", "qnnpack"])  # (onednn's numerics here are x86's)
@pytest.mark.parametrize("name, shape, cout, kwargs", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_dynamic_conv(engine, name, shape, cout, kwargs):
    if engine == "qnnpack" and name.endswith("3d"):
        pytest.skip("PyTorch's qnnpack has 1-d and 2-d convolutions only")
    if engine == "x86" and name.startswith("ConvTranspose") and cout != shape[1]:
        # (torch's x86 path scrambles non-square transposed weights: test_quantized_linear_conv.py)
        cout = shape[1]
    torch.backends.quantized.engine = ember.backends.quantized.engine = engine
    t, e = _pair(name, shape[1], cout, kwargs)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 2
    for reduce_range in (True, False):
        got = e(ember.tensor(x), reduce_range=reduce_range)
        expected = t(torch.tensor(x), reduce_range=reduce_range)
        assert got.dtype == ember.float32 and tuple(got.shape) == tuple(expected.shape)
        np.testing.assert_array_equal(numpy(got), numpy(expected))


def test_names_state_and_errors():
    for name in ("Conv1d", "ConvTranspose1d"):
        with pytest.warns(UserWarning, match=f"The current implementation of the DynamicQuantized{name} module has "
                                             "poor numerical accuracy"):
            e = getattr(nnqd, name)(3, 4, 3)
        t = getattr(tnnqd, name)(3, 4, 3)
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict()) == ["weight", "bias", "scale", "zero_point"]
    e = nnqd.Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match=r"Input shape must be `\(N, C, H, W\)`!"):
        e(ember.randn(3, 5, 5))
    with pytest.raises(AssertionError, match="Conv3d does not support reflection padding"):
        nnqd.Conv3d(3, 4, 3, padding_mode="reflect")
    conv = ember.nn.Conv2d(3, 4, 3)
    with pytest.raises(AssertionError, match="Input float module must have qconfig defined"):
        nnqd.Conv2d.from_float(conv)
    conv.qconfig = ember.ao.quantization.default_dynamic_qconfig
    q = nnqd.Conv2d.from_float(conv)
    assert type(q) is nnqd.Conv2d and q.weight().dtype == ember.qint8
