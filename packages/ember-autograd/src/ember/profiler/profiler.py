"""The step-scheduled profiler: ``profile`` drives an ``ember.autograd.profiler.profile`` through the actions a
``schedule`` names for each step, and hands each finished recording to ``on_trace_ready``."""
import enum
import gzip
import json
import os
import socket
import time
import warnings

from ember.autograd import profiler as _autograd_profiler

from ._execution_trace import ExecutionTraceObserver

__all__ = ["DeviceType", "ExecutionTraceObserver", "ProfilerAction", "ProfilerActivity", "kineto_available",
           "profile", "schedule", "supported_activities", "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 4
    CUDA = 2
    HPU = 3
    PrivateUse1 = 5


class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    Vulkan = 10
    Metal = 11
    XPU = 12
    MPS = 13
    MTIA = 19
    Meta = 14
    HPU = 15
    VE = 16
    Lazy = 17
    IPU = 18
    PrivateUse1 = 20


class ProfilerAction(enum.Enum):
    """What the profiler does during a step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3  # record, and hand the recording to on_trace_ready at the end of the step
    DEVICE_STOPPED = 4  # PyTorch's device tracer stopped early; a schedule never returns it


def kineto_available():
    """False: ember records op calls itself, without Kineto."""
    return False


def _cuda_available():
    from ember import cuda
    return cuda.is_available()


def supported_activities():
    """CPU, and CUDA where a GPU is usable."""
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if _cuda_available() else {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A step -> ProfilerAction function: skip ``skip_first`` steps, then cycles of ``wait`` idle, ``warmup`` and
    ``active`` recorded steps (the last one RECORD_AND_SAVE), ``repeat`` times (0: for ever). With
    ``skip_first_wait`` the first cycle starts without its wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
                             f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
                             f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An ``on_trace_ready`` that writes each recording to ``dir_name/<worker>.<time ns>.pt.trace.json[.gz]``
    (the layout TensorBoard's profiler plugin reads)."""

    def handler_fn(prof):
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, file_name))

    return handler_fn


class profile:
    """Profile the steps of a run (``step()`` ends one) as ``schedule`` says; without a schedule everything
    between ``start()`` and ``stop()`` (or the ``with`` block) is one recording.

    ``record_shapes``, ``profile_memory`` and ``with_stack`` are those of ``ember.autograd.profiler.profile``; an
    ``execution_trace_observer`` (or one ENABLE_PYTORCH_EXECUTION_TRACE=1 asks for) captures while the profiler
    records. ``with_flops``, ``with_modules``, ``experimental_config``, ``acc_events``, ``custom_trace_id_callback``
    and ``post_processing_timeout_s`` are accepted and change nothing.
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        chosen = set()
        for item in activities if activities is not None else supported_activities():
            keys = list(item) if isinstance(item, dict) else [item]
            for key in keys:
                if not isinstance(item, (dict, ProfilerActivity)):
                    continue  # refused below, once an activity is known to be there (PyTorch's order of errors)
                if key in chosen:
                    raise ValueError(f"Activity {key} specified more than once")
                chosen.add(key)
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning, stacklevel=2)
            if use_cuda:
                chosen.add(ProfilerActivity.CUDA)
            else:
                chosen.discard(ProfilerActivity.CUDA)
        if not chosen:
            raise AssertionError("No valid profiler activities found")
        for item in activities or ():
            if not isinstance(item, (dict, ProfilerActivity)):
                raise TypeError(f"Expected ProfilerActivity or dict, got {type(item)}")
        self.activities = chosen
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.with_flops, self.with_modules = with_flops, with_modules
        self.on_trace_ready = on_trace_ready
        self.execution_trace_observer = (execution_trace_observer
                                         or ExecutionTraceObserver.build_execution_trace_obs_from_env())
        self.schedule = schedule if schedule else _always_record
        self.record_steps = bool(schedule)  # ProfilerStep#N markers only when there are steps to tell apart
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        if self.current_action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError("ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must not be "
                             "returned by a user-provided schedule")
        self.step_rec_fn = None
        self.profiler = None  # the autograd profile of the current (or last) recording
        self._metadata = {}
        A = ProfilerAction
        prepare, start, stop, ready = self.prepare_trace, self.start_trace, self.stop_trace, self._trace_ready

        def wrong(what):
            return lambda: warnings.warn(f"Incorrect schedule: {what}", stacklevel=3)

        self._actions = {
            (A.NONE, A.NONE): [], (A.NONE, A.WARMUP): [prepare], (A.NONE, A.RECORD): [prepare, start],
            (A.NONE, A.RECORD_AND_SAVE): [prepare, start],
            (A.WARMUP, A.NONE): [wrong("WARMUP followed by NONE"), start, stop], (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [start], (A.WARMUP, A.RECORD_AND_SAVE): [start],
            (A.RECORD, A.NONE): [wrong("RECORD followed by NONE"), stop],
            (A.RECORD, A.WARMUP): [wrong("RECORD followed by WARMUP"), stop],
            (A.RECORD, A.RECORD): [], (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [stop, ready], (A.RECORD_AND_SAVE, A.WARMUP): [stop, ready, prepare],
            (A.RECORD_AND_SAVE, A.RECORD): [stop, ready, prepare, start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [stop, ready, prepare, start],
            (A.WARMUP, None): [start, stop], (A.RECORD, None): [stop, ready], (A.RECORD_AND_SAVE, None): [stop, ready],
        }

    # ---- the state machine ---------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        if self.execution_trace_observer:
            self.execution_trace_observer.cleanup()
        return False

    def start(self):
        self._transit_action(ProfilerAction.NONE, self.current_action)
        self._open_step()

    def stop(self):
        self._close_step()
        self._transit_action(self.current_action, None)

    def step(self):
        """End the current step: the schedule's action for the next one takes effect."""
        self._close_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit_action(previous, self.current_action)
        self._open_step()

    def _open_step(self):
        if self.record_steps:
            self.step_rec_fn = _autograd_profiler.record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def _close_step(self):
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None

    def _transit_action(self, previous, current):
        for action in self._actions.get((previous, current), ()):
            action()

    def prepare_trace(self):
        device = ProfilerActivity.CUDA in self.activities and _cuda_available()
        self.profiler = _autograd_profiler.profile(
            use_device="cuda" if device else None, use_cpu=ProfilerActivity.CPU in self.activities,
            record_shapes=self.record_shapes, profile_memory=self.profile_memory, with_stack=self.with_stack)

    def start_trace(self):
        if self.execution_trace_observer:
            self.execution_trace_observer.start()
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before starting trace")
        self.profiler.__enter__()

    def stop_trace(self):
        if self.execution_trace_observer:
            self.execution_trace_observer.stop()
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before stopping trace")
        self.profiler.__exit__(None, None, None)
        for e in self.profiler.function_events:
            if e.name.startswith("ProfilerStep#"):  # grouped as one, as PyTorch does; the trace keeps the number
                e.name = e.key = "ProfilerStep*"

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    # ---- results --------------------------------------------------------------------------------
    def _recording(self, what):
        if self.profiler is None:
            raise AssertionError(f"Profiler must be initialized before {what}")
        return self.profiler

    def events(self):
        """The recorded FunctionEvents of the last recording."""
        return self._recording("accessing events").function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events grouped by name (ember's ops have no overloads), with counts and summed times."""
        return self._recording("getting key averages").key_averages(group_by_input_shape, group_by_stack_n)

    def add_metadata(self, key, value):
        """A string entry at the top level of exported traces."""
        self._metadata[key] = str(value)

    def add_metadata_json(self, key, value):
        """An entry (given as JSON text) at the top level of exported traces."""
        self._metadata[key] = json.loads(value)

    def export_chrome_trace(self, path):
        """Write the last recording as a Chrome trace; gzip-compressed when ``path`` ends in ".gz"."""
        doc = self._recording("exporting chrome trace").function_events.chrome_trace()
        doc.update(self._metadata)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "wt") as f:
            json.dump(doc, f)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write one line "outer;...;inner value" per event that has a stack (``with_stack=True``), the format
        of flame-graph tools; ``metric`` is "self_cpu_time_total" or "self_cuda_time_total" (microseconds)."""
        attr = {"self_cpu_time_total": "self_cpu_time_total", "self_cuda_time_total": "self_device_time_total",
                "self_device_time_total": "self_device_time_total"}.get(metric)
        if attr is None:
            raise ValueError(f"export_stacks: metric must be self_cpu_time_total or self_cuda_time_total, "
                             f"got {metric!r}")
        events = self._recording("exporting stacks").function_events
        with open(path, "w") as f:
            for e in events:
                value = int(getattr(e, attr))
                if e.stack and value > 0:
                    frames = ";".join(s.replace(" ", "_").replace(";", "_") for s in reversed(e.stack))
                    f.write(f"{frames} {value}\n")
