"""Collection rules shared by every package's tests (pytest runs from the repository root, so this file applies
to all of them).

* Without PyTorch (the oracle is on this machine's disk for Python 3.11 only; other Pythons would download the
  multi-GB CUDA build), test modules that import torch, directly or through a helper module beside them, are
  not collected: the rest of the suite still runs there.
* Tests marked ``autograd`` need ember-autograd. A package that does not depend on it runs them in the second
  half of its nox session, after installing it; before, and wherever it is absent, they are skipped.
"""
import importlib.util
import re
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


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("ember.autograd") is not None:
        return
    skip = pytest.mark.skip(reason="needs ember-autograd (its package's nox session runs it once installed)")
    for item in items:
        if item.get_closest_marker("autograd"):
            item.add_marker(skip)
