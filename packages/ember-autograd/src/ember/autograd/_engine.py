"""The autograd graph and the backward engine.

Every differentiable op call that has an input requiring grad gets a ``Node`` holding the op's VJP
and what the call saw. ``backward`` walks the graph from the roots with
dependency counts, so a node runs once all the gradients flowing into it are summed.
"""
import itertools
import sys
import threading
import traceback
import weakref
from heapq import heapify, heappop, heappush

import numpy as np
from numpy import ndarray

import ember
from ember import _memory_format, _quiet
from ember._backend import xp_of
from ember._device import CPU
from ember._dtype import FROM_NP
from ember._parallel import MIN_SIZE as SPLIT_MIN
from ember._parallel import ufunc
from ember._sparse import _Meta
from ember._tensor import Tensor

from . import anomaly_mode, grad_mode

_seq = itertools.count()
_MODE, _ANOMALY = grad_mode.MODE, anomaly_mode._STATE  # (thread-local states)


# set by forward AD while a dual level is open: gives a call's output, rebuilt from its array for a VJP that reads
# ctx.out, the tangent that array carried (forward-over-reverse differentiates such VJPs)
OUT_TANGENT = [None]


class _Task(threading.local):
    callbacks = None  # the final callbacks of this thread's innermost running backward (None outside backward)


_TASK = _Task()


def queue_callback(callback):
    """Run ``callback()`` once the running backward pass has finished (PyTorch's
    ``Variable._execution_engine.queue_callback``: DDP finalises its gradient reduction there)."""
    callbacks = _TASK.callbacks
    if callbacks is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    callbacks.append(callback)


class ExecutionEngine:
    """What ``Variable._execution_engine`` gives: the engine's ``queue_callback``."""
    queue_callback = staticmethod(queue_callback)


_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
          "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
          "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
          "you need to access saved tensors after calling backward.")


_LEGACY = {ember.float32: "torch.FloatTensor", ember.float64: "torch.DoubleTensor", ember.float16: "torch.HalfTensor",
           ember.bfloat16: "torch.BFloat16Tensor", ember.complex64: "torch.ComplexFloatTensor",
           ember.complex128: "torch.ComplexDoubleTensor"}

_MODIFIED = "modified by an inplace operation"


def _short_name(name):
    """A node's name as PyTorch's version error prints it: ``MulBackward0`` -> ``Mul``, ``PowBackward1`` -> ``Pow1``."""
    if name == "CopySlices":
        return "torch::autograd::CopySlices"
    return name[:-9] if name.endswith("Backward0") else name.replace("Backward", "")


def _modified(data, now, expected, t=None):
    """PyTorch's error for a saved tensor (array ``data``, tensor ``t`` when known) changed in place since it was
    saved: it names the node the tensor now comes out of."""
    fn = t.grad_fn if t is not None else None
    dtype = FROM_NP[data.dtype]
    source = ""
    if fn is not None:
        source = f", which is output {(t._ext or {}).get('out_idx', 0)} of {_short_name(fn.name())},"
    return (f"one of the variables needed for gradient computation has been {_MODIFIED}: "
            f"[{_LEGACY.get(dtype, str(dtype))} {list(data.shape)}]{source} is at version {now}; expected version "
            f"{expected} instead. Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")


class _Values:
    """The array of an ``_Overwritten`` tensor: shape, dtype, strides and flags read as the saved array's; any use
    of its values raises the version error."""

    __slots__ = ("shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides", "flags", "_error")

    def __init__(self, data, error):
        self.shape, self.dtype, self.ndim, self.size = data.shape, data.dtype, data.ndim, data.size
        self.itemsize, self.nbytes, self.strides, self.flags = data.itemsize, data.nbytes, data.strides, data.flags
        self._error = error

    def _refuse(self, *args, **kwargs):
        raise RuntimeError(self._error)

    def __getattr__(self, name):
        self._refuse()

    __array__ = __array_ufunc__ = __array_function__ = __getitem__ = __setitem__ = __iter__ = __len__ = _refuse
    __float__ = __int__ = __index__ = __bool__ = __complex__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __pow__ = _refuse
    __rpow__ = __neg__ = __matmul__ = __rmatmul__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


class _Overwritten(Tensor):
    """Stands in for a saved tensor that was changed in place after its node saved it (see ``Node.args``)."""

    __slots__ = ("_device",)

    def __init__(self, data, error):
        self._data, self._vc, self._device = _Values(data, error), [0], _meta(data)[2] or CPU
        self._base = self.grad = self.grad_fn = self._ext = None
        self._rg = False

    device = property(lambda self: self._device)
    is_cuda = property(lambda self: self._device.type == "cuda")
    is_cpu = property(lambda self: self._device.type == "cpu")

    def get_device(self):
        return self._device.index if self.is_cuda else -1


def _replace(x, stand_ins):
    """``x`` (a call's arguments) with the tensors named in ``stand_ins`` (by id) replaced."""
    if isinstance(x, Tensor):
        return stand_ins.get(id(x), x)
    if isinstance(x, (list, tuple)):
        return type(x)(_replace(v, stand_ins) for v in x)
    return x


def _output(data, version, node, index):
    """A call's output rebuilt from its array, as part of the graph (it leads into ``node``)."""
    t = Tensor._wrap(data)
    t._vc = version
    if node is not None and data.dtype.kind in "fcV":  # (V: bfloat16's storage) outputs that carry gradients
        t._rg = True
        t.grad_fn = node
        if index:
            t._ext = {"out_idx": index}
    return t


def _detached(x):
    """``x`` with its tensors cut from the graph: without create_graph, VJP ops then take the fast path."""
    if isinstance(x, Tensor):
        return Tensor._wrap(x._data) if x._rg else x
    if type(x) is tuple:
        out = []  # (a loop, not a comprehension: cheaper for the few arguments of a call)
        for v in x:
            t = type(v)
            out.append(Tensor._wrap(v._data) if t is Tensor and v._rg else
                       v if t is not list and t is not tuple and not isinstance(v, Tensor) else _detached(v))
        return tuple(out)
    if isinstance(x, (list, tuple)):
        return type(x)(_detached(v) for v in x)
    return x


def _flat_tensors(x):
    if isinstance(x, Tensor):
        return [x]
    found = []
    if isinstance(x, (list, tuple)):
        for v in x:  # (one call for a flat argument tuple, not one per argument)
            if isinstance(v, Tensor):
                found.append(v)
            elif isinstance(v, (list, tuple)):
                found += _flat_tensors(v)
    return found


def _layout(args):
    """Where the tensors are among ``args``: per argument True (a tensor), False, or such a tuple for a list."""
    return tuple(isinstance(a, Tensor) or (type(a) in (list, tuple) and tuple(isinstance(x, Tensor) for x in a))
                 for a in args)


class Node:
    """A backward function: turns gradients of its outputs into gradients of its inputs.

    A node is also the context its VJP reads (``ctx``, unless a stand-in replaced it, see ``graph``): the call's
    arguments and result, checked against in-place changes on access. (One object, not two: every recorded call
    makes one.) The result is kept as its arrays and version counters, not as tensors: a tensor holds its node,
    so holding it here would make a reference cycle and keep every graph's memory until the cyclic garbage
    collector runs. Reading ``out`` makes fresh tensors over the arrays, joined to the node when a graph is
    being built (create_graph).

    A VJP may say what it reads (attributes set on the function, see ``arithmetic.saves``): ``saves_args``
    False (none of the tensor arguments) or a function ``args -> args`` putting None for the tensors it does not
    read, and ``saves_out`` False. Only what it reads is kept (and checked for in-place changes), so a graph
    holds no more memory than its backward needs."""

    __slots__ = ("_vjp", "_ctx", "next_functions", "_in_meta", "_out_meta", "_structure", "_pos",
                 "_pre_hooks", "_hooks", "seq", "_metadata", "_trace", "materialize", "_args", "kwargs", "_outs",
                 "_single", "_inputs", "_versions", "_pargs", "_pout", "grad_donated", "__weakref__")

    _name = "Node"  # (each op's node is of a subclass named as PyTorch's: see _names)

    def __init__(self, vjp, args, kwargs, outputs, as_tuple=False, inputs=None):
        self._vjp = vjp
        self.seq = next(_seq)
        self._ctx = self._pre_hooks = self._hooks = self._trace = self._metadata = None
        self.materialize = True  # unused float outputs get zero gradients (custom Functions may opt out)
        if inputs is None:
            inputs = _flat_tensors(args)
        # (loops, not comprehensions: this runs for every recorded call)
        edges, in_meta = [], []
        for t in inputs:
            if t._rg:
                fn, ext = t.grad_fn, t._ext
                if fn is None:  # a leaf: its AccumulateGrad (accumulator's lookup inlined)
                    acc = ext.get("acc") if ext is not None else None
                    edges.append((accumulator(t) if acc is None else acc, 0))
                else:
                    edges.append((fn, ext.get("out_idx", 0) if ext is not None else 0))
                d = t._data
                in_meta.append((d.shape, d.dtype, None) if type(d) is ndarray else _meta(d))
            else:
                edges.append(_NO_EDGE)
                in_meta.append(None)
        self.next_functions, self._in_meta = tuple(edges), in_meta
        # where the tensor arguments are: their positions when none is inside a list (apply then picks their
        # gradients directly), else the layout of every argument
        pos, i = [], 0
        for a in args:
            if type(a) is Tensor or isinstance(a, Tensor):
                pos.append(i)
            elif type(a) in (list, tuple):
                pos = None
                break
            i += 1
        self._pos = pos
        self._structure = _layout(args) if pos is None else True
        # what the VJP reads
        saves_args = getattr(vjp, "saves_args", True)
        if saves_args is not True:
            args = saves_args(args) if saves_args else tuple([None if isinstance(a, Tensor) else a for a in args])
            inputs = _flat_tensors(args) if pos is None else [a for a in args if isinstance(a, Tensor)]
        self._args, self.kwargs, self._inputs = args, kwargs, inputs
        # ctx.out: one tensor, or a tuple when several (or the op returned a tuple, even of one)
        self._single = len(outputs) == 1 and not as_tuple
        self._pargs = self._pout = None  # args and out cut from the graph, made once (when read) for VJPs run
        # without create_graph
        self.grad_donated = False  # set while the VJP runs: it may write into the gradient's array (see _unshared)
        in_versions = []
        for t in inputs:
            in_versions.append(t._vc[0])
        out_meta, outs, out_versions = [], [], []
        keep_out = getattr(vjp, "saves_out", True)
        for o in outputs:
            d = o._data
            out_meta.append((d.shape, d.dtype, None) if type(d) is ndarray else _meta(d))
            if keep_out:
                v = o._vc
                outs.append((d, v))
                out_versions.append(v[0])
        self._out_meta, self._outs, self._versions = out_meta, outs, (in_versions, out_versions)

    # ---- the VJP's context -------------------------------------------------------------------------------
    def _check_out(self):
        versions = self._versions
        if versions is None:
            raise RuntimeError(_FREED)
        for (data, version), v in zip(self._outs, versions[1]):
            if version[0] != v:
                raise RuntimeError(_modified(data, version[0], v, None))

    @property
    def args(self):
        """The call's arguments. One changed in place since the call stands in as an ``_Overwritten`` tensor: its
        metadata still reads, its values raise PyTorch's error (PyTorch keeps the sizes a formula needs apart from
        the tensors it saves, so only a formula that reads values fails)."""
        versions = self._versions
        if versions is None:
            raise RuntimeError(_FREED)
        for t, v in zip(self._inputs, versions[0]):  # (inlined: every VJP reads its arguments)
            if t._vc[0] != v:
                return self._overwritten_args()
        if _MODE.enabled:
            return self._args
        pargs = self._pargs
        if pargs is None:
            pargs = self._pargs = _detached(self._args)
        return pargs

    def _overwritten_args(self):
        stand_ins = {}
        for t, v in zip(self._inputs, self._versions[0]):
            now = t._vc[0]
            if now != v:
                if not isinstance(t, Tensor):  # the metadata of a packed tensor (graph.saved_tensors_hooks)
                    raise RuntimeError(_modified(t._data, now, v, None))
                stand_ins[id(t)] = _Overwritten(t._data, _modified(t._data, now, v, t))
        args = _replace(self._args, stand_ins)
        return args if _MODE.enabled else _detached(args)

    def _modified_error(self):
        """The version error of the first saved tensor changed in place since the call, None if none was."""
        versions = self._versions
        if versions is not None:
            for t, v in zip(self._inputs, versions[0]):
                if t._vc[0] != v:
                    return _modified(t._data, t._vc[0], v, t if isinstance(t, Tensor) else None)
            for (data, version), v in zip(self._outs, versions[1]):
                if version[0] != v:
                    return _modified(data, version[0], v)
        return None

    @property
    def out(self):
        """The call's result (one changed in place since the call stands in as in ``args``)."""
        versions = self._versions
        if versions is None:
            raise RuntimeError(_FREED)
        if not self._outs:
            raise RuntimeError(f"the VJP of {self._name} reads ctx.out but is marked as not saving it")
        for (data, version), v in zip(self._outs, versions[1]):
            if version[0] != v:
                outs = [Tensor._wrap(data) if version[0] == v else _Overwritten(data, _modified(data, version[0], v))
                        for (data, version), v in zip(self._outs, versions[1])]
                return outs[0] if self._single else tuple(outs)
        if _MODE.enabled:
            outs = [_output(data, version, self, i) for i, (data, version) in enumerate(self._outs)]
            if OUT_TANGENT[0] is not None:  # (forward AD is open: the outputs keep their tangents)
                for o in outs:
                    OUT_TANGENT[0](o)
            return outs[0] if self._single else tuple(outs)
        if self._pout is None:
            outs = [Tensor._wrap(data) for data, _ in self._outs]
            self._pout = outs[0] if self._single else tuple(outs)
        return self._pout

    @property
    def needs_input_grad(self):
        """Whether each positional argument of the call needs a gradient (False for non-tensors; for a list
        argument, whether any of its tensors does): a VJP need not compute the others."""
        args = self._args
        if args is None:
            raise RuntimeError(_FREED)
        if self._structure is None:
            return tuple(m is not None for m in self._in_meta)
        metas = iter(self._in_meta)
        if self._pos is not None:
            want = [False] * len(args)
            for i in self._pos:
                want[i] = next(metas) is not None
            return tuple(want)
        return tuple(any([next(metas) is not None for x in a if x]) if type(a) is tuple else
                     (next(metas) is not None if a else False) for a in self._structure)

    def free(self):
        self._args = self._outs = self._inputs = self._versions = self._pargs = self._pout = None

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object at {hex(id(self))}>"

    @property
    def metadata(self):
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node runs; may return new grad_inputs."""
        self._hooks = (self._hooks or []) + [fn]
        return _Handle(self, "_hooks", fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, index, fn):
        entry = (index, fn)
        self._pre_hooks = (self._pre_hooks or []) + [entry]
        return _Handle(self, "_pre_hooks", entry)

    def apply(self, grads):
        """Gradients for each edge in ``next_functions`` from the gradients of each output."""
        ctx = self._ctx or self
        if ctx._versions is None:
            raise RuntimeError(_FREED)
        try:
            result = self._vjp(ctx, *grads)
        except Exception as e:
            # a VJP that used the values of a saved tensor changed in place (see ``args``) may fail on some other
            # path first (one for device arrays, say): it gets the version error all the same
            error = self._modified_error()
            if error is None or isinstance(e, RuntimeError) and _MODIFIED in str(e):
                raise
            raise RuntimeError(error) from None
        if type(result) is not tuple and not isinstance(result, (tuple, list)):
            result = (result,)
        if self._structure is None:  # the VJP already returns one gradient per edge
            return [_fit(g, m) for g, m in zip(result, self._in_meta)]
        pos = self._pos
        if pos is not None:
            n, grads = len(result), []
            for i, m in zip(pos, self._in_meta):
                g = result[i] if i < n else None
                if g is not None:  # (_fit's test inlined: most gradients already fit)
                    if m is None:
                        g = None
                    else:
                        d = g._data
                        if d.shape != m[0] or d.dtype is not m[1]:
                            g = _fit(g, m)
                grads.append(g)
            return grads
        flat = []
        for i, where in enumerate(self._structure):
            g = result[i] if i < len(result) else None
            if where is True:
                flat.append(g)
            elif where:
                gs = list(g) if g is not None else []
                flat += [gs[j] if j < len(gs) else None for j, a in enumerate(where) if a]
        return [_fit(g, m) for g, m in zip(flat, self._in_meta)]

    def release(self):
        (self._ctx or self).free()


_NO_EDGE = (None, 0)


def _meta(data):
    """(shape, NumPy dtype, device or None on the CPU) of an array: what a gradient must match."""
    return data.shape, data.dtype, None if type(data) is ndarray else Tensor._wrap(data).device


class AccumulateGrad(Node):
    """The sink of a leaf tensor that requires grad: adds arriving gradients into ``variable.grad``.

    The leaf keeps its AccumulateGrad (made once, not per graph) and the AccumulateGrad refers to the leaf
    weakly, so neither keeps the other in a reference cycle; a leaf nobody holds any more takes no gradient."""

    __slots__ = ("_variable", "_post_hooks")
    _name = "AccumulateGrad"

    def __init__(self, variable):
        self._variable = weakref.ref(variable)
        # first among ready nodes, as PyTorch's (largest sequence number): a gradient lands, and post-accumulate
        # hooks (DDP's) fire, while the rest of backward still runs
        self.seq = sys.maxsize
        self.next_functions = ()
        self._pre_hooks = self._hooks = self._post_hooks = self._trace = self._metadata = None
        self.materialize = True
        self._out_meta = [_meta(variable._data)]

    @property
    def variable(self):
        return self._variable()

    def accumulate(self, g, create_graph):
        v = self._variable()
        if v is None:
            return
        have = v.grad
        if type(g._data) is _Meta or have is not None and type(have._data) is _Meta:  # a sparse gradient
            v.grad = g.clone() if have is None else g + have if have.is_sparse and not g.is_sparse else have + g
        elif have is None:
            # a gradient held elsewhere (a VJP may hand one tensor to several inputs) is copied unless building
            # a graph; a leaf laid out otherwise than row-major (channels-last...) gets its gradient in its own
            # layout, as PyTorch's does
            d = v._data
            if create_graph:
                v.grad = g
            elif type(d) is ndarray and d.ndim > 1 and not d.flags.c_contiguous:
                v.grad = Tensor._wrap(_memory_format.copy(np, g._data, _memory_format.dense_layout(d)))
            else:
                v.grad = g if _unshared(g) else Tensor._wrap(g._data.copy())
        elif create_graph:
            v.grad = have + g
        elif _addable_in_place(have._data, g._data):
            # in place, as PyTorch's (even when .grad requires grad): no new array per backward; over the cores
            # when large (the size is tested here too: calling ufunc for tiny gradients costs a tiny backward 5%)
            d = have._data
            if type(d) is ndarray and d.size >= SPLIT_MIN:
                ufunc(np.add, d, g._data, out=d)
            else:
                d += g._data
            have._vc[0] += 1
        else:
            v.grad = Tensor._wrap(have._data + g._data)
        for hook in self._post_hooks or ():
            hook(v)

    def release(self):
        pass


def _unshared(g, refs=4):
    """Whether nothing but the engine holds gradient ``g`` and its array, which it owns (C-contiguous, as a
    copy would be) or which is the one view of all of an array nothing else refers to (a product reshaped, as
    a convolution's weight gradient): a leaf may then take it as its ``.grad`` without a copy, a VJP may write
    into it (``ctx.grad_donated``). ``refs``: the references to ``g`` the engine's own make (its list of the node's
    gradients, ours, getrefcount's and, from accumulate, its argument); the array's: g's, ours, getrefcount's;
    a base's: the view's, ours, getrefcount's."""
    if sys.getrefcount(g) != refs or type(g) is not Tensor or g._rg:
        return False
    d = g._data
    if type(d) is not ndarray or sys.getrefcount(d) != 3:
        return False
    flags, base = d.flags, d.base
    if base is not None:
        if type(base) is not ndarray or base.base is not None or base.nbytes != d.nbytes \
                or sys.getrefcount(base) != 3 or not base.flags.owndata:
            return False
        return flags.writeable and flags.c_contiguous
    return flags.owndata and flags.writeable and flags.c_contiguous


def _addable_in_place(have, new):
    """Whether gradient ``new`` may be added into array ``have`` in place: same kind of array, shape and a
    dtype that needs no rounding through float32; ``have`` writable and without overlapping elements."""
    d = have.dtype
    if type(have) is not type(new) or d is not new.dtype or d.kind not in "fc" or d.itemsize < 4 \
            or have.shape != new.shape:
        return False
    flags = have.flags
    return getattr(flags, "writeable", True) and (flags.c_contiguous or flags.f_contiguous)


class _Handle:
    """Removes a hook again (``handle.remove()``)."""

    def __init__(self, owner, attr, item):
        self.owner, self.attr, self.item = weakref.ref(owner), attr, item

    def remove(self):
        owner = self.owner()
        if owner is not None:
            setattr(owner, self.attr, [h for h in getattr(owner, self.attr) or () if h is not self.item] or None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def accumulator(t):
    """The AccumulateGrad node of a leaf that requires grad (kept by the leaf)."""
    ext = t._ext
    if ext is not None:
        acc = ext.get("acc")
        if acc is not None:
            return acc
    else:
        ext = t._ext = {}
    acc = ext["acc"] = AccumulateGrad(t)
    return acc


def edge_of(t):
    """(node, output index) through which gradient reaches ``t``."""
    fn = t.grad_fn
    if fn is not None:
        return fn, t._ext.get("out_idx", 0) if t._ext is not None else 0
    return accumulator(t), 0


def _fit(g, meta):
    """A gradient summed back to its input's shape (undoing broadcasting) and cast to its dtype."""
    if g is None or meta is None:
        return None
    shape, dtype, _ = meta
    data = g._data
    if data.shape != shape:
        g = g.sum_to_size(shape)
    if data.dtype != dtype:
        g = (g.real if data.dtype.kind == "c" and dtype.kind != "c" else g).to(FROM_NP[dtype])
    return g


def _zeros(meta):
    shape, dtype, device = meta
    return ember.zeros(shape, dtype=FROM_NP[dtype], device=device)


def ones_like(data):
    """The implicit gradient of a one-element output: ones of its shape and dtype."""
    if type(data) is ndarray and not data.ndim:
        return Tensor._wrap(np.array(1, data.dtype))  # (np.ones costs 7x more for a 0-d array)
    return Tensor._wrap(xp_of(data).ones(data.shape, data.dtype))


def scalar_backward(t, retain_graph, create_graph):
    """``t.backward()`` for a one-element ``t``: its gradient, ones, into the leaves of its graph."""
    data = t._data
    if data.size != 1:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    run_backward((t,), (ones_like(data),), create_graph if retain_graph is None else retain_graph, create_graph)


def run_backward(roots, grad_roots, retain_graph=False, create_graph=False, inputs=None, allow_unused=False,
                 accumulate=True):
    """Backpropagate ``grad_roots`` from the ``roots`` tensors.

    With ``accumulate`` the leaves' ``.grad`` are updated (``inputs`` limits which); without it the
    gradients reaching ``inputs`` are returned instead (``autograd.grad``).
    """
    buffers = {}  # node -> [gradient of each output]
    stack = []  # (loops, not comprehensions, here and below: they cost more than tiny graphs' VJPs)
    for t, g in zip(roots, grad_roots):
        if not t._rg:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        node, idx = edge_of(t)
        _add(buffers, node, idx, g)
        if node not in stack:
            stack.append(node)
    targets = {}
    if inputs is not None:
        for i, t in enumerate(inputs):
            if not t._rg:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets.setdefault(edge_of(t), []).append(i)
    # dependency counts of every node reachable from the roots
    deps, roots_set = {}, set(stack)
    order = stack[:] if inputs is not None else None  # (what _needed walks)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None:
                if nxt in deps:
                    deps[nxt] += 1
                else:
                    deps[nxt] = 1
                    if nxt not in roots_set:
                        stack.append(nxt)
                        if order is not None:
                            order.append(nxt)
    needed = _needed(order, {e[0] for e in targets}) if inputs is not None else None
    captured = [None] * len(inputs) if inputs is not None else None
    ready = []
    for n in roots_set:
        if n not in deps:
            ready.append((-n.seq, id(n), n))
    if len(ready) > 1:
        heapify(ready)
    mode, task = _MODE, _TASK
    enabled, mode.enabled = mode.enabled, create_graph
    callbacks = []
    outer, task.callbacks = task.callbacks, callbacks
    # NumPy's floating-point warnings off, as in every op (ember._quiet): VJPs write some gradients with NumPy
    # directly (an inf gradient is routine under a GradScaler)
    quiet = _quiet.STATE.set(_quiet.IGNORE)
    try:
        while ready:
            node = heappop(ready)[2]
            outs = buffers.pop(node, None) or [None] * len(node._out_meta)
            if node._pre_hooks:
                outs = _run_pre_hooks(node, outs)
            if targets:
                for k, g in enumerate(outs):
                    for pos in targets.get((node, k), ()):
                        captured[pos] = g
            if type(node) is AccumulateGrad:
                if accumulate and outs[0] is not None and (inputs is None or (node, 0) in targets):
                    node.accumulate(outs[0], create_graph)
                continue
            if needed is not None and node not in needed:
                continue
            n_out = len(outs)
            if n_out == 1 and outs[0] is not None:
                # (hooks read outs after the VJP; stand-in contexts take no donation)
                if not create_graph and node._hooks is None and node._ctx is None and _unshared(outs[0], 3):
                    node.grad_donated = True
                    try:  # (_apply inlined: no hooks here)
                        next_grads = node.apply(outs) if not _ANOMALY.enabled else \
                            anomaly_mode.checked_apply(node, outs)
                    finally:
                        node.grad_donated = False
                elif node._hooks is None and not _ANOMALY.enabled:
                    next_grads = node.apply(outs)
                else:
                    next_grads = _apply(node, outs)
            elif n_out > 1 and all(g is not None for g in outs):  # (`None in outs` would call Tensor.__eq__)
                next_grads = _apply(node, outs)
            elif n_out == 1 or all(g is None for g in outs):
                next_grads = [None] * len(node.next_functions)
            else:
                if node.materialize:
                    # (zeros for float outputs: not for integer ones, nor for outputs the op declares constant,
                    # whose metadata is None)
                    outs = [g if g is not None or m is None or m[1].kind not in "fcV" else _zeros(m)
                            for g, m in zip(outs, node._out_meta)]
                next_grads = _apply(node, outs)
            if not retain_graph:
                if node._ctx is None:  # (release inlined)
                    node.free()
                else:
                    node.release()
            for (nxt, idx), g in zip(node.next_functions, next_grads):
                if nxt is None:
                    continue
                if g is not None:
                    _add(buffers, nxt, idx, g)
                left = deps[nxt] = deps[nxt] - 1
                if not left:
                    heappush(ready, (-nxt.seq, id(nxt), nxt))
            next_grads = g = None  # (so a leaf may take a gradient only the engine holds, see _unshared)
        for callback in callbacks:  # (the list may grow meanwhile: callbacks queued by callbacks run too)
            callback()
    finally:
        _quiet.STATE.reset(quiet)
        mode.enabled = enabled
        task.callbacks = outer
    if inputs is not None:
        if not allow_unused and any(g is None for g in captured):
            raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                               "Set allow_unused=True if this is the desired behavior.")
        return captured
    return None


def _apply(node, outs):
    grads = node.apply(outs) if not _ANOMALY.enabled else anomaly_mode.checked_apply(node, outs)
    for hook in node._hooks or ():
        new = hook(grads, outs)
        if new is not None:
            grads = list(new)
    return grads


def _run_pre_hooks(node, outs):
    for index, fn in node._pre_hooks or ():
        if index is None:
            new = fn(tuple(outs))
            if new is not None:
                outs = list(new)
        elif outs[index] is not None:
            new = fn(outs[index])
            if new is not None:
                outs[index] = new
    return outs


def _add(buffers, node, idx, g):
    slot = buffers.get(node)
    if slot is None:
        slot = buffers[node] = [None] * len(node._out_meta)
        slot[idx] = g
    else:
        have = slot[idx]
        slot[idx] = g if have is None else _sum(have, g)


def _sum(a, b):
    """Two gradients of one output (same shape and dtype: both were fitted to it): a plain array add when
    no graph is being built and the dtype needs no rounding through float32 (0-d arrays add to NumPy scalars)."""
    if type(a._data) is _Meta or type(b._data) is _Meta:  # sparse gradients (embeddings'): summed as tensors
        return b + a if a.is_sparse and not b.is_sparse else a + b
    d = a._data.dtype
    if a._rg or b._rg or d is not b._data.dtype or d.kind not in "fc" or d.itemsize < 4 or not a._data.ndim:
        return a + b
    a, b = a._data, b._data
    return Tensor._wrap(ufunc(np.add, a, b) if type(a) is ndarray and a.size >= SPLIT_MIN else a + b)


def _needed(order, target_nodes):
    """Nodes from which some target node is reachable (only those must run for autograd.grad)."""
    needed = set(target_nodes)
    changed = True
    while changed:
        changed = False
        for node in order:
            if node not in needed and any(n in needed for n, _ in node.next_functions if n is not None):
                needed.add(node)
                changed = True
    return needed


def current_traceback():
    return "".join(traceback.format_stack()[:-3])
