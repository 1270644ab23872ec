"""``ember.Tensor``: one NumPy or CuPy array plus what autograd needs.

The array is the storage; a view's array is a NumPy/CuPy view of its base's array and shares its
version counter (``_vc``, a one-element list; ``_version`` reads it as PyTorch's int) so that autograd can see
in-place changes of saved tensors.
Ops are not written here: the op registry installs them as methods and operators.
"""
import builtins
import copy

import numpy as np

from . import _backend, _extensions, _memory_format
from . import _dtype as D
from ._device import CPU, as_device
from ._layout import strided
from ._meta_array import MetaArray
from ._size import Size


class Tensor:
    __slots__ = ("_data", "_vc", "_base", "_rg", "grad", "grad_fn", "_ext", "__weakref__")
    # NumPy defers binary operators to us (np.float32(2) * t calls Tensor.__rmul__)
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, *args, device=None):
        """Legacy constructor: ``Tensor(2, 3)`` (uninitialised float), ``Tensor([1, 2])``, ``Tensor()``."""
        from . import _factory
        if len(args) == 1 and not isinstance(args[0], (int, Size)):
            src = _factory.tensor(args[0], dtype=D.get_default_dtype(), device=device)
        else:
            src = _factory.empty(*(args or (0,)), device=device)
        _init(self, src._data)

    @classmethod
    def _wrap(cls, arr):
        """A new tensor over ``arr`` (no copy): the one constructor ops use."""
        t = _new(cls)
        t._data = arr  # (_init's body, inlined: this runs for every op result)
        t._vc = [0]
        t._base = t.grad = t.grad_fn = t._ext = None
        t._rg = False
        return t

    def _view_of(self, base):
        """Mark this tensor as a view of ``base``: shared version counter and base."""
        self._vc = base._vc
        self._base = base._base if base._base is not None else base
        return self

    def _bump(self):
        self._vc[0] += 1

    @property
    def _version(self):
        """How many times this tensor's memory was written in place, as PyTorch counts it: an int read from the
        counter (``_vc``, a one-element list) that a tensor shares with its views."""
        return self._vc[0]

    # ---- metadata -------------------------------------------------------------------------
    @property
    def dtype(self):
        return D.FROM_NP[self._data.dtype]

    @property
    def shape(self):
        return _size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return _size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    def dim(self):
        return self._data.ndim

    ndimension = dim

    @property
    def ndim(self):
        return self._data.ndim

    def numel(self):
        return self._data.size

    nelement = numel

    def element_size(self):
        return self._data.itemsize

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return self._data.nbytes

    def stride(self, dim=None):
        a = self._data
        if a.size == 0 and not any(a.strides):  # NumPy zeroes an empty array's strides: report contiguous ones
            st = contiguous_strides(a.shape)
        else:
            st = tuple(s // a.itemsize for s in a.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim)]

    def storage_offset(self):
        base = self._base._data if self._base is not None else self._data
        return (_address(self._data) - _address(base)) // self._data.itemsize

    def data_ptr(self):
        return _address(self._data)

    const_data_ptr = data_ptr

    @property
    def output_nr(self):
        """Which output of its ``grad_fn`` this tensor is (0 for leaves and single results)."""
        return self._ext.get("out_idx", 0) if self._ext is not None else 0

    def dim_order(self, *, ambiguity_check=False):
        """The dims from the outermost in memory to the innermost (by decreasing stride; equal strides keep their
        order). ``ambiguity_check=True``: RuntimeError where equal strides leave the order open."""
        st = self.stride()
        if ambiguity_check is True and len(set(st)) < len(st):
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the given "
                               "memory formats.")
        return tuple(sorted(range(len(st)), key=lambda d: -st[d]))

    def module_load(self, other, assign=False):
        """What ``Module.load_state_dict`` puts in place of this parameter or buffer for ``other``: ``other``
        itself, detached, with ``assign``; else this tensor after copying ``other`` in (detached)."""
        return other.detach() if assign else self.copy_(other).detach()

    @property
    def volatile(self):
        """Removed from PyTorch (always False, with a warning)."""
        import warnings
        warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
        return False

    def as_subclass(self, cls):
        """This tensor as an instance of the Tensor subclass ``cls``: an alias (same memory, version counter and
        autograd history; no ``__init__`` runs)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                            "possible. Make sure your class inherits from Tensor.")
        alias = self.view_as(self)
        t = cls._wrap(alias._data)
        t._vc, t._base, t._rg, t.grad_fn = alias._vc, alias._base, alias._rg, alias.grad_fn
        t._ext = dict(alias._ext) if alias._ext is not None else None
        return t

    def is_contiguous(self, memory_format=None):
        fmt = _memory_format.checked(memory_format, "is_contiguous")
        if fmt is None or fmt is _memory_format.contiguous_format or fmt is _memory_format.preserve_format:
            return builtins.bool(self._data.flags.c_contiguous)
        return _memory_format.is_contiguous(self.shape, self.stride(), fmt)

    @property
    def device(self):
        return CPU if type(self._data) is np.ndarray else _backend.device_of(self._data)

    @property
    def is_cuda(self):
        return type(self._data) is not np.ndarray and type(self._data) is not MetaArray

    @property
    def is_cpu(self):
        return type(self._data) is np.ndarray

    @property
    def is_meta(self):
        return type(self._data) is MetaArray

    is_sparse = False
    is_quantized = False
    # devices and layouts ember has no tensors on (plain attributes, so that a subclass can override them)
    is_xpu = is_mps = is_mkldnn = is_vulkan = is_ipu = is_maia = is_mtia = is_xla = False
    is_nested = False
    is_sparse_csr = False
    layout = strided

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        return self.dtype.is_complex

    def is_signed(self):
        return self.dtype.is_signed

    def get_device(self):
        return -1 if type(self._data) is np.ndarray or type(self._data) is MetaArray else self._data.device.id

    @property
    def data(self):
        """The same array without autograd history."""
        return Tensor._wrap(self._data)._view_of(self)

    @data.setter
    def data(self, value):
        self._data = value._data

    @property
    def T(self):
        return self.permute(*range(self._data.ndim - 1, -1, -1))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    # ---- autograd attributes (ember-autograd gives them meaning) -------------------------------
    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        check = _extensions.hooks.get("set_requires_grad")
        if check is None:
            if value:
                raise RuntimeError("requires_grad=True needs ember-autograd: pip install ember-autograd")
            return
        check(self, builtins.bool(value))

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    # ---- conversion ---------------------------------------------------------------------------
    def numpy(self, *, force=False):
        if self._rg and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        if type(self._data) is not np.ndarray:
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() "
                                "to copy the tensor to host memory first.")
            return self._data.get()
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self._data
        if type(arr) is not np.ndarray:
            if type(arr) is MetaArray:
                self.numpy()  # (PyTorch's TypeError: no values)
            arr = arr.get()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        arr = self._data
        if type(arr) is not np.ndarray:
            if type(arr) is MetaArray:
                raise RuntimeError("Tensor.item() cannot be called on meta tensors")
            arr = arr.get()
        return _python_scalar(arr.reshape(()))

    def tolist(self):
        arr = self._host()
        if self.dtype in (D.float16, D.bfloat16):
            arr = arr.astype(np.float32)
        return arr.tolist()

    def _host(self):
        return self._data if type(self._data) is np.ndarray else self._data.get()

    def __float__(self):
        return builtins.float(self._scalar("float"))

    def __int__(self):
        return builtins.int(self._scalar("int"))

    def __complex__(self):
        return builtins.complex(self._scalar("complex"))

    def __index__(self):
        if self.dtype.category > 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self._scalar("int"))

    def __bool__(self):
        if self._data.size != 1:
            what = "no values" if self._data.size == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return builtins.bool(self.item())

    def _scalar(self, what):
        if self._data.size != 1:
            raise TypeError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __reversed__(self):
        return self.flip(0)

    def __repr__(self, *, tensor_contents=None):
        from ._printing import tensor_repr
        return tensor_repr(self, tensor_contents=tensor_contents)

    def __format__(self, spec):
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        from ._serialization import reduce_tensor
        return reduce_tensor(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = object.__new__(type(self))
        _init(new, self._data.copy())
        new._rg = self._rg
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        if hasattr(self, "__dict__"):
            new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = new
        return new

    # ---- moving between devices and dtypes --------------------------------------------------
    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
        """``to(dtype)``, ``to(device[, dtype])``, ``to(other)``: a tensor with that device and dtype."""
        device, dtype = parse_to_args(args, device, dtype)
        dev = as_device(device)
        same_device = dev is None or dev == self.device or (dev.index is None and dev.type == self.device.type)
        same_dtype = dtype is None or dtype is self.dtype
        fmt = _memory_format.checked(memory_format, "to")
        if fmt is _memory_format.preserve_format:
            fmt = None
        if same_device and same_dtype and not copy and (
                fmt is None or _memory_format.suggested(self.shape, self.stride()) is fmt):
            return self
        if same_device and same_dtype and not copy:
            return self.clone(memory_format=fmt)
        if dtype in D.FLOAT8 and type(self._data) is not MetaArray:  # (float8 tensors: see ember._float8)
            from ._float8 import from_tensor
            return from_tensor(self if same_device else self.to(dev), dtype)
        from ._ops.conversion import _to_copy
        out = _to_copy(self, dtype=dtype, device=None if same_device else dev)
        if _backend.is_array(out._data) and not (fmt is None and self._data.flags.c_contiguous):
            order = _memory_format.layout(self._data, fmt or _memory_format.preserve_format)
            if order != _memory_format.layout(out._data, _memory_format.preserve_format):  # (PyTorch's layout)
                out._data = _memory_format.copy(_backend.xp_of(out._data), out._data, order)
        return out

    def cpu(self, memory_format=None):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        if device is None:
            device = "cuda"
        elif isinstance(device, builtins.int):
            device = f"cuda:{device}"
        return self.to(device)

    def type(self, dtype=None, non_blocking=False):
        """The legacy type string in PyTorch's spelling (``'torch.FloatTensor'``), or the tensor converted to
        the type named by a string, a legacy type (``ember.LongTensor``) or a dtype."""
        from ._legacy_types import tensor_type
        return tensor_type(self, dtype, non_blocking)

    def double(self):
        return self.to(D.float64)

    def float(self):
        return self.to(D.float32)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def short(self):
        return self.to(D.int16)

    def char(self):
        return self.to(D.int8)

    def byte(self):
        return self.to(D.uint8)

    def bool(self):
        return self.to(D.bool)

    def cfloat(self):
        return self.to(D.complex64)

    def cdouble(self):
        return self.to(D.complex128)

    def chalf(self):
        return self.to(D.complex32)

    def type_as(self, other):
        return self.to(other.dtype)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        from . import _factory
        return _factory.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                               requires_grad=requires_grad)


class _Provided:
    """A Tensor attribute that another distribution provides (it sets the attribute when installed): until
    then reading it names the package to install. A descriptor rather than ``Tensor.__getattr__``: a class
    with ``__getattr__`` gets no specialised attribute access from CPython, which made every ``t._data`` slower."""

    def __init__(self, name, dist):
        self.name, self.dist = name, dist

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        raise _extensions.missing("Tensor attribute", self.name, self.dist)


for _name, _dist in _extensions.TENSOR_PROVIDERS.items():
    setattr(Tensor, _name, _Provided(_name, _dist))


def parse_to_args(args, device=None, dtype=None):
    """(device, dtype) from the positional forms of ``to()``: a dtype, a device, or a tensor to match."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, D.dtype):
            dtype = a
        elif a is not None:
            device = a
    return device, dtype


def _size(shape):
    return tuple.__new__(Size, shape)  # an array's shape is already a tuple of ints


_LEGACY_TYPE = {D.float32: "FloatTensor", D.float64: "DoubleTensor", D.float16: "HalfTensor",
                D.bfloat16: "BFloat16Tensor", D.int64: "LongTensor", D.int32: "IntTensor",
                D.int16: "ShortTensor", D.int8: "CharTensor", D.uint8: "ByteTensor", D.bool: "BoolTensor",
                D.complex64: "ComplexFloatTensor", D.complex128: "ComplexDoubleTensor"}


_new = object.__new__


def _init(t, arr):
    t._data = arr
    t._vc = [0]
    t._base = None
    t._rg = False
    t.grad = None
    t.grad_fn = None
    t._ext = None


def _address(arr):
    return arr.__array_interface__["data"][0] if type(arr) is np.ndarray else arr.data.ptr


def tensors_in(x):
    """The tensors in ``x``, a tensor or nested lists and tuples of anything, in order."""
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors_in(v)]
    return []


class HostStandInTensor(Tensor):
    """Base of the tensors whose array is a stand-in over a host NumPy array ``_data.arr`` (quantized and float8
    tensors): what they answer alike about their memory."""

    __slots__ = ()
    is_cuda = False
    is_cpu = True

    @property
    def device(self):
        return CPU

    def get_device(self):
        return -1

    def data_ptr(self):
        return _address(self._data.arr)

    const_data_ptr = data_ptr


def contiguous_strides(shape):
    """PyTorch's row-major strides (in elements) of ``shape``; a size-0 dim steps like a size-1 one."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= builtins.max(n, 1)
    return tuple(reversed(strides))


def _python_scalar(arr0):
    v = arr0.item() if arr0.dtype.kind in "biufc" else builtins.float(arr0)
    return v


def _wrap_dim(dim, ndim):
    """A dim in [-ndim, ndim) turned non-negative, with PyTorch's IndexError otherwise."""
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def is_tensor(obj):
    return isinstance(obj, Tensor)
