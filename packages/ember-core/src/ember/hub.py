"""``ember.hub``: download checkpoints over HTTP(S) into a local cache and load them.

The cache is ``$EMBER_HOME/hub`` (default ``~/.cache/ember/hub``, or ``$XDG_CACHE_HOME/ember/hub``);
checkpoints go to its ``checkpoints`` folder. Downloads land in a temporary file next to the target
and are renamed into place only when complete (and, if asked, hash-checked), so an interrupted or
corrupt download never leaves a file that a later call would take for the checkpoint.
"""
import contextlib
import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile

from tqdm import tqdm

from . import _serialization

__all__ = ["download_url_to_file", "get_dir", "load_state_dict_from_url", "set_dir"]

_hub_dir = None
# "name-<sha256 prefix>.ext": the prefix is the first 8 or more hex digits of the file's SHA-256
_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,})\.")
_CHUNK = 1 << 20


def get_dir():
    """The hub cache directory: set_dir's, else ``$EMBER_HOME/hub``, else ``~/.cache/ember/hub``."""
    if _hub_dir is not None:
        return _hub_dir
    home = os.getenv("EMBER_HOME") or os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "ember")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d):
    """Use ``d`` as the hub cache directory from now on."""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download ``url`` to the path ``dst``; with ``hash_prefix``, the file's SHA-256 must start with it."""
    dst = os.path.abspath(os.path.expanduser(os.fspath(dst)))
    request = urllib.request.Request(url, headers={"User-Agent": "ember.hub"})
    with urllib.request.urlopen(request) as response, _atomic_file(dst) as out:
        size = response.headers.get("Content-Length")
        sha256 = hashlib.sha256()
        with tqdm(total=int(size) if size else None, disable=not progress, unit="B", unit_scale=True,
                  unit_divisor=1024) as bar:
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                sha256.update(chunk)
                bar.update(len(chunk))
        if hash_prefix is not None:
            digest = sha256.hexdigest()
            if not digest.startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value of {url} (expected prefix "{hash_prefix}", got '
                                   f'"{digest[:len(hash_prefix)]}")')


@contextlib.contextmanager
def _atomic_file(dst):
    """A temporary file next to ``dst``, renamed to ``dst`` only if the block completes."""
    tmp = tempfile.NamedTemporaryFile(dir=os.path.dirname(dst), prefix=".partial-", delete=False)
    try:
        with tmp:
            yield tmp
        os.replace(tmp.name, dst)
    finally:
        if os.path.exists(tmp.name):
            os.remove(tmp.name)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=True):
    """Load the checkpoint at ``url``, downloading it into ``model_dir`` (default
    ``get_dir()/checkpoints``) unless it is there already.

    ``check_hash`` verifies the download against the SHA-256 prefix in its file name
    (``name-<prefix>.ext``). A zip archive holding a single file (an old way to publish checkpoints)
    is extracted first.
    """
    model_dir = os.path.expanduser(os.fspath(model_dir)) if model_dir is not None else os.path.join(
        get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        hash_prefix = None
        if check_hash:
            match = _HASH_IN_NAME.search(filename)
            if match is None:
                raise ValueError(f"check_hash=True needs a file name of the form 'name-<sha256 prefix>.ext' with "
                                 f"at least 8 hex digits, got '{filename}'")
            hash_prefix = match.group(1)
        if progress:
            print(f'Downloading: "{url}" to {cached}', file=sys.stderr)
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    if _is_single_file_zip(cached):
        with zipfile.ZipFile(cached) as zf:
            member = zf.infolist()[0]
            cached = os.path.join(model_dir, os.path.basename(member.filename))
            if not os.path.exists(cached):
                with zf.open(member) as src, _atomic_file(cached) as out:
                    shutil.copyfileobj(src, out, _CHUNK)
    return _serialization.load(cached, map_location=map_location, weights_only=weights_only)


def _is_single_file_zip(path):
    # a checkpoint in PyTorch's zip format has several records; one lone file is a zipped checkpoint
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    return len(infos) == 1 and not infos[0].is_dir()
