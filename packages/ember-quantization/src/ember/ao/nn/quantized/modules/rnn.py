"""The quantized LSTM: a converted quantizable LSTM (its linear layers, functional ops and activations quantized),
made from an observed one by ``convert`` through the default custom module mapping."""
from ember.ao.nn.quantizable.modules import rnn as _quantizable

__all__ = ["LSTM"]


class LSTM(_quantizable.LSTM):
    """A quantized LSTM (``nn.LSTM``'s arguments): quantized input, output and states; weights per layer, as the
    quantizable LSTM keeps them."""

    _FLOAT_MODULE = _quantizable.LSTM

    def _get_name(self):
        return "QuantizedLSTM"

    @classmethod
    def from_float(cls, *args, **kwargs):
        raise NotImplementedError("It looks like you are trying to convert a non-observed LSTM module. Please, see "
                                  "the examples on quantizable LSTMs.")

    @classmethod
    def from_observed(cls, other):
        """The quantized form of an observed (prepared and calibrated) quantizable LSTM."""
        from ember.ao.quantization import convert
        if not isinstance(other, cls._FLOAT_MODULE):
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got {type(other)}")
        converted = convert(other, inplace=False, remove_qconfig=True)
        converted.__class__ = cls
        return converted
