"""The op registry: one decorated block per op generates every spelling of it.

An op block gives the op's name, one array implementation written against ``xp`` (NumPy or CuPy,
picked from the inputs), its vector-Jacobian product (``@op.vjp``) or ``differentiable=False``, and
optionally a CuPy kernel. From it the registry makes the function (``ember.add``), the method
(``Tensor.add``), the operators (``+``, ``+=``), the in-place method (``add_``) and ``out=``.

Two kinds of op:

* ``elementwise``: operands are tensors or Python scalars. The registry applies PyTorch's type
  promotion, computes float16/bfloat16 in float32 and rounds, checks broadcasting with PyTorch's
  messages, and writes in-place and ``out=`` results. The implementation sees arrays already cast
  to the computation dtype.
* ``op``: anything else. The implementation gets the arguments with tensors (also inside a list or
  tuple argument) replaced by their arrays and returns an array, a tuple of arrays, or a Python
  value. ``view=True`` marks the result a view of the first tensor argument.

VJP contract (used by ember-autograd): ``vjp(ctx, *grads)`` returns one entry per positional
argument of the call (a list for a list argument, None where no gradient flows), written in ember
ops; ``ctx.args``/``ctx.kwargs`` are the call's arguments and ``ctx.out`` its result. Elementwise
VJPs may return gradients in the broadcast shape; the engine sums them back to each input's shape.
"""
import collections
import inspect
import math
import sys
import warnings

import numpy as np

from . import _backend, _memory_format, _parallel, _quiet
from . import _dtype as D
from . import _promotion as P
from ._dispatch import FORCED, RECORD, Call, run_layers
from ._halfcast import narrow, widen
from ._meta_array import MetaArray
from ._tensor import Tensor

REGISTRY = {}
ndarray = np.ndarray
_wrap = Tensor._wrap
_asarray = np.asarray
_HALF = (D.float16, D.bfloat16)

# PyTorch's scalar-type names, used in its error messages
TORCH_NAME = {D.bool: "Bool", D.uint8: "Byte", D.int8: "Char", D.int16: "Short", D.int32: "Int",
              D.int64: "Long", D.float16: "Half", D.bfloat16: "BFloat16", D.float32: "Float",
              D.float64: "Double", D.complex32: "ComplexHalf", D.complex64: "ComplexFloat",
              D.complex128: "ComplexDouble"}


class Op:
    """One registered op. Calling it calls its public function."""

    # (args, kwargs) -> indices of outputs that carry no gradient; set by ops that have such outputs
    constant_outputs = None
    # False: autograd refuses to record the op when its result is complex (PyTorch's ops without complex gradients)
    complex_grad = True
    # elementwise: ``into(out, *arrays, **kwargs)`` writes the result of a call with keyword arguments into ``out``
    # (an in-place call's target, of the result's dtype and shape); without keywords the ufunc writes
    into = None

    def __init__(self, name, impl, kind, *, differentiable=True, view=False, method=True, function=True,
                 inplace=False, operators=(), kernel=None, rule=None, returns=None, mutates=False, scalars=True,
                 scalar_first=False, ufunc=None, out_dtype=None, out_refusal=None, result_layout=None):
        if name in REGISTRY:
            raise RuntimeError(f"op '{name}' is registered twice")
        self.name, self.impl, self.kind = name, impl, kind
        self.differentiable, self.view = differentiable, view
        self.method, self.function, self.inplace = method, function, inplace
        self.operators, self.kernel, self.rule = operators, kernel, rule
        self.returns = collections.namedtuple(name, returns) if returns else None
        self.mutates = mutates  # the implementation writes into its first argument's array
        # general ops with a ``dtype`` keyword and ``out=``: a ``dtype`` given must be the out tensor's ("match",
        # means), which is also the one computed in when none is given ("compute": sums, products)
        self.out_dtype = out_dtype
        # (result dtype, out dtype) -> the exception for an ``out=`` tensor the result can't be cast to, where it is
        # not the RuntimeError of cast_refusal (the joins raise TypeError)
        self.out_refusal = out_refusal or cast_refusal
        # general ops whose NumPy results may come out in their inputs' layout (reductions of a transposed tensor,
        # joins of transposed ones), where PyTorch lays out a new tensor: "row_major" (its reductions), "suggested"
        # (its joins: row-major unless channels-last)
        self.result_layout = result_layout
        self.scalars = scalars  # elementwise: whether operands after the first may be Python numbers
        self.scalar_first = scalar_first  # elementwise: whether the first may be one (torch.mul(2, t))
        # elementwise: the NumPy ufunc the implementation is on its operands (when called without keywords); large
        # host operands are then computed over the cores by ``split(*arrays)``
        self.ufunc = ufunc
        self.split = _splitter(ufunc, impl) if ufunc is not None else None
        self.vjp_fn = None
        self.fn = _make_function(self)
        REGISTRY[name] = self

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    @property
    def doc(self):
        """The op's docstring, cleaned (computed on demand: import time matters)."""
        return inspect.getdoc(self.impl) or ""

    def vjp(self, fn):
        """Decorator: the op's vector-Jacobian product."""
        if not self.differentiable:
            raise RuntimeError(f"op '{self.name}' is marked non-differentiable")
        self.vjp_fn = fn
        return fn

    def __repr__(self):
        return f"<ember op {self.name}>"


# ---- decorators -------------------------------------------------------------------------------
def elementwise(name, *, rule="promote", **options):
    """Register an elementwise op. ``rule(promoted, operand_dtypes, **kwargs)`` gives (compute dtype,
    result dtype), raising for operands the op refuses:
    "promote" (the promoted dtype), "float" (integers and bool become the default float),
    "bool" (result is bool), or a callable such as ``integral_only(name)``. ``ufunc``: the NumPy ufunc the
    implementation calls on its operands, when that is all it does without keyword arguments (large operands are
    then split over the cores); an implementation under ``quiet`` marks it ``quiet``, which the split keeps."""
    options.setdefault("inplace", True)
    return lambda impl: Op(name, impl, "elementwise", rule=_RULES.get(rule, rule), **options)


def op(name, **options):
    """Register a general op (see the module docstring)."""
    return lambda impl: Op(name, impl, "general", **options)


def factory(name):
    """Register a creation function (no tensor inputs, no dispatch): exported and documented."""
    def register(fn):
        o = Op(name, fn, "factory", differentiable=False, method=False)
        o.fn = fn
        return o
    return register


def _splitter(f, impl):
    """``f(*arrays)`` over the cores when the arrays split (``_parallel.ufunc``), with the errstate of ``impl``."""
    def split(*arrays, out=None):
        return _parallel.ufunc(f, *arrays, out=out)
    return _quiet.quiet(split) if getattr(impl, "quiet", False) else split


# ---- dtype rules of elementwise ops ----------------------------------------------------------
def compute_dtype(d):
    """The dtype an op computes in for result dtype ``d``: half types in float32 (complex32 refused)."""
    if d is D.complex32:
        raise TypeError("the result would be complex32 (ComplexHalf), which ember does not store; cast an operand "
                        "to complex64 first")
    return D.float32 if d in _HALF else d


def _rule_promote(p, dtypes, **kwargs):
    return compute_dtype(p), p


def _rule_float(p, dtypes, **kwargs):
    if p.category < 2:
        p = D.get_default_dtype()
    return compute_dtype(p), p


def _rule_bool(p, dtypes, **kwargs):
    return compute_dtype(p), D.bool


def integral_only(op_name):
    """Rule for bitwise ops: integers and bool only, with PyTorch's error naming the op."""
    def rule(p, dtypes, **kwargs):
        if p.category > 1:
            raise NotImplementedError(f"\"{op_name}_cpu\" not implemented for '{TORCH_NAME[p]}'")
        return p, p
    return rule


_RULES = {"promote": _rule_promote, "float": _rule_float, "bool": _rule_bool}


def clear_caches():
    """Forget cached promotion results (the default dtype changed)."""
    _promo_cache.clear()


D._on_default_change.append(clear_caches)


# ---- elementwise calls ------------------------------------------------------------------------
_promo_cache = {}
_SPLIT_MIN = _parallel.MIN_SIZE


def _operand_key(x):
    if isinstance(x, Tensor):
        return (x._data.dtype, 2 if x._data.ndim else 1)
    if isinstance(x, (bool, int, float, complex)) or isinstance(x, np.generic):
        return (type(x), 0)
    raise TypeError(f"expected Tensor or Python number as operand, but got {type(x).__name__}")


def _promote_key(key):
    """(promoted dtype, operand dtypes) of operands described by ``_operand_key``."""
    dims, zeros, scalars, dtypes = [], [], [], []
    for k, cls in key:
        if cls == 0:
            d = P.scalar_dtype(k(0)) if not issubclass(k, np.generic) else D.from_np(k)
            scalars.append(d)
        else:
            d = D.FROM_NP[k]
            (dims if cls == 2 else zeros).append(d)
        dtypes.append(d)
    return P.result_type_of(dims, zeros, scalars), tuple(dtypes)


def _scalar_as(x, cdt, xp):
    """A Python scalar in the computation dtype (integers wrap around as PyTorch's do)."""
    if isinstance(x, (bool, np.bool_)) or cdt.category >= 2:
        return cdt.np.type(x)
    return np.array(int(x)).astype(cdt.np)[()]


class StandInOperands(NotImplementedError):
    """A sparse or quantized tensor met a dense implementation. Such a tensor's array is a stand-in that is no NumPy
    array, so only this branch sees it; the op's public function hands the call to the ``dispatch`` registered for
    the stand-in's type in ``STAND_INS`` (ember._sparse's, ember._quantized's)."""

    def __init__(self, dispatch):
        super().__init__("this op has no implementation for sparse or quantized tensors")
        self.dispatch = dispatch


STAND_INS = {}  # stand-in array type -> dispatch(op, args, kwargs, out, mode)


def _device_arrays(tensors):
    """The array module for these tensors; PyTorch's error when they are on different devices
    (zero-dim CPU tensors may join CUDA ones, as in PyTorch)."""
    for t in tensors:
        if type(t._data) is not ndarray:
            break
    else:
        return np
    for t in tensors:
        dispatch = STAND_INS.get(type(t._data))
        if dispatch is not None:
            raise StandInOperands(dispatch)
    host = [type(t._data) is ndarray for t in tensors]
    devs = {t._data.device.id for t, h in zip(tensors, host) if not h}
    if len(devs) > 1 or any(h and t._data.ndim for t, h in zip(tensors, host)):
        names = sorted({str(t.device) for t in tensors})
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{names[-1]} and {names[0]}!")
    return _backend.cupy()


@_quiet.quiet
def elementwise_impl(call):
    """Run an elementwise call: promotion, broadcasting checks, computation, result writing (NumPy's floating-point
    warnings off: see ``ember._quiet``)."""
    op, operands, mode = call.op, call.args, call.mode
    kwargs = call.kwargs
    if mode is None and not kwargs:  # operands of one storage dtype the implementation handles as is
        d = _common_fast_dtype(op, operands)
        if d is not None:
            try:
                if operands[0]._data.size < _SPLIT_MIN or op.split is None:
                    r = op.impl(np, *[x._data for x in operands])
                else:
                    r = op.split(*[x._data for x in operands])
                return _wrap(r if type(r) is ndarray else _asarray(r))
            except ValueError:  # shapes don't broadcast: the general path words the error
                pass
    key = (op.rule,) + tuple(_operand_key(x) for x in operands)
    if kwargs:
        key += tuple((k, v if isinstance(v, str) else type(v)) for k, v in kwargs.items())
    dtypes = _promo_cache.get(key)
    if dtypes is None:
        p, operand_dtypes = _promote_key(key[1:len(operands) + 1])
        dtypes = _promo_cache[key] = op.rule(p, operand_dtypes, **kwargs) + (p,)
    cdt, rdt, p = dtypes
    tensors = [x for x in operands if isinstance(x, Tensor)]
    xp = _device_arrays(tensors)
    shapes = [t._data.shape for t in tensors]
    shape = shapes[0] if len(set(shapes)) == 1 else P.broadcast_shapes(*shapes)
    if mode == "inplace":
        target = operands[0]
        if not P.can_cast(rdt, target.dtype):
            raise RuntimeError(f"result type {TORCH_NAME[rdt]} can't be cast to the desired output type "
                               f"{TORCH_NAME[target.dtype]}")
        P.check_inplace_broadcast(target._data.shape, shape)
        _refuse_partial_overlap(target, operands)
    cnp = cdt.np
    if p in _HALF and cdt is D.float32:  # PyTorch rounds every operand to the half type before computing in float32
        arrays = [widen(x._data if x._data.dtype == p.np else x._data.astype(p.np))
                  if isinstance(x, Tensor) else _scalar_as(_scalar_as(x, p, xp), cdt, xp) for x in operands]
    else:
        arrays = [x._data.astype(cnp, copy=False) if isinstance(x, Tensor) else _scalar_as(x, cdt, xp)
                  for x in operands]
    if mode == "inplace" and (op.into if kwargs else op.split) is not None and xp is np and cdt is rdt:
        target = operands[0]._data
        if target.dtype == cnp and target.shape == shape:  # the ufunc writes into the target: no temporary, no copy
            try:
                op.into(target, *arrays, **kwargs) if kwargs else op.split(*arrays, out=target)
            except ValueError:  # (a read-only target: write_into below words the error)
                pass
            else:
                operands[0]._vc[0] += 1
                return operands[0]
    if kwargs or op.split is None or xp is not np or math.prod(shape) < _SPLIT_MIN:
        r = op.impl(xp, *arrays, **kwargs)
    else:
        r = op.split(*arrays)
    if type(r) is not ndarray:
        r = xp.asarray(r)
    if r.dtype != rdt.np:
        r = narrow(r, rdt.np)
    if mode == "inplace":
        return write_into(operands[0], r)
    if mode == "out":
        return write_out(call.out, r)
    return _wrap(r)


def _refuse_partial_overlap(target, operands):
    """PyTorch's error when an operand of an in-place op shares part, not all, of the target's memory (its result
    would depend on the order elements are written in). As PyTorch's check, only dense tensors are compared; a
    shared version counter is what marks tensors over one storage."""
    t = target._data
    for x in operands:
        if type(x) is Tensor and x is not target and x._vc is target._vc and x._data.size and t.size:
            d = x._data
            if not (d.flags.c_contiguous or d.flags.f_contiguous) or not (t.flags.c_contiguous or t.flags.f_contiguous):
                continue
            a, b = target.data_ptr(), x.data_ptr()
            if a < b + d.nbytes and b < a + t.nbytes and (a, t.nbytes, t.strides) != (b, d.nbytes, d.strides):
                raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to "
                                   "tensor refer to a single memory location. Please clone() the tensor before "
                                   "performing the operation.")


def _common_fast_dtype(op, operands):
    d = None
    for x in operands:
        if type(x) is not Tensor and not isinstance(x, Tensor) or type(x._data) is not ndarray:
            return None
        if d is None:
            d = x._data.dtype
        elif x._data.dtype is not d:
            return None
    return d if d in op.fast else None


def write_into(target, r):
    """Store ``r`` in ``target``'s array (an in-place op's result) and bump its version."""
    try:
        target._data[...] = r
    except ValueError as e:
        if "read-only" in str(e):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers "
                               "to a single memory location. Please clone() the tensor before performing the "
                               "operation.") from None
        raise
    target._vc[0] += 1
    return target


def _out_dtype(kwargs, out, compute):
    """The keywords of an ``out_dtype`` op's call with ``out=``: a ``dtype`` given must be the out tensor's; without
    one, PyTorch computes in the out tensor's dtype if ``compute`` (a sum into a bool tensor is a logical or)."""
    dtype = kwargs.get("dtype")
    if dtype is None:
        return {**kwargs, "dtype": out.dtype} if compute else kwargs
    if dtype is not out.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {D.CPP_NAME[dtype]}, but got {D.CPP_NAME[out.dtype]} "
                           "instead")
    return kwargs


def cast_refusal(rd, od):
    return RuntimeError(f"result type {TORCH_NAME[rd]} can't be cast to the desired output type {TORCH_NAME[od]}")


def write_out(out, r, refusal=cast_refusal):
    """Store ``r`` in ``out=``: its dtype must be castable (else ``refusal(result dtype, out dtype)`` is raised); a
    differently shaped ``out`` is resized."""
    if not isinstance(out, Tensor):
        raise TypeError(f"argument 'out' must be Tensor, not {type(out).__name__}")
    od, rd = out.dtype, D.FROM_NP[r.dtype]
    if not P.can_cast(rd, od):
        raise refusal(rd, od)
    if out._data.shape != r.shape:
        if out._data.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output shape "
                          f"{list(r.shape)}. This behavior is deprecated, and in a future PyTorch release "
                          "outputs will not be resized unless they have zero elements. You can explicitly "
                          "reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                          UserWarning, stacklevel=4)
        out._data = r.astype(od.np, copy=True) if r.dtype != od.np or r.base is not None else r
        out._vc[0] += 1
        return out
    return write_into(out, r)


def _fast_dtypes(op):
    """Storage dtypes for which the implementation alone yields PyTorch's result dtype."""
    fast = set()
    for d in D.ALL:
        if d.np is None or d in _HALF:
            continue
        try:
            cdt, rdt = op.rule(d, (d,) * 2)
        except (RuntimeError, NotImplementedError):
            continue
        if cdt is d and (rdt is d or rdt is D.bool):
            fast.add(d.np)
    return frozenset(fast)


_POSITION = ("input", "other")


def _check_operands(op, operands):
    """PyTorch's TypeError for a public call whose operands its signature does not take."""
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor) and not (op.scalars if i else op.scalar_first):
            raise TypeError(f"{op.name}(): argument '{_POSITION[min(i, 1)]}' (position {i + 1}) must be Tensor, "
                            f"not {type(x).__name__}")
    if not any(isinstance(x, Tensor) for x in operands):
        raise TypeError(f"{op.name}(): argument 'input' (position 1) must be Tensor, not {type(operands[0]).__name__}")


def _elementwise_slow(op, operands, kwargs, out, mode):
    if mode == "inplace" and not isinstance(operands[0], Tensor):
        raise TypeError(f"{op.name}_(): argument 'input' (position 1) must be Tensor, not {type(operands[0]).__name__}")
    if mode == "out":
        if not (op.scalars and operands and type(operands[0]) is Tensor):  # (else nothing to check)
            _check_operands(op, operands)
        if out is None:
            mode = None
    call = Call(op, operands, kwargs, mode, out)
    try:
        if FORCED[0]:
            return run_layers(call, elementwise_impl)
        for x in operands:
            if isinstance(x, Tensor) and x._rg:
                if mode is None:  # (see _dispatch: autograd is the only layer, it records after the computation)
                    return RECORD[0](op, operands, kwargs, elementwise_impl(call))
                return run_layers(call, elementwise_impl)
        return elementwise_impl(call)
    except StandInOperands as e:
        return e.dispatch(op, operands, kwargs, out, mode)


def _scalar_first(op, suffix, args, kwargs, n):
    """PyTorch's deprecated overloads that take the scalar first (``add_(alpha, other)``, ``addcmul_(value, t1,
    t2)``, ``torch.addcdiv(input, value, t1, t2)``), still common in older programs: ``args`` (the arguments after
    the input) back to ``n`` operands and the scalar as the op's keyword (``op.scalar_first_kw``)."""
    key = getattr(op, "scalar_first_kw", None)  # (add_ only: not every binary op has the overload)
    if key is None or len(args) != n + 1 or not isinstance(args[0], (int, float, bool)) or key in kwargs:
        given = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{op.name}{suffix}() received an invalid combination of arguments - got ({given})")
    scalar_name = "alpha" if key == "alpha" else "value"
    operands = ", ".join(["Tensor other"] if n == 1 else ["Tensor tensor1", "Tensor tensor2"])
    warnings.warn(f"This overload of {op.name}{suffix} is deprecated:\n\t{op.name}{suffix}(Number {scalar_name}, "
                  f"{operands})\nConsider using one of the following signatures instead:\n\t{op.name}{suffix}("
                  f"{operands}, *, Number {scalar_name} = 1)", UserWarning, stacklevel=3)
    return tuple(args[1:]), {**kwargs, key: args[0]}


def _make_elementwise(op, arity):
    impl = op.impl
    fast = op.fast = _fast_dtypes(op)
    fast_float = fast & {np.dtype(np.float32), np.dtype(np.float64)} if op.scalars else frozenset()
    split, big = op.split, _SPLIT_MIN if op.split is not None else sys.maxsize  # (one comparison on small arrays)

    # (an input requiring grad takes the same path: the recorder, see _dispatch, then records the call)
    if arity == 1:
        def fn(input, *, out=None, **kwargs):
            if out is None and not kwargs and type(input) is Tensor and not FORCED[0]:
                x = input._data
                if type(x) is ndarray and x.dtype in fast:
                    r = impl(np, x) if x.size < big else split(x)
                    r = _wrap(r if type(r) is ndarray else _asarray(r))
                    return RECORD[0](op, (input,), kwargs, r) if input._rg else r
            return _elementwise_slow(op, (input,), kwargs, out, "out")

        def inplace(self, **kwargs):
            return _elementwise_slow(op, (self,), kwargs, None, "inplace")
    elif arity == 2:
        def fn(input, other, *, out=None, **kwargs):
            if out is None and not kwargs and type(input) is Tensor and not FORCED[0]:
                x = input._data
                if type(other) is Tensor:
                    y = other._data
                    d = x.dtype
                    if d is y.dtype and d in fast and type(x) is ndarray and type(y) is ndarray:
                        try:
                            r = impl(np, x, y) if x.size < big else split(x, y)
                        except ValueError:  # shapes don't broadcast: the slow path words the error
                            return _elementwise_slow(op, (input, other), kwargs, out, "out")
                        r = _wrap(r if type(r) is ndarray else _asarray(r))
                        return RECORD[0](op, (input, other), kwargs, r) if input._rg or other._rg else r
                elif type(other) is float and x.dtype in fast_float and type(x) is ndarray:
                    r = impl(np, x, x.dtype.type(other)) if x.size < big else split(x, x.dtype.type(other))
                    r = _wrap(r if type(r) is ndarray else _asarray(r))
                    return RECORD[0](op, (input, other), kwargs, r) if input._rg else r
            return _elementwise_slow(op, (input, other), kwargs, out, "out")

        def inplace(self, other, *more, **kwargs):
            if more:
                (other,), kwargs = _scalar_first(op, "_", (other,) + more, kwargs, 1)
            return _elementwise_slow(op, (self, other), kwargs, None, "inplace")
    else:
        n = getattr(op.impl, "__wrapped__", op.impl).__code__.co_argcount - 1  # (see _make_function)

        def fn(*operands, out=None, **kwargs):
            if len(operands) > n and hasattr(op, "scalar_first_kw"):
                rest, kwargs = _scalar_first(op, "", operands[1:], kwargs, n - 1)
                operands = operands[:1] + rest
            return _elementwise_slow(op, operands, kwargs, out, "out")

        def inplace(self, *operands, **kwargs):
            if len(operands) >= n and hasattr(op, "scalar_first_kw"):
                operands, kwargs = _scalar_first(op, "_", operands, kwargs, n - 1)
            return _elementwise_slow(op, (self,) + operands, kwargs, None, "inplace")
    op.inplace_fn = inplace
    return fn


# ---- general ops ------------------------------------------------------------------------------
def _unwrap(a):
    if isinstance(a, Tensor):
        return a._data
    if type(a) in (list, tuple) and any(isinstance(x, Tensor) for x in a):
        return type(a)(x._data if isinstance(x, Tensor) else x for x in a)
    return a


def general_impl(call):
    """Run a general op: unwrap tensors, call the implementation, wrap what it returns."""
    return _general(call.op, call.args, call.kwargs, call.mode, call.out)


@_quiet.quiet
def _general(op, args, kwargs, mode, out):
    """``general_impl`` of a call given as its parts (the calls that meet no layer make no ``Call``), NumPy's
    floating-point warnings off (see ``ember._quiet``)."""
    arrays = []  # (the usual arguments, host tensors and plain values, unwrapped in one loop)
    for a in args:
        if type(a) is Tensor and type(a._data) is ndarray:
            arrays.append(a._data)
        elif isinstance(a, (Tensor, list, tuple)):
            arrays = None
            break
        elif type(a) is ndarray:  # (an implementation would take it for a tensor's array: PyTorch refuses it)
            raise _must_be_tensor(op, len(arrays), a)
        else:
            arrays.append(a)
    if kwargs:
        kwargs_in = {k: _unwrap(v) for k, v in kwargs.items()}
        if arrays is not None and any(isinstance(v, Tensor) for v in kwargs.values()):
            arrays = None
    else:
        kwargs_in = {}
    if mode == "out" and op.out_dtype is not None and isinstance(out, Tensor):
        kwargs_in = _out_dtype(kwargs_in, out, op.out_dtype == "compute")
    tensors = None
    if arrays is None:  # tensors inside sequences or on a device: the device check
        tensors = Call(op, args, kwargs).tensors()
        xp = _device_arrays(tensors) if tensors else np
        arrays = [a._data if type(a) is Tensor else _unwrap(a) for a in args]
        for i, a in enumerate(args):
            if type(a) in (list, tuple) and ndarray in map(type, a):  # (cat's sequence, say: PyTorch's refusal)
                j = [type(x) for x in a].index(ndarray)
                raise TypeError(f"expected Tensor as element {j} in argument {i}, but got numpy.ndarray")
    else:
        xp = np
    r = op.impl(xp, *arrays, **kwargs_in)
    if op.result_layout is not None:
        r = _memory_format.new_result(r, op.result_layout == "suggested")
    if op.mutates:
        args[0]._vc[0] += 1
        return args[0]
    if mode == "inplace":
        target = args[0]
        _refuse_partial_overlap(target, args + tuple(kwargs.values()) if kwargs else args)
        r = xp.asarray(r)
        P.check_inplace_broadcast(target._data.shape, r.shape)
        if not P.can_cast(D.FROM_NP[r.dtype], target.dtype):
            raise RuntimeError(f"result type {TORCH_NAME[D.FROM_NP[r.dtype]]} can't be cast to the desired "
                               f"output type {TORCH_NAME[target.dtype]}")
        return write_into(target, r)
    if mode == "out":
        if isinstance(r, tuple):
            return type(out)(write_out(o, xp.asarray(x), op.out_refusal) for o, x in zip(out, r))
        return write_out(out, xp.asarray(r), op.out_refusal)
    result = _wrap(r) if type(r) is ndarray else wrap_result(r)
    call = Call(op, args, kwargs) if op.view else None
    if call is not None and (op.view is True or op.view(call)):
        # views share their base's version counter and remember how they were made, so that autograd
        # can replay them when an in-place op writes through a view
        parent, many = (tensors or call.tensors())[0], isinstance(result, tuple)
        for i, v in enumerate(result if many else (result,)):
            if not _backend.shares_memory(v._data, parent._data):
                continue  # e.g. reshape had to copy: not a view
            v._view_of(parent)
            v._ext = {"view": (parent, op, args[1:], kwargs, i if many else None)}
    if op.returns is not None and type(result) is tuple:  # max(input) is a tensor, max(input, dim) a pair
        result = op.returns(*result)
    return result


def wrap_result(r):
    if type(r) is ndarray:
        return _wrap(r)
    if isinstance(r, (ndarray, np.generic)):
        return _wrap(_asarray(r))
    if isinstance(r, tuple):
        return tuple(wrap_result(x) for x in r)
    if isinstance(r, list):
        return [wrap_result(x) for x in r]
    if hasattr(r, "__cuda_array_interface__") or type(r) is MetaArray:
        return _wrap(r)
    return r


def _any_requires_grad(args, kwargs):
    for a in args:
        if isinstance(a, Tensor):
            if a._rg:
                return True
        elif type(a) in (list, tuple):
            for x in a:
                if isinstance(x, Tensor) and x._rg:
                    return True
    return any(isinstance(v, Tensor) and v._rg for v in kwargs.values())


def _general_call(op, args, kwargs, out, mode):
    if FORCED[0]:
        return run_layers(Call(op, args, kwargs, mode, out), general_impl)
    if _any_requires_grad(args, kwargs):
        if mode is None:  # (see _dispatch: autograd is the only layer, it records after the computation)
            return RECORD[0](op, args, kwargs, _general(op, args, kwargs, None, None))
        return run_layers(Call(op, args, kwargs, mode, out), general_impl)
    return _general(op, args, kwargs, mode, out)


_ARGUMENT_ERRORS = (AttributeError, TypeError, ValueError, IndexError, KeyError)


# first parameters that PyTorch types Tensor (a list there is no sequence of tensors, as cat's ``tensors`` is)
_TENSOR_FIRST_NAMES = frozenset((n,) for n in ("input", "A", "x", "x1", "input1", "anchor", "LU", "LU_data", "theta",
                                                "grad_output", "condition", "sorted_sequence", "a"))


def _positional_names(op):
    """The names of the positional parameters of ``op``'s implementation after ``xp`` (as its signature gives them
    through decorators; only errors ask)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in inspect.signature(op.impl).parameters.values() if p.kind in kinds)[1:]


def must_be_tensor(function, parameter, i, value):
    """PyTorch's TypeError for ``value``, no tensor, as the ``i``-th positional argument (``parameter``) of
    ``function``."""
    kind = type(value)
    kind = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"
    return TypeError(f"{function}(): argument '{parameter}' (position {i + 1}) must be Tensor, not {kind}")


def _must_be_tensor(op, i, value):
    names = _positional_names(op)
    return must_be_tensor(op.name, names[i] if i < len(names) else "input", i, value)


def _not_a_tensor(op, args, error):
    """PyTorch's TypeError when a general op failed on a first argument that is no tensor (nor a sequence where
    one may be, as cat's is); None when that is not the cause. Checked only after a failure, so calls pay nothing
    for it."""
    if not args or isinstance(args[0], Tensor):
        return None
    if isinstance(args[0], (list, tuple)) and _positional_names(op)[0:1] not in _TENSOR_FIRST_NAMES:
        return None
    if isinstance(error, TypeError) and "must be" in str(error):  # already PyTorch's refusal
        return None
    return _must_be_tensor(op, 0, args[0])


def _make_general(op):
    mode = "inplace" if op.mutates else None

    def fn(*args, out=None, **kwargs):  # (_general_call inlined: one frame less on every call)
        try:
            if FORCED[0]:
                return run_layers(Call(op, args, kwargs, mode if out is None else "out", out), general_impl)
            if _any_requires_grad(args, kwargs):
                if mode is None and out is None:
                    return RECORD[0](op, args, kwargs, _general(op, args, kwargs, None, None))
                return run_layers(Call(op, args, kwargs, mode if out is None else "out", out), general_impl)
            return _general(op, args, kwargs, mode if out is None else "out", out)
        except _ARGUMENT_ERRORS as e:
            refusal = _not_a_tensor(op, args, e)
            if refusal is None:
                raise
            raise refusal from None
        except StandInOperands as e:
            return e.dispatch(op, args, kwargs, out, mode if out is None else "out")

    def inplace(self, *args, **kwargs):
        try:
            return _general_call(op, (self,) + args, kwargs, None, "inplace")
        except _ARGUMENT_ERRORS as e:
            refusal = _not_a_tensor(op, (self,), e)
            if refusal is None:
                raise
            raise refusal from None
        except StandInOperands as e:
            return e.dispatch(op, (self,) + args, kwargs, None, "inplace")

    op.inplace_fn = inplace
    return fn


def _make_function(op):
    if op.kind == "factory":
        return op.impl
    if op.kind == "elementwise":
        # the operands are the positional parameters after xp (read from the code object: cheap at import), of the
        # implementation under a decorator such as ember._quiet.quiet
        impl = getattr(op.impl, "__wrapped__", op.impl)
        fn = _make_elementwise(op, -1 if impl.__defaults__ else impl.__code__.co_argcount - 1)
    else:
        fn = _make_general(op)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = op.impl.__doc__
    fn.__module__ = "ember"
    fn.op = op
    return fn


# ---- installing spellings ---------------------------------------------------------------------
_REFLECTED = {"__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
              "__rmatmul__", "__rand__", "__ror__", "__rxor__", "__rlshift__", "__rrshift__"}
_INPLACE = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__imatmul__",
            "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}


def _reflected(o):
    """``other OP self`` for a Python number ``other`` (the public functions refuse a number first)."""
    if o.kind == "elementwise":
        def method(self, other):
            return _elementwise_slow(o, (other, self), {}, None, None)
    else:
        def method(self, other):
            return o.fn(other, self)
    return method


def _inplace_operator(inplace_fn):
    def method(self, other):
        return inplace_fn(self, other)
    return method


def install(namespace, ops=None):
    """Put the spellings of ``ops`` (default: every registered op) on Tensor and their functions in
    ``namespace`` (a dict). Extension packages call it for the ops they register."""
    exported = []
    for o in REGISTRY.values() if ops is None else ops:
        if o.function:
            namespace[o.name] = o.fn
            exported.append(o.name)
            if o.inplace:  # PyTorch also exports in-place forms as functions (torch.abs_)
                namespace[o.name + "_"] = o.inplace_fn
        if o.method:
            mname = o.name if o.method is True else o.method
            setattr(Tensor, mname, o.fn)
            if o.inplace:
                setattr(Tensor, mname + "_", o.inplace_fn)
        for dunder in o.operators:
            if dunder in _REFLECTED:
                setattr(Tensor, dunder, _reflected(o))
            elif dunder in _INPLACE:
                setattr(Tensor, dunder, _inplace_operator(o.inplace_fn))
            else:
                setattr(Tensor, dunder, o.fn)
    return exported
