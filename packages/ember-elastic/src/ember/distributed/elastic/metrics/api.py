"""Metrics: values published by name into a group, each group sent to its handler (the default one: dropped)."""
import abc
import time
import warnings
from collections import namedtuple
from functools import wraps

__all__ = ["ConsoleMetricHandler", "MetricData", "MetricHandler", "MetricStream", "MetricsConfig",
           "NullMetricHandler", "configure", "get_elapsed_time_ms", "getStream", "prof", "profile",
           "publish_metric", "put_metric"]

MetricData = namedtuple("MetricData", ["timestamp", "group_name", "name", "value"])


class MetricsConfig:
    """Parameters of a metrics set-up (``params``: a dict, empty by default)."""
    __slots__ = ["params"]

    def __init__(self, params=None):
        self.params = {} if params is None else params


class MetricHandler(abc.ABC):
    """Where metric values go: implement ``emit(metric_data)``."""

    @abc.abstractmethod
    def emit(self, metric_data):
        ...


class ConsoleMetricHandler(MetricHandler):
    """Prints ``[timestamp][group]: name=value``."""

    def emit(self, metric_data):
        print(f"[{metric_data.timestamp}][{metric_data.group_name}]: {metric_data.name}={metric_data.value}")


class NullMetricHandler(MetricHandler):
    """Drops every value."""

    def emit(self, metric_data):
        pass


class MetricStream:
    """The values of one group, sent to ``handler``."""

    def __init__(self, group_name, handler):
        self.group_name, self.handler = group_name, handler

    def add_value(self, metric_name, metric_value):
        self.handler.emit(MetricData(time.time(), self.group_name, metric_name, metric_value))


_handlers = {}
_default_handler = NullMetricHandler()


def configure(handler, group=None):
    """Send the values of ``group`` to ``handler``; with no group, make it the handler of every other group."""
    global _default_handler
    if group is None:
        _default_handler = handler
    else:
        _handlers[group] = handler


def getStream(group):
    return MetricStream(group, _handlers.get(group, _default_handler))


def put_metric(metric_name, metric_value, metric_group="torchelastic"):
    """Publish one value (the group "torchelastic" holds the agent's own metrics)."""
    getStream(metric_group).add_value(metric_name, metric_value)


def publish_metric(metric_group, metric_name, metric_value):
    warnings.warn("publish_metric is deprecated, use put_metric(metric_name, metric_value, metric_group)",
                  FutureWarning, stacklevel=2)
    getStream(metric_group).add_value(metric_name, metric_value)


def get_elapsed_time_ms(start_time_in_seconds):
    """Whole milliseconds since ``start_time_in_seconds`` (a ``time.time()`` value)."""
    return int((time.time() - start_time_in_seconds) * 1000)


def _metric_name(fn):
    """``Class.method`` for methods, ``module.function`` (the module's last name) for functions."""
    qualname = fn.__qualname__
    if "." in qualname:
        return qualname
    return f"{fn.__module__.rsplit('.', 1)[-1]}.{qualname}" if fn.__module__ else qualname


def _timed(fn, publish, name):
    @wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            result = fn(*args, **kwargs)
        except Exception:
            publish(f"{name}.failure", 1)
            raise
        else:
            publish(f"{name}.success", 1)
            return result
        finally:
            publish(f"{name}.duration.ms", get_elapsed_time_ms(start))
    return wrapper


def prof(fn=None, group="torchelastic"):
    """Decorator publishing ``<name>.success`` or ``<name>.failure`` (1) and ``<name>.duration.ms`` of each call
    into ``group``; usable bare (``@prof``) or with arguments (``@prof(group="agent")``)."""
    def wrap(f):
        return _timed(f, lambda name, value: put_metric(name, value, group), _metric_name(f))
    return wrap(fn) if fn else wrap


def profile(group=None):
    """Deprecated form of ``prof`` (metric names are the bare function name)."""
    warnings.warn("profile is deprecated, use @prof instead", FutureWarning, stacklevel=2)

    def wrap(f):
        return _timed(f, lambda name, value: getStream(group).add_value(name, value), f.__name__)
    return wrap
