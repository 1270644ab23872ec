"""ember finds its extensions' entry points as importlib.metadata does, without importing it."""
import importlib.metadata
import sys

from ember import _extensions


def _dist(root, folder, text):
    (root / folder).mkdir()
    (root / folder / "entry_points.txt").write_text(text)


def test_entry_points_match_importlib_metadata(tmp_path, monkeypatch):
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    _dist(first, "ember_probe-1.0.dist-info", "[console_scripts]\nprobe = a:b\n\n[ember.extensions]\n"
          "probe = ember_probe._setup:install\n# a comment\nextra = ember_probe.x:y.z [fast]\n")
    _dist(first, "old_probe.egg-info", "[ember.extensions]\nold = old_probe:install\n")
    _dist(later, "Ember.Probe-2.0.dist-info", "[ember.extensions]\nshadowed = a:b\n")  # the same name, later: hidden
    monkeypatch.setattr(sys, "path", [str(first), str(later), *sys.path])
    ours = sorted(_extensions.entry_points("ember.extensions"))
    theirs = sorted((e.name, e.value) for e in importlib.metadata.entry_points(group="ember.extensions"))
    assert ours == theirs
    assert ("probe", "ember_probe._setup:install") in ours and ("old", "old_probe:install") in ours
    assert not any(name == "shadowed" for name, _ in ours)
