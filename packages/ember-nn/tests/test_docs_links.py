"""The repository's markdown points at files that exist, and the README's package table lists every package.

Relative links of README.md, docs/ and the packages' READMEs must name existing files or folders (``mkdocs build
--strict`` checks the site's links too, but not the READMEs, and only when the docs session runs). The table of
the README's "Packages" section has a row per folder of packages/ whose last column names the ember packages its
pyproject.toml depends on: a new package adds its row."""
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "packages").glob("*/README.md")])
# [text](target) and [text](target "title"); images too. Code spans and fenced blocks are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")


def _links(page):
    text = CODE.sub("", FENCED.sub("", page.read_text()))
    return [m[1] for m in LINK.finditer(text)]


def test_pages_found():
    assert ROOT / "README.md" in PAGES and ROOT / "docs" / "getting-started.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def test_link_pattern_sees_links(tmp_path):
    page = tmp_path / "p.md"
    page.write_text('[a](x.md) ![img](i.png "t") `[not](code.md)` [u](https://e.org/a)\n```\n[no](f.md)\n```\n')
    assert _links(page) == ["x.md", "i.png", "https://e.org/a"]


def _package_table():
    """The README's Packages table: {package name: set of ember packages in its last column}."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Packages\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| \[`([\w-]+)`\]\(packages/([\w-]+)/\) \|.*\| ([^|]*) \|$", line)
        if m:
            assert m[1] == m[2], f"the row of {m[1]} links to packages/{m[2]}/"
            rows[m[1]] = set(re.findall(r"\bember(?:-[a-z]+)*\b", m[3]))
    return rows


def _ember_deps(pyproject):
    deps = tomllib.loads(pyproject.read_text())["project"].get("dependencies", [])
    names = (re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0].lower() for d in deps)
    return {n for n in names if n == "ember" or n.startswith("ember-")}


def test_readme_lists_every_package():
    rows = _package_table()
    pyprojects = {tomllib.loads(p.read_text())["project"]["name"]: p
                  for p in (ROOT / "packages").glob("*/pyproject.toml")}
    missing = sorted(set(pyprojects) - set(rows))
    assert not missing, f"README.md's Packages table has no row for {missing}: add one per package"
    extra = sorted(set(rows) - set(pyprojects))
    assert not extra, f"README.md lists packages that packages/ does not hold: {extra}"
    for name, needs in rows.items():
        if name == "ember":
            continue  # the meta-package's row says "all of the above"
        deps = _ember_deps(pyprojects[name])
        assert needs == deps, f"README.md says {name} needs {sorted(needs)}, its pyproject.toml says {sorted(deps)}"
