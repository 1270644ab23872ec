"""Elastic agents (``ember.distributed.elastic.agent.server``)."""
from ember._extensions import lazy_submodule


def __getattr__(name):
    return lazy_submodule(__name__, name)
