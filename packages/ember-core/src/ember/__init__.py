"""ember: a PyTorch-compatible deep-learning framework on NumPy (CPU) and CuPy (CUDA).

``ember`` is a pkgutil-style namespace package: ember-core owns this file and the other ember
distributions (ember-autograd, ember-nn, ...) add subpackages to it. Importing ember loads every
installed extension (entry point group ``ember.extensions``).
"""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

import importlib as _importlib  # noqa: E402

_importlib.import_module(f"{__name__}._allocator").tune()  # large temporaries reuse malloc's memory

from math import e, inf, nan, pi  # noqa: E402,F401

from . import (  # noqa: E402
    _extensions,
    _factory,  # noqa: E402,F401  (registers the creation functions)
    _meta,  # noqa: E402,F401  (ops on meta tensors)
    _ops,
    _registry,
)
from ._compile import compile  # noqa: E402
from ._device import device  # noqa: E402
from ._dlpack import *  # noqa: E402,F401,F403
from ._dtype import (  # noqa: E402
    bfloat16,
    bool,
    cdouble,
    cfloat,
    chalf,
    complex32,
    complex64,
    complex128,
    double,
    dtype,
    finfo,
    float,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    iinfo,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    set_default_dtype,
    short,
    uint8,
)
from ._factory import get_default_device, set_default_device  # noqa: E402
from ._float8 import _scaled_mm  # noqa: E402
from ._layout import layout, sparse_coo, sparse_csr, strided  # noqa: E402
from ._legacy_types import *  # noqa: E402,F401,F403  (ember.FloatTensor, ember.LongTensor, ...)
from ._memory_format import (  # noqa: E402
    channels_last,
    channels_last_3d,
    contiguous_format,
    legacy_contiguous_format,
    memory_format,
    preserve_format,
)
from ._ops.fake_quantize import fake_quantize_per_channel_affine, fake_quantize_per_tensor_affine  # noqa: E402
from ._printing import set_printoptions  # noqa: E402
from ._promotion import broadcast_shapes, can_cast, promote_types, result_type  # noqa: E402
from ._qtypes import (  # noqa: E402
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    qint32,
    qscheme,
    quint2x4,
    quint4x2,
    quint8,
)
from ._quantized import (  # noqa: E402
    _choose_qparams_per_tensor,
    _empty_affine_quantized,
    _empty_per_channel_affine_quantized,
    _make_per_channel_quantized_tensor,
    _make_per_tensor_quantized_tensor,
    dequantize,
    int_repr,
    quantize_per_channel,
    quantize_per_tensor,
    quantize_per_tensor_dynamic,
)
from ._random import *  # noqa: E402,F401,F403
from ._serialization import *  # noqa: E402,F401,F403
from ._settings import *  # noqa: E402,F401,F403
from ._size import Size  # noqa: E402
from ._sparse import hspmm, smm, sparse_coo_tensor, sparse_csr_tensor, spmm  # noqa: E402
from ._storage import *  # noqa: E402,F401,F403  (UntypedStorage, TypedStorage, FloatStorage, ...)
from ._tensor import Tensor, is_tensor  # noqa: E402
from ._version import __version__  # noqa: E402

newaxis = None  # t[:, ember.newaxis] adds a dim, as None does

_exported = _registry.install(globals())

# submodules (ember.cuda, ember.linalg, and those of other distributions: ember.nn, ember.special, ...)
# are imported on first attribute access, so that `import ember` stays light


def is_floating_point(input):
    return input.dtype.is_floating_point


def is_complex(input):
    return input.dtype.is_complex


def numel(input):
    return input.numel()


def _assert(condition, message):
    """``assert condition, message`` as a function (PyTorch's traceable spelling, which models call)."""
    assert condition, message


def __getattr__(name):
    dist = _extensions.PROVIDERS.get(name)
    home = _extensions.ATTRIBUTES.get(name)
    if home is not None:
        try:
            return getattr(_importlib.import_module(home), name)
        except ModuleNotFoundError as e:  # its distribution is not installed: the error below names it
            if not f"{home}.".startswith(f"{e.name}."):
                raise
    try:
        return _extensions.lazy_submodule(__name__, name)
    except AttributeError:
        if dist is not None:
            raise _extensions.missing("ember attribute", name, dist) from None
        raise


_extensions.load_all(_importlib.import_module(__name__))
