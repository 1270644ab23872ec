"""``swap_in_optimizer_params_and_state``: run an optimiser for a while on other parameters and another state
(a ``state_dict()``-shaped dict), the live ones put back afterwards."""
import contextlib
from collections import defaultdict

from ember._tensor import Tensor

__all__ = ["swap_in_optimizer_params_and_state"]

_NAME = "swap_in_optimizer_params_and_state"


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Inside the block, ``optimizer.param_groups`` hold the tensors of ``swapin_parameters`` (a dict, in the
    order of the optimiser's parameters across its groups) and the hyperparameters of
    ``swapin_optim_state["param_groups"]``, and ``optimizer.state`` is built from
    ``swapin_optim_state["state"]`` (keyed by the packed ids of those groups, as ``state_dict()`` numbers them).
    Each parameter's state dict is a shallow copy: in-place changes of its tensors reach the caller's dict,
    new entries do not. On exit the live groups and state are back, whatever happened inside."""
    state, swaps = _checked(optimizer, swapin_parameters, swapin_optim_state)
    live_state, live_groups = optimizer.state, [dict(g) for g in optimizer.param_groups]
    try:
        new_state = defaultdict(dict)
        for group, (saved, params) in zip(optimizer.param_groups, swaps):
            group.update({k: v for k, v in saved.items() if k != "params"}, params=params)
            for p, pid in zip(params, saved["params"]):
                new_state[p] = dict(state.get(pid, {}))
        optimizer.state = new_state
        yield
    finally:
        for group, before in zip(optimizer.param_groups, live_groups):
            group.clear()
            group.update(before)
        optimizer.state = live_state


def _checked(optimizer, parameters, saved):
    """(the saved state, [(saved group, its parameters)]) after checking that ``saved`` fits the optimiser."""
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    if not isinstance(saved, dict):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    state, groups = saved.get("state"), saved.get("param_groups")
    if not isinstance(state, dict):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be a dict mapping packed parameter "
                           f"ids to per-param state dicts, got {type(state).__name__}.")
    if any(isinstance(k, Tensor) for k in state):
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style state keyed by packed parameter ids.")
    if any(isinstance(k, int) and not isinstance(v, dict) for k, v in state.items()):
        raise RuntimeError(f"{_NAME} requires per-parameter optimizer state entries to be dictionaries.")
    if not isinstance(groups, list):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['param_groups'] to be a list of param-group "
                           f"dicts, got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups than the live optimizer.")
    flat, start, seen, swaps = list(parameters.values()), 0, set(), []
    for i, (group, sg) in enumerate(zip(optimizer.param_groups, groups)):
        if not isinstance(sg, dict):
            raise RuntimeError(f"{_NAME} requires each optimizer param group to be a dictionary.")
        ids = sg.get("params")
        if not isinstance(ids, list) or not all(isinstance(j, int) for j in ids):
            raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param_groups[*]['params'] entries "
                               "keyed by packed parameter ids.")
        if len(ids) != len(group["params"]):
            raise RuntimeError(f"swapin_optim_state param group {i} has a different number of params than the "
                               "live optimizer param group.")
        only_saved, only_live = [k for k in sg if k not in group], [k for k in group if k not in sg]
        if only_saved or only_live:
            raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param group keys to exactly match "
                               f"the live optimizer group keys for group {i}. Keys only in swap-in: {only_saved}. "
                               f"Keys only in live: {only_live}.")
        seen.update(ids)
        if start + len(ids) > len(flat):
            raise RuntimeError(f"{_NAME} requires the explicit parameter state to match optimizer.param_groups "
                               "ordering.")
        swaps.append((sg, flat[start:start + len(ids)]))
        start += len(ids)
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be keyed only by packed parameter ids "
                           f"from param_groups[*]['params']; got extra keys {extra!r}.")
    return state, swaps
