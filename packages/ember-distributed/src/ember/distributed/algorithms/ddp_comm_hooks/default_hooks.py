"""DDP communication hooks: plain averaging, and averaging in half precision (float16 / bfloat16)."""
import ember

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper",
           "bf16_compress_wrapper"]


def _dist():
    import ember.distributed as dist
    return dist


def _collectives_in_call(hook):
    """Mark ``hook`` as issuing every collective during the call itself (none from future callbacks): DDP may then
    call the next bucket's hook before this one's future completes, and the collectives still come in the same
    order on every rank."""
    hook._ember_collectives_in_call = True
    return hook


def _allreduce_fut(process_group, tensor):
    """Average ``tensor`` over the group in place (divided first, then summed); a Future of it."""
    group = process_group if process_group is not None else _dist().group.WORLD
    tensor.div_(group.size())
    return _dist().all_reduce(tensor, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])


@_collectives_in_call
def allreduce_hook(process_group, bucket):
    """Average the bucket over the group, as DDP does without a hook."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    group = process_group if process_group is not None else _dist().group.WORLD
    buffer = bucket[0] if isinstance(bucket, tuple) else bucket.buffer()
    compressed = buffer.to(dtype).div_(group.size())

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer
    return _dist().all_reduce(compressed, group=group, async_op=True).get_future().then(decompress)


@_collectives_in_call
def fp16_compress_hook(process_group, bucket):
    """Average the bucket in float16: cast, divided by the group's size, summed, cast back."""
    return _compress_hook(ember.float16, process_group, bucket)


@_collectives_in_call
def bf16_compress_hook(process_group, bucket):
    """Average the bucket in bfloat16: cast, divided by the group's size, summed, cast back."""
    return _compress_hook(ember.bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook):
    def wrapped(hook_state, bucket):
        bucket.set_buffer(bucket.buffer().to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(fut):
            out = bucket.buffer()
            out.copy_(fut.value())
            return out
        return fut.then(decompress)
    if getattr(hook, "_ember_collectives_in_call", False):
        _collectives_in_call(wrapped)
    return wrapped


def fp16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to float16; its result cast back to the bucket's dtype."""
    wrapped = _compress_wrapper(ember.float16, hook)
    wrapped.__name__ = "fp16_compress_wrapper_hook"
    return wrapped


def bf16_compress_wrapper(hook):
    """``hook`` run on the bucket cast to bfloat16; its result cast back to the bucket's dtype."""
    wrapped = _compress_wrapper(ember.bfloat16, hook)
    wrapped.__name__ = "bf16_compress_wrapper_hook"
    return wrapped
