"""autograd.set_multithreading_enabled: a thread-local setting as torch's (at once when made, restored by a with
block or around a decorated function); ember's engine runs backward in the calling thread either way."""
import threading

import torch

import ember
from ember.autograd import grad_mode


def _observe(lib, read):
    """What ``read()`` (the setting) says along the ways torch's programs use it."""
    seen = [read()]
    with lib.autograd.set_multithreading_enabled(False):
        seen.append(read())
        thread = threading.Thread(target=lambda: seen.append(("thread", read())))
        thread.start()
        thread.join()
    seen.append(read())
    lib.autograd.set_multithreading_enabled(False)  # a call takes effect at once
    seen.append(read())
    lib.autograd.set_multithreading_enabled(True)

    @lib.autograd.set_multithreading_enabled(False)  # (making the decorator sets it too, as set_grad_enabled's)
    def inside():
        return read()
    seen += [read(), inside(), read()]
    lib.autograd.set_multithreading_enabled(True)
    return seen


def test_set_multithreading_enabled_as_torch():
    expected = _observe(torch, torch._C._is_multithreading_enabled)
    assert expected[:5] == [True, False, ("thread", True), True, False]  # thread-local
    assert _observe(ember, grad_mode.is_multithreading_enabled) == expected


def test_backward_unchanged():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with ember.autograd.set_multithreading_enabled(False):
        (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
