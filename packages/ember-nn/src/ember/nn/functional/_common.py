"""Helpers shared by the functional files: registry look-ups, argument tuples, loss reductions."""
import collections.abc
import functools
import inspect
import sys
import warnings

from ember._registry import REGISTRY, must_be_tensor
from ember._tensor import Tensor


def registered(name):
    """Registry op ``name`` (looked up per call: ember-core files are import-order free); an op this ember-core lacks
    is a NotImplementedError naming the function that needs it, not a KeyError."""
    try:
        return REGISTRY[name]
    except KeyError:
        frame = sys._getframe(1)  # the public function asking: past this module's and private helpers' frames
        while frame.f_back is not None and (frame.f_globals.get("__name__") == __name__ or (
                frame.f_code.co_name.startswith("_") and frame.f_back.f_globals.get("__name__", "").startswith(
                    __package__))):
            frame = frame.f_back
        raise NotImplementedError(f"ember.nn.functional.{frame.f_code.co_name}() needs the op '{name}', which this "
                                  "version of ember-core does not provide") from None


def tensor_parameters(*names):
    """Decorator: PyTorch's TypeError ("argument 'input' (position 1) must be Tensor, not list") when the function
    failed with an AttributeError and one of its parameters ``names`` holds something that is not a tensor (None
    passes). Checked only after a failure, so calls pay one frame for it."""
    def decorate(fn):
        positions = {n: i for i, n in enumerate(inspect.signature(fn).parameters) if n in names}

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except AttributeError as error:
                bound = inspect.signature(fn).bind_partial(*args, **kwargs).arguments
                for name, i in positions.items():
                    value = bound.get(name)
                    if value is not None and not isinstance(value, Tensor):
                        raise must_be_tensor(fn.__name__, name, i, value) from None
                raise error
        return checked
    return decorate


def core(name):
    """The public function of registry op ``name``."""
    return registered(name).fn


def core_(name):
    """The in-place form of registry op ``name``."""
    return registered(name).inplace_fn


def ntuple(value, n):
    """``value`` repeated ``n`` times unless it already is a sequence."""
    if isinstance(value, collections.abc.Iterable):
        return tuple(value)
    return (value,) * n


_REDUCTIONS = ("none", "mean", "sum")


def reduction_of(size_average, reduce, reduction):
    """The ``reduction`` string, honouring the deprecated ``size_average``/``reduce`` flags as PyTorch does."""
    if size_average is None and reduce is None:
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='...' instead.",
                  stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "mean" if size_average and reduce else "sum" if reduce else "none"


def reduce_loss(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss
