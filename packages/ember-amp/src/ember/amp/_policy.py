"""The autocast op policies, as data: one table per device type, keyed by ember op names.

A key is the name of a registry op (``call.op.name``: ``mm``, ``fft_rfft``, ``linalg_inv``) or of a
function ember composes from other ops (``linear``, ``mse_loss``, ``linalg_cond``): autocast wraps
those at their module attribute (see ``_layer.COMPOSITE_MODULES``). Kinds:

* ``lower``: floating inputs (not float64) are cast to the region's dtype (float16 / bfloat16);
* ``fp32``: floating inputs (not float64) are cast to float32;
* ``promote``: floating inputs (not float64) are cast to the widest among them;
* ``banned``: the call raises (``binary_cross_entropy`` in a CUDA region).

The lists start from the seed pages amp and amp.rst; ``docs/amp_policy.md`` lists every entry that
differs from them and why. ``SEED_NAMES`` maps PyTorch's names in those pages to the key here.
"""

_FFT = tuple(f"fft_{n}" for n in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
                                  "irfft2", "rfftn", "irfftn", "hfft", "ihfft"))
_LOSSES = ("cosine_embedding_loss", "nll_loss", "hinge_embedding_loss", "poisson_nll_loss", "cross_entropy",
           "l1_loss", "smooth_l1_loss", "mse_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
           "multi_margin_loss", "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits")
# ember registers aliases as ops of their own: they follow the op they alias
ALIASES = {"concat": "cat", "concatenate": "cat", "arccos": "acos", "arcsin": "asin", "max_pool3d_with_indices":
           "max_pool3d", "fractional_max_pool2d_with_indices": "fractional_max_pool2d",
           "fractional_max_pool3d_with_indices": "fractional_max_pool3d"}

CPU = {
    "lower": ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
              "bmm", "mm", "matmul", "baddbmm", "addmm", "addbmm", "linalg_vecdot", "linear", "prelu",
              "scaled_dot_product_attention", "einsum", "tensordot", "chain_matmul", "linalg_multi_dot"),
    "fp32": ("avg_pool3d", "binary_cross_entropy", "grid_sample", "polar", "prod", "quantile", "nanquantile", "stft",
             "cdist", "trace", "view_as_complex", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse",
             "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d",
             "adaptive_avg_pool3d", "adaptive_max_pool3d", "fractional_max_pool2d", "fractional_max_pool3d", "pad",
             "ctc_loss", *_LOSSES, "huber_loss", *_FFT, "linalg_cond", "linalg_matrix_rank", "linalg_solve",
             "linalg_cholesky", "linalg_svdvals", "linalg_eigvals", "linalg_eigvalsh", "linalg_inv",
             "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve", "fake_quantize_per_tensor_affine",
             "geqrf", "lu", "qr", "svd", "triangular_solve", "linalg_qr", "linalg_cholesky_ex", "linalg_svd",
             "linalg_eig", "linalg_eigh", "linalg_lstsq", "linalg_inv_ex"),
    "promote": ("cat", "stack", "index_copy"),
}

CUDA = {
    "lower": ("matmul", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
              "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
              "convolution", "linear", "mm", "mv", "prelu", "einsum", "linalg_vecdot", "scaled_dot_product_attention"),
    "fp32": ("pow", "div", "acos", "asin", "cosh", "cdist", "cosine_similarity", "cumprod", "cumsum", "dist", "erfinv",
             "exp", "expm1", "group_norm", "layer_norm", "rms_norm", "log", "log_softmax", "log10", "log1p", "log2",
             "logsumexp", "norm", "normalize", "pdist", "prod", "reciprocal", "rsqrt", "sinh", "softmax", "softmin",
             "softplus", "sum", "renorm", "tan", *_LOSSES),
    "promote": ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sample", "index_put",
                "scatter_add", "tensordot"),
    "banned": ("binary_cross_entropy",),
}

# PyTorch's names in the seed pages -> the key above (names that are the same need no entry)
SEED_NAMES = {"__matmul__": "matmul", "__pow__": "pow", "__rpow__": "pow", "__rdiv__": "div", "__rtruediv__": "div",
              "rpow": "pow", "rdiv": "div", "rtruediv": "div",  # amp.txt lost the underscores
              "multi_dot": "linalg_multi_dot", "_convolution": "conv2d", "cross_entropy_loss": "cross_entropy",
              "nll_loss2d": "nll_loss", "multilabel_margin_loss_forward": "multilabel_margin_loss",
              "grid_sampler": "grid_sample", "grid_sampler_2d": "grid_sample", "grid_sampler_3d": "grid_sample",
              "_grid_sampler_2d_cpu_fallback": "grid_sample", "reflection_pad1d": "pad", "reflection_pad2d": "pad",
              "replication_pad1d": "pad", "replication_pad2d": "pad", "replication_pad3d": "pad", "_lu_with_info": "lu",
              # recurrent cells and layers, and multi-head attention, are made of linear layers and matrix products
              "GRUCell": "linear", "LSTMCell": "linear", "RNNCell": "linear", "mkldnn_rnn_layer": "linear",
              "_native_multi_head_attention": "linear"}


def _reflected(args, kwargs):
    """``div`` is listed only as ``number / tensor`` (PyTorch's __rtruediv__ computes a reciprocal)."""
    return not hasattr(args[0], "_data")


def _padding_in_fp32(args, kwargs):
    """PyTorch lists reflection padding of 1 and 2 dims and replication padding of 1 to 3 dims."""
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    pad = kwargs.get("pad", args[1] if len(args) > 1 else ())
    return mode == "replicate" or (mode == "reflect" and len(pad) <= 4)


# (device type, key) -> predicate(args, kwargs): the policy applies only when it holds
CONDITIONS = {("cuda", "div"): _reflected, ("cpu", "pad"): _padding_in_fp32}


def policies(table):
    """{key: kind} of one table, with ember's alias ops."""
    out = {name: kind for kind, names in table.items() for name in names}
    out.update({alias: out[name] for alias, name in ALIASES.items() if name in out})
    return out


POLICY = {"cpu": policies(CPU), "cuda": policies(CUDA)}
