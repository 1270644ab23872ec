"""The op table exercises every optional parameter of the PyTorch functions its lines call.

A line's torch-side call runs under a ``TorchFunctionMode`` that records every torch function and Tensor method the
call reaches (the outermost ones: what a torch function calls inside is not seen), with the arguments it got. Each
recorded call is bound to its PyTorch signature: the ``aten`` schemas of a native function (every overload a Python
call can reach) or the Python signature of a function written in Python (``torch.nn.functional``,
``torch.functional``). A parameter counts as exercised when a call that succeeded gave it a value other than its
default; ``out=`` counts as a parameter. A line's *targets* are the calls of the op it is named for (``add_`` calls
``clone`` and then ``Tensor.add_``: its target is ``Tensor.add_``); a line whose name matches none of its calls
(a private ember op compared with the aten op it mirrors) targets the one distinct function it calls, if it calls
only one. Every optional parameter of every target must be exercised by some line, or exempted by a line that
targets it: ``Line(..., exempt={"memory_format": "<why>"})``; docs/ops.md lists the exemptions.
"""
import importlib.util
import inspect
import pathlib
import sys
import types
import warnings

import numpy as np
import pytest
import test_ops
import torch
from optable import convert
from torch.overrides import TorchFunctionMode

LINES = test_ops.LINES

# calls lines make around the op they test (a copy of the sample, out='s buffer, a result's detach); they are the
# target only of a line named for them
HELPERS = {"clone", "empty", "detach", "numpy", "double", "float", "to", "resolve_conj", "__get__", "__getitem__",
           "unsqueeze", "mul", "mul_", "sum", "tensor", "stack", "cat"}
# parameters ember leaves out everywhere, as PyTorch features it does not model
EVERYWHERE = {
    "names": "named tensors are not modelled",
    "memory_format": "ember tensors have one layout per stride set; memory formats are not modelled",
    "layout": "sparse layouts are made by the sparse constructors, not by a dense op's keyword",
    "pin_memory": "host memory is not pinned on the CPU path",
    "device": "the table runs on the CPU (test_cuda.py covers devices)",
    "requires_grad": "autograd is ember-autograd's (its tests cover requires_grad=)",
    "generator": "random lines draw from their generator= (optable_random.py); other ops take none",
}


class Recorder(TorchFunctionMode):
    """Records (function, args, kwargs, whether it returned, result) of every torch call made under it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            result = func(*args, **kwargs)
        except Exception:
            self.calls.append((func, args, kwargs, False, None))
            raise
        self.calls.append((func, args, kwargs, True, result))
        return result


def entry_name(func):
    """The name a recorded callable is reported under: ``torch.add``, ``Tensor.add_``, ``F.interpolate``..."""
    if isinstance(func, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return "aten." + func.__name__.split(".")[0]
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    owner, _, name = qual.rpartition(".")
    module = getattr(func, "__module__", None) or ""
    if owner in ("TensorBase", "Tensor"):
        return "Tensor." + name
    if module == "torch.nn.functional":
        return "F." + name
    if module.startswith("torch._C._") and module != "torch._C._VariableFunctions":
        return f"torch.{module[len('torch._C._'):]}.{name}"
    return "torch." + name


def op_name(func):
    """The aten-style name of a recorded callable (``add``, ``add_``, ``linalg_norm``, ``interpolate``)."""
    return entry_name(func).rpartition(".")[2]


class Param:
    def __init__(self, name, typ, default, has_default, keyword_only):
        self.name, self.type, self.default, self.has_default = name, typ, default, has_default
        self.keyword_only = keyword_only


def signatures(func):
    """The overloads of ``func`` a Python call can reach, each a list of ``Param`` (out tensors named ``out``);
    None for what has no signature of its own (operators, properties)."""
    if isinstance(func, torch._ops.OpOverload):
        schemas = [func._schema]
    elif isinstance(func, torch._ops.OpOverloadPacket):
        schemas = torch._C._jit_get_schemas_for_operator(func._qualified_op_name)
    elif inspect.isfunction(func) or inspect.ismethod(func):
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            return None
        return [[Param(p.name, "*" if p.kind == p.VAR_POSITIONAL else "Any", p.default,
                       p.default is not p.empty or p.kind == p.VAR_POSITIONAL, p.kind == p.KEYWORD_ONLY)
                 for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]]
    else:
        name = op_name(func)
        if name.startswith("__"):
            return None
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    out = []
    for s in schemas:
        params, seen_out = [], False
        for a in s.arguments:
            if a.is_out:
                if not seen_out:
                    params.append(Param("out", "out", None, True, True))
                seen_out = True
                continue
            typ = str(a.real_type)  # (ScalarType, not the int it is stored as)
            params.append(Param(a.name, typ, a.default_value, a.default_value is not None or
                                typ.startswith("Optional"), a.kwarg_only))
        # (TorchScript's overloads on numbers, strings and lists, ``add.t(t[] a, t[] b)``, ``sort(Tensor[](a!) self)``,
        # ``ldexp(float x, int i)``, are not reachable from Python)
        tensors = any("Tensor" in p.type for p in params) or any("Tensor" in str(r.type) for r in s.returns)
        first = params[0] if params else None
        script = first and (first.name in ("a", "l", "list") or first.name == "self" and first.type.startswith("List"))
        if tensors and not script:
            out.append(params)
    return out or None


_OBJECTS = {"ScalarType": torch.dtype, "Layout": torch.layout, "MemoryFormat": torch.memory_format,
            "Device": (str, int, torch.device), "Generator": torch.Generator}


def _fits(value, typ):
    """Whether a Python value can be passed for a schema argument of type ``typ`` (loosely, as overloads differ)."""
    if typ.startswith("Optional["):
        return value is None or _fits(value, typ[9:-1])
    if typ in ("Any", "out") or typ.startswith("t"):
        return True
    if value is None:
        return False
    if typ == "Tensor":
        return isinstance(value, torch.Tensor)
    if typ.startswith("List["):
        inner = typ[5:-1]
        if isinstance(value, (list, tuple)):
            return all(_fits(v, inner) for v in value)
        return inner in ("int", "SymInt") and _fits(value, inner)  # int[1] takes an int
    if typ == "bool":
        return isinstance(value, bool)
    if typ in ("int", "SymInt"):
        return isinstance(value, int) and not isinstance(value, bool)
    if typ in _OBJECTS:
        return isinstance(value, _OBJECTS[typ])
    if typ in ("float", "number", "complex", "Scalar"):
        return isinstance(value, (int, float, complex, bool)) or (isinstance(value, torch.Tensor) and value.dim() == 0)
    if typ == "str":
        return isinstance(value, str)
    return True


def bind(overloads, args, kwargs):
    """The names of the parameters ``args``/``kwargs`` give a non-default value, under the first overload they fit."""
    kwargs = dict(kwargs)
    for params in overloads:
        positional = [p for p in params if not p.keyword_only]
        star = next((i for i, p in enumerate(positional) if p.type == "*"), None)  # (a Python ``*tensors``)
        if star is not None:
            args = args[:star] + (args[star:],)
        if len(args) > len(positional) or any(k not in {p.name for p in params} for k in kwargs):
            continue
        given = dict(zip((p.name for p in positional), args), **kwargs)
        by_name = {p.name: p for p in params}
        if any(p.name not in given and not p.has_default for p in params):
            continue
        if not all(_fits(v, by_name[k].type) for k, v in given.items()):
            continue
        return {k for k, v in given.items() if not (by_name[k].has_default and _is_default(v, by_name[k].default))}
    return None


def _is_default(value, default):
    if isinstance(value, torch.Tensor) or isinstance(default, torch.Tensor):
        return value is default
    if default is inspect.Parameter.empty:
        return False
    try:
        return type(value) is type(default) and value == default or (value is None and default is None) or (
            not isinstance(value, (bool, type(None))) and not isinstance(default, (bool, type(None)))
            and value == default)
    except Exception:  # noqa: BLE001 - values that do not compare are not the default
        return False


def optional_params(overloads):
    """Parameter names some overload lets a call leave out."""
    names = [{p.name for p in params} for params in overloads]
    every = set.intersection(*names)
    out = set()
    for params in overloads:
        out |= {p.name for p in params if (p.has_default or p.name not in every) and p.type != "*"}
    return out


def base_name(line_name):
    name = line_name.split(" ")[0].split("(")[0]
    return name[len("Tensor."):] if name.startswith("Tensor.") else name


def record(line):
    """The recorded torch calls of ``line``'s samples, for one dtype (parameters do not depend on it), and of its
    out= test."""
    dtype = "float64" if "float64" in line.dtypes else line.dtypes[0]
    calls = []
    rng = np.random.default_rng(0)
    cases = [(dtype, a, k) for a, k in line.samples(dtype, rng)]
    if test_ops.OUT_SUPPORT[id(line)]:
        cases += test_ops.out_cases(line)
    for dtype, args, kwargs in cases:
        a, k = convert(torch, args, dtype), convert(torch, kwargs, dtype)
        with warnings.catch_warnings(), Recorder() as rec:
            warnings.simplefilter("ignore")
            try:
                line.call(torch, *a, **k)
            except Exception:  # noqa: BLE001 - error samples: recorded as calls that did not return
                pass
        calls += rec.calls
    return calls


def targets(line, calls):
    """The calls of ``line`` that belong to its op."""
    base = base_name(line.name)
    own = [c for c in calls if op_name(c[0]) in (base, base.rstrip("_"))]
    if own:
        return own
    others = [c for c in calls if op_name(c[0]) not in HELPERS] or calls  # (_to_copy's only call is Tensor.to)
    return others if len({entry_name(c[0]) for c in others}) == 1 else []


_COVERAGE = []


def _takes_out(func, args, kwargs, result):
    """Whether torch's Python function takes ``out=`` (a schema may have an out overload Python does not reach), by
    calling it again with out= buffers of ``result``'s dtypes."""
    results = result if isinstance(result, tuple) else (result,)
    if not all(isinstance(r, torch.Tensor) for r in results):
        return False
    out = [torch.empty(0, dtype=r.dtype) for r in results]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            func(*args, **kwargs, out=tuple(out) if isinstance(result, tuple) else out[0])
    except Exception:  # noqa: BLE001 - refused (TypeError, or an aten overload that does not match)
        return False
    return True


def coverage():
    """{entry: (optional params, exercised params, {param: reason} exempted, line names)} over the table (computed
    once)."""
    if _COVERAGE:
        return _COVERAGE[0]
    table, examples = {}, {}
    for line in LINES:
        for func, args, kwargs, returned, result in targets(line, record(line)):
            overloads = signatures(func)
            if overloads is None:
                continue
            entry = table.setdefault(entry_name(func), (optional_params(overloads), set(), {}, set()))
            if entry_name(func).startswith("Tensor."):  # (methods take no out=)
                entry[0].discard("out")
            if returned:  # (a parameter given only to calls that raise is not exercised)
                entry[1].update(bind(overloads, args, kwargs) or ())
                examples.setdefault(entry_name(func), (func, args, kwargs, result))
            entry[2].update(line.exempt)
            entry[3].add(line.name)
    for name, (optional, exercised, _, _) in table.items():
        if "out" in optional and "out" not in exercised and name in examples and not _takes_out(*examples[name]):
            optional.discard("out")
    _COVERAGE.append(table)
    return table


def _family(entry):
    """The entries of one op: ``torch.add``, ``Tensor.add``, ``Tensor.add_`` (a method takes the function's
    parameters, and is covered where they are exercised through either)."""
    return entry.rpartition(".")[2].rstrip("_")


def _shared():
    """{op family: (exercised, exempted)} over its function and method entries."""
    shared = {}
    for entry, (_, exercised, exempt, _) in coverage().items():
        if entry.startswith(("torch.", "Tensor.")) and entry.count(".") == 1:
            family = shared.setdefault(_family(entry), (set(), set()))
            family[0].update(exercised)
            family[1].update(exempt)
    return shared


def _exercised(entry):
    """(exercised, exempted) parameters of ``entry``, through the function or the methods of its op."""
    also = _shared().get(_family(entry), (set(), set())) if entry.count(".") == 1 else (set(), set())
    return coverage()[entry][1] | also[0], set(coverage()[entry][2]) | also[1]


def gaps():
    """{entry: sorted unexercised, unexempted parameters}."""
    out = {}
    for entry, (optional, _, _, _) in coverage().items():
        exercised, exempt = _exercised(entry)
        missing = sorted(optional - exercised - exempt - set(EVERYWHERE))
        if missing:
            out[entry] = missing
    return out


def test_every_parameter_is_exercised_or_exempt():
    missing = gaps()
    assert not missing, "parameters no op line passes a non-default value (sample them or exempt them): " + "; ".join(
        f"{entry}: {', '.join(params)}" for entry, params in sorted(missing.items()))


def test_exemptions_are_needed():
    """An exemption names an optional parameter of the line's target that no line exercises (a misspelt one, or one
    a sample now passes, is an error)."""
    for line in LINES:
        for param in line.exempt:
            entries = [entry for entry, (optional, _, _, names) in coverage().items()
                       if line.name in names and param in optional]
            assert entries, f"{line.name}: exempts {param!r}, which none of its targets takes"
            assert not all(param in _exercised(entry)[0] for entry in entries), (
                f"{line.name}: exempts {param!r}, which a line exercises")


def test_docs_list_the_exemptions():
    """docs/ops.md's list of exemptions (docs/hooks.py reads them from the source) is the table's."""
    hooks_path = pathlib.Path(__file__).resolve().parents[3] / "docs" / "hooks.py"
    if not hooks_path.exists():
        pytest.skip("no docs folder beside the package (an installed copy of the tests)")
    stub = types.ModuleType("mkdocs.plugins")  # (the hook's only mkdocs import, a decorator)
    stub.event_priority = lambda priority: (lambda f: f)
    saved = {name: sys.modules.get(name) for name in ("mkdocs", "mkdocs.plugins")}
    sys.modules.update({"mkdocs": types.ModuleType("mkdocs"), "mkdocs.plugins": stub})
    try:
        spec = importlib.util.spec_from_file_location("_docs_hooks", hooks_path)
        hooks = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hooks)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    expected = {(line.name, param): reason for line in LINES for param, reason in line.exempt.items()}
    expected.update({("every op", param): reason for param, reason in EVERYWHERE.items()})
    assert hooks.op_exemptions() == expected

if __name__ == "__main__":
    for entry, params in sorted(gaps().items()):
        print(f"{entry}: {', '.join(params)}")
