"""``ember.nn.quantizable``: PyTorch's older name of ``ember.ao.nn.quantizable`` (the same module)."""
from ember.ao._alias import alias

alias(__name__, "ember.ao.nn.quantizable")
