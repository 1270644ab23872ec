"""``ember.quantization``: PyTorch's older name of ``ember.ao.quantization`` (the same module)."""
from ember.ao._alias import alias

alias(__name__, "ember.ao.quantization")
