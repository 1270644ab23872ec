"""ember.hub / ember.utils.model_zoo against torch.hub, served by a real HTTP server on 127.0.0.1."""
import hashlib
import http.server
import io
import os
import threading
import urllib.error
import zipfile

import pytest
import torch

import ember
import ember.hub
import ember.utils.model_zoo


@pytest.fixture(scope="module")
def server():
    """An HTTP server on the loopback interface serving ``files`` (name -> bytes) and counting requests."""
    files, hits = {}, []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.lstrip("/")
            hits.append(name)
            if name not in files:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(files[name])))
            self.end_headers()
            self.wfile.write(files[name])

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files, hits
    httpd.shutdown()
    thread.join()


@pytest.fixture(autouse=True)
def _fresh_hub_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(ember.hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "ember_home"))
    for var in ("no_proxy", "NO_PROXY"):  # the test server is local: never go through a configured proxy
        monkeypatch.setenv(var, "127.0.0.1,localhost")


def _checkpoint(seed=0):
    torch.manual_seed(seed)
    sd = {"fc.weight": torch.randn(3, 4), "fc.bias": torch.randn(3)}
    buf = io.BytesIO()
    torch.save(sd, buf)
    return sd, buf.getvalue()


def _publish(files, data, stem="resnet"):
    name = f"{stem}-{hashlib.sha256(data).hexdigest()[:10]}.pth"
    files[name] = data
    return name


def _same(e, t):
    assert e.tolist() == t.tolist() and tuple(e.shape) == tuple(t.shape)


def test_get_dir_and_set_dir(monkeypatch, tmp_path):
    assert ember.hub.get_dir() == str(tmp_path / "ember_home" / "hub")
    monkeypatch.delenv("EMBER_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert ember.hub.get_dir() == os.path.expanduser("~/.cache/ember/hub")
    ember.hub.set_dir(tmp_path / "elsewhere")
    assert ember.hub.get_dir() == str(tmp_path / "elsewhere")


def test_load_state_dict_from_url(server, tmp_path):
    base, files, hits = server
    sd, data = _checkpoint()
    name = _publish(files, data)
    out = ember.hub.load_state_dict_from_url(f"{base}/{name}", progress=False, check_hash=True)
    assert list(out) == list(sd)
    for k in sd:
        _same(out[k], sd[k])
    cached = tmp_path / "ember_home" / "hub" / "checkpoints" / name
    assert cached.read_bytes() == data
    assert os.listdir(cached.parent) == [name]  # no temporary file left behind
    ref = torch.hub.load_state_dict_from_url(f"{base}/{name}", model_dir=str(tmp_path / "torch"), progress=False,
                                             check_hash=True)
    for k in sd:
        _same(out[k], ref[k])
    n = len(hits)
    ember.hub.load_state_dict_from_url(f"{base}/{name}", progress=False)
    assert len(hits) == n  # served from the cache


def test_model_dir_file_name_and_model_zoo(server, tmp_path):
    base, files, _ = server
    sd, data = _checkpoint(1)
    name = _publish(files, data, "zoo")
    assert ember.utils.model_zoo.load_url is ember.hub.load_state_dict_from_url
    out = ember.utils.model_zoo.load_url(f"{base}/{name}", model_dir=tmp_path / "m", file_name="mine.pt",
                                         progress=False)
    assert os.listdir(tmp_path / "m") == ["mine.pt"]
    _same(out["fc.bias"], sd["fc.bias"])


def test_hash_mismatch_leaves_no_file(server, tmp_path):
    base, files, _ = server
    _, data = _checkpoint(2)
    files["bad-0123abcd.pth"] = data
    for load, model_dir in ((ember.hub.load_state_dict_from_url, tmp_path / "e"),
                            (torch.hub.load_state_dict_from_url, tmp_path / "t")):
        with pytest.raises(RuntimeError, match="0123abcd"):
            load(f"{base}/bad-0123abcd.pth", model_dir=str(model_dir), progress=False, check_hash=True)
        assert os.listdir(model_dir) == []
    actual = hashlib.sha256(data).hexdigest()[:8]
    with pytest.raises(RuntimeError, match=f'expected prefix "0123abcd", got "{actual}"'):
        ember.hub.download_url_to_file(f"{base}/bad-0123abcd.pth", tmp_path / "e" / "x", hash_prefix="0123abcd",
                                       progress=False)
    assert os.listdir(tmp_path / "e") == []


def test_check_hash_needs_a_prefix_in_the_name(server, tmp_path):
    base, files, _ = server
    files["plain.pth"] = _checkpoint()[1]
    with pytest.raises(ValueError, match="sha256 prefix"):
        ember.hub.load_state_dict_from_url(f"{base}/plain.pth", progress=False, check_hash=True)


def test_download_url_to_file_with_progress(server, tmp_path, capfd):
    base, files, _ = server
    files["blob.bin"] = os.urandom(3 << 20)
    dst = tmp_path / "blob.bin"
    ember.hub.download_url_to_file(f"{base}/blob.bin", dst, hash_prefix=hashlib.sha256(files["blob.bin"])
                                   .hexdigest()[:12])
    assert dst.read_bytes() == files["blob.bin"]
    assert "3.00M" in capfd.readouterr().err  # tqdm's bar, in binary units


def test_missing_url(server, tmp_path):
    base, _, _ = server
    for load in (ember.hub.load_state_dict_from_url, torch.hub.load_state_dict_from_url):
        with pytest.raises(urllib.error.HTTPError):
            load(f"{base}/nope.pth", model_dir=str(tmp_path), progress=False)
    assert os.listdir(tmp_path) == []


def test_zipped_checkpoint_is_extracted(server, tmp_path):
    base, files, _ = server
    sd, data = _checkpoint(3)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("inner/weights.pth", data)
    files["packed.zip"] = buf.getvalue()
    out = ember.hub.load_state_dict_from_url(f"{base}/packed.zip", model_dir=tmp_path, progress=False)
    _same(out["fc.weight"], sd["fc.weight"])
    assert sorted(os.listdir(tmp_path)) == ["packed.zip", "weights.pth"]


def test_weights_only_is_the_default(server, tmp_path):
    import datetime
    base, files, _ = server
    buf = io.BytesIO()
    torch.save({"when": datetime.date(2020, 1, 1)}, buf)
    files["meta.pth"] = buf.getvalue()
    with pytest.raises(Exception, match="datetime.date"):
        ember.hub.load_state_dict_from_url(f"{base}/meta.pth", model_dir=tmp_path, progress=False)
    out = ember.hub.load_state_dict_from_url(f"{base}/meta.pth", model_dir=tmp_path, progress=False,
                                             weights_only=False)
    assert out["when"].year == 2020
