"""ember.profiler: PyTorch's ``torch.profiler`` on ember's op recording (``ember.autograd.profiler``).

``with profile(schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=tensorboard_trace_handler(d)) as p:``
and ``p.step()`` once per iteration records the active steps' op calls, ``record_function`` blocks and
``ProfilerStep#N`` markers; ``p.key_averages().table(sort_by="self_cpu_time_total")`` summarises them, and
``export_chrome_trace`` writes a Chrome/Perfetto trace. There is no Kineto: CPU times are wall-clock times
around each dispatched op, CUDA times (when CuPy has a GPU) come from CUDA events.
"""
from ember.autograd.profiler import record_function

from .profiler import (
    DeviceType,
    ExecutionTraceObserver,
    ProfilerAction,
    ProfilerActivity,
    kineto_available,
    profile,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["DeviceType", "ExecutionTraceObserver", "ProfilerAction", "ProfilerActivity", "kineto_available",
           "profile", "record_function", "schedule", "supported_activities", "tensorboard_trace_handler"]
