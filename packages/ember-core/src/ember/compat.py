"""Run code written for PyTorch on ember, unchanged: ``import torch`` and its submodules resolve to ember's.

In a program::

    import ember.compat
    ember.compat.install_torch_alias()
    import torch                      # ember
    import torch.nn.functional as F   # ember.nn.functional
    from torch.utils.data import DataLoader

From the command line, as ``python -m runpy`` would run it (``sys.argv``, ``__name__ == "__main__"`` and
``sys.path[0]`` set as for ``python script.py``)::

    python -m ember.compat script.py [args ...]
    python -m ember.compat -m package.module [args ...]

``torch.X`` is ember's ``ember.X`` itself, not a copy: ``torch.nn.Module is ember.nn.Module``. A module ember
lacks raises ModuleNotFoundError under its PyTorch name. Only ``torch`` and ``torch.*`` are aliased
(``torchvision`` and the like are left alone). Processes the program starts with multiprocessing (DataLoader
workers) have the alias too, with any start method.
"""
import builtins
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import types

__all__ = ["install_torch_alias", "run"]

_ALIAS = "torch"
_TARGET = "ember"


class _AliasLoader(importlib.abc.Loader):
    """Hands out the already-imported ember module; the import system files it under the torch name."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass  # ember's module has run already


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and ``torch.<sub>`` as ``ember`` and ``ember.<sub>``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _ALIAS and not fullname.startswith(_ALIAS + "."):
            return None
        target_name = _TARGET + fullname[len(_ALIAS):]
        try:
            found = importlib.util.find_spec(target_name)
        except ModuleNotFoundError:  # a parent is missing
            found = None
        if found is None:
            return None  # the import fails with ModuleNotFoundError naming ``fullname``
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(target_name),
                                              is_package=found.submodule_search_locations is not None)


def install_torch_alias():
    """Make ``import torch`` (and ``torch.*``) import ember from now on, in this process and in the processes it
    starts with multiprocessing (DataLoader workers included), whatever their start method. Idempotent.

    Raises RuntimeError if PyTorch itself is imported already: its modules and ember's would mix."""
    if any(isinstance(f, TorchAliasFinder) for f in sys.meta_path):
        return
    loaded = sys.modules.get(_ALIAS)
    if loaded is not None:
        raise RuntimeError(f"install_torch_alias(): '{_ALIAS}' is imported already (from "
                           f"{getattr(loaded, '__file__', None)}); install the alias before anything imports it")
    sys.meta_path.insert(0, TorchAliasFinder())  # ahead of the path finder, which would find an installed torch
    _alias_in_children()


class _AliasInChild:
    """Installs the alias where it is unpickled: a "spawn" or "forkserver" child unpickles multiprocessing's
    preparation data before it runs the main script again (as ``__mp_main__``), so the script's ``import torch``
    finds ember there too. (A forked child inherits the finder.)"""

    def __reduce__(self):
        return install_torch_alias, ()


def _alias_in_children():
    from multiprocessing import spawn

    if getattr(spawn.get_preparation_data, "_ember_alias", False):
        return
    prepare = spawn.get_preparation_data

    def get_preparation_data(name):
        data = prepare(name)
        data["ember_torch_alias"] = _AliasInChild()  # a key multiprocessing's own prepare() does not read
        return data

    get_preparation_data._ember_alias = True
    spawn.get_preparation_data = get_preparation_data
    try:
        from multiprocessing import forkserver
    except ImportError:  # (Windows)
        return
    # by default the fork server imports the main script once, before the alias could be there; its children
    # run the script themselves, after unpickling the preparation data
    preload = getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", None)
    if preload and "__main__" in preload:
        forkserver.set_forkserver_preload([m for m in preload if m != "__main__"])


def _run_script(path):
    """Run a script file as ``python path`` does: its code and ``__file__`` under the absolute path (warnings and
    tracebacks name it so, ``dirname(__file__)`` survives a chdir), ``sys.argv[0]`` as typed."""
    full = os.path.abspath(path)
    with open(full, "rb") as f:
        code = compile(f.read(), full, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=full, __cached__=None, __loader__=None, __package__=None, __spec__=None,
                         __builtins__=builtins)
    previous = sys.modules.get("__main__")
    sys.modules["__main__"] = main  # (multiprocessing's spawn finds the script through it)
    try:
        exec(code, main.__dict__)
    finally:
        sys.modules["__main__"] = previous


def run(argv):
    """Run ``argv`` (``[script, *args]`` or ``["-m", module, *args]``) as ``__main__`` with the torch alias."""
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m ember.compat script.py [args ...]\n"
              "       python -m ember.compat -m module [args ...]\n\n"
              "Runs a PyTorch program on ember: 'import torch' and its submodules resolve to ember's.",
              file=sys.stderr)
        raise SystemExit(0 if argv and argv[0] in ("-h", "--help") else 2)
    install_torch_alias()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif not os.path.exists(argv[0]):
        print(f"{sys.executable}: can't open file {os.path.abspath(argv[0])!r}: [Errno 2] No such file or directory",
              file=sys.stderr)
        raise SystemExit(2)
    else:
        sys.argv = list(argv)
        if os.path.isfile(argv[0]):
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # the script's folder, as `python script.py` has
            _run_script(argv[0])
        else:  # (runpy puts a folder or zip file with a __main__ module on the path itself)
            runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    # run through the imported module ember.compat, so that the finder installed is that module's class
    importlib.import_module("ember.compat").run(sys.argv[1:])
