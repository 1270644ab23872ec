"""``ember.jit``: TorchScript's entry points, running eagerly.

ember has no TorchScript compiler. ``script`` returns what it is given; ``trace`` runs the function or module
once on the example inputs (so a trace that cannot work fails here as in PyTorch), checks that it returns
tensors, and returns it unchanged; the decorators (``ignore``, ``unused``, ``export``, ...) return what they
decorate. So a scripted or traced module is the same ``nn.Module`` with the same results. ``is_scripting()``
is always False; ``is_tracing()`` is True only while ``trace`` runs the example. TorchScript archives cannot
be written or read: ``save`` and ``load`` raise ``NotImplementedError`` (save a ``state_dict`` with
``ember.save`` instead).
"""
import typing

from .. import _extensions
from .._tensor import Tensor

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface", "script_if_tracing",
           "script_method", "is_scripting", "is_tracing", "annotate", "Attribute", "Final", "fork", "wait",
           "freeze", "optimize_for_inference", "save", "load", "ScriptFunction", "TracerWarning", "Error"]

Final = typing.Final
_tracing = [0]  # depth of trace() calls running their example


class TracerWarning(Warning):
    """Category of PyTorch's warnings about traces; ember's trace emits none, code may filter it."""


class Error(RuntimeError):
    """TorchScript's error type; ember raises it nowhere (nothing is compiled)."""


class ScriptFunction:
    """TorchScript's compiled-function type. ember never makes one (``script`` returns the function itself), so
    ``isinstance(f, ember.jit.ScriptFunction)`` is False, as for an eager function in PyTorch."""


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself (a module, function or class): ember runs it eagerly."""
    return obj


def _check_outputs(out):
    if isinstance(out, Tensor):
        return
    if isinstance(out, (tuple, list)):
        for o in out:
            _check_outputs(o)
        return
    if isinstance(out, dict):
        for o in out.values():
            _check_outputs(o)
        return
    raise RuntimeError("Only tensors, lists, tuples of tensors, or dictionary of tensors can be output from traced "
                       "functions")


def _run_example(fn, example_inputs, example_kwarg_inputs=None):
    if example_inputs is None and example_kwarg_inputs is None:
        raise TypeError("trace() needs example_inputs (a tensor or a tuple of arguments) or example_kwarg_inputs")
    args = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(example_inputs or ())
    _tracing[0] += 1
    try:
        out = fn(*args, **(example_kwarg_inputs or {}))
    finally:
        _tracing[0] -= 1
    _check_outputs(out)


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-05,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs=True):
    """Run ``func`` (a function or module) once on the example inputs and return it unchanged.

    ``example_inputs`` is a tensor or a tuple of positional arguments; ``example_kwarg_inputs`` a dict of
    keyword arguments. As in PyTorch, the result must be tensors (or tuples, lists, dicts of them)."""
    if not callable(func):
        raise RuntimeError(f"trace() expects a function or a module, got {type(func).__name__}")
    _run_example(func, example_inputs, example_kwarg_inputs)
    return func


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-05,
                 strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
                 example_inputs_is_kwarg=False, _store_inputs=True):
    """Run each method named in ``inputs`` (``{"forward": example, ...}``) once and return ``mod`` unchanged."""
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    for name, example in inputs.items():
        method = getattr(mod, name)
        if example_inputs_is_kwarg:
            _run_example(method, None, example)
        else:
            _run_example(method, example)
    return mod


def _identity(fn):
    return fn


unused = export = interface = script_if_tracing = script_method = _identity


def ignore(drop=False, **kwargs):
    """``@ignore`` and ``@ignore(drop=True)``: the function itself."""
    if callable(drop):
        return drop
    return _identity


def is_scripting():
    return False


def is_tracing():
    return _tracing[0] > 0


def annotate(the_type, the_value):
    return the_value


def Attribute(value, type):  # noqa: N802 - PyTorch's name
    """``value`` itself, as ``torch.jit.Attribute`` outside a scripted module."""
    return value


def fork(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` now and return a future holding its result (``wait`` returns it)."""
    from ember.futures import Future
    future = Future()
    future.set_result(func(*args, **kwargs))
    return future


def wait(future):
    return future.wait()


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """``mod`` itself: there is no TorchScript graph to freeze."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    """``mod`` itself: there is no TorchScript graph to optimise."""
    return mod


def save(m, f, _extra_files=None):
    raise NotImplementedError("ember.jit.save: ember has no TorchScript, so it cannot write a TorchScript archive; "
                              "save the module's state_dict with ember.save(model.state_dict(), f) instead")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    raise NotImplementedError("ember.jit.load: ember has no TorchScript, so it cannot read a TorchScript archive; "
                              "load a state_dict saved with torch.save or ember.save through ember.load instead")


def __getattr__(name):
    # module types of TorchScript that programs subclass or test against; they need ember-nn's Module
    if name in ("ScriptModule", "RecursiveScriptModule", "TracedModule", "TopLevelTracedModule"):
        try:
            from . import _modules
        except ImportError as e:
            if e.name is None or not e.name.startswith("ember.nn"):
                raise
            raise _extensions.missing("ember.jit attribute", name, "ember-nn") from None
        return getattr(_modules, name)
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
