"""PyTorch's deprecated ``nn.utils.stateless.functional_call``, a spelling of ``ember.func.functional_call``."""
import warnings

import ember

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``ember.func.functional_call`` (calls ``module`` with the given tensors in place of its own), with
    PyTorch's deprecation warning."""
    warnings.warn("`ember.nn.utils.stateless.functional_call` is deprecated: use `ember.func.functional_call`, a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return ember.func.functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                                      strict=strict)
