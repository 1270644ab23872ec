"""ember.hub.load / list / help: hubconf.py entry points from local folders (against torch.hub on the same folder)
and from "GitHub" repositories served by an HTTP server on 127.0.0.1 (ember.hub's GitHub addresses pointed at it):
download into the cache, the trust prompt and trusted_list, ref validation, default branches, archive safety."""
import http.server
import io
import json
import os
import sys
import threading
import zipfile

import pytest
import torch

import ember
import ember.hub

HUBCONF = '''
"""A test hub."""
import helper_mod

dependencies = ["json"]


def model(width, scale=1.0):
    """Makes a model."""
    return {"width": width, "scale": scale, "helper": helper_mod.VALUE}


def _private():
    pass


constant = 3
'''


@pytest.fixture(autouse=True)
def _fresh_hub_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(ember.hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "ember_home"))
    for var in ("no_proxy", "NO_PROXY"):  # the test server is local: never go through a configured proxy
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    monkeypatch.delenv(ember.hub.ENV_GITHUB_TOKEN, raising=False)
    yield
    sys.modules.pop("helper_mod", None)  # (what a hubconf imports stays imported, in torch.hub too)


def _write_repo(folder, hubconf=HUBCONF):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hubconf.py").write_text(hubconf)
    (folder / "helper_mod.py").write_text("VALUE = 'from the repository'\n")
    return str(folder)


@pytest.mark.parametrize("hub", [torch.hub, ember.hub], ids=["torch", "ember"])
def test_local_load(hub, tmp_path):
    folder = _write_repo(tmp_path / "repo")
    path_before = list(sys.path)
    out = hub.load(folder, "model", 5, source="local", scale=2.0)
    assert out == {"width": 5, "scale": 2.0, "helper": "from the repository"}
    assert sys.path == path_before and "hubconf" not in sys.modules
    assert hub.load(folder, "model", 1, source="LOCAL")["width"] == 1


@pytest.mark.parametrize("call,error,match", [
    (lambda hub, d: hub.load(d, "model", 1, source="gitlab"), ValueError, "Unknown source"),
    (lambda hub, d: hub.load(d, 3, source="local"), ValueError, "model should be a string"),
    (lambda hub, d: hub.load(d, "nothing", source="local"), RuntimeError, "Cannot find callable nothing"),
    (lambda hub, d: hub.load(d, "constant", source="local"), RuntimeError, "Cannot find callable constant"),
])
def test_local_errors_match_torch(call, error, match, tmp_path):
    folder = _write_repo(tmp_path / "repo")
    for hub in (torch.hub, ember.hub):
        with pytest.raises(error, match=match):
            call(hub, folder)


def test_missing_dependencies(tmp_path):
    folder = _write_repo(tmp_path / "repo", HUBCONF.replace('["json"]', '["json", "no_such_module_x", "nor_y"]'))
    for hub in (torch.hub, ember.hub):
        with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_x, nor_y"):
            hub.load(folder, "model", 1, source="local")


# ---- GitHub repositories, served locally ------------------------------------------------------------------
def _zipball(top, files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(top + "/", "")
        for name, text in files.items():
            zf.writestr(f"{top}/{name}", text)
    return buf.getvalue()


@pytest.fixture
def github(monkeypatch):
    """A stand-in for github.com and its API: ``routes`` maps request paths (with their query) to bytes."""
    routes, hits = {}, []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = routes.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setattr(ember.hub, "_GITHUB", base)
    monkeypatch.setattr(ember.hub, "_GITHUB_API", base)
    yield routes, hits
    httpd.shutdown()
    thread.join()


def _publish(routes, owner="alice", name="models", ref="main", hubconf=HUBCONF, default=True):
    routes[f"/{owner}/{name}/zipball/{ref}"] = _zipball(f"{owner}-{name}-0abc123", {
        "hubconf.py": hubconf, "helper_mod.py": "VALUE = 'downloaded'\n"})
    if default:
        routes[f"/{owner}/{name}/tree/{ref}/"] = b"<html></html>"
    routes[f"/repos/{owner}/{name}/branches?per_page=100&page=1"] = json.dumps(
        [{"name": ref, "commit": {"sha": "0abc123def"}}]).encode()
    routes[f"/repos/{owner}/{name}/branches?per_page=100&page=2"] = b"[]"
    routes[f"/repos/{owner}/{name}/tags?per_page=100&page=1"] = b"[]"


def test_github_download_cache_and_reload(github, tmp_path, capsys):
    routes, hits = github
    _publish(routes)
    out = ember.hub.load("alice/models", "model", 7, trust_repo=True)
    assert out == {"width": 7, "scale": 1.0, "helper": "downloaded"}
    hub = tmp_path / "ember_home" / "hub"
    assert sorted(os.listdir(hub)) == ["alice_models_main", "trusted_list"]  # archive removed, folder renamed
    assert (hub / "trusted_list").read_text() == "alice_models\n"
    assert "Downloading" in capsys.readouterr().out
    n = len(hits)
    assert ember.hub.list("alice/models:main") == ["model"]
    assert ember.hub.help("alice/models", "model") == "Makes a model."
    assert not any("zipball" in h for h in hits[n:])  # served from the cache
    assert "Using cache found in" in capsys.readouterr().err
    routes["/alice/models/zipball/main"] = _zipball("alice-models-1def456", {
        "hubconf.py": HUBCONF.replace("scale=1.0", "scale=3.0"), "helper_mod.py": "VALUE = 'downloaded'\n"})
    assert ember.hub.load("alice/models", "model", 1, force_reload=True, verbose=False)["scale"] == 3.0


def test_default_branch_master_and_refs_with_slashes(github, tmp_path):
    routes, _ = github
    _publish(routes, ref="master", default=False)  # no main branch: tree/main/ is a 404
    assert ember.hub.load("alice/models", "model", 2, trust_repo=True)["width"] == 2
    _publish(routes, ref="release/v2")
    ember.hub.load("alice/models:release/v2", "model", 2, trust_repo=True)
    assert (tmp_path / "ember_home" / "hub" / "alice_models_release_v2" / "hubconf.py").exists()


def test_ref_validation(github):
    routes, hits = github
    _publish(routes)
    routes["/alice/models/zipball/0abc12"] = routes["/alice/models/zipball/main"]
    assert ember.hub.load("alice/models:0abc12", "model", 1, trust_repo=True)["width"] == 1  # a branch tip's commit
    routes["/alice/models/zipball/feature"] = routes["/alice/models/zipball/main"]
    with pytest.raises(ValueError, match="Cannot find feature in https://github.com/alice/models"):
        ember.hub.load("alice/models:feature", "model", 1, trust_repo=True)
    n = len(hits)
    ember.hub.load("alice/models:feature", "model", 1, trust_repo=True, skip_validation=True)
    assert not any("/repos/" in h for h in hits[n:])


def test_trust_prompt(github, monkeypatch, tmp_path):
    routes, _ = github
    _publish(routes)
    answers = []
    monkeypatch.setattr("builtins.input", lambda prompt: answers.pop(0))
    answers.append("n")
    with pytest.raises(Exception, match="Untrusted repository."):
        ember.hub.load("alice/models", "model", 1)
    answers.append("maybe")
    with pytest.raises(ValueError, match="Unrecognized response maybe"):
        ember.hub.load("alice/models", "model", 1)
    answers.append("Yes")
    assert ember.hub.load("alice/models", "model", 1)["width"] == 1
    assert ember.hub.load("alice/models", "model", 1)["width"] == 1  # trusted now: no question ("check")
    answers.append("y")
    ember.hub.list("alice/models", trust_repo=False)  # False always asks
    assert not answers
    _publish(routes, owner="pytorch", name="vision")
    assert ember.hub.list("pytorch/vision") == ["model"]  # PyTorch's own owners are trusted
    assert (tmp_path / "ember_home" / "hub" / "trusted_list").read_text().split() == ["alice_models"]


def test_archive_entries_outside_the_cache_are_refused(github, tmp_path):
    routes, _ = github
    _publish(routes)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("alice-models-0abc123/hubconf.py", HUBCONF)
        zf.writestr("alice-models-0abc123/../../escaped.py", "x = 1\n")
    routes["/alice/models/zipball/main"] = buf.getvalue()
    with pytest.raises(ValueError, match="unsafe path"):
        ember.hub.load("alice/models", "model", 1, trust_repo=True)
    assert not (tmp_path / "ember_home" / "escaped.py").exists() and not (tmp_path / "escaped.py").exists()
