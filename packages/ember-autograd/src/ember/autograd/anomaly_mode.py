"""Anomaly detection: remember where each graph node was made, and fail on NaN gradients naming it."""
import threading
import traceback
import warnings

import numpy as np


class _State(threading.local):
    enabled = False
    check_nan = True


_STATE = _State()


def is_anomaly_enabled():
    return _STATE.enabled


def is_anomaly_check_nan_enabled():
    return _STATE.check_nan


class set_detect_anomaly:
    """Switch anomaly detection on or off: at once when called, and back to the previous setting when used as a
    context manager (``with set_detect_anomaly(False): ...``)."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_STATE.enabled, _STATE.check_nan)
        _STATE.enabled, _STATE.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _STATE.enabled, _STATE.check_nan = self.prev


class detect_anomaly:
    """Context manager: record forward tracebacks; a backward node returning NaN raises, and the
    forward call that made the node is printed."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = (_STATE.enabled, _STATE.check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)
        _STATE.enabled, _STATE.check_nan = True, bool(self.check_nan)

    def __exit__(self, *exc):
        _STATE.enabled, _STATE.check_nan = self.prev


def forward_trace():
    return "".join(traceback.format_stack()[:-3])


def checked_apply(node, outs):
    try:
        grads = node.apply(outs)
    except Exception:
        _report(node)
        raise
    if _STATE.check_nan:
        for i, g in enumerate(grads):
            if g is not None and (g.dtype.is_floating_point or g.dtype.is_complex) and np.isnan(
                    np.asarray(g._host())).any():
                _report(node)
                raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
    return grads


def _report(node):
    if node._trace:
        warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                      f"{node._trace}", stacklevel=3)
