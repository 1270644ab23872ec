"""Decorators telling the RPC agent how to run a function on the callee."""
import functools

__all__ = ["async_execution"]


def async_execution(fn):
    """Mark ``fn`` as returning a Future: the callee answers when that future completes, holding no thread
    meanwhile. Inside ``staticmethod``/``classmethod``, put this decorator innermost."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper._wrapped_async_rpc_function = fn
    return wrapper
