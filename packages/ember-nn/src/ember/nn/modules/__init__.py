"""Every module class of ember.nn. Each file here defines ``__all__``; all files are imported, so a new
family of layers needs no line here."""
import importlib
import pkgutil

__all__ = []
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("_"):
        continue
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _name in getattr(_module, "__all__", ()):
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
