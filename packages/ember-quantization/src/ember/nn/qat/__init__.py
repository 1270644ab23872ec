"""``ember.nn.qat``: PyTorch's older name of ``ember.ao.nn.qat`` (the same module)."""
from ember.ao._alias import alias

alias(__name__, "ember.ao.nn.qat", "dynamic")
