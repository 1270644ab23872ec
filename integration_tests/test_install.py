"""Every package installs into a fresh environment and `import ember` finds all of them.

The same check runs twice: from built wheels (as users get them) and from editable installs (as
developers work). ember is a pkgutil-style namespace spread over several distributions, so both
layouts must work. The `integration` nox session passes the wheels it built in EMBER_WHEELHOUSE;
run alone, this module builds them itself.
"""
import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))

pytestmark = pytest.mark.slow

# Runs inside the new environment: import every given module, do a little arithmetic, report where
# ember came from and which extensions loaded.
PROGRAM = """
import importlib, json, sys
import ember
for name in sys.argv[1:]:
    importlib.import_module(name)
a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
b = (a @ a + 1).sum(0)
assert b.tolist() == [24.0, 34.0], b.tolist()
assert ember.ones(3, dtype=ember.int64).sum().item() == 3
print(json.dumps({"file": ember.__file__, "path": list(ember.__path__), "version": ember.__version__,
                  "extensions": list(ember._extensions.loaded)}))
"""


def _dist_name(pkg_dir):
    return tomllib.loads((pkg_dir / "pyproject.toml").read_text())["project"]["name"]


def _subpackages(names):
    """Importable names from file paths like ember/nn/__init__.py."""
    mods = set()
    for n in names:
        parts = n.replace("\\", "/").split("/")
        if parts[0] == "ember" and parts[-1] == "__init__.py" and len(parts) > 2:
            mods.add(".".join(parts[:-1]))
    return sorted(mods)


def _fresh_venv(path):
    # no system site packages: only what we install is importable
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(path)
    return path / ("Scripts" if os.name == "nt" else "bin") / "python"


def _run(cmd, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    given = os.environ.get("EMBER_WHEELHOUSE")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheelhouse")
    for pkg in PACKAGE_DIRS:
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(pkg)], cwd=ROOT)
    return out


def _check(python, modules, tmp_path):
    # run from an empty folder so the checkout cannot shadow the installed packages
    out = _run([str(python), "-c", PROGRAM, *modules], cwd=tmp_path).strip().splitlines()[-1]
    _check_first_calls(python, tmp_path)
    return json.loads(out)


def _check_first_calls(python, tmp_path):
    """ember-special's first-call check (its tests' first_call_check.py) as installed: ``import ember`` with every
    package loads no compiler, SciPy, Ray or tqdm; no call of an ember.special function, nor of ember-core's loop
    functions, waits for numba; the loops compile in the background (into the new environment's numba cache)."""
    script = ROOT / "packages" / "ember-special" / "tests" / "first_call_check.py"
    report = json.loads(_run([str(python), str(script)], cwd=tmp_path).strip().splitlines()[-1])
    assert report["import"] == [] and not (report["small"] or report["first"]), report
    assert report["waited"] and not (report["failed"] or report["warm"] or report["jit_free"]), report


def test_wheels_install_into_fresh_venv(wheelhouse, tmp_path):
    wheels = sorted(wheelhouse.glob("*.whl"))
    dists = {w.name.split("-")[0].replace("_", "-") for w in wheels}
    assert dists == {_dist_name(p) for p in PACKAGE_DIRS}, "a package has no wheel"
    modules = []
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            modules += _subpackages(z.namelist())
    python = _fresh_venv(tmp_path / "venv")
    # wheels by path, --find-links so the meta-package's exact pins resolve to them
    _run([str(python), "-m", "pip", "install", "-q", "--find-links", str(wheelhouse), *map(str, wheels)], cwd=tmp_path)
    info = _check(python, modules, tmp_path)
    assert Path(info["file"]).is_relative_to(tmp_path / "venv"), info["file"]
    core = next(w for w in wheels if w.name.startswith("ember_core-"))
    assert info["version"] == core.name.split("-")[1]


def test_editable_installs_into_fresh_venv(tmp_path):
    modules = []
    for pkg in PACKAGE_DIRS:
        src = pkg / "src"
        modules += _subpackages(str(p.relative_to(src)) for p in src.rglob("__init__.py")) if src.is_dir() else []
    python = _fresh_venv(tmp_path / "venv")
    args = [a for pkg in PACKAGE_DIRS for a in ("-e", str(pkg))]
    _run([str(python), "-m", "pip", "install", "-q", *args], cwd=tmp_path)
    info = _check(python, modules, tmp_path)
    # every package's source folder is part of the one `ember` namespace
    assert Path(info["file"]).is_relative_to(ROOT / "packages" / "ember-core" / "src"), info["file"]
    for pkg in PACKAGE_DIRS:
        if (pkg / "src" / "ember").is_dir():
            assert any(Path(p).resolve() == (pkg / "src" / "ember").resolve() for p in info["path"]), pkg.name
