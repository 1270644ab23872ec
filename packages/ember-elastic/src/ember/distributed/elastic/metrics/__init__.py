"""Metrics of elastic jobs: ``put_metric(name, value, group)`` publishes a value, ``configure(handler, group)``
routes a group's values (all are dropped until configured), ``@prof`` times a function. The agent publishes its
own metrics into the group "torchelastic" (``workers.<role>.remaining_restarts``, ``workers.<role>.run_total``,
``workers.<role>.flakiness``, ``SimpleElasticAgent._rendezvous.duration.ms``, ...)."""
from typing import Optional  # noqa: F401  (a public name of torch's module)

from .api import (
    ConsoleMetricHandler,
    MetricData,
    MetricHandler,
    MetricsConfig,
    NullMetricHandler,
    configure,
    get_elapsed_time_ms,
    getStream,
    prof,
    profile,
    publish_metric,
    put_metric,
)

__all__ = ["ConsoleMetricHandler", "MetricData", "MetricHandler", "MetricsConfig", "NullMetricHandler", "configure",
           "get_elapsed_time_ms", "getStream", "initialize_metrics", "prof", "profile", "publish_metric",
           "put_metric"]


def initialize_metrics(cfg=None):
    """Hook for a site's metrics set-up (the launcher calls it with its ``metrics_cfg``); does nothing here."""
