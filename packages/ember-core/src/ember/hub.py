"""``ember.hub``: download checkpoints over HTTP(S) into a local cache and load them; load models published by a
``hubconf.py`` in a local folder or a GitHub repository.

The cache is ``$EMBER_HOME/hub`` (default ``~/.cache/ember/hub``, or ``$XDG_CACHE_HOME/ember/hub``);
checkpoints go to its ``checkpoints`` folder, repositories to ``<owner>_<name>_<ref>`` folders (downloaded as
GitHub's zip archive of the ref and extracted, refusing entries that would land outside the cache), and the
repositories the user trusts are listed in its ``trusted_list`` file. Downloads land in a temporary file next to the
target and are renamed into place only when complete (and, if asked, hash-checked), so an interrupted or corrupt
download never leaves a file that a later call would take for the checkpoint.
"""
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import warnings
import zipfile

from tqdm import tqdm

from . import _serialization

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

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


# ---- models published by a hubconf.py --------------------------------------------------------------------------
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"  # the hubconf's list of the modules its entry points need
ENV_GITHUB_TOKEN = "GITHUB_TOKEN"  # sent to GitHub's API (its rate limit for anonymous calls is low)
_GITHUB, _GITHUB_API = "https://github.com", "https://api.github.com"
_TRUSTED_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """``model(*args, **kwargs)``, the entry point ``model`` of the ``hubconf.py`` of ``repo_or_dir``: a folder
    (``source="local"``) or a GitHub repository ``"owner/name[:ref]"`` (``source="github"``: downloaded into the
    cache unless there already, after asking whether to trust it as ``trust_repo`` says)."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        repo_or_dir = _cached_repo(repo_or_dir, force_reload, trust_repo, verbose, skip_validation)
    with _hubconf(repo_or_dir) as hub_module:
        return _entry(hub_module, model)(*args, **kwargs)


def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True):
    """The names of the entry points (public callables) of a GitHub repository's ``hubconf.py``."""
    with _hubconf(_cached_repo(github, force_reload, trust_repo, verbose, skip_validation)) as hub_module:
        return [name for name in dir(hub_module) if callable(getattr(hub_module, name)) and not name.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check"):
    """The docstring of entry point ``model`` of a GitHub repository's ``hubconf.py``."""
    with _hubconf(_cached_repo(github, force_reload, trust_repo, True, skip_validation)) as hub_module:
        return _entry(hub_module, model).__doc__


@contextlib.contextmanager
def _hubconf(folder):
    """The ``hubconf.py`` of ``folder`` imported as a fresh module, with the folder on ``sys.path`` meanwhile (so
    that the hubconf's imports of its repository's modules work)."""
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(MODULE_HUBCONF[:-3], os.path.join(folder, MODULE_HUBCONF))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(folder)


def _entry(hub_module, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    missing = [name for name in getattr(hub_module, VAR_DEPENDENCY, None) or ()
               if importlib.util.find_spec(name) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    fn = getattr(hub_module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def _repo_info(github):
    """(owner, name, ref) of ``"owner/name[:ref]"``; without a ref, the repository's ``main`` branch if it has one,
    else ``master`` (offline: whichever of them the cache holds)."""
    repo, _, ref = github.partition(":")
    owner, name = repo.split("/")
    if ref:
        return owner, name, ref
    try:
        with urllib.request.urlopen(f"{_GITHUB}/{owner}/{name}/tree/main/"):
            return owner, name, "main"
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return owner, name, "master"
        raise
    except urllib.error.URLError as e:
        for ref in ("main", "master"):
            if os.path.exists(os.path.join(get_dir(), f"{owner}_{name}_{ref}")):
                return owner, name, ref
        raise RuntimeError(f"It looks like there is no internet connection and the repo could not be found in the "
                           f"cache ({get_dir()})") from e


def _cached_repo(github, force_reload, trust_repo, verbose, skip_validation):
    """The cache folder holding ``github``'s files at its ref, downloaded unless there already (or when
    ``force_reload``)."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    owner, name, ref = _repo_info(github)
    folder = "_".join([owner, name, ref.replace("/", "_")])
    repo_dir = os.path.join(hub_dir, folder)
    _check_trusted(owner, name, folder, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    if not skip_validation:
        _check_ref_exists(owner, name, ref)
    archive = os.path.join(hub_dir, ref.replace("/", "_") + ".zip")
    _remove(archive)
    url = f"{_GITHUB}/{owner}/{name}/zipball/{ref}"
    sys.stdout.write(f'Downloading: "{url}" to {archive}\n')
    try:
        download_url_to_file(url, archive, progress=False)
    except urllib.error.HTTPError as e:
        if e.code != 300:
            raise
        warnings.warn(f"The ref {ref} is ambiguous. Perhaps it is both a tag and a branch in the repo? ember.hub "
                      f"will now assume that it's a branch. You can disambiguate tags and branches by explicitly "
                      f"passing refs/heads/branch_name or refs/tags/tag_name as the ref. That might require using "
                      f"skip_validation=True.", stacklevel=3)
        download_url_to_file(f"{_GITHUB}/{owner}/{name}/zipball/refs/heads/{ref}", archive, progress=False)
    with zipfile.ZipFile(archive) as zf:
        top = os.path.join(hub_dir, zf.infolist()[0].filename)
        _remove(top)
        _extract_inside(zf, hub_dir)
    _remove(archive)
    _remove(repo_dir)
    shutil.move(top, repo_dir)
    return repo_dir


def _check_trusted(owner, name, folder, trust_repo):
    """Ask (``trust_repo`` False, or "check" for a repository not trusted yet) whether to trust the repository;
    remember one that ran in ``trusted_list``. Repositories of PyTorch's own owners, and those cached before
    trust was asked, count as trusted."""
    hub_dir = get_dir()
    path = os.path.join(hub_dir, "trusted_list")
    if not os.path.exists(path):
        open(path, "a").close()
    with open(path) as f:
        trusted = {line.strip() for line in f}
    owner_name = f"{owner}_{name}"
    known = owner_name in trusted or owner in _TRUSTED_OWNERS or os.path.isdir(os.path.join(hub_dir, folder))
    if trust_repo is False or (trust_repo == "check" and not known):
        answer = input(f"The repository {owner_name} does not belong to the list of trusted repositories and as "
                       f"such cannot be downloaded. Do you trust this repository and wish to add it to the trusted "
                       f"list of repositories (y/N)?").lower()
        if answer in ("y", "yes"):
            if known:
                print("The repository is already trusted.")
        elif answer in ("n", "no", ""):
            raise Exception("Untrusted repository.")  # (PyTorch's exception type: programs catch it as such)
        else:
            raise ValueError(f"Unrecognized response {answer}.")
    if not known:
        with open(path, "a") as f:
            f.write(owner_name + "\n")


def _check_ref_exists(owner, name, ref):
    """ValueError unless ``ref`` names a branch or tag of the repository or a commit at the tip of one (a commit
    of a fork, served under the parent's name by GitHub, would otherwise run unnoticed)."""
    headers = {"Accept": "application/vnd.github.v3+json"}
    if os.environ.get(ENV_GITHUB_TOKEN):
        headers["Authorization"] = f"token {os.environ[ENV_GITHUB_TOKEN]}"
    for kind in ("branches", "tags"):
        page = 1
        while True:
            request = urllib.request.Request(f"{_GITHUB_API}/repos/{owner}/{name}/{kind}?per_page=100&page={page}",
                                             headers=headers)
            with urllib.request.urlopen(request) as response:
                entries = json.loads(response.read().decode("utf-8"))
            if not entries:
                break
            if any(e["name"] == ref or e["commit"]["sha"].startswith(ref) for e in entries):
                return
            page += 1
    raise ValueError(f"Cannot find {ref} in https://github.com/{owner}/{name}. If it's a commit from a forked repo, "
                     f"please call hub.load() with forked repo directly.")


def _extract_inside(zf, folder):
    """Extract ``zf`` into ``folder``, refusing absolute entries and entries that would land outside it."""
    root = os.path.realpath(folder)
    for member in zf.infolist():
        name = os.path.normpath(member.filename)
        if os.path.isabs(name) or re.match(r"^[A-Za-z]:", name) or ".." in re.split(r"[/\\]", name):
            raise ValueError(f"Archive entry has an unsafe path: {member.filename}")
        target = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, target]) != root:
            raise ValueError(f"Archive entry escapes target directory: {member.filename}")
        zf.extract(member, root)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
