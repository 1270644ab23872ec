"""``ember.nn.intrinsic``: PyTorch's older name of ``ember.ao.nn.intrinsic`` (the same module)."""
from ember.ao._alias import alias

alias(__name__, "ember.ao.nn.intrinsic", "qat", "quantized", "quantized.dynamic")
