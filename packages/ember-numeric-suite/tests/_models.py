"""The models of the tests, written once for either framework (``fw`` is ``torch`` or ``ember``): a static model
(QuantStub, conv-bn-relu, two Linears joined by FloatFunctional add, add_scalar and cat, DeQuantStub) and a dynamic
one (a two-layer LSTM and a Linear), with the recipes that quantize them."""
import copy


def static_model(fw):
    nn, tq, nnq = fw.nn, fw.ao.quantization, fw.ao.nn.quantized

    class Static(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = tq.QuantStub()
            self.conv = nn.Conv2d(2, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.fc1 = nn.Linear(64, 5)
            self.fc2 = nn.Linear(64, 5)
            self.ff = nnq.FloatFunctional()
            self.dequant = tq.DeQuantStub()

        def forward(self, x):
            x = self.relu(self.bn(self.conv(self.quant(x)))).flatten(1)
            y = self.ff.add(self.fc1(x), self.fc2(x))
            y = self.ff.cat([y, self.ff.add_scalar(y, 0.25)], 1)
            return self.dequant(y)

    return Static().eval()


def dynamic_model(fw):
    nn = fw.nn

    class Dynamic(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 6, num_layers=2)
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.fc(y)

    return Dynamic().eval()


def quantize_static(fw, model, calibration):
    """(the fused float model, the model quantized from it): fuse conv-bn-relu, x86 qconfig, calibrate, convert."""
    tq = fw.ao.quantization
    fused = tq.fuse_modules(model, [["conv", "bn", "relu"]])
    prepared = copy.deepcopy(fused)
    prepared.qconfig = tq.get_default_qconfig("x86")
    tq.prepare(prepared, inplace=True)
    with fw.no_grad():
        prepared(calibration)
    return fused, tq.convert(prepared)


def quantize_dynamic(fw, model):
    return fw.ao.quantization.quantize_dynamic(model, {fw.nn.LSTM, fw.nn.Linear}, dtype=fw.qint8)
