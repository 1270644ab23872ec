"""Op families. Importing this package registers every op of ember-core."""
from . import arithmetic, comparison, conversion, indexing, linalg, mutation, pointwise, reduction, shape  # noqa: F401
