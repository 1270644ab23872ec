"""Entry point of ember-special (group ``ember.extensions``): called by ``import ember``."""


def install(ember):
    """Register ember.special's ops and put their spellings on ``ember`` and ``Tensor``."""
    from ember import _registry
    from ember._tensor import Tensor

    from . import _common, _ops

    _registry.install(vars(ember), _common.OPS)
    ember.logit_ = _ops.logit_  # the in-place function form, which the registry makes only for in-place ops
    for name, method in _common.METHODS.items():
        setattr(Tensor, name, method)
