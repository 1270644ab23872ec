"""Smoke tests of the meta-package as installed by the `integration` session (from wheels)."""
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import ember

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def meta():
    try:
        return metadata.distribution("ember")
    except metadata.PackageNotFoundError:
        pytest.skip("the ember meta-package is not installed (run `nox -s integration`)")


def test_meta_pins_are_installed_exactly(meta):
    pins = [r for r in meta.requires or [] if "extra ==" not in r]
    assert pins, "the meta-package pins nothing"
    for req in pins:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)", req.strip())
        assert m, f"meta-package requirement is not an exact pin: {req}"
        assert metadata.version(m[1]) == m[2], req


def test_meta_pins_every_package(meta):
    """Each package of the monorepo must add its exact pin to packages/ember/pyproject.toml."""
    pinned = {re.split(r"[\s=\[]", r, maxsplit=1)[0].lower() for r in meta.requires or [] if "extra ==" not in r}
    dists = {tomllib.loads(p.read_text())["project"]["name"] for p in (ROOT / "packages").glob("*/pyproject.toml")}
    assert dists - {"ember"} <= pinned, f"not pinned by the meta-package: {sorted(dists - {'ember'} - pinned)}"


def test_version_matches_ember_core_metadata(meta):
    assert ember.__version__ == metadata.version("ember-core")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", ember.__version__)


def test_tensor_ops_work():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = ember.arange(2, dtype=ember.float32)
    assert (a + b).tolist() == [[1.0, 3.0], [3.0, 5.0]]
    assert (a @ a).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert a.sum().item() == 10.0
    assert a[1, 0].item() == 3.0
    assert (ember.tensor([1, 2], dtype=ember.int32) + 2.5).dtype == ember.float32
    assert a.shape == ember.Size([2, 2])
    assert str(a.device) == "cpu"
