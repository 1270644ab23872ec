"""``ember.utils.checkpoint``: trade compute for memory by recomputing a block in backward.

``checkpoint(fn, *args)`` runs ``fn`` without keeping its intermediate tensors and runs it again
when backward needs them, with the random number generators (CPU, and CUDA for devices the inputs
live on) restored to their state at the first run, so dropout-like randomness replays identically.

* ``use_reentrant=False`` (recommended): the forward is recorded as usual, but under
  ``saved_tensors_hooks`` that drop every saved tensor; the first time backward reads one, ``fn`` is
  rerun and the recomputed values are handed out in the order they were saved. Works with
  ``autograd.grad``, keyword arguments, and inputs that don't require grad (parameters used by ``fn``
  still get gradients).
* ``use_reentrant=True``: ``fn`` runs under no_grad inside a custom Function whose backward reruns it
  with grad and calls ``backward`` on it (a backward inside the backward). Gradients reach only the
  tensor arguments and the leaves ``fn`` uses, accumulated into ``.grad``, so use ``.backward()``.
"""
import contextlib
import warnings

import ember
from ember._tensor import Tensor
from ember.autograd import Function, grad_mode
from ember.autograd.graph import saved_tensors_hooks

__all__ = ["CheckpointError", "checkpoint", "checkpoint_sequential"]


class CheckpointError(RuntimeError):
    """The recomputation in backward did not reproduce the forward pass."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _reentrant_default(use_reentrant):
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: pass use_reentrant explicitly. use_reentrant=False is recommended; "
                      "use_reentrant=True keeps the current default behaviour.", stacklevel=3)
        return True
    return use_reentrant


class _RngState:
    """The CPU generator's state and that of the CUDA generators of the devices ``args`` use."""

    def __init__(self, args):
        self.devices = sorted({t.device.index or 0 for t in args if isinstance(t, Tensor) and t.is_cuda})
        self.cpu = ember.random.get_rng_state()
        self.cuda = [ember.cuda.get_rng_state(d) for d in self.devices]

    @contextlib.contextmanager
    def restored(self):
        with ember.random.fork_rng(devices=self.devices):
            ember.random.set_rng_state(self.cpu)
            for d, state in zip(self.devices, self.cuda):
                ember.cuda.set_rng_state(state, d)
            yield


def _replay(rng):
    return rng.restored() if rng is not None else contextlib.nullcontext()


def _detach_args(args):
    return [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args]


class _Reentrant(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, *args):
        ctx.run = run
        ctx.rng = _RngState(args) if preserve_rng_state else None
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        args = _detach_args([next(saved) if a is None else a for a in ctx.args])
        with _replay(ctx.rng), grad_mode.enable_grad():
            outputs = ctx.run(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in args)


def _non_reentrant(function, args, kwargs, preserve_rng_state, context_fn, determinism_check):
    forward_context, recompute_context = context_fn()
    rng = _RngState(args) if preserve_rng_state else None
    metadata, recomputed = [], []

    def pack(t):
        metadata.append((tuple(t.shape), t.dtype))
        return len(metadata) - 1

    def recompute():
        def keep(t):
            recomputed.append(t.detach())

        with _replay(rng), grad_mode.enable_grad(), recompute_context, saved_tensors_hooks(keep, lambda x: x):
            function(*_detach_args(args), **kwargs)
        if determinism_check != "none":
            again = [(tuple(t.shape), t.dtype) for t in recomputed]
            if again != metadata:
                raise CheckpointError("ember.utils.checkpoint: the recomputation saved different tensors than the "
                                      f"forward pass ({len(metadata)} tensors with shapes/dtypes {metadata} in "
                                      f"forward, {len(again)} with {again} when recomputed). The function must "
                                      "do the same operations when run again.")

    def unpack(index):
        if not recomputed:
            recompute()
        return recomputed[index]

    with saved_tensors_hooks(pack, unpack), forward_context:
        return function(*args, **kwargs)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, with its intermediate tensors recomputed in backward instead of
    kept (see the module docstring). ``context_fn()`` returns two context managers, entered around
    the forward run and the recomputation. ``determinism_check="none"`` skips comparing the shapes
    and dtypes of the recomputed tensors. ``debug`` and ``early_stop`` are accepted for compatibility
    (ember always recomputes the whole function)."""
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be 'default' or 'none', but got {determinism_check!r}")
    if _reentrant_default(use_reentrant):
        if context_fn is not noop_context_fn:
            raise ValueError("Passing context_fn is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        return _Reentrant.apply(function, preserve_rng_state, *args)
    return _non_reentrant(function, args, kwargs, preserve_rng_state, context_fn, determinism_check)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a list, or a module whose children run in order) one after another on
    ``input``, split into ``segments`` chunks, each checkpointed except the last."""
    use_reentrant = _reentrant_default(use_reentrant)
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children"):
        functions = list(functions.children())
    functions = list(functions)

    def run(chunk):
        def forward(x):
            for f in chunk:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    start = 0
    for _ in range(segments - 1):
        input = checkpoint(run(functions[start:start + size]), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
        start += size
    return run(functions[start:])(input)
