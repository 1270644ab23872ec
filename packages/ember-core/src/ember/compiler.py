"""``ember.compiler``: the compiler controls of ``torch.compiler``, for an eager framework.

ember never compiles (see ``ember.compile``), so nothing is ever being compiled or exported, resets and
cudagraph step marks have nothing to act on, and the decorators return what they decorate.
"""
from ._compile import LISTED_BACKENDS, compile

__all__ = ["compile", "reset", "allow_in_graph", "assume_constant_result", "list_backends", "disable",
           "cudagraph_mark_step_begin", "is_compiling", "is_dynamo_compiling", "is_exporting"]


def reset():
    """No-op: ember keeps no compiled code to forget."""


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names PyTorch lists by default; ``ember.compile`` accepts them (and runs eagerly)."""
    return list(LISTED_BACKENDS)


def disable(fn=None, recursive=True, *, reason=None):
    """``fn`` itself (it already runs eagerly); without ``fn``, a decorator that returns its argument."""
    if fn is None:
        return lambda f: f
    return fn


def cudagraph_mark_step_begin():
    """No-op: ember records no CUDA graphs."""


def is_compiling():
    return False


def is_dynamo_compiling():
    return False


def is_exporting():
    return False
