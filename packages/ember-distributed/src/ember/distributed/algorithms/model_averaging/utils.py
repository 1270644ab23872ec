"""Averaging parameters over a process group: the helpers of the model averagers."""
import ember
import ember.distributed as dist
from ember.distributed import distributed_c10d

__all__ = ["average_parameters", "get_params_to_average", "average_parameters_or_parameter_groups"]


def average_parameters(params, process_group):
    """Replace each of ``params`` (an iterable of tensors) by its mean over ``process_group`` (None: the default
    group), with one all-reduce of all of them flattened into one buffer (memory: one more copy of them)."""
    group = process_group if process_group is not None else dist.group.WORLD
    if distributed_c10d._rank_not_in_group(group):
        return
    params = list(params)
    flat = ember.cat([p.data.reshape(-1) for p in params])
    flat /= dist.get_world_size(group)
    dist.all_reduce(flat, group=group)
    offset = 0
    for p in params:
        # as torch, each parameter's data becomes its slice of the reduced buffer (in the parameter's dtype)
        p.data = flat[offset:offset + p.numel()].view_as(p).type_as(p)
        offset += p.numel()


def get_params_to_average(params):
    """The parameters among ``params`` (parameters, or an optimizer's parameter groups) that have a gradient."""
    chosen = []
    for param in params:
        if isinstance(param, ember.nn.Parameter):
            if param.grad is not None:
                chosen.append(param)
        elif isinstance(param, dict):
            chosen.extend(p for p in param["params"] if p.grad is not None)
        else:
            raise NotImplementedError(f"Parameter input of type {type(param)} is not supported")
    return chosen


def average_parameters_or_parameter_groups(params, process_group):
    """Average the parameters of a model or of an optimizer's parameter groups that have a gradient."""
    average_parameters(get_params_to_average(params), process_group)
