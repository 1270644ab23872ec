"""``nn.Module``: parameters, buffers, submodules, state_dict, hooks, device and dtype moves."""
import collections
import functools
import itertools

import ember
from ember._tensor import Tensor, parse_to_args

from ..parameter import Buffer, Parameter

_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _RemovableHandle:
    """Returned by the register_*_hook methods; ``remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, store, flags=()):
        self.id = next(self._ids)
        self._store, self._flags = store, flags

    def remove(self):
        self._store.pop(self.id, None)
        for flag_set in self._flags:
            flag_set.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(text, spaces):
    lines = text.split("\n")
    return lines[0] if len(lines) == 1 else "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])


class Module:
    """Base class of every layer and model: assign Parameters, buffers and Modules as attributes, and
    implement ``forward``."""

    dump_patches = False
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = {}
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = {}
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()
        d["_backward_hooks"] = {}
        d["_backward_pre_hooks"] = {}
        d["_state_dict_hooks"] = {}
        d["_load_state_dict_pre_hooks"] = {}
        d["_load_state_dict_post_hooks"] = {}

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- registration -------------------------------------------------------------------------
    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             "explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (torch Tensor or "
                            "None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = Tensor._wrap(tensor._data)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind, store):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in store:
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, "_buffers", "_modules")
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' (torch.nn.Parameter or "
                                "None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, "_parameters", "_buffers")
            d.pop(name, None)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (torch.nn.Module or "
                                "None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (torch.Tensor or None "
                                "expected)")
            self.register_buffer(name, value, name not in self._non_persistent_buffers_set)
        elif isinstance(value, Buffer):
            self.register_buffer(name, value)
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, d, *dicts):
        for key in dicts:
            if d.get(key) is not None:
                d[key].pop(name, None)
        if d.get("_non_persistent_buffers_set") is not None:
            d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(key, {}):
                del self.__dict__[key][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ---- traversal ----------------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else ():
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def _get_member(self, target, store, kind):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in getattr(mod, store):
            raise AttributeError(f"{type(mod).__name__} has no {kind} `{name}`")
        return getattr(mod, store)[name]

    def get_parameter(self, target):
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target):
        return self._get_member(target, "_buffers", "buffer")

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes --------------------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = ember.zeros_like(p.grad)

    # ---- moving between devices and dtypes ------------------------------------------------------
    def _apply(self, fn):
        for m in self.children():
            m._apply(fn)
        for p in self._parameters.values():
            if p is None:
                continue
            with ember.no_grad():
                new = fn(p)
            p._data = new._data  # keep the Parameter object: optimisers hold references to it
            if p.grad is not None:
                p.grad = fn(p.grad)
        for name, b in self._buffers.items():
            if b is not None:
                self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(tensor)``, ``to(device, dtype)``: floating parameters and buffers
        take the dtype; everything moves to the device. ``memory_format=`` lays out the 4-d and 5-d ones."""
        device, dtype = parse_to_args(args, kwargs.get("device"), kwargs.get("dtype"))
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")
        memory_format = kwargs.get("memory_format")

        def convert(t):
            target = dtype if dtype is not None and (t.dtype.is_floating_point or t.dtype.is_complex) else None
            if memory_format is not None and t.dim() in (4, 5):
                return t.to(device=device, dtype=target, memory_format=memory_format)
            return t.to(device=device, dtype=target)

        return self._apply(convert)

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def _cast_floats(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.dtype.is_floating_point else t)

    def float(self):
        return self._cast_floats(ember.float32)

    def double(self):
        return self._cast_floats(ember.float64)

    def half(self):
        return self._cast_floats(ember.float16)

    def bfloat16(self):
        return self._cast_floats(ember.bfloat16)

    def to_empty(self, *, device=None, recurse=True):
        return self._apply(lambda t: ember.empty_like(t, device=device))

    def share_memory(self):
        """Move parameters, their gradients and buffers to shared memory (``Tensor.share_memory_``)."""
        return self._apply(lambda t: t.share_memory_())

    def compile(self, *args, **kwargs):
        """``torch.compile`` of the module's calls, in place: ember runs eagerly, so the arguments are checked as
        ``ember.compile`` checks them and the module stays as it is."""
        ember.compile(self._call_impl, *args, **kwargs)

    # ---- state_dict -------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer, keyed by dotted path."""
        if args:  # the positional (destination, prefix, keep_vars) form
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        if destination is None:
            destination = collections.OrderedDict()
            destination._metadata = collections.OrderedDict()
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, {})
            if result is not None:
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {**{k: v for k, v in self._parameters.items() if v is not None},
                 **{k: v for k, v in persistent.items() if v is not None}}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(value)}")
                continue
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {_torch_size(value.shape)} "
                                  f"from checkpoint, the shape in current model is {_torch_size(param.shape)}.")
                continue
            if assign:
                if name in self._parameters:
                    setattr(self, name, Parameter(value, requires_grad=param.requires_grad))
                else:
                    self._buffers[name] = value
            else:
                with ember.no_grad():
                    param.copy_(value)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    head = rest.split(".", 1)[0]
                    if "." not in rest and rest not in local and head not in self._modules:
                        unexpected_keys.append(key)
                    elif "." in rest and head not in self._modules:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict``; returns (missing_keys, unexpected_keys)."""
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)

        def load(module, local, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            module._load_from_state_dict(local, prefix, local_metadata, True, missing, unexpected, errors,
                                         assign=assign)
            for name, child in module._modules.items():
                if child is not None:  # (a child and its hooks see only its own entries, as in PyTorch)
                    inner = prefix + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(inner)}, inner)
            for hook in module.__dict__.get("_load_state_dict_post_hooks", {}).values():
                # (a hook may change the key lists in place: before the strict check below)
                if hook(module, _IncompatibleKeys(missing, unexpected)) is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be modified, "
                                         "it should be done inplace.")

        load(self, dict(state_dict))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    def register_state_dict_post_hook(self, hook):
        handle = _RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        handle = _RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = functools.partial(hook, self) if with_module else hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``
        before this module's own entries load."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` once the whole state_dict has loaded (it may edit the key lists)."""
        handle = _RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # ---- hooks and calling --------------------------------------------------------------------------
    def _register(self, store, hook, prepend, flags=(), flagged=False):
        handle = _RemovableHandle(store, flags)
        store[handle.id] = hook
        if prepend:  # dicts keep insertion order: move the new hook to the front
            rest = {k: v for k, v in store.items() if k != handle.id}
            store.clear()
            store[handle.id] = hook
            store.update(rest)
        for flag_set in flags[:1] if flagged else ():
            flag_set.add(handle.id)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``(module, args, kwargs)``) before forward; may return new args."""
        return self._register(self._forward_pre_hooks, hook, prepend, (self._forward_pre_hooks_with_kwargs,),
                              with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` after forward; may return a new output."""
        handle = self._register(self._forward_hooks, hook, prepend,
                                (self._forward_hooks_with_kwargs, self._forward_hooks_always_called), with_kwargs)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` before the module's input gradients are computed."""
        return self._register(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` once the gradients of the module's inputs are known;
        may return replacement grad_input."""
        return self._register(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        return self.register_full_backward_hook(hook)

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks
                or _GLOBAL_FORWARD_PRE_HOOKS or _GLOBAL_FORWARD_HOOKS):
            return self.forward(*args, **kwargs)
        for hid, hook in {**_GLOBAL_FORWARD_PRE_HOOKS, **self._forward_pre_hooks}.items():
            if hid in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward = self._backward_hooks or self._backward_pre_hooks
        if backward:
            from ._backward_hooks import wrap_inputs
            args, state = wrap_inputs(self, args)
        output = self.forward(*args, **kwargs)
        for hid, hook in {**_GLOBAL_FORWARD_HOOKS, **self._forward_hooks}.items():
            result = hook(self, args, kwargs, output) if hid in self._forward_hooks_with_kwargs else \
                hook(self, args, output)
            if result is not None:
                output = result
        if backward:
            from ._backward_hooks import wrap_outputs
            output = wrap_outputs(self, output, state)
        return output

    __call__ = _call_impl

    # ---- printing ------------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, m in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(m), 2))
        if not self._modules and len(lines) <= 1:
            return f"{self._get_name()}({lines[0] if lines else ''})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


_GLOBAL_FORWARD_PRE_HOOKS = {}
_GLOBAL_FORWARD_HOOKS = {}


def register_module_forward_pre_hook(hook):
    handle = _RemovableHandle(_GLOBAL_FORWARD_PRE_HOOKS)
    _GLOBAL_FORWARD_PRE_HOOKS[handle.id] = hook
    return handle


def register_module_forward_hook(hook):
    handle = _RemovableHandle(_GLOBAL_FORWARD_HOOKS)
    _GLOBAL_FORWARD_HOOKS[handle.id] = hook
    return handle


def _torch_size(shape):
    return f"torch.Size({list(shape)})"



__all__ = ["Module"]
