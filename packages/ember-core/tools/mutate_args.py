"""Mutation run over the argument handling of the registry's ops: does the op table notice a wrong keyword?

For every op implementation in ``ember/_ops/*.py`` (a function under ``@elementwise``, ``@op`` or ``@factory``),
each keyword parameter (one with a default, or keyword-only) gets mutants, one at a time:

* ``perturb``: the implementation starts with ``name = _mutated(name, <default>)``, which, for a value other than
  the default, adds 0.001 to a float (and a float array), 1 to an int (and an int array, and the first of a tuple of
  ints), flips a bool and swaps a dtype for its neighbour (float32 for float64...); None and strings pass unchanged;
* ``swap``: the string literals compared with the parameter (``mode == "floor"``) are exchanged, the first two
  distinct ones; with only one, that comparison is negated.

A mutant that changed no value while the op's lines ran is reported UNEXERCISED rather than survived: no sample
passes that parameter a value the mutation applies to (a tensor-valued or string parameter under ``perturb``, a
parameter the lines leave at its default), so the mutant is equivalent for this suite.

The mutant replaces the implementation's code object in place (the registry, its closures and the fast paths all
hold the same function), then the op table's lines for that op (``test_ops.test_op_matches_torch`` of the lines
named for the op, as ``pytest -k <op>`` would pick, without the lines of longer names that merely contain it) run
in this process, and the original code is put back. A mutant is killed when one of them fails.

Run on request (never part of nox's sessions): ``/work/dev/bin/python packages/ember-core/tools/mutate_args.py
[--ops add,div] [--out report.txt]``.
"""
import argparse
import ast
import copy
import importlib
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPS_DIR = ROOT / "src" / "ember" / "_ops"
DECORATORS = {"elementwise", "op", "factory"}


TRIGGERED = [False]  # whether the running mutant changed a value (else it was never exercised)
_OTHER = {"float64": "float32", "float32": "float64", "int64": "int32", "int32": "int64", "complex128": "complex64",
          "complex64": "complex128", "float16": "bfloat16", "bfloat16": "float16"}


def _perturbed(value):
    """A wrong value of the same kind: bool flipped, int + 1, float + 0.001, the first number of a tuple or list
    so, a float array + 0.001, an int array + 1, a dtype swapped for its neighbour; None and strings as they are."""
    import ember
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, (float, complex)):
        return value + 0.001
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], (int, float)):
        return type(value)([_perturbed(value[0])] + list(value[1:]))
    if isinstance(value, ember.dtype) and value.name in _OTHER:
        return getattr(ember, _OTHER[value.name])
    if hasattr(value, "dtype") and hasattr(value, "shape") and getattr(value.dtype, "kind", None) in tuple("fciu"):
        return value + (0.001 if value.dtype.kind in "fc" else 1)
    return value


def _mutated(value, default):
    """``value`` perturbed, unless it is the parameter's default (the mutant then changes only the calls that pass
    the keyword, as a wrong use of it in a branch taken for a non-default value would)."""
    if value is default or type(value) is type(default) and isinstance(value, (bool, int, float, str)) and (
            value == default):
        return value
    new = _perturbed(value)
    if new is not value:
        TRIGGERED[0] = True
    return new


def _touched(value, literals):
    """``value``, noting whether it is one of the swapped literals (the swap then changes the call)."""
    if isinstance(value, str) and value in literals:
        TRIGGERED[0] = True
    return value


def _decorator_op(node):
    """The op name of a registry decorator (``@elementwise("add", ...)``), else None."""
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name in DECORATORS and node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value
    return None


def _keywords(fn):
    """(name, default source) of the keyword parameters of an implementation: those with defaults, and keyword-only
    ones (a required one's default source is a fresh ``object()``, which no value equals)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    with_default = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) if a.defaults else []
    kwonly = [(p, d if d is not None else ast.parse("object()").body[0].value) for p, d in zip(a.kwonlyargs,
                                                                                                a.kw_defaults)]
    return [(p.arg, ast.unparse(d)) for p, d in with_default + kwonly]


def _string_compares(fn, param):
    """The Compare nodes of ``fn`` testing ``param`` (==, !=) against a string literal."""
    out = []
    for node in ast.walk(fn):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
                and isinstance(node.left, ast.Name) and node.left.id == param
                and isinstance(node.comparators[0], ast.Constant) and isinstance(node.comparators[0].value, str)):
            out.append(node)
    return out


def mutants(path):
    """(op name, function name, parameter, kind, mutated FunctionDef) of one module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        names = [n for n in map(_decorator_op, fn.decorator_list) if n]
        if not names:
            continue
        for param, default in _keywords(fn):
            if param == "xp":
                continue
            body_start = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
                getattr(fn.body[0], "value", None), ast.Constant) else 0
            if not (default.startswith(("'", '"'))):  # (a string keyword: the swap below is its mutant)
                m = copy.deepcopy(fn)
                m.decorator_list = []
                m.body.insert(body_start, ast.parse(f"{param} = _mutated({param}, {default})").body[0])
                yield names[0], fn.name, param, "perturb", m
            m = copy.deepcopy(fn)
            m.decorator_list = []
            compares = _string_compares(m, param)
            literals = list(dict.fromkeys(c.comparators[0].value for c in compares))
            if len(literals) >= 2:
                a, b = literals[:2]
                for c in compares:
                    v = c.comparators[0].value
                    c.comparators[0] = ast.Constant(b if v == a else a if v == b else v)
                m.body.insert(body_start, ast.parse(f"_touched({param}, {(a, b)!r})").body[0])
                yield names[0], fn.name, param, f"swap {a!r}<->{b!r}", m
            elif literals:
                c = compares[0]
                c.ops = [ast.NotEq() if isinstance(c.ops[0], ast.Eq) else ast.Eq()]
                m.body.insert(body_start, ast.parse(f"_touched({param}, {(literals[0],)!r})").body[0])
                yield names[0], fn.name, param, f"negate == {literals[0]!r}", m


def _raw(fn):
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _lines_for(op, test_ops):
    """The (line, dtype) cases of ``op``: lines named for it (``add``, ``add_``, ``add(out=)``, ``add (x)``)."""
    out = []
    for line in test_ops.LINES:
        base = line.name.split(" ")[0].split("(")[0]
        base = base[len("Tensor."):] if base.startswith("Tensor.") else base
        if base in (op, op + "_"):
            out += [(line, dtype) for dtype in line.dtypes]
    return out


def _killed(cases, test_ops):
    for line, dtype in cases:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                test_ops.test_op_matches_torch(line, dtype)
        except BaseException as e:  # noqa: BLE001 - any failure (an assertion, a crash of the mutant) kills it
            if isinstance(e, KeyboardInterrupt):
                raise
            return f"{line.name}[{dtype}]: {type(e).__name__}"
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated op names (default: every op)")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--tests", default=str(ROOT / "tests"), help="the folder of the op table (another checkout's "
                        "tests, to compare suites)")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.tests)
    test_ops = importlib.import_module("test_ops")
    from ember._registry import REGISTRY

    only = set(args.ops.split(",")) if args.ops else None
    rows, start = [], time.time()
    counts = {"killed": 0, "survived": 0, "unexercised": 0, "untested": 0, "skipped": 0}
    for path in sorted(OPS_DIR.glob("*.py")):
        module = sys.modules.get(f"ember._ops.{path.stem}")
        if module is None:  # (a module without ops)
            continue
        module._mutated, module._touched = _mutated, _touched
        baseline = {}
        for op, fname, param, kind, node in mutants(path):
            if only and op not in only or op not in REGISTRY:
                continue
            target = _raw(REGISTRY[op].impl)
            cases = _lines_for(op, test_ops)
            where = f"{op} {param} {kind}"
            if not cases:
                counts["untested"] += 1
                rows.append(f"UNTESTED    {where} (no line named for the op)")
                continue
            if op not in baseline:
                baseline[op] = _killed(cases, test_ops)
            if baseline[op] is not None or target.__code__.co_freevars:
                counts["skipped"] += 1
                rows.append(f"SKIPPED     {where} ({baseline[op] or 'a closure'})")
                continue
            code = compile(ast.fix_missing_locations(ast.Module([node], [])), str(path), "exec")
            new = next(c for c in code.co_consts if getattr(c, "co_name", None) == fname)
            original = target.__code__
            target.__code__ = new
            TRIGGERED[0] = False
            try:
                killer = _killed(cases, test_ops)
            finally:
                target.__code__ = original
            status = "killed" if killer else "survived" if TRIGGERED[0] else "unexercised"
            counts[status] += 1
            rows.append(f"{status.upper():11} {where}" + (f" by {killer}" if killer else ""))
            print(rows[-1], flush=True)
    total = counts["killed"] + counts["survived"] + counts["unexercised"]
    summary = (f"{total} mutants run: {counts['killed']} killed, {counts['survived']} survived, "
               f"{counts['unexercised']} unexercised (changed no value); {counts['untested']} of ops without a line, "
               f"{counts['skipped']} skipped; {time.time() - start:.0f} s")
    report = "\n".join(rows + [summary])
    print(summary)
    if args.out:
        pathlib.Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
