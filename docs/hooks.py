"""mkdocs hooks: the tables made from ember's op registry, and the sources mkdocstrings reads.

The ops reference (docs/ops.md) and the function table of docs/api/special.md are made from the registry
itself at build time, so they list exactly the ops of the installed packages and cannot drift from the code.
The op table's exemptions (parameters of PyTorch's signatures no sample passes, with the reason) are read from
the table's source (ember-core's tests/optable*.py) with ``ast``, as the docs build has no torch.
Docstrings are free text (``|x|``, ``a * b``, ``[min, max]``), so every cell is emitted as HTML with
markdown's special characters written as entities.

mkdocstrings reads the code statically (griffe), and griffe stops at the first ``ember`` folder holding an
``__init__.py``: ember-core's. The other packages add their subpackages (``ember.nn``, ...) to that import
name from their own folders, which griffe would not see. So the build merges every package's ``src/ember``
into one tree of links and points mkdocstrings there.
"""
import ast
import html
import re
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

MARKER = "<!-- ember-ops-table -->"
EXEMPTIONS_MARKER = "<!-- ember-ops-exemptions -->"
SPECIAL_MARKER = "<!-- ember-special-table -->"
PACKAGES = Path(__file__).resolve().parents[1] / "packages"
CORE_TESTS = PACKAGES / "ember-core" / "tests"
_merged = []  # the merged source trees of this build, removed after it


def _text(s):
    s = html.escape(s, quote=False)
    # html.escape produced &lt; &gt; &amp; already; protect the rest without touching those entities
    return re.sub(r"&(?:lt|gt|amp);|[\\`*_{}\[\]()#+!|~^:]", lambda m: m[0] if m[0][0] == "&" else f"&#{ord(m[0])};", s)


def _code(s):
    return f"<code>{_text(s)}</code>"


def _doc(doc):
    """First paragraph of a docstring (its summary, which may wrap); ``literal`` spans become code."""
    first = " ".join(line.strip() for line in doc.strip().split("\n\n")[0].splitlines())
    parts = re.split(r"``(.+?)``", first)
    return "".join(_code(p) if i % 2 else _text(p) for i, p in enumerate(parts))


def _spellings(op):
    out = []
    if op.function:
        out.append(f"ember.{op.name}")
    if op.method:
        out.append(f"Tensor.{op.name if op.method is True else op.method}")
    if op.inplace:
        out.append(f"Tensor.{op.name}_" if op.inplace is True else f"Tensor.{op.inplace}")
    out += list(op.operators or ())
    return "<br>".join(_code(s) for s in out)


def _gradient(op):
    if op.vjp_fn is not None:
        return "VJP"
    if not op.differentiable:
        return "not differentiable"
    return "missing"


def ops_table():
    import ember
    from ember._registry import REGISTRY

    families = {}
    for op in REGISTRY.values():
        families.setdefault(getattr(op.impl, "__module__", None) or "other", []).append(op)
    lines = [f"{len(REGISTRY)} ops, ember {_text(ember.__version__)}.", ""]
    for family in sorted(families):
        lines += [f"## {_text(family)}", "", "| op | kind | spellings | gradient | CuPy kernel | description |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for op in sorted(families[family], key=lambda o: o.name):
            kernel = "" if op.kernel is None else _code(str(getattr(op.kernel, "name", None) or "yes"))
            lines.append(f"| {_code(op.name)} | {_text(op.kind)} | {_spellings(op)} | {_gradient(op)} | {kernel} "
                         f"| {_doc(op.doc)} |")
        lines.append("")
    return "\n".join(lines)


def special_table():
    """ember.special's functions: one row per function, its aliases in the same row."""
    import ember.special
    from ember._registry import REGISTRY

    ops = {id(op.fn): op for op in REGISTRY.values()}
    names = {}
    for name in ember.special.__all__:
        fn = getattr(ember.special, name)
        if name != "Tensor":
            names.setdefault(id(fn), (fn, []))[1].append(name)
    count = sum(len(aliases) for _, aliases in names.values())
    lines = [f"{len(names)} functions under {count} names, ember-special {_text(ember.special.__version__)}.", "",
             "| function | also spelled | gradient | description |", "| --- | --- | --- | --- |"]
    for fn, aliases in sorted(names.values(), key=lambda entry: entry[1][0]):
        op = ops.get(id(fn))
        spelled = _spellings(op) if op is not None and (op.function or op.method) else ""
        gradient = _gradient(op) if op is not None else "as the op it wraps"
        lines.append(f"| {'<br>'.join(_code(f'ember.special.{a}') for a in aliases)} | {spelled} | {gradient} "
                     f"| {_doc(op.doc if op is not None else fn.__doc__ or '')} |")
    return "\n".join(lines + [""])


def _literal_dicts(tree):
    """The module-level names of ``tree`` bound to dict literals, evaluated."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, dict):
                names[node.targets[0].id] = value
    return names


def op_exemptions():
    """{(line name, parameter): reason} of the op table (its ``exempt=`` dicts, read from the source: the build
    imports neither the tests nor torch), and ``("every op", parameter)`` for the coverage check's ``EVERYWHERE``."""
    out = {}
    for path in sorted(CORE_TESTS.glob("optable*.py")):
        tree = ast.parse(path.read_text())
        names = _literal_dicts(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Line"):
                continue
            for kw in node.keywords:
                if kw.arg != "exempt":
                    continue
                exempt = names[kw.value.id] if isinstance(kw.value, ast.Name) else ast.literal_eval(kw.value)
                line = ast.literal_eval(node.args[0])
                out.update({(line, param): reason for param, reason in exempt.items()})
    everywhere = _literal_dicts(ast.parse((CORE_TESTS / "test_optable_coverage.py").read_text()))["EVERYWHERE"]
    out.update({("every op", param): reason for param, reason in everywhere.items()})
    return out


def exemptions_table():
    lines = ["| op table line | parameter | why no sample passes it |", "| --- | --- | --- |"]
    for (line, param), reason in sorted(op_exemptions().items(), key=lambda item: (item[0][0] != "every op", item[0])):
        lines.append(f"| {_code(line) if line != 'every op' else 'every op'} | {_code(param)} | {_text(reason)} |")
    return "\n".join(lines + [""])


TABLES = {"ops.md": [(MARKER, ops_table), (EXEMPTIONS_MARKER, exemptions_table)],
          "api/special.md": [(SPECIAL_MARKER, special_table)]}


def on_page_markdown(markdown, page, config, files, **kwargs):
    for marker, make in TABLES.get(page.file.src_uri, ()):
        if marker not in markdown:
            raise ValueError(f"docs/{page.file.src_uri} lost its marker {marker}")
        markdown = markdown.replace(marker, make())
    return markdown


def _merge_sources():
    """A folder whose ``ember/`` links every package's modules (ember-core's files win where two hold one)."""
    tree = Path(tempfile.mkdtemp(prefix="ember-docs-src-"))
    sources = sorted(PACKAGES.glob("*/src"), key=lambda src: (src.parent.name != "ember-core", src.parent.name))
    for src in sources:
        for path in sorted(src.rglob("*.py")):
            dest = tree / path.relative_to(src)
            if "__pycache__" not in path.parts and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.symlink_to(path)
    return tree


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config, **kwargs):
    tree = _merge_sources()
    _merged.append(tree)
    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(tree)]
    return config


def on_post_build(config, **kwargs):
    while _merged:
        shutil.rmtree(_merged.pop(), ignore_errors=True)


def on_build_error(error, **kwargs):
    on_post_build(None)
