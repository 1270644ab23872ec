"""mkdocs hook: fills the ops reference (docs/ops.md) from ember's op registry at build time.

The table is made from the registry itself, so it lists exactly the ops of the installed packages
and cannot drift from the code. Docstrings are free text (``|x|``, ``a * b``, ``[min, max]``), so
every cell is emitted as HTML with markdown's special characters written as entities.
"""
import html
import re

MARKER = "<!-- ember-ops-table -->"


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


def on_page_markdown(markdown, page, config, files, **kwargs):
    if page.file.src_uri != "ops.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/ops.md lost its marker {MARKER}")
    return markdown.replace(MARKER, ops_table())
