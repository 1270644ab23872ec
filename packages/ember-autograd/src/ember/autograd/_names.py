"""The class of each op's graph node, named as PyTorch names the node its op makes.

PyTorch's node classes are named after the ATen function the derivative belongs to: ``<CamelCase>Backward<N>``,
N numbering the overloads (``sum()`` -> SumBackward0, ``sum(dim)`` -> SumBackward1). ember's op of the same name
follows that rule (``node_type_of``); the tables below hold the ops that differ: aliases and ops that PyTorch
computes through another ATen function (``FIXED``), and ops whose overload depends on the call (``BY_CALL``).
tests/test_node_names.py checks every op of the op table against PyTorch. Each name is one ``Node`` subclass, made
once: a node costs no more than with a plain class.
"""
from ember._tensor import Tensor

from ._engine import Node

_types = {}


def node_type(name, base=Node, **attrs):
    """The node class called ``name`` (made on first use, then the same class)."""
    cls = _types.get(name)
    if cls is None:
        cls = _types[name] = type(name, (base,), {"__slots__": (), "_name": name, "__module__": base.__module__,
                                                   **attrs})
    return cls


def camel(op_name):
    """PyTorch's node name for an ATen function of that name: each ``_``-separated part title-cased (a letter
    after a digit too: log1p -> Log1P, max_pool2d -> MaxPool2D)."""
    return _stem(op_name) + "0"


def _stem(op_name):
    """``camel`` without the overload number."""
    return "".join(part.title() for part in op_name.strip("_").split("_")) + "Backward"


FIXED = {
    # aliases
    "true_divide": "DivBackward0", "divide": "DivBackward0", "multiply": "MulBackward0", "subtract": "SubBackward0",
    "negative": "NegBackward0", "absolute": "AbsBackward0", "arctan": "AtanBackward0", "arcsinh": "AsinhBackward0",
    "arccosh": "AcoshBackward0", "arcsin": "AsinBackward0", "arccos": "AcosBackward0", "arctanh": "AtanhBackward0",
    "arctan2": "Atan2Backward0", "fix": "TruncBackward0", "swapaxes": "TransposeBackward0",
    "swapdims": "TransposeBackward0", "expand_as": "ExpandBackward0", "broadcast_to": "ExpandBackward0",
    "concat": "CatBackward0", "concatenate": "CatBackward0", "narrow": "SliceBackward0", "msort": "SortBackward0",
    "linalg_diagonal": "DiagonalBackward0", "ravel": "ViewBackward0", "copy_": "CopyBackwards",
    "orgqr": "LinalgHouseholderProductBackward0",
    "_to_copy": "ToCopyBackward0",
    # dropout's recorded form (it keeps its mask): on the CPU, torch multiplies by the noise (alpha: adds an offset)
    "_dropout_with_mask": "MulBackward0", "_feature_dropout_with_mask": "MulBackward0",
    "_alpha_dropout_with_mask": "AddBackward0", "_feature_alpha_dropout_with_mask": "AddBackward0",
    # computed by another ATen function (the node of its result)
    "flipud": "FlipBackward0", "fliplr": "FlipBackward0", "tile": "RepeatBackward0",
    "take_along_dim": "GatherBackward0", "cross": "LinalgCrossBackward0", "linalg_inv": "LinalgInvExBackward0",
    "inverse": "LinalgInvExBackward0", "det": "LinalgDetBackward0", "slogdet": "LinalgSlogdetBackward0",
    "linalg_solve": "LinalgSolveExBackward0", "linalg_cholesky": "LinalgCholeskyExBackward0",
    "qr": "LinalgQrBackward0", "linalg_svdvals": "LinalgSvdBackward0", "linalg_eigvalsh": "LinalgEighBackward0",
    "pinverse": "LinalgPinvBackward0", "matrix_exp": "LinalgMatrixExpBackward0", "fft_fftshift": "RollBackward0",
    "fft_ifftshift": "RollBackward0", "fft_rfft": "FftR2CBackward0", "fft_rfft2": "FftR2CBackward0",
    "fft_rfftn": "FftR2CBackward0", "fft_ihfft": "ConjBackward0", "hstack": "CatBackward0", "vstack": "CatBackward0",
    "row_stack": "CatBackward0", "dstack": "CatBackward0", "column_stack": "CatBackward0",
    "tensor_split": "SliceBackward0", "hsplit": "SliceBackward0", "vsplit": "SliceBackward0",
    "dsplit": "SliceBackward0",
    "meshgrid": "ExpandBackward0", "diagflat": "DiagEmbedBackward0", "outer": "MulBackward0", "ger": "MulBackward0",
    "linalg_vecdot": "SumBackward1", "cosine_similarity": "SumBackward1", "pairwise_distance": "NormBackward1",
    "frobenius_norm": "NormBackward1", "square": "PowBackward0", "softsign": "DivBackward0",
    "tanhshrink": "SubBackward0", "nanmean": "DivBackward0", "selu": "EluBackward0", "prelu": "PreluKernelBackward0",
    "rrelu": "RreluWithNoiseBackward0", "batch_norm": "NativeBatchNormBackward0",
    "layer_norm": "NativeLayerNormBackward0", "group_norm": "NativeGroupNormBackward0",
    "instance_norm": "ViewBackward0", "_softmax_nll": "NllLossBackward0", "max_pool2d": "MaxPool2DWithIndicesBackward0",
    "max_pool3d": "MaxPool3DWithIndicesBackward0", "rnn_tanh_cell": "TanhBackward0", "rnn_relu_cell": "ReluBackward0",
    "gru_cell": "AddBackward0", "_lstm_layer": "StackBackward0", "linalg_tensorsolve": "ViewBackward0",
    "tensordot": "ViewBackward0", "kron": "UnsafeViewBackward0", "linalg_vander": "CatBackward0",
}
for _op in ("max_pool1d", "max_pool1d_with_indices", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d"):
    FIXED[_op] = "SqueezeBackward1"  # PyTorch pools one dimension as two, then squeezes


def _given(args, kwargs, index, name):
    """Whether argument ``name`` (at position ``index``) was passed, and not as None."""
    return (args[index] if len(args) > index else kwargs.get(name)) is not None


def _is_tensor(args, kwargs, index, name):
    return isinstance(args[index] if len(args) > index else kwargs.get(name), Tensor)


def _overload(index, name, tensor_is):
    """Overload 0 or 1 of an op whose argument ``name`` may be a tensor or a number (``tensor_is``: the tensor
    overload's number)."""
    def namer(op_name, args, kwargs, result):
        n = tensor_is if _is_tensor(args, kwargs, index, name) else 1 - tensor_is
        return _stem(op_name) + "01"[n]
    return namer


def _reduction(op_name):
    """sum/mean/prod/median/nanmedian: overload 0 reduces everything, 1 takes dims (the classes found here: sum
    and mean are recorded often)."""
    everything, dims = node_type(_stem(op_name) + "0"), node_type(_stem(op_name) + "1")

    def namer(args, kwargs, result):
        return dims if (len(args) > 1 and args[1] is not None) or (kwargs and kwargs.get("dim") is not None) \
            else everything
    return namer


def _max_min(op_name, args, kwargs, result):
    if _is_tensor(args, kwargs, 1, "other"):
        return "MaximumBackward0" if op_name == "max" else "MinimumBackward0"
    return _stem(op_name) + ("0" if _given(args, kwargs, 1, "dim") else "1")


def _pow(op_name, args, kwargs, result):
    if not isinstance(args[0], Tensor):
        return "PowBackward2"
    return "PowBackward1" if _is_tensor(args, kwargs, 1, "exponent") else "PowBackward0"


def _clamp(op_name, args, kwargs, result):
    tensor = _is_tensor(args, kwargs, 1, "min") or _is_tensor(args, kwargs, 2, "max")
    return "ClampBackward0" if tensor else "ClampBackward1"


def _squeeze(op_name, args, kwargs, result):
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    return "SqueezeBackward0" if dim is None else "SqueezeBackward2" if isinstance(dim, (list, tuple)) else \
        "SqueezeBackward1"


def _view(op_name, args, kwargs, result):
    """reshape and its kin: a view of the input, else a copy (PyTorch's _unsafe_view of a clone)."""
    return "ViewBackward0" if result._base is not None or not result.numel() else "UnsafeViewBackward0"


def _split(op_name, args, kwargs, result):
    sizes = args[1] if len(args) > 1 else kwargs.get("split_size_or_sections", kwargs.get("split_size"))
    return "SplitWithSizesBackward0" if isinstance(sizes, (list, tuple)) else "SplitBackward0"


def _getitem(op_name, args, kwargs, result):
    """Basic indexing is a chain of select/slice/unsqueeze: the last one's node; anything else is index()."""
    index = args[1]
    parts = index if type(index) is tuple else (index,)
    name = "AliasBackward0"
    for p in parts:
        if isinstance(p, bool) or isinstance(p, (list, tuple)):
            return "IndexBackward0"
        if isinstance(p, int):
            name = "SelectBackward0"
        elif isinstance(p, Tensor):
            if p.dim() or p.dtype.is_floating_point or p.dtype.itemsize == 1:  # (0-d integers act as ints)
                return "IndexBackward0"
            name = "SelectBackward0"
        elif isinstance(p, slice):
            name = "SliceBackward0"
        elif p is None:
            name = "UnsqueezeBackward0"
    return name


def _setitem(op_name, args, kwargs, result):
    return "CopySlices" if _getitem(op_name, args, kwargs, result) != "IndexBackward0" else "IndexPutBackward0"


def _linear(op_name, args, kwargs, result):
    bias = _given(args, kwargs, 2, "bias")
    if args[0].dim() == 2:
        return "AddmmBackward0" if bias else "MmBackward0"
    return "ViewBackward0" if bias else "UnsafeViewBackward0"


def _matmul(op_name, args, kwargs, result):
    a, b = args[0].dim(), args[1].dim()
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4",
            (2, 2): "MmBackward0"}.get((a, b), "UnsafeViewBackward0")


def _conv(op_name, args, kwargs, result):
    """An unbatched input is computed as a batch of one, then squeezed."""
    return "SqueezeBackward1" if args[0].dim() == int(op_name[-2]) + 1 else "ConvolutionBackward0"


def _adaptive_avg(op_name, args, kwargs, result):
    """Pooling to one element per channel is a mean in PyTorch."""
    size = args[1] if len(args) > 1 else kwargs.get("output_size")
    sizes = size if isinstance(size, (list, tuple)) else (size,)
    return "MeanBackward1" if all(s == 1 for s in sizes) else camel(op_name)


def _sum_to_size(op_name, args, kwargs, result):
    """A sum keeping the dimensions, then a view when leading ones go."""
    return "ViewBackward0" if result.dim() < args[0].dim() else "SumBackward1"


def _chunk(op_name, args, kwargs, result):
    """chunk splits by a size, by sizes when the dimension is empty."""
    dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
    prefix = "UnsafeSplit" if op_name == "unsafe_chunk" else "Split"
    return prefix + ("WithSizesBackward0" if args[0].shape[dim] == 0 else "Backward0")


BY_CALL = {
    "max": _max_min, "min": _max_min, "pow": _pow, "float_power": _pow, "clamp": _clamp, "clip": _clamp,
    "clamp_min": _overload(1, "min", 1), "clamp_max": _overload(1, "max", 1),
    "remainder": _overload(1, "other", 1), "fmod": _overload(1, "other", 1), "copysign": _overload(1, "other", 0),
    "rsub": _overload(1, "other", 0), "lerp": _overload(2, "weight", 1), "masked_fill": _overload(2, "value", 1),
    "index_fill": _overload(3, "value", 1), "fill": _overload(1, "value", 1), "fill_": _overload(1, "value", 1),
    "round": lambda op_name, args, kwargs, result: "RoundBackward1" if _given(args, kwargs, 1, "decimals")
    else "RoundBackward0",
    "sort": lambda op_name, args, kwargs, result: "SortBackward1" if _given(args, kwargs, 99, "stable")
    else "SortBackward0",
    "squeeze": _squeeze, "reshape": _view, "view_as": _view, "reshape_as": _view, "flatten": _view,
    "unflatten": _view, "split": _split, "chunk": _chunk, "unsafe_chunk": _chunk, "__getitem__": _getitem,
    "__setitem__": _setitem,
    "linear": _linear, "matmul": _matmul, "sum_to_size": _sum_to_size,
    "adaptive_avg_pool2d": _adaptive_avg, "adaptive_avg_pool3d": _adaptive_avg,
    **{name: _conv for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                "conv_transpose3d")},
}


# op name -> namer(args, kwargs, result) -> node class
_NAMERS = {name: _reduction(name) for name in ("sum", "mean", "prod", "median", "nanmedian")}
for _name, _namer in BY_CALL.items():
    _NAMERS[_name] = (lambda op_name, f: lambda args, kwargs, result: node_type(f(op_name, args, kwargs, result)))(
        _name, _namer)


def node_type_of(op, args, kwargs, result, cache):
    """The node class of a call of ``op``; kept in ``cache`` (op -> class) when it does not depend on the call."""
    namer = _NAMERS.get(op.name)
    if namer is not None:
        return namer(args, kwargs, result)
    cls = cache[op] = node_type(FIXED.get(op.name) or camel(op.name))
    return cls
