"""Elastic jobs on a Ray cluster: ``emberrun --ray-address ADDR ...`` or ``ray_launch(config, entrypoint,
address)(*args)``. Importing this package imports Ray (nothing else in ember does)."""
from .launcher import connect, ray_launch

__all__ = ["connect", "ray_launch"]
