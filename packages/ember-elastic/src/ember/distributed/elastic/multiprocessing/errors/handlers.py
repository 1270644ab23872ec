"""The error handler ``record`` uses by default."""
from .error_handler import ErrorHandler

__all__ = ["get_error_handler"]


def get_error_handler():
    return ErrorHandler()
