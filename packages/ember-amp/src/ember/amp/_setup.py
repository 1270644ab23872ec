"""Entry point of ember-amp (group ``ember.extensions``): the autocast functions of the ember namespace.

Cheap on purpose: the dispatcher layer is registered only while an autocast region is enabled, and the
composed functions that autocast treats as single ops are wrapped when their modules load.
"""
from . import _state


def install(ember):
    from . import _layer, _unscale  # noqa: F401  (_unscale records its CUDA kernels for `nox -s kernels`)
    from .autocast_mode import autocast

    for name in _state.TORCH_FUNCTIONS:
        setattr(ember, name, getattr(_state, name))
    for name, fn in _state.LEGACY.items():
        setattr(ember, name, fn)
    ember.autocast = autocast
    _layer.install_wrappers()
