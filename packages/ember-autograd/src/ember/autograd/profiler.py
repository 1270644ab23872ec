"""The autograd profiler and operator callbacks.

``with profile() as prof:`` records every op call (named ``ember::<op>``, ``ember::<op>_`` when in
place) and every ``record_function`` block with its wall-clock CPU time; ``prof.key_averages()``
groups them by name (and by input shapes with ``group_by_input_shape=True``), ``.table()`` prints
them, ``export_chrome_trace(path)`` writes a trace for chrome://tracing or Perfetto. The backward
pass is profiled as the ops its VJPs run. With ``use_device="cuda"`` each op's device time is also
measured with CUDA events. With ``profile_memory=True`` an op's ``cpu_memory_usage`` (or
``device_memory_usage``) is the size of the new tensors it returned (views and in-place results cost
nothing), a block's the sum over the ops inside; ``with_stack=True`` keeps the Python stack of each call.

Operator callbacks (fleet-wide, "always on" observation):

    def on_enter(rec):               # rec: RecordFunction (name, inputs, debug_info, thread_id, ...)
        return time.perf_counter()   # anything; handed to the end callback
    def on_exit(rec, started):
        log(rec.name, time.perf_counter() - started, rec.debug_info.get("model_id"))

    handle = add_global_callback(on_enter, on_exit, sampling_prob=0.01)   # one op call in a hundred
    with debug_info(model_id="resnet-7"):   # thread-local, seen by callbacks in forward and backward
        model(x).sum().backward()
    remove_global_callback(handle)

``rec.inputs`` holds the call's arguments (and ``rec.outputs``, at the end, an op's result) only for callbacks
added with ``needs_inputs=True``.
``record_function`` blocks are reported too (``rec.is_user_scope``). Each callback is sampled
independently. Like the profiler, a registered callback sends every op call through the dispatcher's
layered path, so there is a cost even at a low sampling rate; adding and removing callbacks is not
thread-safe and is best done once, at start-up, while no op is running.
"""
import collections
import contextlib
import itertools
import json
import os
import random
import sys
import threading
import time
import traceback

from ember import _dispatch
from ember._tensor import Tensor

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "RecordFunction", "add_global_callback",
           "clear_global_callbacks", "debug_info", "has_global_callbacks", "profile", "record_function",
           "remove_global_callback"]

_active = []  # open profile objects
_callbacks = {}  # handle -> _Callback
_handles = itertools.count(1)
_sampler = random.Random()  # private, so sampling never disturbs ember's or Python's global streams
_installed = [False]
_wants = [False, False]  # [some open profile records stacks, ... records memory]: read on every recorded call
_ids = itertools.count()


class _Local(threading.local):
    def __init__(self):
        self.stack = []  # open FunctionEvents of this thread
        self.debug = {}


_tls = _Local()


def _now_us():
    return time.perf_counter_ns() / 1000.0


def _refresh():
    """Keep the profiler layer registered (and the slow path forced) exactly while it has work."""
    _wants[:] = any(p.with_stack for p in _active), any(p.profile_memory for p in _active)
    want = bool(_active or _callbacks)
    if want != _installed[0]:
        if want:
            _dispatch.register_layer("profiler", 50, _layer)
        else:
            _dispatch.unregister_layer("profiler")
        _dispatch.force_slow(want)
        _installed[0] = want


# ---- operator callbacks ----------------------------------------------------------------------------
class RecordFunction:
    """What a callback sees of one op call or ``record_function`` block."""

    __slots__ = ("name", "inputs", "outputs", "is_user_scope", "thread_id", "start_us", "end_us", "debug_info")

    def __init__(self, name, inputs, is_user_scope):
        self.name, self.inputs, self.is_user_scope = name, inputs, is_user_scope
        self.outputs = None
        self.thread_id = threading.get_ident()
        self.start_us = _now_us()
        self.end_us = None
        self.debug_info = _tls.debug

    def __repr__(self):
        return f"<RecordFunction {self.name}>"


_Callback = collections.namedtuple("_Callback", "start end prob needs_inputs")


def add_global_callback(start_fn=None, end_fn=None, *, sampling_prob=1.0, needs_inputs=False):
    """Call ``start_fn(rec)`` before and ``end_fn(rec, start_result)`` after a sampled fraction
    ``sampling_prob`` of all op calls, in every thread; returns a handle for remove_global_callback."""
    if not 0.0 <= sampling_prob <= 1.0:
        raise ValueError(f"sampling_prob must be in [0, 1], got {sampling_prob}")
    if start_fn is None and end_fn is None:
        raise ValueError("add_global_callback needs a start_fn or an end_fn")
    handle = next(_handles)
    _callbacks[handle] = _Callback(start_fn, end_fn, float(sampling_prob), bool(needs_inputs))
    _refresh()
    return handle


def remove_global_callback(handle):
    if _callbacks.pop(handle, None) is None:
        raise ValueError(f"no global callback with handle {handle}")
    _refresh()


def clear_global_callbacks():
    _callbacks.clear()
    _refresh()


def has_global_callbacks():
    return bool(_callbacks)


@contextlib.contextmanager
def debug_info(**values):
    """Thread-local information for operator callbacks (``rec.debug_info``), e.g. a model id."""
    before = _tls.debug
    _tls.debug = {**before, **values}
    try:
        yield
    finally:
        _tls.debug = before


# ---- recording -------------------------------------------------------------------------------------
class FunctionEvent:
    """One recorded op call or ``record_function`` block; times in microseconds."""

    def __init__(self, name, start_us, input_shapes, parent, is_user_scope):
        self.id = next(_ids)
        self.name = self.key = self.trace_name = name  # (ember.profiler shows step markers as "ProfilerStep*")
        self.thread = threading.get_ident()
        self.start_us, self.end_us = start_us, None
        self.input_shapes = input_shapes
        self.cpu_parent = parent
        self.cpu_children = []
        self.is_user_scope = is_user_scope
        self.device_time_total = 0.0
        self._cuda = None  # (start event, end event) while device times are pending
        self.stack = []
        self.self_cpu_memory_usage = self.self_device_memory_usage = 0
        self.cpu_memory_usage = self.device_memory_usage = 0

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_device_time_total(self):
        return self.device_time_total - sum(c.device_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={_fmt(self.cpu_time_total)} "
                f"input_shapes={self.input_shapes}>")


def _shapes(args):
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(list(a.shape))
        elif type(a) in (list, tuple) and a and all(isinstance(x, Tensor) for x in a):
            out.append([list(x.shape) for x in a])
        else:
            out.append([])
    return out


def _python_stack():
    """The caller's frames, innermost first, as "file(line): function", leaving out ember's own."""
    own = tuple(os.path.join(d, "") for d in sys.modules["ember"].__path__)
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(own)]
    return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames)]


def _memory(event, result, call):
    """Charge ``event`` (an op call) with the bytes of the new tensors ``result`` holds."""
    if call.mode == "inplace":
        return
    inputs = {id(t._data) for t in call.tensors()}
    for t in result if type(result) in (tuple, list) else (result,):
        if isinstance(t, Tensor) and t._base is None and id(t._data) not in inputs:
            if t._data.__class__.__module__.startswith("cupy"):
                event.self_device_memory_usage += t._data.nbytes
            else:
                event.self_cpu_memory_usage += t._data.nbytes


def _enter(name, args, user_scope):
    """Start recording a call: returns what ``_exit`` needs, or None when nothing observes it."""
    sampled = [cb for cb in _callbacks.values() if cb.prob >= 1.0 or _sampler.random() < cb.prob]
    if not (_active or sampled):
        return None
    rec = RecordFunction(name, args if any(cb.needs_inputs for cb in sampled) else None, user_scope)
    started = [(cb, cb.start(rec) if cb.start is not None else None) for cb in sampled]
    event = None
    if _active:
        stack = _tls.stack
        shapes = _shapes(args) if any(p.record_shapes for p in _active) else []
        event = FunctionEvent(name, _now_us(), shapes, stack[-1] if stack else None, user_scope)
        if _wants[0]:
            event.stack = _python_stack()
        if any(p._device for p in _active):
            event._cuda = _cuda_events()
        stack.append(event)
        for p in _active:
            p._events.append(event)
    return rec, started, event


def _exit(state):
    if state is None:
        return
    rec, started, event = state
    if event is not None:
        if event._cuda is not None:
            event._cuda[1].record()
        event.end_us = _now_us()
        stack = _tls.stack
        if stack and stack[-1] is event:
            stack.pop()
        event.cpu_memory_usage += event.self_cpu_memory_usage
        event.device_memory_usage += event.self_device_memory_usage
        parent = event.cpu_parent
        if parent is not None:
            parent.cpu_children.append(event)
            parent.cpu_memory_usage += event.cpu_memory_usage
            parent.device_memory_usage += event.device_memory_usage
    rec.end_us = _now_us()
    for cb, ctx in started:
        if cb.end is not None:
            cb.end(rec, ctx)


def _cuda_events():
    from ember import _backend
    cp = _backend.cupy()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    return start, end


def _layer(call, call_next):
    name = call.op.name
    state = _enter(f"ember::{name}_" if call.mode == "inplace" and not name.endswith("_") else f"ember::{name}",
                   call.args, False)
    try:
        result = call_next(call)
        if state is not None:
            if state[0].inputs is not None:
                state[0].outputs = result
            if state[2] is not None and _wants[1]:
                _memory(state[2], result, call)
        return result
    finally:
        _exit(state)


class record_function(contextlib.ContextDecorator):
    """Label a block (or, as a decorator, every call of a function) in profiles and for callbacks."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._state = []

    def __enter__(self):
        self._state.append(_enter(self.name, () if self.args is None else (self.args,), True))
        return self

    def __exit__(self, *exc):
        _exit(self._state.pop())
        return False


# ---- results ---------------------------------------------------------------------------------------
def _fmt(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class FunctionEventAvg:
    """The events of one key (name, and input shapes when grouped by them) summed up."""

    def __init__(self, key, input_shapes):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.is_user_scope = False
        self.stack = []

    def add(self, e):
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.device_time_total += e.device_time_total
        self.self_device_time_total += e.self_device_time_total
        for attr in ("cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage"):
            setattr(self, attr, getattr(self, attr) + getattr(e, attr))
        self.is_user_scope = e.is_user_scope
        self.stack = e.stack
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self):
        return self.device_time_total / self.count if self.count else 0.0

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={_fmt(self.cpu_time_total)} "
                f"self_cpu_time_total={_fmt(self.self_cpu_time_total)} input_shapes={self.input_shapes}>")


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "count", "device_time_total",
              "self_device_time_total", "device_time", "cuda_time_total", "self_cuda_time_total", "cuda_time",
              "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage",
              "cuda_memory_usage", "self_cuda_memory_usage")


def _fmt_bytes(n):
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} b"


class EventList(list):
    """A list of FunctionEvents or FunctionEventAvgs with reporting helpers."""

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """One FunctionEventAvg per name (and input shapes, and innermost ``group_by_stack_n`` frames)."""
        groups = {}
        for e in self:
            key = (e.name, str(e.input_shapes) if group_by_input_shape else None,
                   tuple(e.stack[:group_by_stack_n]) if group_by_stack_n > 0 else None)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(e.name, e.input_shapes if group_by_input_shape else None)
            avg.add(e)
        return EventList(groups.values())

    def total_average(self):
        total = FunctionEventAvg("Total", None)
        for e in self:
            total.add(e)
        return total

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, max_shapes_column_width=80,
              header=None):
        """The rows as a text table, sorted descending by ``sort_by`` (an attribute such as
        "cpu_time_total", "self_cpu_time_total", "count")."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"sort_by must be one of {', '.join(_SORT_KEYS)}; got {sort_by!r}")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total or 1.0
        device = any(e.device_time_total for e in self)
        memory = [(label, attr) for label, attr in (("CPU Mem", "cpu_memory_usage"),
                                                     ("Self CPU Mem", "self_cpu_memory_usage"),
                                                     ("CUDA Mem", "device_memory_usage"),
                                                     ("Self CUDA Mem", "self_device_memory_usage"))
                  if any(getattr(e, attr) for e in self)]
        shapes = any(getattr(e, "input_shapes", None) for e in rows)
        names = [(getattr(e, "key", None) or e.name) for e in rows]
        name_w = min(max(len("Name"), *(len(n) for n in names)) if names else 4, max_name_column_width)
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
        if device:
            cols += ["Self CUDA", "CUDA total", "CUDA time avg"]
        cols += [label for label, _ in memory]
        cols.append("# of Calls")
        widths = [name_w] + [12] * len(cols)
        shape_text = [str(e.input_shapes) for e in rows] if shapes else []
        if shapes:
            cols.append("Input Shapes")
            widths.append(min(max(len("Input Shapes"), *(len(s) for s in shape_text)), max_shapes_column_width))
        rule = "  ".join("-" * w for w in widths)
        lines = [header] if header else []
        lines += [rule, "  ".join(c.rjust(w) for c, w in zip(["Name"] + cols, widths)), rule]
        for k, (e, name) in enumerate(zip(rows, names)):
            if len(name) > name_w:
                name = name[:name_w - 3] + "..."
            cells = [name, f"{100 * e.self_cpu_time_total / total_self:.2f}%", _fmt(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total_self:.2f}%", _fmt(e.cpu_time_total),
                     _fmt(e.cpu_time_total / max(getattr(e, "count", 1), 1))]
            if device:
                cells += [_fmt(e.self_device_time_total), _fmt(e.device_time_total),
                          _fmt(e.device_time_total / max(getattr(e, "count", 1), 1))]
            cells += [_fmt_bytes(getattr(e, attr)) for _, attr in memory]
            cells.append(str(getattr(e, "count", 1)))
            if shapes:
                cells.append(shape_text[k][:max_shapes_column_width])
            lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
        lines += [rule, f"Self CPU time total: {_fmt(self.self_cpu_time_total)}"]
        if device:
            lines.append(f"Self CUDA time total: {_fmt(sum(e.self_device_time_total for e in self))}")
        return "\n".join(lines) + "\n"

    def chrome_trace(self):
        """The events as a Chrome trace document (JSON "X" events, microseconds)."""
        pid = os.getpid()
        trace = [{"name": e.trace_name, "ph": "X", "cat": "user_annotation" if e.is_user_scope else "cpu_op",
                  "ts": e.start_us, "dur": e.cpu_time_total, "pid": pid, "tid": e.thread,
                  "args": {"Input Dims": e.input_shapes, **({"Call stack": ";".join(e.stack)} if e.stack else {})}}
                 for e in self]
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace, for chrome://tracing or Perfetto."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def __str__(self):
        return self.table()


class profile:
    """Record the op calls made inside the block (see the module docstring).

    ``record_shapes`` keeps each call's input shapes; ``use_device="cuda"`` (or ``use_cuda=True``) also
    times each op on the GPU; ``profile_memory`` and ``with_stack`` as the module docstring says.
    ``with_flops``, ``with_modules``, ``use_kineto``, ``experimental_config``, ``acc_events`` and
    ``custom_trace_id_callback`` are accepted for compatibility and have no effect.
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        if use_device not in (None, "cuda"):
            raise ValueError(f"profile: unsupported use_device {use_device!r}; ember can time 'cuda' only")
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self._device = bool(use_cuda or use_device == "cuda")
        self._events = []
        self._running = False

    def __enter__(self):
        if self.enabled:
            if self._running:
                raise RuntimeError("Profiler context manager is not reentrant")
            self._events = []
            self._running = True
            _active.append(self)
            _refresh()
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        _active.remove(self)
        _refresh()
        self._running = False
        if self._device:
            from ember import _backend
            _backend.cupy().cuda.Device().synchronize()
            for e in self._events:
                if e._cuda is not None:
                    e.device_time_total = _backend.cupy().cuda.get_elapsed_time(*e._cuda) * 1000.0
                    e._cuda = None
        return False

    def _check_finished(self):
        if self._running:
            raise RuntimeError("Profiler didn't finish running")

    @property
    def function_events(self):
        self._check_finished()
        return EventList(e for e in self._events if e.end_us is not None)

    def events(self):
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        return self.function_events.self_cpu_time_total

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, max_shapes_column_width=80, header=None):
        return self.key_averages().table(sort_by, row_limit, max_name_column_width, max_shapes_column_width, header)

    def export_chrome_trace(self, path):
        self.function_events.export_chrome_trace(path)

    def __str__(self):
        return self.table()
