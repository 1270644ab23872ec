"""Resampling: ``interpolate`` and its deprecated spellings ``upsample``, ``upsample_nearest``, ``upsample_bilinear``.

``interpolate`` validates its arguments with PyTorch's errors, works out the output size and the scale factors
that set the coordinate mapping, and calls ember-core's ``_upsample`` (or adaptive average pooling for "area")."""
import math
import warnings

import numpy as np

import ember

from ._common import core

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

# mode -> (number of spatial dims it needs or None for any of 1 to 3, the primitive's mode)
_MODES = {"nearest": (None, "nearest"), "nearest-exact": (None, "nearest-exact"), "area": (None, "area"),
          "linear": (1, "linear"), "bilinear": (2, "linear"), "trilinear": (3, "linear"), "bicubic": (2, "cubic"),
          "lanczos": (2, "lanczos")}
_NAMES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _is_integer(x):
    if isinstance(x, ember.Tensor):
        return not x.is_floating_point() and not x.is_complex()
    return isinstance(x, (int, np.integer))


def _sizes(input, n, size, scale_factor):
    """(output size, scale factors), exactly one of them given, each one value per spatial dim."""
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    shape = list(input.shape[2:])
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != n:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {shape} and output size of {size}. Please provide input "
                                 "tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
            sizes = list(size)
        else:
            sizes = [size] * n
        if not all(_is_integer(s) for s in sizes):
            raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], "
                            f"but got size with types {[type(s) for s in sizes]}")
        return [int(s) for s in sizes], None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != n:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {shape} and scale_factor of shape {scale_factor}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, "
                             "...,sK) format.")
        return None, [float(s) for s in scale_factor]
    return None, [float(scale_factor)] * n


def _scaled(input, scales):
    """The output size for scale factors: each input size times its factor, rounded down."""
    out = []
    for length, s in zip(input.shape[2:], scales):
        v = length * s
        if not math.isfinite(v) or abs(v) >= 2.0 ** 63:
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        out.append(int(v))
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resample ``input`` (N, C, *spatial with 1 to 3 spatial dims) to ``size`` or by ``scale_factor``.

    ``mode``: nearest, nearest-exact, linear (1 spatial dim), bilinear or bicubic (2), trilinear (3), lanczos (2,
    antialiased only) or area (adaptive average pooling). ``align_corners`` (interpolating modes only) maps the centres
    of the corner pixels onto each other. With ``scale_factor``, the factor sets the coordinate mapping unless
    ``recompute_scale_factor`` asks for the one of the rounded output size. ``antialias`` widens the bilinear,
    bicubic and Lanczos filters by the shrink factor when downsampling."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                             "bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    n = input.dim() - 2
    output_size, scales = _sizes(input, n, size, scale_factor)
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if (recompute_scale_factor or mode == "area") and output_size is None:
        # the output size from the factors; the mapping then follows that size, not the factors
        output_size, scales = [int(length * s) for length, s in zip(input.shape[2:], scales)], None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    dims, primitive = _MODES.get(mode, (0, None))
    if primitive is None or not 1 <= n <= 3 or dims not in (None, n):
        named = {"linear": "3D", "bilinear": "4D", "trilinear": "5D"}
        if mode in named and 1 <= n <= 3:
            raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {named[mode]} input")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for "
                                  f"the modes: {_NAMES} (got {mode})")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if mode == "area":
        return core(f"adaptive_avg_pool{n}d")(input, output_size)
    if align_corners is not None and not isinstance(align_corners, (bool, np.bool_)):
        raise TypeError(f"interpolate(): argument 'align_corners' must be bool, not {type(align_corners).__name__}")
    if output_size is None:
        output_size = _scaled(input, scales)
    return core("_upsample")(input, output_size, primitive, bool(align_corners), scales, bool(antialias))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate``."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate`` with mode nearest."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate`` with mode bilinear and aligned corners."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
