"""SyncBatchNorm's training forward when a process group is up: batch statistics over every rank's batch.

Each rank gathers every rank's per-channel mean, biased variance and count (float64), combines them (Chan's
parallel formula) into the statistics of the whole batch, normalises its own part with them and updates the
running statistics (the variance unbiased over the total count), as BatchNorm over the concatenated batch would.
Backward all-reduces the per-channel sums of dy and dy*(x - mean), from which each rank's input gradient follows;
weight and bias gradients stay local (DDP averages them). ember runs this on CPU tensors too, which torch refuses.
"""
import ember
from ember.autograd import Function


def sync_batch_norm_forward(module, input):
    """``module.forward(input)`` of a SyncBatchNorm in training mode (ember.nn calls it while a process group is
    initialised): synchronised over ``module.process_group`` (default: the world) when it has several ranks."""
    import ember.distributed as dist
    import ember.nn.functional as F
    module._check_input_dim(input)
    if input.shape[1] == 0:
        raise ValueError("SyncBatchNorm number of input channels should be non-zero")
    factor = 0.0 if module.momentum is None else module.momentum
    if module.track_running_stats and module.num_batches_tracked is not None:
        module.num_batches_tracked.add_(1)
        if module.momentum is None:  # a cumulative moving average
            factor = 1.0 / float(module.num_batches_tracked)
    running_mean = module.running_mean if module.track_running_stats else None
    running_var = module.running_var if module.track_running_stats else None
    group = module.process_group if module.process_group else dist.group.WORLD
    world_size = dist.get_world_size(group)
    if world_size <= 1:
        return F.batch_norm(input, running_mean, running_var, module.weight, module.bias, True, factor, module.eps)
    return SyncBatchNorm.apply(input, module.weight, module.bias, running_mean, running_var, module.eps, factor,
                               group, world_size)


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_shape(x):
    return [1, -1] + [1] * (x.dim() - 2)


class SyncBatchNorm(Function):
    """Batch normalisation with statistics over the whole process group (torch's Function of the same name)."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        import ember.distributed as dist
        input = input.contiguous()
        channels = input.shape[1]
        count = input.numel() // channels if channels else 0
        if count == 1 and world_size < 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {count}")
        dims = _reduce_dims(input)
        stats = ember.zeros(2 * channels + 1, dtype=ember.float64, device=input.device)
        if count:
            x64 = input.double()
            mean = x64.mean(dims)
            stats[:channels] = mean
            stats[channels:2 * channels] = (x64 - mean.view(_channel_shape(input))).square().mean(dims)
            stats[-1] = count
        gathered = [ember.empty_like(stats) for _ in range(world_size)]
        dist.all_gather(gathered, stats, group=process_group)
        every = ember.stack(gathered)
        counts = every[:, -1:]
        total = counts.sum()
        means, variances = every[:, :channels], every[:, channels:2 * channels]
        mean = (means * counts).sum(0) / total
        m2 = (variances * counts + (means - mean).square() * counts).sum(0)
        var = m2 / total
        invstd = (var + eps).rsqrt()
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_((mean * momentum).to(running_mean.dtype))
        if running_var is not None:
            running_var.mul_(1 - momentum).add_((m2 / (total - 1) * momentum).to(running_var.dtype))
        mean, invstd = mean.to(input.dtype), invstd.to(input.dtype)
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.total, ctx.process_group = total.item(), process_group
        scale = invstd if weight is None else invstd * weight
        out = (input - mean.view(_channel_shape(input))) * scale.view(_channel_shape(input))
        if bias is not None:
            out += bias.view(_channel_shape(input))
        return out

    @staticmethod
    def backward(ctx, grad_output):
        import ember.distributed as dist
        input, weight, mean, invstd = ctx.saved_tensors
        grad_output = grad_output.contiguous()
        shape, dims = _channel_shape(input), _reduce_dims(input)
        xmu = input - mean.view(shape)
        sum_dy = grad_output.sum(dims)
        sum_dy_xmu = (grad_output * xmu).sum(dims)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            channels = input.shape[1]
            combined = ember.cat([sum_dy, sum_dy_xmu])
            dist.all_reduce(combined, group=ctx.process_group)
            mean_dy, mean_dy_xmu = combined[:channels] / ctx.total, combined[channels:] / ctx.total
            scale = invstd if weight is None else invstd * weight
            grad_input = (grad_output - mean_dy.view(shape) - xmu * (invstd.square() * mean_dy_xmu).view(shape)) \
                * scale.view(shape)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xmu * invstd
        if ctx.needs_input_grad[2]:
            grad_bias = sum_dy
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
