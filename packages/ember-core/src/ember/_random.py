"""Random numbers: ``Generator``, the default generators and seeding, the sampling functions (rand,
randn, randint, randperm, normal, bernoulli, multinomial, poisson) and the in-place samplers
(``uniform_``, ``normal_``, ``random_``, ...).

A CPU generator is PyTorch's: ``std::mt19937`` seeded with the seed, and every sampler transforms its draws as
PyTorch's CPU kernels do (``ember._mt19937``), so that a seed gives PyTorch's numbers and ``get_rng_state`` its
5056-byte state, which either library can load to continue the other's stream. Samplers fill a tensor in the
order PyTorch's kernels do: in memory order, which for a tensor made like a non-contiguous one (``rand_like``,
dropout masks) is that tensor's. Poisson and binomial samples come from NumPy's samplers on the same Mersenne
Twister: reproducible for a seed, not PyTorch's numbers.
A CUDA generator is, like PyTorch's, a seed and an offset (16 bytes): each draw makes a CuPy Philox
``RandomState`` keyed by (seed, offset) and bumps the offset, so that the state round-trips exactly without
reading curand's device-side state; its streams are reproducible for a seed but not PyTorch's. ``import
ember`` never imports CuPy: the CUDA default generators are made on first use and take the seed of the last
``manual_seed``.
"""
import math
import operator
import os
import warnings

import numpy as np

from . import _backend, _device, _memory_format
from . import _dtype as D
from . import _mt19937 as MT
from . import _promotion as P
from ._device import as_device
from ._factory import _check_sizes, _like_kw, _place, get_default_device, shape_or_size, size_args, zeros_like
from ._meta_array import MetaArray
from ._registry import TORCH_NAME, factory, op, write_out
from ._tensor import Tensor

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state"]

_DEFAULT_SEED = 67280421310721  # PyTorch's seed of a new Generator
_U64 = 1 << 64
_HALF = (D.float16, D.bfloat16)
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}  # mantissa bits, as PyTorch counts
_CUDA_STATE = (8, 8)  # seed, offset (bytes each)


def _check_seed(seed):
    if not hasattr(seed, "__index__"):
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    seed = operator.index(seed)
    if not -(1 << 63) <= seed < _U64:
        raise ValueError("Overflow when unpacking long long")
    return seed % _U64


def _cuda_index(dev):
    """The index of CUDA device ``dev`` (the current one if it names none); initialises CUDA."""
    from . import cuda
    return cuda._index(dev)


class Generator:
    """A random number stream on one device: ``ember.Generator("cpu").manual_seed(0)``."""

    def __init__(self, device="cpu"):
        dev = as_device(device)
        if dev.type == "meta":
            raise RuntimeError("META device type not an accelerator.")
        self.device = dev if dev.type == "cpu" else _device.device("cuda", _cuda_index(dev))
        self._stream = MT.Stream(_DEFAULT_SEED) if dev.type == "cpu" else None
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        """Restart the stream from ``seed``; returns the generator."""
        self._seed = _check_seed(seed)
        if self._stream is not None:
            self._stream.reseed(self._seed)
        else:
            self._offset = 0
        return self

    def seed(self):
        """Seed from the operating system's entropy; returns the seed."""
        s = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The state as a uint8 CPU tensor (for ``set_state``): PyTorch's bytes for a CPU generator."""
        if self._stream is not None:
            return Tensor._wrap(self._stream.to_bytes())
        raw = b"".join(v.to_bytes(n, "little") for v, n in zip((self._seed, self._offset), _CUDA_STATE))
        return Tensor._wrap(np.frombuffer(raw, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from ``get_state`` (or PyTorch's ``get_state`` for a CPU one); returns the generator."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a ember.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not D.uint8:
            raise TypeError("RNG state must be a ember.ByteTensor")
        arr = new_state._host()
        if not arr.flags.c_contiguous:
            raise RuntimeError("RNG state must be contiguous")
        raw = arr.tobytes()
        if self._stream is not None:
            if len(raw) != MT.STATE.itemsize:
                raise RuntimeError(f"Expected a CPUGeneratorImplState of size {MT.STATE.itemsize} but found the "
                                   f"input RNG state size to be {len(raw)}")
            if not self._stream.load(raw):
                raise RuntimeError("Invalid mt19937 state")
            self._seed = self._stream.seed
            return self
        if len(raw) != sum(_CUDA_STATE):
            raise RuntimeError(f"Expected an RNG state of size {sum(_CUDA_STATE)} for a cuda generator but found the "
                               f"input RNG state size to be {len(raw)}")
        self._seed, self._offset = (int.from_bytes(raw[i:i + 8], "little") for i in (0, 8))
        return self

    def _draws(self):
        """What the samplers without PyTorch's streams draw from: NumPy's Generator on this generator's
        Mersenne Twister (CPU), or a fresh CUDA stream."""
        if self._stream is not None:
            self._stream.fresh = False
            return self._stream.numpy
        key = np.random.SeedSequence([self._seed, self._offset]).generate_state(1, np.uint64)[0]
        self._offset += 1
        return _CudaDraws(self.device.index, key)

    def __repr__(self):
        return f"<ember.Generator device={self.device}>"


class _CudaDraws:
    """A CuPy Philox RandomState on one device, answering to NumPy Generator's method names."""

    _NAMES = {"random": "random_sample", "integers": "randint"}

    def __init__(self, index, key):
        cp = _backend.cupy()
        self._device = cp.cuda.Device(index)
        with self._device:
            self._rs = cp.random.RandomState(key, method=cp.cuda.curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)

    def __getattr__(self, name):
        fn = getattr(self._rs, self._NAMES.get(name, name))

        def call(*args, **kwargs):
            with self._device:  # curand generators and the arrays they fill belong to one device
                return fn(*args, **kwargs)
        return call


# ---- default generators and seeding -----------------------------------------------------------
default_generator = Generator()
default_generator.seed()  # a fresh process starts from a random seed, as PyTorch's does
_cuda_generators = {}  # device index -> default CUDA Generator, made on first use
_cuda_seed = [None]  # the last manual_seed, for CUDA generators made after it


def cuda_default_generator(index=None):
    """The default generator of CUDA device ``index`` (the current device if None)."""
    index = _cuda_index(_device.device("cuda", index))
    g = _cuda_generators.get(index)
    if g is None:
        g = _cuda_generators[index] = Generator(_device.device("cuda", index))
        if _cuda_seed[0] is None:
            g.seed()
        else:
            g.manual_seed(_cuda_seed[0])
    return g


def cuda_manual_seed_all(seed):
    """Seed every CUDA default generator, also those not made yet (for ``ember.cuda.manual_seed_all``)."""
    seed = _check_seed(seed)
    _cuda_seed[0] = seed
    for g in _cuda_generators.values():
        g.manual_seed(seed)


def manual_seed(seed):
    """Seed the CPU default generator and every CUDA one (also those not made yet); returns the CPU one."""
    default_generator.manual_seed(int(seed))
    cuda_manual_seed_all(default_generator.initial_seed())
    return default_generator


def seed():
    """Seed every default generator from the operating system's entropy; returns the seed."""
    s = default_generator.seed()
    cuda_manual_seed_all(s)
    return s


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


def _generator_for(generator, dev):
    """``generator`` checked against the device, or the device's default generator."""
    if generator is None:
        return default_generator if dev.type == "cpu" else cuda_default_generator(dev.index)
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, not {type(generator).__name__}")
    if generator.device.type != dev.type:
        raise RuntimeError(f"Expected a '{dev.type}' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator


def _draws_for(generator, arr):
    """NumPy's (or CuPy's) samplers on the generator for ``arr``'s device (see ``Generator._draws``)."""
    return _generator_for(generator, _backend.device_of(arr))._draws()


def generator_for(generator, arr):
    """``generator``, or the default one, for sampling into or from ``arr`` (a NumPy or CuPy array)."""
    return _generator_for(generator, _backend.device_of(arr))


# ---- drawing arrays: PyTorch's streams on the CPU, CuPy's samplers on CUDA ------------------------
def walk(arr):
    """The axes of ``arr`` from outermost to innermost in memory: the order in which PyTorch's kernels fill a
    tensor laid out as ``arr`` (None: row-major)."""
    if arr.ndim < 2 or arr.flags.c_contiguous:
        return None
    return sorted(range(arr.ndim), key=lambda d: -abs(arr.strides[d]))


def in_order(arr, axes):
    """The elements of ``arr`` in the order ``axes`` walks them (flat)."""
    return (arr if axes is None else arr.transpose(axes)).ravel()


def placed(flat, shape, axes):
    """Values listed in the order ``axes`` walks a tensor of ``shape``, as an array of that shape."""
    if axes is None:
        return flat.reshape(shape)
    return flat.reshape([shape[a] for a in axes]).transpose(np.argsort(axes))


def _on_cpu(g, shape, axes, sample):
    """``sample(stream, n)`` of a CPU generator, placed in ``shape``."""
    return placed(sample(g._stream, math.prod(shape)), shape, axes)


def _real_view(sampler, g, shape, dtype, axes, *args):
    """A complex sample: PyTorch fills the real view, real and imaginary parts in turn."""
    inner = None if axes is None else axes + [len(shape)]
    return sampler(g, shape + (2,), dtype.to_real(), *args, axes=inner).view(dtype.np)[..., 0]


def _compute(dtype):
    # integer dtypes only reach here with empty results (PyTorch accepts those)
    return D.float32 if dtype in _HALF else dtype if dtype.category >= 2 else D.float64


def _uniform(g, shape, dtype, low=0.0, high=1.0, axes=None):
    """Uniform on [low, high) in ``dtype`` (the computation dtype on CUDA); complex dtypes get independent
    real and imaginary parts, each on [low, high)."""
    if dtype.is_complex:
        return _real_view(_uniform, g, shape, dtype, axes, low, high)
    if g._stream is not None:
        return _on_cpu(g, shape, axes, lambda s, n: MT.uniform(s, n, D.storage(dtype), low, high))
    src = g._draws()
    if dtype in _HALF:  # multiples of 2**-digits, so that rounding to half precision never reaches 1
        bits = _DIGITS[dtype]
        u = (src.integers(0, 1 << bits, shape, dtype=np.int64) * 2.0 ** -bits).astype(np.float32)
    else:
        u = src.random(shape, dtype=dtype.np)
    return u if (low, high) == (0.0, 1.0) else u * (high - low) + low


def _normal(g, shape, dtype, mean=0.0, std=1.0, axes=None, contiguous=True):
    """Normal values; a complex one has variance std**2 split between its two parts, each centred on mean.
    ``contiguous``: the output is (PyTorch samples large contiguous outputs in blocks)."""
    if dtype.is_complex:
        return _real_view(_normal, g, shape, dtype, axes, mean, std / math.sqrt(2))
    if g._stream is not None:
        return _on_cpu(g, shape, axes, lambda s, n: MT.normal(s, n, D.storage(dtype), mean, std, contiguous))
    z = g._draws().standard_normal(shape, dtype=_compute(dtype).np)
    return z if (mean, std) == (0.0, 1.0) else z * std + mean


def _integers(g, shape, dtype, low, span, axes=None, wide=None):
    """Integers on [low, low + span) (int64 on CUDA, ``dtype`` on the CPU; ``wide``: see MT.integers)."""
    if g._stream is not None:
        return _on_cpu(g, shape, axes, lambda s, n: MT.integers(s, n, D.storage(dtype), low, span, wide))
    return g._draws().integers(low, low + span, shape, dtype=np.int64)


def _of_unit(g, shape, dtype, axes, cpu, cuda):
    """A distribution of double uniforms: ``cpu(stream, n)`` as PyTorch's kernel computes it (in double, cast
    to ``dtype``), ``cuda(u)`` on CUDA."""
    if g._stream is not None:
        return _on_cpu(g, shape, axes, lambda s, n: MT.cast(cpu(s, n), D.storage(dtype)))
    return cuda(g._draws().random(shape, dtype=np.float64))


def _not_implemented(kernel, dtype):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{TORCH_NAME[dtype]}'")


def _in_dtype(v, dtype):
    """``v`` cast to ``dtype`` and back to an int, as C++ casts int64 to it (half types through float; an
    overflow stays infinite, which the range checks then reject)."""
    r = float(MT.cast(np.array([v], np.int64), D.storage(dtype))[0])
    return int(r) if math.isfinite(r) else r


def _int_range(frm, to, dtype):
    """(low, span) of random_/randint, checked as PyTorch checks them: [frm, to), or with ``to=None`` up to the
    largest value of ``dtype`` (2**digits for floating dtypes), inclusive, or the whole int64 range for
    ``frm`` = -2**63. For floating dtypes the bounds move inwards to the nearest ones the dtype holds."""
    frm = operator.index(frm)
    to = None if to is None else operator.index(to)
    if any(v is not None and not -(1 << 63) <= v < (1 << 63) for v in (frm, to)):
        raise ValueError("Overflow when unpacking long long")
    if to is None and frm == -(1 << 63):
        if dtype in (D.float16, D.bool):
            raise _not_implemented("random_full_64_bits_range_kernel_cpu", dtype)
        if dtype not in (D.int64, D.float64, D.float32, D.bfloat16):
            raise RuntimeError("random_full_64_bits_range_kernel_cpu handles only int64, double, float and bfloat16")
        return 0, _U64
    floating = dtype.is_floating_point
    if floating:
        digits = _DIGITS[dtype]
        if _in_dtype(frm + 1, dtype) < frm:
            frm = _in_dtype(frm + 1, dtype) + (1 << (abs(frm + 1).bit_length() - digits))
    if to is not None:
        if frm >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={frm} >= to={to}")
        if floating:
            if _in_dtype(to - 1, dtype) >= to:
                to = _in_dtype(to - 1, dtype) - (1 << (abs(to - 1).bit_length() - digits))
            if frm >= to:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, "
                                   f"but got from={frm} >= to={to}")
        to_inc = to - 1
    else:
        to_inc = 1 << digits if floating else D.iinfo(dtype).max
        if floating and frm >= to_inc:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' "
                               f"casted to dtype, but got from={frm} > to_inc={to_inc}")
    if floating:
        lo, hi = -float(D.finfo(dtype).max), float(D.finfo(dtype).max)
    else:
        info = D.iinfo(dtype)
        lo, hi = info.min, info.max
    for name, v in (("from", frm), ("to - 1", to_inc)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{name} is out of bounds for {D.CPP_NAME[dtype]}")
    for name, v in (("from", frm), ("to - 1", to_inc)):
        if floating and not -(1 << digits) <= v <= 1 << digits:
            warnings.warn(f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                          f"{D.CPP_NAME[dtype]} can support discrete uniform distribution only within this range.",
                          UserWarning, stacklevel=3)
    return frm, to_inc - frm + 1


# ---- creation functions -----------------------------------------------------------------------
# set by ember.func.vmap while a vmap runs: ``hook(shape) -> (shape to draw, finish(tensor) or None)``, so that its
# randomness setting decides what a random factory inside it draws
VMAP_DRAW = [None]


def _create(size, generator, out, dtype, device, requires_grad, draw):
    """A new tensor (or ``out``) of shape ``size`` filled by ``draw(generator, shape, dtype)``."""
    shape = size_args(size)
    _check_sizes(shape)
    finish = None
    if VMAP_DRAW[0] is not None and out is None:
        shape, finish = VMAP_DRAW[0](shape)
    if out is not None:
        dtype, device = dtype or out.dtype, device or out.device
    dtype = dtype or D.get_default_dtype()
    dev = as_device(device) or get_default_device()
    if dev.type == "cuda":
        dev = _device.device("cuda", _cuda_index(dev))
    if dev.type == "meta":  # (no values: nothing is drawn, the stream stays where it is)
        arr = MetaArray(shape, D.storage(dtype))
    else:
        arr = draw(_generator_for(generator, dev), shape, dtype)
        arr = arr.astype(D.storage(dtype), copy=False)
    if finish is not None:
        return finish(_place(arr, dev, requires_grad))
    return write_out(out, arr) if out is not None else _place(arr, dev, requires_grad)


def _floating(kernel, draw, even_empty=False):
    """``draw`` for floating and complex dtypes only, with PyTorch's error for the others (not for an empty
    result unless ``even_empty``: PyTorch's kernel never runs then)."""
    def checked(g, shape, dtype, *axes):
        if dtype.category < 2 and (even_empty or math.prod(shape)):
            raise _not_implemented(kernel, dtype)
        return draw(g, shape, dtype, *axes)
    return checked


def _like(input, generator, dtype, device, requires_grad, draw, memory_format):
    """A tensor like ``input`` filled by ``draw(generator, shape, dtype, axes)`` in the order PyTorch fills
    ``empty_like(input)`` (its layout, when that has no gaps)."""
    kw = _like_kw(input, dtype, device, requires_grad)
    return _create(input.shape, generator, None, kw["dtype"], kw["device"], requires_grad,
                   lambda g, shape, d: draw(g, shape, d, _memory_format.like(input._data, memory_format)))


@factory("rand")
def rand(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """Uniform values on [0, 1) (default float dtype)."""
    draw = _floating("check_uniform_bounds", _uniform, even_empty=True)
    return _create(shape_or_size("rand", shape, size), generator, out, dtype, device, requires_grad, draw)


@factory("randn")
def randn(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """Standard normal values (default float dtype)."""
    return _create(shape_or_size("randn", shape, size), generator, out, dtype, device, requires_grad,
                   _floating("normal_kernel_cpu", _normal))


@factory("rand_like")
def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    """``rand`` with the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(rand_like, generator=generator, dtype=dtype, layout=layout, device=device,
                                   requires_grad=requires_grad, random=True)
    draw = _floating("check_uniform_bounds", lambda g, shape, d, axes: _uniform(g, shape, d, axes=axes), True)
    return _like(input, generator, dtype, device, requires_grad, draw, memory_format)


@factory("randn_like")
def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    """``randn`` with the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(randn_like, generator=generator, dtype=dtype, layout=layout, device=device,
                                   requires_grad=requires_grad, random=True)
    draw = _floating("normal_kernel_cpu",
                     lambda g, shape, d, axes: _normal(g, shape, d, axes=axes, contiguous=axes is None))
    return _like(input, generator, dtype, device, requires_grad, draw, memory_format)


def _randint_args(low, high, size):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=...)
        low, high = 0, low
    if size is None or high is None:
        raise TypeError("randint() missing required arguments: 'high' and 'size'")
    return low, high, size


@factory("randint")
def randint(low=0, high=None, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):
    """Integers uniform on [low, high) (int64 unless ``dtype``): ``randint(high, size)``,
    ``randint(low, high, size)``."""
    low, high, size = _randint_args(low, high, size)
    dtype = dtype or (out.dtype if out is not None else D.int64)
    low, span = _int_range(low, high, dtype)
    return _create((size,), generator, out, dtype, device, requires_grad,
                   lambda g, shape, d: _integers(g, shape, d, low, span))


@factory("randint_like")
def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """``randint`` with the shape (and by default dtype and device) of ``input``."""
    if high is None:
        low, high = 0, low
    low, span = _int_range(low, high, dtype or input.dtype)
    return _like(input, generator, dtype, device, requires_grad,
                 lambda g, shape, d, axes: _integers(g, shape, d, low, span, axes), memory_format)


@factory("randperm")
def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    """A random permutation of 0 .. n-1 (int64 unless ``dtype``)."""
    n = operator.index(n)
    dtype = dtype or (out.dtype if out is not None else D.int64)
    if dtype is D.bool:
        raise _not_implemented("randperm", dtype)
    if dtype.category == 1 and n - 1 > D.iinfo(dtype).max:
        raise RuntimeError(f"value cannot be converted to type {dtype.name}_t without overflow")

    def draw(g, shape, d):
        if g._stream is not None:
            return MT.cast(MT.randperm(g._stream, n), D.storage(d))
        return g._draws().permutation(n)
    return _create((n,), generator, out, dtype, device, requires_grad, draw)


def _check_std(std):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


@factory("normal")
def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Normal values: ``normal(mean, std)`` with a tensor mean and/or std (broadcast), or
    ``normal(mean, std, size)`` with numbers."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None:
            raise TypeError("normal(): size is only accepted when mean and std are numbers")
        return _normal_tensors(mean, std, generator=generator, out=out)
    if size is None:
        raise TypeError("normal(): size is required when mean and std are numbers")
    _check_std(std)
    draw = _floating("normal_kernel_cpu", lambda g, shape, d: _normal(g, shape, d, mean, std))
    return _create((size,), generator, out, dtype, device, requires_grad, draw)


# ---- ops on tensors ---------------------------------------------------------------------------
def _zero_grads(ctx, *grads):
    """Samples carry no gradient to their parameters: zeros for each tensor argument, as PyTorch."""
    return tuple(zeros_like(a) if isinstance(a, Tensor) else None for a in ctx.args)


def _dtype_of(a):
    return D.FROM_NP[a.dtype]


def _number(x):
    """A Python float from a number or a zero-dim tensor argument."""
    return float(x.item() if hasattr(x, "ndim") else x)


def _in_place_op(xp, fn, a, b, dtype):
    """``a = fn(a, b)`` as PyTorch's in-place op on a tensor of ``dtype``: computed in the promoted dtype
    (float for the half types), rounded to ``dtype``."""
    ct = np.result_type(np.float32 if dtype in _HALF else a.dtype, b.dtype)
    r = fn(a.astype(ct, copy=False), b.astype(ct, copy=False))
    return MT.cast(r, dtype.np) if xp is np else r.astype(dtype.np)


@op("_normal_tensors", function=False, method=False)
def _normal_tensors(xp, mean, std, *, generator=None):
    """Normal values with the given (broadcast) means and standard deviations, in the dtype of mean (std when
    mean is a number). As PyTorch: standard normals (scaled by std if a number), times std if a tensor, plus
    mean."""
    arrays = [a for a in (mean, std) if hasattr(a, "ndim")]
    dtype = _dtype_of(arrays[0])
    if hasattr(std, "ndim"):
        if std.dtype.kind == "c":  # (std < 0 would order complex numbers)
            raise RuntimeError("normal expects standard deviation to be non-complex")
        if bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    shape = P.broadcast_shapes(*(a.shape for a in arrays))
    if dtype.category < 2 and math.prod(shape):
        raise _not_implemented("normal_kernel_cpu", dtype)
    g = generator_for(generator, arrays[0])
    z = _normal(g, shape, dtype, 0.0, 1.0 if hasattr(std, "ndim") else std)
    if hasattr(std, "ndim"):
        z = _in_place_op(xp, xp.multiply, z, std, dtype)
    return _in_place_op(xp, xp.add, z, mean if hasattr(mean, "ndim") else xp.asarray(mean, dtype.np), dtype)


_normal_tensors.vjp(_zero_grads)


def _check_probabilities(xp, p):
    if not _dtype_of(p).is_floating_point:
        raise _not_implemented("bernoulli_tensor_cpu_p_", _dtype_of(p))
    if not bool(((p >= 0) & (p <= 1)).all()):  # also rejects NaN
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")


def _check_p(p):
    p = _number(p)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    return p


def sample_bernoulli(g, shape, p, axes=None):
    """Booleans of ``shape``, True with probability ``p`` (a number or an array broadcast to ``shape``), drawn
    from generator ``g`` in the order ``axes`` walks them."""
    if g._stream is not None:
        if hasattr(p, "dtype"):
            flat = MT.bernoulli(g._stream, in_order(np.broadcast_to(p, shape), axes))
        else:
            flat = MT.bernoulli(g._stream, p, math.prod(shape))
        return placed(flat, shape, axes)
    # float32 draws for float32/half probability tensors; float64 ones keep their precision
    ct = np.float32 if hasattr(p, "dtype") and p.dtype != np.float64 else np.float64
    return g._draws().random(shape, dtype=ct) < (p.astype(ct) if hasattr(p, "dtype") else p)


@op("bernoulli")
def bernoulli(xp, input, p=None, *, generator=None):
    """0/1 samples in ``input``'s dtype: probabilities ``input``, or ``p`` for every element."""
    if p is None:
        if input.size:
            _check_probabilities(xp, input)
        p = input
    else:
        p = _check_p(p)
    return sample_bernoulli(generator_for(generator, input), input.shape, p).astype(input.dtype)


bernoulli.vjp(_zero_grads)


@op("multinomial", differentiable=False, result_layout="row_major")
def multinomial(xp, input, num_samples, replacement=False, *, generator=None):
    """Indices sampled from the rows of ``input`` (1-D or 2-D), each row weighting its categories."""
    dtype = _dtype_of(input)
    if not dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {TORCH_NAME[dtype]}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if isinstance(num_samples, bool) or not hasattr(num_samples, "__index__"):
        raise TypeError(f"multinomial(): argument 'num_samples' (position 2) must be int, not "
                        f"{type(num_samples).__name__}")
    k, n = operator.index(num_samples), input.shape[-1]
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and k > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if n > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    rows = input.shape[0] if input.ndim == 2 else 1
    p = input.reshape(rows, n).astype(np.float64)
    if not bool((xp.isfinite(p) & (p >= 0)).all()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if rows and not bool((p.sum(-1) > 0).all()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = generator_for(generator, input)
    if g._stream is not None:
        r = _multinomial_cpu(g._stream, input, rows, k, replacement)
    else:
        r = _multinomial_cuda(xp, g._draws(), p, k, replacement)
    r = r.astype(np.int64, copy=False)
    return r if input.ndim == 2 else r[0]


def _multinomial_cpu(s, input, rows, k, replacement):
    """PyTorch's CPU sampler: with replacement (and more than one sample) the inverse CDF; otherwise the
    exponential race, p / E with E ~ Exp(1) drawn in ``input``'s dtype and layout, its largest k in order
    (ties, which need zero probabilities, go to the lower index: PyTorch's top-k leaves their order to its
    sort)."""
    if replacement and k > 1:
        return MT.multinomial(s, input.reshape(rows, input.shape[-1]), k)
    e = placed(MT.cast(MT.exponential(s, input.size, 1.0), input.dtype), input.shape, _memory_format.like(input))
    dtype = _dtype_of(input)
    keys = _in_place_op(np, np.divide, input, e, dtype).reshape(rows, input.shape[-1])
    if k == 1:
        return np.argmax(keys, axis=-1)[:, None]
    return np.argsort(-keys, axis=-1, kind="stable")[:, :k]


def _multinomial_cuda(xp, src, p, k, replacement):
    rows, n = p.shape
    if not replacement:
        # the exponential race: sorting E / p with E ~ Exp(1) samples without replacement; zero-weight
        # categories come last, as PyTorch also falls back to them once the others are drawn
        e = -xp.log1p(-src.random((rows, n), dtype=np.float64))
        positive = p > 0
        keys = xp.where(positive, e / xp.where(positive, p, 1), xp.inf)
        return xp.argsort(keys, axis=-1, kind="stable")[:, :k]
    # inverse CDF: row r's CDF is shifted to [r, r + 1] so that one searchsorted serves every row
    cdf = xp.cumsum(p, axis=-1)
    cdf /= cdf[:, -1:]
    offsets = xp.arange(rows, dtype=np.float64)[:, None]
    u = src.random((rows, k), dtype=np.float64)
    flat = xp.searchsorted((cdf + offsets).ravel(), (u + offsets).ravel(), side="right").reshape(rows, k)
    last = n - 1 - xp.argmax(p[:, ::-1] > 0, axis=-1)[:, None]  # rounding may step past the last category
    return xp.minimum(flat - xp.arange(rows)[:, None] * n, last)


@op("poisson", method=False)
def poisson(xp, input, generator=None):
    """Poisson samples with the rates in ``input``, in its dtype."""
    dtype = _dtype_of(input)
    if not dtype.is_floating_point:
        raise _not_implemented("poisson_cpu", dtype)
    if not bool((input >= 0).all()):  # also rejects NaN
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return xp.asarray(_draws_for(generator, input).poisson(input.astype(np.float64))).astype(dtype.np)


poisson.vjp(_zero_grads)


# ---- in-place samplers (Tensor methods) -------------------------------------------------------
def _sampler(name):
    """Register an in-place sampler: the function computes the values, the registry writes them."""
    def register(fn):
        def impl(xp, input, *args, generator=None, **kwargs):
            input[...] = fn(xp, input, _dtype_of(input), generator_for(generator, input), *args, **kwargs)
        impl.__doc__ = fn.__doc__
        registered = op(name, function=False, mutates=True)(impl)
        registered.vjp(_zero_grads)
        return registered
    return register


def _continuous(name, dtype, cname=False):
    if not dtype.is_floating_point:
        what = D.CPP_NAME[dtype] if cname else TORCH_NAME[dtype]
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {what}")


@_sampler("uniform_")
def _uniform_(xp, input, dtype, g, *args, **bounds):
    """Fill with values uniform on [from, to) (default [0, 1))."""
    if set(bounds) - {"from", "to"} or len(args) + len(bounds) > 2:
        raise TypeError("uniform_() accepts 'from' and 'to' only")
    a, b = (list(args) + [bounds.get("from", 0.0), bounds.get("to", 1.0)][len(args):])
    if dtype.category < 2:
        raise _not_implemented("check_uniform_bounds", dtype)
    a, b = _number(a), _number(b)
    limit = D.finfo(dtype).max
    for name, v in (("from", a), ("to", b)):
        if not -limit <= v <= limit:
            raise RuntimeError(f"{name} is out of bounds for {D.CPP_NAME[dtype.to_real()]}")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a:g} > to={b:g}")
    if b - a > limit:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{TORCH_NAME[dtype.to_real()]}>::max(), "
                           f"but found to={b:g} and from={a:g} which result in to-from to exceed the limit")
    return _uniform(g, input.shape, dtype, a, b, axes=walk(input))


@_sampler("normal_")
def _normal_(xp, input, dtype, g, mean=0.0, std=1.0):
    """Fill with normal values."""
    mean, std = _number(mean), _number(std)
    _check_std(std)
    if dtype.category < 2 and input.size:
        raise _not_implemented("normal_kernel_cpu", dtype)
    return _normal(g, input.shape, dtype, mean, std, axes=walk(input), contiguous=input.flags.c_contiguous)


@_sampler("bernoulli_")
def _bernoulli_(xp, input, dtype, g, p=0.5):
    """Fill with 1 (probability ``p``, a number or a broadcastable tensor) or 0."""
    if dtype.is_complex and input.size:
        raise _not_implemented("bernoulli_scalar_cpu_", dtype)
    if hasattr(p, "ndim") and p.ndim:
        P.check_inplace_broadcast(input.shape, P.broadcast_shapes(input.shape, p.shape))
        _check_probabilities(xp, p)
    else:
        p = _check_p(p)
    return sample_bernoulli(g, input.shape, p, walk(input))


@_sampler("random_")
def _random_(xp, input, dtype, g, *args, **bounds):
    """Fill with integers: ``random_(to)`` on [0, to), ``random_(from, to)``, ``random_()`` on
    [0, largest value of the dtype] (2**digits for floating dtypes)."""
    if dtype.is_complex:
        if args or bounds:
            raise RuntimeError("check_random_bounds handles only integral, floating-point and boolean types")
        raise _not_implemented("random_kernel_cpu", dtype)
    if set(bounds) - {"from", "to"} or len(args) > 2:
        raise TypeError("random_() accepts 'from' and 'to' only")
    if len(args) == 1:
        args = (0, args[0])
    frm, to = args or (bounds.get("from", 0), bounds.get("to"))
    low, span = _int_range(frm, to, dtype)
    # random_() takes 64-bit draws for int64 and double only, random_(from, to) by the span
    wide = dtype in (D.int64, D.float64) if not (args or bounds) else None
    return _integers(g, input.shape, dtype, low, span, walk(input), wide)


@_sampler("exponential_")
def _exponential_(xp, input, dtype, g, lambd=1.0):
    """Fill with exponential values of rate ``lambd``."""
    lambd = _number(lambd)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    if input.size:
        _continuous("Exponential", dtype)
    return _of_unit(g, input.shape, dtype, walk(input), lambda s, n: MT.exponential(s, n, lambd),
                    lambda u: -xp.log1p(-u) / lambd)


@_sampler("geometric_")
def _geometric_(xp, input, dtype, g, p):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    p = _number(p)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if (dtype.is_complex or dtype is D.bool) and input.size:
        raise _not_implemented("geometric_cpu", dtype)
    return _of_unit(g, input.shape, dtype, walk(input), lambda s, n: MT.geometric(s, n, p),
                    lambda u: xp.floor(xp.log1p(-u) / math.log1p(-p)) + 1)


@_sampler("log_normal_")
def _log_normal_(xp, input, dtype, g, mean=1.0, std=2.0):
    """Fill with exp(N(mean, std))."""
    mean, std = _number(mean), _number(std)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if not dtype.is_floating_point and input.size:
        raise _not_implemented("log_normal_cpu", dtype)
    if g._stream is not None:
        return _on_cpu(g, input.shape, walk(input),
                       lambda s, n: MT.cast(MT.log_normal(s, n, mean, std), D.storage(dtype)))
    return xp.exp(_normal(g, input.shape, dtype, mean, std))


@_sampler("cauchy_")
def _cauchy_(xp, input, dtype, g, median=0.0, sigma=1.0):
    """Fill with Cauchy values."""
    _continuous("Cauchy", dtype, cname=True)
    median, sigma = _number(median), _number(sigma)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    return _of_unit(g, input.shape, dtype, walk(input), lambda s, n: MT.cauchy(s, n, median, sigma),
                    lambda u: median + sigma * xp.tan(math.pi * (u - 0.5)))
