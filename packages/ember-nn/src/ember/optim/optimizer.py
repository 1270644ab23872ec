"""``Optimizer``: parameter groups, per-parameter state, hooks, and state_dicts in PyTorch's layout.

Algorithms update the parameters' arrays (NumPy or CuPy) in place, so every reference to a parameter
stays valid and no autograd history is recorded; state tensors live on the parameter's device.
"""
import copy
import functools
import itertools
import warnings
from collections import OrderedDict, defaultdict

import numpy as np

import ember
from ember import _backend, _quiet
from ember._tensor import Tensor

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook", "required"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()
_global_pre_hooks = OrderedDict()
_global_post_hooks = OrderedDict()
_hook_ids = itertools.count()


class _Handle:
    """``remove()`` unregisters the hook it was returned for."""

    def __init__(self, store):
        self.id = next(_hook_ids)
        self._store = store

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register(store, hook, prepend=False):
    handle = _Handle(store)
    store[handle.id] = hook
    if prepend:
        store.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook):
    """``hook(optimizer, args, kwargs)`` before every optimizer's step."""
    return _register(_global_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """``hook(optimizer, args, kwargs)`` after every optimizer's step."""
    return _register(_global_post_hooks, hook)


def _with_hooks(step):
    """Runs the step pre/post hooks around ``step`` (once, also when a subclass calls super().step())."""
    quiet_step = _quiet.quiet(step)  # (steps compute with NumPy directly: quiet as the ops, see ember._quiet)

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if self.__dict__.get("_in_step"):
            return step(self, *args, **kwargs)
        for hook in itertools.chain(_global_pre_hooks.values(), self._step_pre_hooks.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got "
                                       f"{res}.")
                args, kwargs = res
        self._in_step = True
        try:
            out = quiet_step(self, *args, **kwargs)
        finally:
            self._in_step = False
        self._opt_called = True
        for hook in itertools.chain(self._step_post_hooks.values(), _global_post_hooks.values()):
            hook(self, args, kwargs)
        return out
    wrapper._hooked = True
    return wrapper


def _value(x):
    """A Python number from a number or a one-element tensor (lr, betas may be tensors)."""
    return x.item() if isinstance(x, Tensor) else x


def scalar_tensor(value, like):
    """A 0-d float32 state tensor (``step``, ...) on ``like``'s device, as PyTorch keeps them."""
    dtype = np.float64 if ember.get_default_dtype() is ember.float64 else np.float32
    return Tensor._wrap(_backend.xp_of(like._data).full((), value, dtype=dtype))


def zeros_state(p, fill=0.0):
    return Tensor._wrap(_backend.xp_of(p._data).full(p._data.shape, fill, dtype=p._data.dtype))


class Optimizer:
    """Base class: ``params`` is an iterable of tensors, of (name, tensor) pairs, or of dicts (parameter
    groups, each may override ``defaults``). Subclasses implement ``step``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_hooked", False):
            cls.step = _with_hooks(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()
        self._state_dict_pre_hooks = OrderedDict()
        self._state_dict_post_hooks = OrderedDict()
        self._load_state_dict_pre_hooks = OrderedDict()
        self._load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_step_pre_hooks", "_step_post_hooks", "_state_dict_pre_hooks", "_state_dict_post_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        for group in self.param_groups:  # state_dicts of older releases may lack newer options
            for k, v in self.defaults.items():
                if v is not required:
                    group.setdefault(k, v)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with 'params' and any option overrides)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = None
        if params and isinstance(params[0], tuple):
            names = [n for n, _ in params]
            params = [p for _, p in params]
        group = dict(param_group)
        group["params"] = params
        if names is not None:
            group["param_names"] = names
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error", stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if self.param_groups and (("param_names" in group) != ("param_names" in self.param_groups[0])):
            raise ValueError("all optimizer param groups should be with/without names.")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients: drop them (default) or fill them with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif p.grad.is_sparse:  # zeroed as PyTorch's: no entries left
                    g = p.grad
                    p.grad = ember.sparse_coo_tensor(g._indices()[:, :0], g._values()[:0].detach(), g.shape)
                else:
                    if p.grad.grad_fn is not None:
                        p.grad = p.grad.detach()
                    p.grad._data[...] = 0
                    p.grad._bump()

    def step(self, closure=None):
        raise NotImplementedError

    # ---- hooks ------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` before each step."""
        return _register(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` after each step."""
        return _register(self._step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        return _register(self._state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        return _register(self._state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        return _register(self._load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        return _register(self._load_state_dict_post_hooks, hook, prepend)

    # ---- state_dict -------------------------------------------------------------------------
    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}: parameters are
        numbered in group order, so the dict loads into any optimizer over the same parameter layout
        (also PyTorch's). The state tensors are the live ones, not copies."""
        for hook in self._state_dict_pre_hooks.values():
            hook(self)
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        sd = {"state": state, "param_groups": groups}
        for hook in self._state_dict_post_hooks.values():
            out = hook(self, sd)
            sd = sd if out is None else out
        return sd

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()`` (ember's or PyTorch's): state tensors are moved to each parameter's
        device and floating ones to its dtype ('step' is kept as saved)."""
        state_dict = dict(state_dict)
        for hook in self._load_state_dict_pre_hooks.values():
            out = hook(self, state_dict)
            state_dict = state_dict if out is None else out
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(itertools.chain.from_iterable(s["params"] for s in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key == "step":
                    return value
                if param.is_floating_point():
                    return value.to(dtype=param.dtype, device=param.device)
                return value.to(device=param.device)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, key) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for hook in self._load_state_dict_post_hooks.values():
            hook(self)

    # ---- helpers for the algorithms -----------------------------------------------------------
    @staticmethod
    def _grads(group, sparse_ok=False):
        """[(param, gradient array)] for the parameters of ``group`` that have a gradient."""
        grads = [(p, g) for p in group["params"] if (g := p.grad) is not None]
        if not sparse_ok and any(g.is_sparse for _, g in grads):
            raise RuntimeError("this optimizer does not support sparse gradients")
        return [(p, g._data) for p, g in grads]

    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        with ember.enable_grad():
            return closure()
