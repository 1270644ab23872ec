"""Op families, one module each. Importing this package registers every op of ember-core: every
module in this folder is imported, so a new family needs no line here."""
import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
