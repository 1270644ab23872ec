"""The Python blocks of the docs run as written: those of docs/getting-started.md, docs/index.md and each
package's README.md, each page's blocks in order and in one namespace (as a reader pastes them one after the other
into one session).

A block titled "needs ..." ("needs scikit-learn", "needs a CUDA GPU and ember-amp") is skipped where one of those
is missing; a block that builds on an earlier one repeats that block's needs in its title. A package's README
needs that package."""
import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

import ember

ROOT = Path(__file__).resolve().parents[3]


def _package_needs(readme):
    """A package's README needs the package; the meta-package's, every package it pins."""
    project = tomllib.loads((readme.parent / "pyproject.toml").read_text())["project"]
    if project["name"] != "ember":
        return [project["name"]]
    return [re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0] for d in project["dependencies"]]


# page -> what all its blocks need
PAGES = {ROOT / "docs" / "getting-started.md": [], ROOT / "docs" / "index.md": [],
         **{p: _package_needs(p) for p in sorted((ROOT / "packages").glob("*/README.md"))}}
FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.M | re.S)
TITLE = re.compile(r'title="(?P<title>[^"]*)"')
# the needs a title may name besides ember packages -> whether the machine has it
CHECKS = {
    "a CUDA GPU": lambda: ember.cuda.is_available(),
    "scikit-learn": lambda: importlib.util.find_spec("sklearn") is not None,
    "several processes": lambda: False,  # a script to start as processes of its own: not run in this namespace
}


def _needs(info):
    """'title="needs a CUDA GPU and ember-amp"' -> ['a CUDA GPU', 'ember-amp']; no title -> []."""
    title = TITLE.search(info)
    if not title:
        return []
    m = re.fullmatch(r"needs (.+)", title["title"])
    assert m, f"a code block's title must read 'needs ...', got {title['title']!r}"
    return [n.strip() for n in re.split(r",|\band\b", m[1]) if n.strip()]


def _available(need):
    if need.startswith("ember"):
        try:
            importlib.metadata.distribution(need)
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    assert need in CHECKS, f"unknown need {need!r} in a code block's title: add it to CHECKS"
    return CHECKS[need]()


def _blocks():
    """(page, line, needs, code) of every Python block, in page order."""
    blocks = []
    for page, page_needs in PAGES.items():
        text = page.read_text()
        blocks += [(page, text.count("\n", 0, m.start()) + 1, page_needs + _needs(m["info"]), m["code"])
                   for m in FENCE.finditer(text)]
    return blocks


BLOCKS = _blocks()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """A reader's session per page: one namespace for its blocks, and a working directory for the files they
    write."""
    return {page: ({"__name__": "__docs__"}, tmp_path_factory.mktemp("docs")) for page in PAGES}


def test_pages_have_blocks():
    assert sum(page.name == "getting-started.md" for page, *_ in BLOCKS) >= 8
    assert {page.parent.name for page, *_ in BLOCKS} >= {"ember-core", "ember-autograd", "ember-nn", "ember-amp"}
    # a block that puts tensors on the GPU, unless it falls back to the CPU, must say that it needs one
    for page, line, needs, code in BLOCKS:
        if re.search(r"[\"']cuda[\"']", code) and "is_available()" not in code:
            assert "a CUDA GPU" in needs, f"{page}, line {line}, uses CUDA but is not titled 'needs a CUDA GPU'"


@pytest.mark.parametrize("page, line, needs, code", BLOCKS,
                         ids=[f"{page.relative_to(ROOT)}:{line}" for page, line, *_ in BLOCKS])
def test_block_runs(page, line, needs, code, sessions, monkeypatch):
    missing = [n for n in needs if not _available(n)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    namespace, workdir = sessions[page]
    monkeypatch.chdir(workdir)  # blocks may write files (a checkpoint)
    exec(compile(code, f"{page.relative_to(ROOT)}, block at line {line}", "exec"), namespace)
