"""Elastic jobs on a Ray cluster: ``emberrun --ray-address ADDR ...`` or ``ray_launch(config, entrypoint,
address)(*args)``. Importing this package is free; its names import Ray on first use (nothing else in ember does)."""
__all__ = ["connect", "ray_launch"]


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import launcher
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
        raise ModuleNotFoundError("elastic jobs on Ray need Ray: pip install 'ember-elastic[ray]'",
                                  name="ray") from None
    return getattr(launcher, name)
