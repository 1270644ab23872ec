"""``ReduceOp`` as torch.distributed has it, and the array reductions of the CPU backend.

``ReduceOp.SUM`` and the others are members of the enum ``ReduceOp.RedOpType`` (they compare equal to their
numbers and count as ReduceOp instances); ``ReduceOp(ReduceOp.MAX)`` is an instance wrapping one, and
``_make_nccl_premul_sum(factor)`` makes the PREMUL_SUM instance carrying its factor (which gloo, and so the CPU
backend, refuses).
"""
import enum
import warnings

import numpy as np


class RedOpType(int, enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    def __str__(self):
        return f"RedOpType.{self.name}"  # (so f"{op}" reads so too)


class _ReduceOpMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, RedOpType) or type.__instancecheck__(cls, obj)


class ReduceOp(metaclass=_ReduceOpMeta):
    """A reduction: ``ReduceOp.SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX``, ``BAND``, ``BOR``, ``BXOR``,
    ``PREMUL_SUM``."""

    RedOpType = RedOpType
    SUM, AVG, PRODUCT, MIN, MAX = RedOpType.SUM, RedOpType.AVG, RedOpType.PRODUCT, RedOpType.MIN, RedOpType.MAX
    BAND, BOR, BXOR, PREMUL_SUM = RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR, RedOpType.PREMUL_SUM

    def __init__(self, op):
        if not isinstance(op, RedOpType):
            raise TypeError(f"ReduceOp(): expected a ReduceOp.RedOpType (e.g. ReduceOp.SUM), got {type(op).__name__}")
        self.op = op
        self.factor = None

    def __eq__(self, other):
        if isinstance(other, RedOpType):
            return self.op == other
        if type(other) is ReduceOp:
            return self.op == other.op
        return NotImplemented

    def __hash__(self):
        return hash(self.op)

    def __repr__(self):
        return f"<ReduceOp {self.op.name}>"

    def __reduce__(self):
        return _rebuild, (self.op, self.factor)


def _rebuild(op, factor):
    r = ReduceOp(op)
    r.factor = factor
    return r


def _make_nccl_premul_sum(factor):
    """The PREMUL_SUM reduction: multiply each input by ``factor`` (a number or a one-element tensor), then sum."""
    return _rebuild(RedOpType.PREMUL_SUM, factor)


class _DeprecatedReduceOp:
    """``reduce_op``: the old name of ReduceOp (its attributes warn)."""

    def __getattr__(self, name):
        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
                      FutureWarning, stacklevel=2)
        return getattr(ReduceOp, name)


reduce_op = _DeprecatedReduceOp()


def op_type(op, fname):
    """The RedOpType of ``op`` (a member or a ReduceOp); TypeError for anything else."""
    if isinstance(op, RedOpType):
        return op
    if type(op) is ReduceOp:
        return op.op
    raise TypeError(f"{fname}(): op must be a torch.distributed.ReduceOp (e.g. ReduceOp.SUM), got {op!r}")


def supports_complex(op):
    """Whether ``op`` is defined on complex tensors (reduced as pairs of reals)."""
    return op_type(op, "supports_complex") not in (RedOpType.MAX, RedOpType.MIN, RedOpType.PRODUCT,
                                                  RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR)


# ---- the reductions on arrays --------------------------------------------------------------------------------
_UFUNC = {RedOpType.SUM: np.add, RedOpType.AVG: np.add, RedOpType.PRODUCT: np.multiply, RedOpType.MIN: np.minimum,
          RedOpType.MAX: np.maximum, RedOpType.BAND: np.bitwise_and, RedOpType.BOR: np.bitwise_or,
          RedOpType.BXOR: np.bitwise_xor}
_BOOL_UFUNC = {RedOpType.SUM: np.logical_or, RedOpType.AVG: np.logical_or, RedOpType.PRODUCT: np.logical_and,
               RedOpType.MIN: np.logical_and, RedOpType.MAX: np.logical_or}


class Reducer:
    """``combine(srcs, out)``: ``out = srcs[0] op srcs[1] op ...`` in that order (``out`` may be ``srcs[0]`` or
    ``srcs[1]``, no later one); ``finish(out)``: what follows the combination (AVG's division)."""

    __slots__ = ("_ufunc", "_divisor")

    def __init__(self, op, dtype, size):
        if dtype == np.bool_:
            self._ufunc = _BOOL_UFUNC.get(op, _UFUNC[op])
        elif op in (RedOpType.MIN, RedOpType.MAX) and dtype.kind in "fV":  # floats (V: bfloat16): gloo's NaNs
            self._ufunc = _first_unless(np.greater if op == RedOpType.MIN else np.less)
        else:
            self._ufunc = _UFUNC[op]
        self._divisor = size if op == RedOpType.AVG else None

    def combine(self, srcs, out):
        f = self._ufunc
        with np.errstate(all="ignore"):
            if len(srcs) == 1:
                if srcs[0] is not out:
                    np.copyto(out, srcs[0])
                return
            f(srcs[0], srcs[1], out=out)
            for s in srcs[2:]:
                f(out, s, out=out)

    def finish(self, out):
        if self._divisor is not None:
            with np.errstate(all="ignore"):
                np.true_divide(out, out.dtype.type(self._divisor), out=out)


def _first_unless(beaten):
    """gloo's min/max: ``b`` where ``beaten(a, b)``, else ``a`` (a NaN in ``a`` stays, one in ``b`` is dropped)."""
    def pick(a, b, out):
        take_b = beaten(a, b)
        if out is b:
            np.copyto(out, a, where=~take_b)
        else:
            if out is not a:
                np.copyto(out, a)
            np.copyto(out, b, where=take_b)
    return pick
