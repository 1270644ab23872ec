"""Launching elastic agents from Python: ``LaunchConfig``, ``elastic_launch``, ``launch_agent``."""
from .api import LaunchConfig, elastic_launch, launch_agent

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]
