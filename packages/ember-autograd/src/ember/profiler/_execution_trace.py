"""The execution trace: every op call and ``record_function`` block while the observer runs, as a node with its
parent, its arguments and its results (tensors by id, storage, offset, size and dtype), in the JSON layout of
PyTorch's execution traces (Chakra schema 1.1.1), which replay and analysis tools read. It observes through the
autograd profiler's operator callbacks, so it costs nothing while it is not running."""
import gzip
import itertools
import json
import os
import tempfile
import threading
import time
import weakref

from ember._tensor import Tensor
from ember.autograd import profiler as _autograd_profiler

__all__ = ["ExecutionTraceObserver"]

_SCHEMA = "1.1.1-chakra.0.0.4"
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
            "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _root(array):
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _address(array):
    return array.__array_interface__["data"][0] if hasattr(array, "__array_interface__") else array.data.ptr


class ExecutionTraceObserver:
    """``register_callback(path)`` names the output file (gzip-compressed when it ends in ".gz"); ``start()`` and
    ``stop()`` open and close capture windows (``profile(execution_trace_observer=...)`` does it with the
    profiler's recording); ``unregister_callback()`` (or ``cleanup()``) writes the file."""

    def __init__(self):
        self._registered = False
        self._execution_trace_running = False
        self.output_file_path = None
        self.extra_resources_collection = False
        self._handle = None
        self._nodes = []
        self._ids = itertools.count(1)
        self._tensor_ids, self._storage_ids = {}, {}
        self._tls = threading.local()
        self._start_ts = self._finish_ts = None

    def __del__(self):
        self.unregister_callback()

    @staticmethod
    def build_execution_trace_obs_from_env():
        """An observer writing to a temporary file when ENABLE_PYTORCH_EXECUTION_TRACE=1, else None."""
        if os.environ.get("ENABLE_PYTORCH_EXECUTION_TRACE", "0") != "1":
            return None
        with tempfile.NamedTemporaryFile("w+t", suffix=".et.json", delete=False) as f:
            path = f.name
        observer = ExecutionTraceObserver().register_callback(path)
        observer.set_extra_resource_collection(os.environ.get("ENABLE_PYTORCH_EXECUTION_TRACE_EXTRAS", "0") == "1")
        return observer

    def set_extra_resource_collection(self, val):
        """Kept for compatibility: ember has no compiled kernels to save beside the trace."""
        self.extra_resources_collection = bool(val)

    def register_callback(self, output_file_path):
        if not self._registered:
            self.output_file_path = output_file_path
            self._registered = True
            self._nodes = []
            self._ids = itertools.count(1)
            process, thread = next(self._ids), next(self._ids)
            self._process_id, self._thread_id = process, thread
            self._nodes += [self._node(process, "[pytorch|profiler|execution_trace|process]", process, 0),
                            self._node(thread, "[pytorch|profiler|execution_trace|thread]", process, 0)]
        return self

    def unregister_callback(self):
        if not self._registered:
            return
        self.stop()
        doc = {"schema": _SCHEMA, "pid": os.getpid(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
               "start_ts": self._start_ts or 0, "nodes": self._nodes, "finish_ts": self._finish_ts or 0}
        opener = gzip.open if self.output_file_path.endswith(".gz") else open
        with opener(self.output_file_path, "wt") as f:
            json.dump(doc, f)
        self._registered = False

    @property
    def is_registered(self):
        return self._registered

    def is_running(self):
        return self._execution_trace_running

    def start(self):
        if self._registered and not self._execution_trace_running:
            if self._start_ts is None:
                self._start_ts = time.perf_counter_ns() // 1000
            self._handle = _autograd_profiler.add_global_callback(self._enter, self._exit, needs_inputs=True)
            self._execution_trace_running = True

    def stop(self):
        if self._execution_trace_running:
            _autograd_profiler.remove_global_callback(self._handle)
            self._execution_trace_running = False
            self._finish_ts = time.perf_counter_ns() // 1000

    def cleanup(self):
        self.unregister_callback()

    def get_output_file_path(self):
        return self.output_file_path or None

    # ---- recording ------------------------------------------------------------------------------------
    def _node(self, node_id, name, parent, rf_id, inputs=(), outputs=(), user_scope=False):
        return {"id": node_id, "name": name, "ctrl_deps": parent, "inputs": self._values(inputs),
                "outputs": self._values(outputs),
                "attrs": [{"name": "rf_id", "type": "uint64", "value": rf_id},
                          {"name": "fw_parent", "type": "uint64", "value": 0},
                          {"name": "seq_id", "type": "int64", "value": -1},
                          {"name": "scope", "type": "uint64", "value": 7 if user_scope else 0},
                          {"name": "tid", "type": "uint64", "value": threading.get_ident() % (1 << 63)},
                          {"name": "fw_tid", "type": "uint64", "value": 0},
                          {"name": "op_schema", "type": "string", "value": ""},
                          {"name": "kernel_backend", "type": "string", "value": ""},
                          {"name": "kernel_file", "type": "string", "value": ""},
                          {"name": "tensor_range", "type": "string", "value": ""}]}

    def _tensor(self, t):
        array = t._data
        root = _root(array)
        known = self._tensor_ids.get(id(t))
        if known is None or known[0]() is not t:  # (ids of dead tensors are reused)
            known = self._tensor_ids[id(t)] = (weakref.ref(t), next(self._ids))
        tensor_id = known[1]
        storage_id = self._storage_ids.get(_address(root))
        if storage_id is None:
            storage_id = self._storage_ids[_address(root)] = next(self._ids)
        offset = (_address(array) - _address(root)) // max(array.itemsize, 1)
        device = str(t.device)
        return ([tensor_id, storage_id, offset, t.numel(), array.itemsize, device], list(t.shape),
                f"Tensor({_C_TYPES.get(str(t.dtype).rpartition('.')[2], str(t.dtype))})", list(t.stride()))

    def _value(self, v):
        """(value, shape, type, strides) of one argument or result."""
        if isinstance(v, Tensor):
            return self._tensor(v)
        if isinstance(v, (list, tuple)):
            parts = [self._value(x) for x in v]
            kinds = ",".join(p[2] for p in parts)
            return [p[0] for p in parts], [p[1] for p in parts], f"GenericList[{kinds}]", [p[3] for p in parts]
        if v is None:
            return "<None>", [], "None", []
        if isinstance(v, bool):
            return v, [], "Bool", []
        if isinstance(v, int):
            return v, [], "Int", []
        if isinstance(v, float):
            return v, [], "Double", []
        if isinstance(v, str):
            return v, [], "String", []
        return str(v), [], type(v).__name__, []

    def _values(self, values):
        parts = [self._value(v) for v in values]
        return {"values": [p[0] for p in parts], "shapes": [p[1] for p in parts], "types": [p[2] for p in parts],
                "strides": [p[3] for p in parts]}

    def _enter(self, rec):
        stack = self._tls.__dict__.setdefault("stack", [])
        node_id = next(self._ids)
        stack.append(node_id)
        return node_id, stack[-2] if len(stack) > 1 else self._thread_id

    def _exit(self, rec, started):
        node_id, parent = started
        stack = self._tls.stack
        if stack and stack[-1] == node_id:
            stack.pop()
        outputs = rec.outputs
        outputs = () if outputs is None else outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        self._nodes.append(self._node(node_id, rec.name, parent, node_id, rec.inputs or (), outputs,
                                      rec.is_user_scope))
