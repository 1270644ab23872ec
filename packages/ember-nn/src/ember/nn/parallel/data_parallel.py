"""``DataParallel`` and ``data_parallel``: a module run over several CUDA devices in one process, the batch split
along ``dim``, one replica per device, the outputs joined on ``output_device``.

As in PyTorch, without an accelerator ``DataParallel`` just calls its module (``device_ids`` is empty), and with one
device it moves the module there and calls it on the moved inputs. ``data_parallel`` does the same (where PyTorch's
refuses to run without an accelerator)."""
from itertools import chain

import ember

from ..modules.module import Module
from .parallel_apply import parallel_apply
from .replicate import replicate
from .scatter_gather import gather, scatter_kwargs

__all__ = ["DataParallel", "data_parallel"]


def _device_type():
    """The accelerator's device type, None when there is none."""
    return "cuda" if ember.cuda.is_available() else None


def _all_device_indices():
    return list(range(ember.cuda.device_count()))


def _index(d):
    """A device index from an index, a device or its name (PyTorch's _get_device_index)."""
    if isinstance(d, int):
        return d
    d = ember.device(d)
    if d.index is None:
        raise ValueError(f"Expected a device with a specified index or an integer, but got: {d}")
    return d.index


def _check_placement(module, src):
    for t in chain(module.parameters(), module.buffers()):
        if t.device.type != src.type or (t.device.index or 0) != src.index:
            raise RuntimeError(f"module must have its parameters and buffers on device {src} (device_ids[0]) but "
                               f"found one of them on device: {t.device}")


def _devices(device_type, ids):
    return [ember.device(device_type, i) for i in ids]


class DataParallel(Module):
    """Runs ``module`` on the devices ``device_ids`` (default: all), each replica on a chunk of the inputs along
    ``dim``, and gathers the outputs on ``output_device`` (default: ``device_ids[0]``). Its state_dict is the
    module's, under the prefix ``module.``."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        device_type = _device_type()
        self.module = module
        self.dim = dim
        if device_type is None:  # no accelerator: the module runs as it is
            self.device_ids, self.output_device, self.src_device_obj = [], None, None
            return
        if device_ids is None:
            device_ids = _all_device_indices()
        if not device_ids:
            raise RuntimeError("no available devices were found")
        self.device_ids = [_index(d) for d in device_ids]
        self.output_device = _index(device_ids[0] if output_device is None else output_device)
        self.src_device_obj = ember.device(device_type, self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_placement(self.module, self.src_device_obj)
        inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
        if not inputs and not module_kwargs:
            inputs, module_kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **module_kwargs[0])
        replicas = self.replicate(self.module, self.device_ids[:len(inputs)])
        outputs = self.parallel_apply(replicas, inputs, module_kwargs)
        return self.gather(outputs, self.output_device)

    # the steps, by device index as PyTorch's (subclasses may override them)
    def replicate(self, module, device_ids):
        return replicate(module, _devices(self.src_device_obj.type, device_ids), not ember.is_grad_enabled())

    def scatter(self, inputs, kwargs, device_ids):
        return scatter_kwargs(inputs, kwargs, _devices(self.src_device_obj.type, device_ids), dim=self.dim)

    def parallel_apply(self, replicas, inputs, kwargs):
        return parallel_apply(replicas, inputs, kwargs, _devices(self.src_device_obj.type,
                                                                 self.device_ids[:len(replicas)]))

    def gather(self, outputs, output_device):
        target = -1 if output_device == -1 else ember.device(self.src_device_obj.type, _index(output_device))
        return gather(outputs, target, dim=self.dim)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """``module(*inputs, **module_kwargs)`` evaluated over ``device_ids`` as DataParallel does (no accelerator: the
    module is called as it is)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    device_type = _device_type()
    if device_type is None:
        return module(*inputs, **(module_kwargs or {}))
    if device_ids is None:
        device_ids = _all_device_indices()
    if not device_ids:
        raise RuntimeError("no available devices were found")
    devices = _devices(device_type, [_index(d) for d in device_ids])
    output_device = _index(device_ids[0] if output_device is None else output_device)
    _check_placement(module, devices[0])
    inputs, module_kwargs = scatter_kwargs(inputs, module_kwargs, devices, dim)
    if not inputs and not module_kwargs:
        inputs, module_kwargs = ((),), ({},)
    if len(devices) == 1:
        return module(*inputs[0], **module_kwargs[0])
    used = devices[:len(inputs)]
    outputs = parallel_apply(replicate(module, used), inputs, module_kwargs, used)
    return gather(outputs, -1 if output_device == -1 else ember.device(device_type, output_device), dim)
