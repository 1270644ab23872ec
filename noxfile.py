"""ember's test matrix. `nox` runs the default sessions; `nox -l` lists them all.

Packages are discovered, not listed: every packages/<dist>/pyproject.toml is a package, its ember-*
dependencies are read from its pyproject, and every package whose tests/ folder holds test files gets
a `tests-3.11(package='<dist>')` session. A new package therefore needs no edit here.

On Python 3.11 (ORACLE_PYTHON) each package's whole suite runs against PyTorch 2.13, whose CPU build is on these
machines' disk for 3.11 only (elsewhere pip would download the multi-GB CUDA build), in an environment of that
package alone. On the other Pythons one `compat-<python>` session installs every package and no torch and runs each
package's fast subset: the root conftest.py leaves out the test modules that need torch, and the tests marked
``slow`` are left out. That proves the packages install and work there; that each installs alone with only its
declared dependencies is proved on 3.11 (one environment per Python instead of one per package saves CI minutes).

Each session builds its own fresh environment (CI runs in a fresh clone): nothing is shared
between sessions except pip's download cache. A session that passed removes its environment (see _release).
"""
import glob
import os
import re
import shutil
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"
PYTHONS = ["3.11", "3.12", "3.13"]
ORACLE_PYTHON = "3.11"
TEST_DEPS = ["pytest", "hypothesis", "mpmath"]
# test marker -> the package such tests need ("name: needs ember-x ..." in pyproject.toml's markers, as conftest.py
# reads them): sessions without that package run these tests again after installing it
OPTIONAL = dict(re.findall(r"^(\w+): needs (ember-[\w-]+)", "\n".join(
    tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]),
    re.MULTILINE))
ORACLE = "torch==2.13.0"

nox.options.reuse_venv = "no"
nox.options.error_on_external_run = True
nox.options.error_on_missing_interpreters = True  # a missing Python must fail CI, not skip its sessions
nox.options.download_python = "never"


def _find_pythons():
    """Put pyenv's interpreters of PYTHONS on PATH where no working ``python3.X`` is there already (pyenv's shims
    answer only for the versions selected globally)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for v in PYTHONS:
        found = shutil.which(f"python{v}")
        if found and "shims" not in found:
            continue
        dirs = sorted(glob.glob(str(pyenv / f"{v}.*" / "bin")))
        if dirs:
            os.environ["PATH"] = dirs[-1] + os.pathsep + os.environ["PATH"]


_find_pythons()
# The default matrix; `bench` is run on request only. A pytest session runs last so that the run's
# closing lines are a test summary.
nox.options.sessions = ["lint", "docs", "kernels", "tests", "compat", "integration"]


def _release(session):
    """Remove a passed session's environment unless it is to be reused (``nox -r``). Environments are rebuilt on
    every run, and kept they add up: the whole matrix held 16 GB of disk, one session at a time needs 1.4 GB (a CI
    run failed with a full disk). A failed session keeps its environment for inspection."""
    if not session.virtualenv.reuse_existing:
        shutil.rmtree(session.virtualenv.location, ignore_errors=True)


def _req_name(req):
    return re.split(r"[\s\[<>=!~;@(]", req, maxsplit=1)[0].lower().replace("_", "-")


def _load_packages():
    """dist name -> {dir, ember deps (direct), test group}."""
    found = {}
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text())
        project = data["project"]
        deps = [_req_name(r) for r in project.get("dependencies", [])]
        found[project["name"]] = {
            "dir": pyproject.parent,
            "deps": [d for d in deps if d == "ember" or d.startswith("ember-")],
            # extra test-only requirements a package may declare (PEP 735 group "test")
            "test": [r for r in data.get("dependency-groups", {}).get("test", []) if isinstance(r, str)],
        }
    return found


PKGS = _load_packages()


def _closure(name):
    """The package and every ember package it needs, directly or not (dependencies first)."""
    order = []

    def visit(n):
        if n in order:
            return
        if n not in PKGS:
            raise ValueError(f"{name} needs {n}, which is not in packages/")
        for d in PKGS[n]["deps"]:
            visit(d)
        order.append(n)

    visit(name)
    return order


def _editable(names):
    args = []
    for n in names:
        args += ["-e", str(PKGS[n]["dir"].relative_to(ROOT))]
    return args


def _has_tests(info):
    tests = info["dir"] / "tests"
    return tests.is_dir() and any(tests.rglob("test_*.py"))


# only packages with test files: a pytest run that collects nothing exits 5
TESTED = [n for n, info in PKGS.items() if _has_tests(info)]
# every package, the meta-package last (it pins the others; an editable install of it has no code)
ALL = [n for n in PKGS if n != "ember"] + (["ember"] if "ember" in PKGS else [])


def _marks(tests, marker):
    """Whether a test module under ``tests`` carries ``marker`` (``pytest.mark.X``, or optable's ``needs_X``)."""
    pattern = re.compile(rf"mark\.{marker}\b|needs_{marker}\b")
    return any(pattern.search(p.read_text(encoding="utf-8")) for p in tests.rglob("*.py"))


def _tests_dir(package):
    return str(PKGS[package]["dir"].relative_to(ROOT) / "tests")


@nox.session(python=[ORACLE_PYTHON])
@nox.parametrize("package", TESTED)
def tests(session, package):
    """One package's whole suite against PyTorch, in an environment of only that package and its ember dependencies.

    Then, for each optional package of OPTIONAL it does not depend on, its tests marked for it once more with that
    package installed."""
    closure = _closure(package)
    # --no-compile: byte-compiling all of torch costs ~7 s per session; imports compile what they use
    session.install("--no-compile", *TEST_DEPS, ORACLE, *(r for n in closure for r in PKGS[n]["test"]),
                    *_editable(closure))
    session.run("python", "-c", "import ember, sys; print('ember', ember.__version__, 'from', ember.__file__)")
    session.run("pytest", _tests_dir(package), *session.posargs)
    for marker, dist in OPTIONAL.items():
        if dist in PKGS and dist not in closure and _marks(PKGS[package]["dir"] / "tests", marker):
            session.install("--no-compile", *_editable(_closure(dist)))
            # exit code 5: no test of this package carries the marker
            session.run("pytest", _tests_dir(package), "-m", marker, *session.posargs, success_codes=[0, 5])
    _release(session)


@nox.session(python=[v for v in PYTHONS if v != ORACLE_PYTHON])
def compat(session):
    """Every package installed together without torch; each package's tests that need no torch, less the slow ones.

    One pytest run per package: their tests/ folders are not packages and would clash in one run."""
    session.install("--no-compile", *TEST_DEPS, *(r for n in ALL for r in PKGS[n]["test"]), *_editable(ALL))
    session.run("python", "-c", "import ember, sys; print('ember', ember.__version__, 'from', ember.__file__)")
    for package in TESTED:
        # exit code 5: every test module of the package needs torch
        session.run("pytest", _tests_dir(package), "-m", "not slow", *session.posargs, success_codes=[0, 5])
    _release(session)


@nox.session
def integration(session):
    """Wheels of every package, the meta-package installed from them, and the integration tests
    (which also install every package into fresh venvs, from these wheels and editable)."""
    wheelhouse = Path(session.create_tmp()).resolve() / "wheelhouse"
    if wheelhouse.exists():
        for f in wheelhouse.iterdir():
            f.unlink()
    # one pip run with the build backend installed here: an isolated build environment per package costs seconds each
    session.install("hatchling>=1.21")
    session.run("python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheelhouse),
                *(str(PKGS[n]["dir"]) for n in ALL))
    wheels = sorted(str(p) for p in wheelhouse.glob("*.whl"))
    # wheels by path (so a same-named project on an index cannot win) plus --find-links for the pins
    session.install("pytest", "--find-links", str(wheelhouse), *wheels)
    # the docs' code blocks again, now with every package installed (a package's own session skips the blocks that
    # need packages it does not depend on)
    session.run("pytest", "integration_tests", "packages/ember-nn/tests/test_docs_examples.py", *session.posargs,
                env={"EMBER_WHEELHOUSE": str(wheelhouse)})
    _release(session)


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", ".")
    _release(session)


@nox.session
def kernels(session):
    """Compile every registered CuPy kernel of every package with NVRTC (sm_80, sm_90); no GPU needed."""
    session.install("cupy-cuda12x", "nvidia-cuda-nvrtc-cu12", *_editable(ALL))
    session.run("python", "packages/ember-core/tools/compile_kernels.py", *session.posargs)
    _release(session)


@nox.session
def docs(session):
    """The documentation site, built with --strict (the ops reference is generated from the registry)."""
    # ruff: mkdocstrings formats the signatures with it
    session.install("mkdocs", "mkdocs-material", "mkdocstrings[python]", "ruff", *_editable(ALL))
    site = Path(session.create_tmp()).resolve() / "site"
    session.run("mkdocs", "build", "--strict", "--clean", "-d", str(site))
    _release(session)


@nox.session  # not in nox.options.sessions: run with `nox -s bench`
def bench(session):
    """ember against PyTorch on the CPU; prints ratios. Not in the default run: timings need a quiet machine."""
    # ray: bench_elastic's rows of the Ray path
    session.install("torch==2.13.0", "threadpoolctl", "ray", *_editable(ALL))
    # results go to bench-results/<date>-<commit>.json unless EMBER_BENCH_JSON names a file
    out = ["--json", os.environ["EMBER_BENCH_JSON"]] if os.environ.get("EMBER_BENCH_JSON") else []
    # OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (set on some machines for old OpenBLAS builds) slow
    # a current NumPy's BLAS; the benchmark command alone runs without them (run.py prints the kernel used)
    session.run("env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE", "python", "benchmarks/run.py", *out,
                *session.posargs, external=True)
