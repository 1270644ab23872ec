"""ember.distributed.autograd: backward passes across RPC workers, as torch.distributed.autograd (FAST mode).

    with dist_autograd.context() as context_id:
        loss = rpc.rpc_sync("worker1", ember.add, args=(t1, t2)).sum()
        dist_autograd.backward(context_id, [loss])
        grads = dist_autograd.get_gradients(context_id)   # {t1: ..., t2: ...}

Gradients are accumulated in the context (``get_gradients``), not in the tensors' ``.grad``."""
import ember

from . import _context

__all__ = ["backward", "context", "get_gradients", "is_available"]


def is_available():
    """True: ember's distributed autograd is installed."""
    return True


class context:  # noqa: N801 - torch's name
    """A distributed autograd context for the forward and backward passes inside its ``with`` block; entering
    gives its id. Leaving it forgets what it recorded on every worker it reached."""

    def __enter__(self):
        self._ctx = _context.new_context()
        return self._ctx.id

    def __exit__(self, *exc):
        _context.release(self._ctx)
        return False


def backward(context_id, roots, retain_graph=False):
    """Backpropagate from ``roots`` (scalar tensors) through every worker the context's RPCs reached; returns
    when all are done. The graphs are kept until the context ends (``retain_graph`` is accepted for
    compatibility)."""
    ctx = _context.lookup(context_id)
    if isinstance(roots, ember.Tensor):
        roots = [roots]
    for r in roots:
        if not isinstance(r, ember.Tensor):
            raise TypeError(f"backward: roots must be tensors, got {type(r).__name__}")
        if r.numel() != 1:
            raise RuntimeError("Gradients can be computed only for scalar roots, got a tensor of shape "
                               f"{tuple(r.shape)}")
        if not r.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    _context.local_pass(ctx, list(roots), [ember.ones_like(r) for r in roots]).wait()


def get_gradients(context_id):
    """{tensor: gradient} accumulated on this worker in the context."""
    ctx = _context.lookup(context_id)
    with ctx.lock:
        return dict(ctx.grads)


def _current_context():
    """The context entered on this thread (RuntimeError when none)."""
    ctx = _context.current()
    if ctx is None:
        raise RuntimeError("Current thread doesn't have a valid autograd context. Please wrap your code using: "
                           "`with ember.distributed.autograd.context() as context_id` to generate a valid context")
    return ctx
