"""Grad modes, thread-local: no_grad, enable_grad, set_grad_enabled, inference_mode, set_multithreading_enabled."""
import functools
import threading


class _Mode(threading.local):
    enabled = True
    inference = False
    multithreading = True


MODE = _Mode()
on_inference_change = None  # set by _setup: switches the dispatcher's slow path for inference marking


def is_grad_enabled():
    return MODE.enabled


def is_inference_mode_enabled():
    return MODE.inference


class _DecoratorContextManager:
    """A context manager that also decorates functions (each call runs inside a fresh instance)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_DecoratorContextManager):
    """Run without recording operations for autograd."""

    def __enter__(self):
        self.prev = MODE.enabled
        MODE.enabled = False

    def __exit__(self, *exc):
        MODE.enabled = self.prev


class enable_grad(_DecoratorContextManager):
    """Record operations again inside a no_grad region."""

    def __enter__(self):
        self.prev = MODE.enabled
        MODE.enabled = True

    def __exit__(self, *exc):
        MODE.enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Switch recording on or off; takes effect at once, and also works as a context manager."""

    def __init__(self, mode):
        self.prev = MODE.enabled
        self.mode = bool(mode)
        MODE.enabled = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        MODE.enabled = self.prev

    def clone(self):
        return type(self)(self.mode)


class set_multithreading_enabled(_DecoratorContextManager):
    """Allow or forbid backward passes to run device work in threads of their own; takes effect at once and also
    works as a context manager. (ember's engine runs every backward in the calling thread: the setting is kept for
    programs that read or restore it, and changes nothing else.)"""

    def __init__(self, mode):
        self.prev = MODE.multithreading
        self.mode = bool(mode)
        MODE.multithreading = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        MODE.multithreading = self.prev

    def clone(self):
        return type(self)(self.mode)


def is_multithreading_enabled():
    return MODE.multithreading


class inference_mode(_DecoratorContextManager):
    """No recording, and tensors made inside can never take part in autograd later."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (MODE.enabled, MODE.inference)
        if self.mode:
            MODE.enabled, MODE.inference = False, True
            on_inference_change(True)

    def __exit__(self, *exc):
        MODE.enabled, MODE.inference = self.prev
        if self.mode:
            on_inference_change(False)

    def clone(self):
        return type(self)(self.mode)
