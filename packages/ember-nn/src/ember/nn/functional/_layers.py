"""Linear, convolution, pooling, normalisation, dropout, embedding, padding, shuffles, grid sampling and distances."""
import math
import warnings

import numpy as np

import ember

from ._common import core, core_, ntuple, tensor_parameters

__all__ = ["linear", "bilinear", "grouped_mm", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "conv_tbc", "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d",
           "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices", "batch_norm",
           "instance_norm", "layer_norm", "group_norm", "rms_norm", "local_response_norm", "normalize", "dropout",
           "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "embedding",
           "embedding_bag", "one_hot", "pad", "unfold", "fold", "pixel_shuffle", "pixel_unshuffle",
           "channel_shuffle", "native_channel_shuffle", "affine_grid", "grid_sample", "cosine_similarity",
           "pairwise_distance", "pdist"]


# ---- linear and convolution ---------------------------------------------------------------------
@tensor_parameters("input", "weight", "bias")
def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    if weight.dim() == 2 and input.dim() and (bias is None or bias.dim() <= 1):
        return core("linear")(input, weight, bias)  # one graph node, computing only the gradients wanted
    out = input.matmul(weight.t())
    return out if bias is None else out + bias


def bilinear(input1, input2, weight, bias=None):
    return core("bilinear")(input1, input2, weight, bias)


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """Each group of ``mat_a``'s rows (``offs``: the int32 ends of the groups) times its own matrix of ``mat_b``, as a
    mixture-of-experts layer multiplies each expert's tokens; see ``ember._grouped_mm`` for the other layouts."""
    return core("_grouped_mm")(mat_a, mat_b, offs, bias, out_dtype)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return core("conv1d")(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return core("conv2d")(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return core("conv3d")(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return core("conv_transpose1d")(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return core("conv_transpose2d")(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return core("conv_transpose3d")(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_tbc(input, weight, bias, pad=0):
    return core("conv_tbc")(input, weight, bias, pad)


# ---- pooling -------------------------------------------------------------------------------------
def _max_pool(n):
    def with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return core(f"max_pool{n}d_with_indices")(input, kernel_size, stride, padding, dilation, ceil_mode)

    def plain(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        if return_indices:
            return with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
        return core(f"max_pool{n}d")(input, kernel_size, stride, padding, dilation, ceil_mode)
    plain.__name__, with_indices.__name__ = f"max_pool{n}d", f"max_pool{n}d_with_indices"
    return plain, with_indices


(max_pool1d, max_pool1d_with_indices), (max_pool2d, max_pool2d_with_indices), \
    (max_pool3d, max_pool3d_with_indices) = (_max_pool(n) for n in (1, 2, 3))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return core("avg_pool1d")(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return core("avg_pool2d")(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return core("avg_pool3d")(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _adaptive(n):
    def avg(input, output_size):
        return core(f"adaptive_avg_pool{n}d")(input, output_size)

    def with_indices(input, output_size, return_indices=False):
        return core(f"adaptive_max_pool{n}d")(input, output_size)

    def plain(input, output_size, return_indices=False):
        out = with_indices(input, output_size)
        return out if return_indices else out[0]
    avg.__name__, plain.__name__ = f"adaptive_avg_pool{n}d", f"adaptive_max_pool{n}d"
    with_indices.__name__ = f"adaptive_max_pool{n}d_with_indices"
    return avg, plain, with_indices


(adaptive_avg_pool1d, adaptive_max_pool1d, adaptive_max_pool1d_with_indices), \
    (adaptive_avg_pool2d, adaptive_max_pool2d, adaptive_max_pool2d_with_indices), \
    (adaptive_avg_pool3d, adaptive_max_pool3d, adaptive_max_pool3d_with_indices) = (_adaptive(n) for n in (1, 2, 3))


def _unpool_size(input, n, kernel_size, stride, padding, output_size):
    """The spatial output size of max unpooling: the pooled input's size, or ``output_size`` checked against it."""
    k = ntuple(kernel_size, n)
    s = k if stride is None else ntuple(stride, n)
    p = ntuple(padding, n)
    spatial = input.shape[input.dim() - n:]
    default = [(spatial[d] - 1) * s[d] + k[d] - 2 * p[d] for d in range(n)]
    if output_size is None:
        return default
    out = list(output_size)[-n:] if len(output_size) in (n + 1, n + 2) else list(output_size)
    if len(out) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - s[d], default[d] + s[d]
        if not lo < out[d] < hi:
            raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be between {lo} and {hi})')
    return out


def _max_unpool(n):
    def unpool(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        size = _unpool_size(input, n, kernel_size, stride, padding, output_size)
        # the 3-d primitive also takes the window geometry (as PyTorch's max_unpool3d does)
        extra = (ntuple(kernel_size if stride is None else stride, 3), ntuple(padding, 3)) if n == 3 else ()
        return core(f"max_unpool{n}d")(input, indices, size, *extra)
    unpool.__name__ = f"max_unpool{n}d"
    return unpool


max_unpool1d, max_unpool2d, max_unpool3d = (_max_unpool(n) for n in (1, 2, 3))


def _lp_pool(n):
    def lp(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        k = ntuple(kernel_size, n)
        pooled = globals()[f"avg_pool{n}d"](input.pow(norm_type), k, stride, 0, ceil_mode)
        # the window sum of |x|^p (mean times window size); the sign keeps odd powers of negatives as PyTorch does
        return (pooled.sign() * pooled.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)
    lp.__name__ = f"lp_pool{n}d"
    return lp


lp_pool1d, lp_pool2d, lp_pool3d = (_lp_pool(n) for n in (1, 2, 3))


def _intervals(sample, size, out, k):
    """Start of each fractional pooling window, per plane: (planes, out) from samples (planes,)."""
    if out == 1:
        return ember.full((sample.shape[0], 1), size - k, dtype=ember.int64, device=sample.device)
    alpha = (size - k) / (out - 1)
    i = ember.arange(out - 1, device=sample.device, dtype=sample.dtype)
    starts = (((i + sample[:, None]) * alpha).trunc() - (sample[:, None] * alpha).trunc()).long()
    return ember.cat([starts, starts.new_full((sample.shape[0], 1), size - k)], 1)


def _fractional_max_pool(n, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    name = f"fractional_max_pool{n}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    unbatched = input.dim() == n + 1
    x = input.unsqueeze(0) if unbatched else input
    if x.dim() != n + 2:
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got: {list(input.shape)}")
    spatial = list(x.shape[2:])
    k = ntuple(kernel_size, n)
    out = list(ntuple(output_size, n)) if output_size is not None else \
        [int(s * r) for s, r in zip(spatial, ntuple(output_ratio, n))]
    for d in range(n):
        if out[d] + k[d] - 1 > spatial[d]:
            raise RuntimeError(f"{name}(): pool size {k[d]} and output size {out[d]} are too large for input size "
                               f"{spatial[d]}")
    N, C = x.shape[:2]
    samples = ember.rand(N, C, n, dtype=x.dtype, device=x.device) if _random_samples is None else _random_samples
    samples = samples.reshape(N * C, n)
    # PyTorch's 2-d kernel reads the samples as (width, height); the 3-d kernel as (time, height, width)
    order = [1, 0] if n == 2 else [0, 1, 2]
    flat = ember.zeros((N * C,) + (1,) * (2 * n), dtype=ember.int64, device=x.device)
    for d in range(n):
        starts = _intervals(samples[:, order[d]], spatial[d], out[d], k[d])
        pos = starts[:, :, None] + ember.arange(k[d], device=x.device)  # (planes, out, k)
        shape = [N * C] + [1] * (2 * n)
        shape[1 + d], shape[1 + n + d] = out[d], k[d]
        flat = flat * spatial[d] + pos.reshape(shape)
    flat = flat.reshape(N, C, math.prod(out), math.prod(k))
    windows = x.flatten(2).gather(2, flat.flatten(2)).reshape(flat.shape)
    values, arg = windows.max(-1)
    indices = flat.gather(3, arg.unsqueeze(-1)).squeeze(-1)
    values, indices = values.reshape(N, C, *out), indices.reshape(N, C, *out)
    if unbatched:
        values, indices = values[0], indices[0]
    return (values, indices) if return_indices else values


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


# ---- normalisation -------------------------------------------------------------------------------
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training and input.numel() // (input.shape[1] if input.dim() > 1 else 1) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"torch.Size({list(input.shape)})")
    return core("batch_norm")(input, weight, bias, running_mean, running_var, training, momentum, eps, False)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"torch.Size({list(input.shape)})")
    return core("instance_norm")(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                                 False)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return core("layer_norm")(input, list(ntuple(normalized_shape, 1)), weight, bias, eps, False)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    return core("group_norm")(input, num_groups, weight, bias, eps, False)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return core("rms_norm")(input, list(ntuple(normalized_shape, 1)), weight, eps)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Each element divided by ``(k + alpha * mean of squares over ``size`` neighbouring channels) ** beta``."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    sq = pad(input.mul(input).movedim(1, -1), (size // 2, (size - 1) // 2))
    C = input.shape[1]
    window = sum(sq[..., j:j + C] for j in range(size)).movedim(-1, 1)  # a loop over the window, not the data
    return input / window.mul(alpha / size).add(k).pow(beta)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input`` divided by its ``p``-norm along ``dim`` (at least ``eps``)."""
    r = input / ember.linalg.vector_norm(input, p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return r if out is None else out.copy_(r)


# ---- dropout -------------------------------------------------------------------------------------
def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout(name, input, p, training, inplace):
    _check_p(p)
    return (core_(name) if inplace else core(name))(input, p, training)


def dropout(input, p=0.5, training=True, inplace=False):
    return _dropout("dropout", input, p, training, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout("alpha_dropout", input, p, training, inplace)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout("feature_alpha_dropout", input, p, training, inplace)


def _feature_dropout(n, input, p, training, inplace):
    """Whole channels zeroed; an unbatched (C, *n spatial) input is treated as a batch of one."""
    _check_p(p)
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"dropout{n}d: Expected {n + 1}D or {n + 2}D input, but received a {input.dim()}D input. "
                           f"Note that dropout{n}d exists to provide channel-wise dropout on inputs with {n} spatial "
                           f"dimension{'s' if n > 1 else ''}, a channel dimension, and an optional batch dimension "
                           f"(i.e. {n + 1}D or {n + 2}D inputs).")
    unbatched = input.dim() == n + 1
    x = input.unsqueeze(0) if unbatched else input
    out = _dropout("feature_dropout", x, p, training, inplace)
    return input if inplace else out.squeeze(0) if unbatched else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(1, input, p, training, inplace)


@tensor_parameters("input")
def dropout2d(input, p=0.5, training=True, inplace=False):
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
        _check_p(p)
        return _dropout("feature_dropout", input, p, training, inplace)
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
        _check_p(p)
        return _dropout("feature_dropout", input, p, training, inplace)
    return _feature_dropout(2, input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(3, input, p, training, inplace)


# ---- embeddings -----------------------------------------------------------------------------------
def _padding_idx(padding_idx, weight):
    if padding_idx is None:
        return -1
    n = weight.shape[0]
    if not -n <= padding_idx < n:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % n


def _renorm_(weight, input, max_norm, norm_type):
    with ember.no_grad():  # rescaling the looked-up rows is not part of the graph
        core("embedding_renorm_")(weight, input, max_norm, norm_type)


@tensor_parameters("input", "weight")
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    pidx = _padding_idx(padding_idx, weight)
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    return core("embedding")(weight, input, pidx, scale_grad_by_freq, sparse)


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of rows of ``weight``: the rows of a 2-D ``input``, or the runs of a 1-D one
    that ``offsets`` start."""
    if weight.dtype == ember.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then "
                         f"it must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        offsets = ember.arange(0, input.numel(), input.shape[1], dtype=input.dtype, device=input.device)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in _BAG_MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    return core("embedding_bag")(weight, input, offsets, scale_grad_by_freq, _BAG_MODES[mode], sparse,
                                 per_sample_weights, include_last_offset, padding_idx)[0]


@tensor_parameters("tensor")
def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim of ``num_classes`` (max + 1 when -1)."""
    if tensor.dtype != ember.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max()) + 1
    if tensor.numel() and not tensor.is_meta:  # (a meta tensor has no values to check)
        if int(tensor.min()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        if int(tensor.max()) >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    # (contiguous, as PyTorch's, whatever the layout of ``tensor``)
    return (tensor.unsqueeze(-1) == ember.arange(num_classes, device=tensor.device)).long().contiguous()


# ---- padding ------------------------------------------------------------------------------------
def _pad_index(L, before, after, mode):
    """Source index of every padded position of a dim of size ``L`` (NumPy: built once on the host)."""
    i = np.arange(-before, L + after)
    if mode == "reflect":
        period = 2 * (L - 1) if L > 1 else 1
        i = np.abs(i) % period
        return np.where(i >= L, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, L - 1)
    return i % L


@tensor_parameters("input")
def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims; ``pad`` lists (before, after) pairs from the last dim backwards."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.dim()}")
    if mode == "constant":
        return core("constant_pad_nd")(input, list(pad), 0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    n = len(pad) // 2
    if not (n + 1 <= input.dim() <= n + 2) or n > 3:
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now")
    out = input
    for j in range(n):
        d = input.dim() - 1 - j
        before, after = pad[2 * j], pad[2 * j + 1]
        L = input.shape[d]
        if mode == "reflect" and (before >= L or after >= L):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                               f"got: padding ({before}, {after}) at dimension {d} of input {list(input.shape)}")
        if mode == "circular" and (before > L or after > L):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and L == 0 and before + after > 0:
            raise RuntimeError(f"padding size is expected to be non-empty at dimension {d}")
        index = ember.from_numpy(_pad_index(L, before, after, mode)).to(input.device)
        out = out.index_select(d, index)
    return out


# ---- sliding blocks ---------------------------------------------------------------------------------
def _block_weight(channels, kernel, like):
    """(C * prod(kernel), 1, *kernel) one-hot filters: convolving with them (groups=C) copies each block element."""
    k = math.prod(kernel)
    eye = ember.eye(k, dtype=like.dtype, device=like.device).reshape((k, 1) + tuple(kernel))
    return eye.repeat(channels, 1, 1, 1)


@tensor_parameters("input")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of a (N, C, H, W) input as columns: (N, C * kh * kw, blocks)."""
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    x = input.unsqueeze(0) if input.dim() == 3 else input
    k = ntuple(kernel_size, 2)
    cols = conv2d(x, _block_weight(x.shape[1], k, x), None, stride, padding, dilation, x.shape[1])
    cols = cols.flatten(2)
    return cols[0] if input.dim() == 3 else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding blocks (columns, as ``unfold`` makes them) back into a (N, C, *output_size) tensor."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    x = input.unsqueeze(0) if input.dim() == 2 else input
    k, out = ntuple(kernel_size, 2), ntuple(output_size, 2)
    s, p, d = ntuple(stride, 2), ntuple(padding, 2), ntuple(dilation, 2)
    blocks = [(out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    kk = math.prod(k)
    if x.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={x.shape[1]} and kernel_size={k}")
    if x.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={out}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, "
                           f"expected size of input's dimension 2 to match the calculated number of sliding blocks "
                           f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={x.shape[2]}.")
    C = x.shape[1] // kk
    # the transposed convolution is the adjoint of unfold's, and it lands exactly on output_size
    extra = [out[i] + 2 * p[i] - ((blocks[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1) for i in range(2)]
    y = conv_transpose2d(x.reshape(x.shape[0], C * kk, *blocks), _block_weight(C, k, x), None, s, p, extra, C, d)
    return y[0] if input.dim() == 2 else y


# ---- shuffles and resampling ----------------------------------------------------------------------
def pixel_shuffle(input, upscale_factor):
    return core("pixel_shuffle")(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    return core("pixel_unshuffle")(input, downscale_factor)


def channel_shuffle(input, groups):
    return core("channel_shuffle")(input, groups)


native_channel_shuffle = channel_shuffle


def _align_warning(align_corners):
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", stacklevel=3)
        return False
    return align_corners


def affine_grid(theta, size, align_corners=None):
    align_corners = _align_warning(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    n = len(size) - 2
    if n not in (2, 3):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {tuple(size)}.")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (n, n + 1) or theta.shape[0] != size[0]:
        raise ValueError(f"Expected a batch of {n}D affine matrices of shape Nx{n}x{n + 1} for size {tuple(size)}. "
                         f"Got {tuple(theta.shape)}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation of "
                      "affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return core("affine_grid_generator")(theta, size, align_corners)


def _unnormalize(coord, size, align_corners, padding_mode):
    """Pixel coordinate of normalised ``coord`` along a dim of ``size``, folded by the padding mode."""
    return _fold((coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2, size, align_corners,
                 padding_mode)


def _fold(x, size, align_corners, padding_mode):
    """Pixel coordinate ``x`` brought into the input by the padding mode (left as it is for "zeros")."""
    if padding_mode == "border":
        return x.clamp(0, size - 1)
    if padding_mode == "reflection":
        lo, span = (0.0, size - 1.0) if align_corners else (-0.5, float(size))
        if span <= 0:
            return x * 0
        y = (x - lo).abs()
        flips = (y / span).floor()
        extra = y - flips * span
        y = ember.where(flips.remainder(2) == 0, extra + lo, span - extra + lo)
        return y.clamp(0, size - 1)
    return x


def _cubic_weights(t):
    """The four weights of cubic convolution (A = -0.75, as PyTorch) at taps -1, 0, 1, 2 for fractions ``t``."""
    A = -0.75

    def near(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@tensor_parameters("input", "grid")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, *spatial) at the normalised points of ``grid`` (N, *out, n): linearly, nearest, or
    bicubic (2-d only; each of the 4x4 taps folded by the padding mode)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align_corners = _align_warning(align_corners)
    n = input.dim() - 2
    if n not in (2, 3) or grid.dim() != input.dim() or grid.shape[-1] != n or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {n} in last dimension and the same batch "
                           f"size and number of dims as input, but got input with sizes {list(input.shape)} and grid "
                           f"with sizes {list(grid.shape)}")
    if mode == "bicubic" and n != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    N, C, *spatial = input.shape
    out_shape = list(grid.shape[1:-1])
    flat_in = input.reshape(N, C, -1)
    # grid's last dim is (x, y[, z]): x indexes the last spatial dim; bicubic folds each tap rather than the point
    coords = [_unnormalize(grid[..., n - 1 - d].reshape(N, 1, -1), spatial[d], align_corners,
                           "zeros" if mode == "bicubic" else padding_mode) for d in range(n)]
    if mode == "nearest":
        corners = [[(c.round(), None)] for c in coords]  # round half to even, as PyTorch's nearbyint
    elif mode == "bicubic":
        corners = []
        for d, c in enumerate(coords):
            lo = c.floor()
            corners.append([(_fold(lo + (k - 1), spatial[d], align_corners, padding_mode), w)
                            for k, w in enumerate(_cubic_weights(c - lo))])
    else:
        corners = []
        for c in coords:
            lo = c.floor()
            w = c - lo
            corners.append([(lo, 1 - w), (lo + 1, w)])
    out = 0
    for combo in np.ndindex(*(len(cs) for cs in corners)):  # the stencil's taps (2^n, 16 for bicubic), not the data
        index, weight, inside = 0, 1, True
        for d, j in enumerate(combo):
            pos, w = corners[d][j]
            inside = inside & (pos >= 0) & (pos <= spatial[d] - 1)
            index = index * spatial[d] + pos.clamp(0, spatial[d] - 1).long()
            weight = weight if w is None else weight * w
        values = flat_in.gather(2, index.expand(N, C, -1))
        out = out + values * ember.where(inside, weight, 0.0).to(input.dtype)
    return out.reshape(N, C, *out_shape)


# ---- distances ----------------------------------------------------------------------------------------
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return core("cosine_similarity")(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return core("pairwise_distance")(x1, x2, p, eps, keepdim)


def pdist(input, p=2):
    return core("pdist")(input, p)
