"""Random numbers: ``Generator``, the default generators and seeding, the sampling functions (rand,
randn, randint, randperm, normal, bernoulli, multinomial, poisson) and the in-place samplers
(``uniform_``, ``normal_``, ``random_``, ...).

A CPU generator is NumPy's PCG64 bit generator; its state (seed, PCG64 state and increment, buffered
32-bit half) is encoded in a 48-byte uint8 tensor. A CUDA generator is, like PyTorch's, a seed and an
offset (16 bytes): each draw makes a CuPy Philox ``RandomState`` keyed by (seed, offset) and bumps the
offset, so that the state round-trips exactly without reading curand's device-side state. Streams are
reproducible for a seed but not bitwise equal to PyTorch's. ``import ember`` never imports CuPy: the CUDA
default generators are made on first use and take the seed of the last ``manual_seed``.
"""
import math
import operator
import os
import warnings

import numpy as np

from . import _backend, _device
from . import _dtype as D
from . import _promotion as P
from ._device import as_device
from ._factory import _check_sizes, _like_kw, _place, get_default_device, size_args, zeros_like
from ._registry import TORCH_NAME, factory, op, write_out
from ._tensor import Tensor

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state"]

_DEFAULT_SEED = 67280421310721  # PyTorch's seed of a new Generator
_U64 = 1 << 64
_HALF = (D.float16, D.bfloat16)
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}  # mantissa bits, as PyTorch counts
# C++ type names, used in PyTorch's messages
_CNAME = {D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short", D.int32: "int",
          D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
          D.float64: "double", D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}
_CPU_STATE = (8, 16, 16, 4, 4)  # seed, PCG64 state, PCG64 increment, has_uint32, uinteger (bytes each)
_CUDA_STATE = (8, 8)  # seed, offset


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
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        """Restart the stream from ``seed``; returns the generator."""
        self._seed = _check_seed(seed)
        if self.device.type == "cpu":
            self._np = np.random.Generator(np.random.PCG64(self._seed))
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
        """The state as a uint8 CPU tensor (for ``set_state``)."""
        if self.device.type == "cpu":
            st = self._np.bit_generator.state
            values = (self._seed, st["state"]["state"], st["state"]["inc"], st["has_uint32"], st["uinteger"])
        else:
            values = (self._seed, self._offset)
        raw = b"".join(v.to_bytes(n, "little") for v, n in zip(values, self._layout()))
        return Tensor._wrap(np.frombuffer(raw, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from ``get_state``; returns the generator."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a ember.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not D.uint8:
            raise TypeError("RNG state must be a ember.ByteTensor")
        raw, layout = new_state._host().tobytes(), self._layout()
        if len(raw) != sum(layout):
            raise RuntimeError(f"Expected an RNG state of size {sum(layout)} for a {self.device.type} generator but "
                               f"found the input RNG state size to be {len(raw)}")
        ends = np.cumsum(layout)
        values = [int.from_bytes(raw[e - n:e], "little") for e, n in zip(ends, layout)]
        self._seed = values[0]
        if self.device.type == "cpu":
            bits = np.random.PCG64()
            bits.state = {"bit_generator": "PCG64", "state": {"state": values[1], "inc": values[2]},
                          "has_uint32": values[3], "uinteger": values[4]}
            self._np = np.random.Generator(bits)
        else:
            self._offset = values[1]
        return self

    def _layout(self):
        return _CPU_STATE if self.device.type == "cpu" else _CUDA_STATE

    def _draws(self):
        """What one sampling call draws from: NumPy's Generator, or a fresh CUDA stream."""
        if self.device.type == "cpu":
            return self._np
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
    return _generator_for(generator, _backend.device_of(arr))._draws()


# ---- drawing arrays (xp-generic: ``src`` is NumPy's Generator or _CudaDraws) ------------------
def _compute(dtype):
    # integer dtypes only reach here with empty results (PyTorch accepts those)
    return D.float32 if dtype in _HALF else dtype if dtype.category >= 2 else D.float64


def _uniform(src, shape, dtype, low=0.0, high=1.0):
    """Uniform on [low, high) in the computation dtype of ``dtype``; complex dtypes get independent
    real and imaginary parts, each on [low, high)."""
    if dtype.is_complex:
        return _uniform(src, shape + (2,), dtype.to_real(), low, high).view(dtype.np)[..., 0]
    if dtype in _HALF:  # multiples of 2**-digits, so that rounding to half precision never reaches 1
        bits = _DIGITS[dtype]
        u = (src.integers(0, 1 << bits, shape, dtype=np.int64) * 2.0 ** -bits).astype(np.float32)
    else:
        u = src.random(shape, dtype=dtype.np)
    return u if (low, high) == (0.0, 1.0) else u * (high - low) + low


def _normal(src, shape, dtype, mean=0.0, std=1.0):
    """Normal values; a complex one has variance std**2 split between its two parts, each centred on mean."""
    if dtype.is_complex:
        return _normal(src, shape + (2,), dtype.to_real(), mean, std * math.sqrt(0.5)).view(dtype.np)[..., 0]
    z = src.standard_normal(shape, dtype=_compute(dtype).np)
    return z if (mean, std) == (0.0, 1.0) else z * std + mean


def _unit_uniform(src, shape):
    """float64 [0, 1) for the transforms (exponential, geometric, cauchy), whose tails need the precision."""
    return src.random(shape, dtype=np.float64)


def _not_implemented(kernel, dtype):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{TORCH_NAME[dtype]}'")


def _int_range(frm, to, dtype):
    """[frm, to) for random_/randint, checked as PyTorch checks it; ``to=None`` means up to the largest
    value of ``dtype`` (2**digits for floating dtypes), inclusive. Returns (frm, exclusive end)."""
    frm = operator.index(frm)
    to = None if to is None else operator.index(to)
    if any(v is not None and not -(1 << 63) <= v < (1 << 63) for v in (frm, to)):
        raise ValueError("Overflow when unpacking long long")
    if dtype.is_floating_point:
        digits = _DIGITS[dtype]
        lo, hi = -(1 << digits), 1 << digits
    else:
        info = D.iinfo(dtype)
        lo, hi = info.min, info.max
    if to is None:
        if frm > hi:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' "
                               f"casted to dtype, but got from={frm} > to_inc={hi}")
        to = hi + 1
    elif frm >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={frm} >= to={to}")
    for name, v in (("from", frm), ("to - 1", to - 1)):
        if lo <= v <= hi:
            continue
        if not dtype.is_floating_point:
            raise RuntimeError(f"{name} is out of bounds for {_CNAME[dtype]}")
        warnings.warn(f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                      f"{_CNAME[dtype]} can support discrete uniform distribution only within this range.",
                      UserWarning, stacklevel=3)
    return frm, to


# ---- creation functions -----------------------------------------------------------------------
def _create(size, generator, out, dtype, device, requires_grad, draw):
    """A new tensor (or ``out``) of shape ``size`` filled by ``draw(src, shape, dtype)``."""
    shape = size_args(size)
    _check_sizes(shape)
    if out is not None:
        dtype, device = dtype or out.dtype, device or out.device
    dtype = dtype or D.get_default_dtype()
    dev = as_device(device) or get_default_device()
    if dev.type == "cuda":
        dev = _device.device("cuda", _cuda_index(dev))
    arr = draw(_generator_for(generator, dev)._draws(), shape, dtype)
    arr = arr.astype(D.storage(dtype), copy=False)
    return write_out(out, arr) if out is not None else _place(arr, dev, requires_grad)


def _floating(kernel, draw, even_empty=False):
    """``draw`` for floating and complex dtypes only, with PyTorch's error for the others (not for an empty
    result unless ``even_empty``: PyTorch's kernel never runs then)."""
    def checked(src, shape, dtype):
        if dtype.category < 2 and (even_empty or math.prod(shape)):
            raise _not_implemented(kernel, dtype)
        return draw(src, shape, dtype)
    return checked


@factory("rand")
def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """Uniform values on [0, 1) (default float dtype)."""
    draw = _floating("check_uniform_bounds", _uniform, even_empty=True)
    return _create(size, generator, out, dtype, device, requires_grad, draw)


@factory("randn")
def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """Standard normal values (default float dtype)."""
    return _create(size, generator, out, dtype, device, requires_grad, _floating("normal_kernel_cpu", _normal))


@factory("rand_like")
def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    """``rand`` with the shape (and by default dtype and device) of ``input``."""
    return rand(input.shape, generator=generator, **_like_kw(input, dtype, device, requires_grad))


@factory("randn_like")
def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    """``randn`` with the shape (and by default dtype and device) of ``input``."""
    return randn(input.shape, generator=generator, **_like_kw(input, dtype, device, requires_grad))


@factory("randint")
def randint(low=0, high=None, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):
    """Integers uniform on [low, high) (int64 unless ``dtype``): ``randint(high, size)``,
    ``randint(low, high, size)``."""
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=...)
        low, high = 0, low
    if size is None or high is None:
        raise TypeError("randint() missing required arguments: 'high' and 'size'")
    dtype = dtype or (out.dtype if out is not None else D.int64)
    low, high = _int_range(low, high, dtype)
    return _create((size,), generator, out, dtype, device, requires_grad,
                   lambda src, shape, d: src.integers(low, high, shape, dtype=np.int64))


@factory("randint_like")
def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """``randint`` with the shape (and by default dtype and device) of ``input``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, generator=generator, **_like_kw(input, dtype, device, requires_grad))


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
    return _create((n,), generator, out, dtype, device, requires_grad, lambda src, shape, d: src.permutation(n))


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
    draw = _floating("normal_kernel_cpu", lambda src, shape, d: _normal(src, shape, d, mean, std))
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


@op("_normal_tensors", function=False, method=False)
def _normal_tensors(xp, mean, std, *, generator=None):
    """Normal values with the given (broadcast) means and standard deviations, in mean's dtype."""
    arrays = [a for a in (mean, std) if hasattr(a, "ndim")]
    dtype = _dtype_of(arrays[0])
    if hasattr(std, "ndim"):
        if bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    shape = P.broadcast_shapes(*(a.shape for a in arrays))
    if dtype.category < 2 and math.prod(shape):
        raise _not_implemented("normal_kernel_cpu", dtype)
    cnp = _compute(dtype).np
    z = _normal(_draws_for(generator, arrays[0]), shape, dtype)
    r = z * xp.asarray(std, dtype=cnp) + xp.asarray(mean, dtype=cnp)
    return r.astype(dtype.np, copy=False)


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


def _bernoulli_draw(src, shape, p):
    """Booleans that are True with probability ``p`` (a number or an array broadcast to ``shape``)."""
    # float32 draws for float32/half probability tensors; float64 ones keep their precision
    ct = np.float32 if hasattr(p, "dtype") and p.dtype != np.float64 else np.float64
    return src.random(shape, dtype=ct) < (p.astype(ct) if hasattr(p, "dtype") else p)


@op("bernoulli")
def bernoulli(xp, input, p=None, *, generator=None):
    """0/1 samples in ``input``'s dtype: probabilities ``input``, or ``p`` for every element."""
    if p is None:
        if input.size:
            _check_probabilities(xp, input)
        p = input
    else:
        p = _check_p(p)
    return _bernoulli_draw(_draws_for(generator, input), input.shape, p).astype(input.dtype)


bernoulli.vjp(_zero_grads)


@op("multinomial", differentiable=False)
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
    src = _draws_for(generator, input)
    if not replacement:
        # the exponential race: sorting E / p with E ~ Exp(1) samples without replacement; zero-weight
        # categories come last, as PyTorch also falls back to them once the others are drawn
        e = -xp.log1p(-_unit_uniform(src, (rows, n)))
        positive = p > 0
        keys = xp.where(positive, e / xp.where(positive, p, 1), xp.inf)
        r = xp.argsort(keys, axis=-1, kind="stable")[:, :k]
    else:
        # inverse CDF: row r's CDF is shifted to [r, r + 1] so that one searchsorted serves every row
        cdf = xp.cumsum(p, axis=-1)
        cdf /= cdf[:, -1:]
        offsets = xp.arange(rows, dtype=np.float64)[:, None]
        u = _unit_uniform(src, (rows, k))
        flat = xp.searchsorted((cdf + offsets).ravel(), (u + offsets).ravel(), side="right").reshape(rows, k)
        last = n - 1 - xp.argmax(p[:, ::-1] > 0, axis=-1)[:, None]  # rounding may step past the last category
        r = xp.minimum(flat - xp.arange(rows)[:, None] * n, last)
    r = r.astype(np.int64, copy=False)
    return r if input.ndim == 2 else r[0]


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
            input[...] = fn(xp, input, _dtype_of(input), _draws_for(generator, input), *args, **kwargs)
        impl.__doc__ = fn.__doc__
        registered = op(name, function=False, mutates=True)(impl)
        registered.vjp(_zero_grads)
        return registered
    return register


def _continuous(name, dtype, cname=False):
    if not dtype.is_floating_point:
        what = _CNAME[dtype] if cname else TORCH_NAME[dtype]
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {what}")


@_sampler("uniform_")
def _uniform_(xp, input, dtype, src, *args, **bounds):
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
            raise RuntimeError(f"{name} is out of bounds for {_CNAME[dtype.to_real()]}")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a:g} > to={b:g}")
    if b - a > limit:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{TORCH_NAME[dtype.to_real()]}>::max(), "
                           f"but found to={b:g} and from={a:g} which result in to-from to exceed the limit")
    return _uniform(src, input.shape, dtype, a, b)


@_sampler("normal_")
def _normal_(xp, input, dtype, src, mean=0.0, std=1.0):
    """Fill with normal values."""
    mean, std = _number(mean), _number(std)
    _check_std(std)
    if dtype.category < 2 and input.size:
        raise _not_implemented("normal_kernel_cpu", dtype)
    return _normal(src, input.shape, dtype, mean, std)


@_sampler("bernoulli_")
def _bernoulli_(xp, input, dtype, src, p=0.5):
    """Fill with 1 (probability ``p``, a number or a broadcastable tensor) or 0."""
    if dtype.is_complex and input.size:
        raise _not_implemented("bernoulli_scalar_cpu_", dtype)
    if hasattr(p, "ndim") and p.ndim:
        P.check_inplace_broadcast(input.shape, P.broadcast_shapes(input.shape, p.shape))
        _check_probabilities(xp, p)
    else:
        p = _check_p(p)
    return _bernoulli_draw(src, input.shape, p)


@_sampler("random_")
def _random_(xp, input, dtype, src, *args, **bounds):
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
    frm, to = _int_range(frm, to, dtype)
    return src.integers(frm, to, input.shape, dtype=np.int64)


@_sampler("exponential_")
def _exponential_(xp, input, dtype, src, lambd=1.0):
    """Fill with exponential values of rate ``lambd``."""
    lambd = _number(lambd)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    if input.size:
        _continuous("Exponential", dtype)
    return -xp.log1p(-_unit_uniform(src, input.shape)) / lambd


@_sampler("geometric_")
def _geometric_(xp, input, dtype, src, p):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    p = _number(p)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if (dtype.is_complex or dtype is D.bool) and input.size:
        raise _not_implemented("geometric_cpu", dtype)
    return xp.floor(xp.log1p(-_unit_uniform(src, input.shape)) / math.log1p(-p)) + 1


@_sampler("log_normal_")
def _log_normal_(xp, input, dtype, src, mean=1.0, std=2.0):
    """Fill with exp(N(mean, std))."""
    mean, std = _number(mean), _number(std)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if not dtype.is_floating_point and input.size:
        raise _not_implemented("log_normal_cpu", dtype)
    return xp.exp(_normal(src, input.shape, dtype, mean, std))


@_sampler("cauchy_")
def _cauchy_(xp, input, dtype, src, median=0.0, sigma=1.0):
    """Fill with Cauchy values."""
    _continuous("Cauchy", dtype, cname=True)
    median, sigma = _number(median), _number(sigma)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    return median + sigma * xp.tan(math.pi * (_unit_uniform(src, input.shape) - 0.5))
