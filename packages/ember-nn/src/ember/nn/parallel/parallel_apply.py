"""``parallel_apply``: each replica called on its own inputs in its own thread (on its device), results in order;
a replica's exception is raised in the caller, naming the replica."""
import threading

import ember

from .scatter_gather import as_device

__all__ = ["parallel_apply"]


def _device_context(device):
    if device is not None and device.type == "cuda":
        return ember.cuda.device(device.index)
    return _NoContext()


class _NoContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """``modules[i](*inputs[i], **kwargs_tup[i])`` for every i at once; an input that is not a tuple or list is
    the one argument."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs "
                             f"{len(inputs)}")
    kwargs_tup = tuple(kwargs_tup) if kwargs_tup is not None else ({},) * len(modules)
    if len(kwargs_tup) != len(modules):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of kwargs "
                             f"{len(kwargs_tup)}")
    devices = [None] * len(modules) if devices is None else [as_device(d) for d in devices]
    results = [None] * len(modules)
    grad_enabled = ember.is_grad_enabled()  # (grad mode is per thread: the workers take the caller's)

    def work(i):
        try:
            with ember.set_grad_enabled(grad_enabled), _device_context(devices[i]):
                args = inputs[i] if isinstance(inputs[i], (list, tuple)) else (inputs[i],)
                results[i] = ("ok", modules[i](*args, **kwargs_tup[i]))
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            results[i] = ("error", e)

    if len(modules) == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(modules))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    outputs = []
    for i, (status, value) in enumerate(results):
        if status == "error":
            where = f" on device {devices[i]}" if devices[i] is not None else ""
            message = f"Caught {type(value).__name__} in replica {i}{where}: {value}"
            try:
                error = type(value)(message)
            except Exception:  # noqa: BLE001 - an exception type that takes other arguments
                error = RuntimeError(message)
            raise error from value
        outputs.append(value)
    return outputs
