"""``ember.nn.quantized``: PyTorch's older name of ``ember.ao.nn.quantized`` (the same module)."""
from ember.ao._alias import alias

alias(__name__, "ember.ao.nn.quantized", "dynamic", "functional")
