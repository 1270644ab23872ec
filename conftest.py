"""Collection rules shared by every package's tests (pytest runs from the repository root, so this file applies
to all of them).

* Without PyTorch (the oracle is on this machine's disk for Python 3.11 only; other Pythons would download the
  multi-GB CUDA build), test modules that import torch, directly or through a helper module beside them, are
  not collected: the rest of the suite still runs there.
* Tests marked ``autograd`` need ember-autograd, ``special`` ember-special, ``nn`` ember-nn (pyproject.toml's
  markers say so). A package that does not depend on one runs those tests at the end of its nox session, after
  installing it; before, and wherever it is absent, they are skipped.
"""
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

_HAS_TORCH = importlib.util.find_spec("torch") is not None
_IMPORTS = re.compile(r"^\s*(?:import|from)\s+([\w.]+)", re.MULTILINE)
_needs_torch = {}


def _imports_torch(path):
    """Whether module ``path`` imports torch, or imports a module beside it that does."""
    if path not in _needs_torch:
        _needs_torch[path] = False  # (an import cycle ends here)
        names = {m.split(".")[0] for m in _IMPORTS.findall(path.read_text(encoding="utf-8"))}
        _needs_torch[path] = "torch" in names or any(
            _imports_torch(path.with_name(f"{n}.py")) for n in names if path.with_name(f"{n}.py").is_file())
    return _needs_torch[path]


def pytest_ignore_collect(collection_path, config):
    if not _HAS_TORCH and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return _imports_torch(Path(collection_path)) or None
    return None


# marker -> the ember package its tests need, from the markers' descriptions ("name: needs ember-x ...") in
# pyproject.toml (the noxfile reads the same to install that package for a second run of them)
OPTIONAL = dict(re.findall(r"^(\w+): needs (ember-[\w-]+)", "\n".join(
    tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]),
    re.MULTILINE))


def pytest_collection_modifyitems(config, items):
    for marker, dist in OPTIONAL.items():
        if importlib.util.find_spec("ember." + marker) is not None:
            continue
        skip = pytest.mark.skip(reason=f"needs {dist} (its package's nox session runs it once installed)")
        for item in items:
            if item.get_closest_marker(marker):
                item.add_marker(skip)
