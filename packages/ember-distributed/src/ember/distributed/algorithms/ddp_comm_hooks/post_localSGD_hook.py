"""The post-local SGD communication hook: DDP averages gradients over the whole group for the first
``start_localSGD_iter`` iterations, then only within a subgroup (intra-node by default), or not at all; a model
averager (``algorithms.model_averaging``) run after the optimizer step then averages the model now and then."""
import logging

import ember

from . import default_hooks as default

logger = logging.getLogger(__name__)

__all__ = ["PostLocalSGDState", "post_localSGD_hook"]


class PostLocalSGDState:
    """``process_group``: the group of the warm-up averaging (None: the default group); ``subgroup``: that of the
    later averaging (None: ``dist.new_subgroups()``, one per node, made on first use); ``post_local_gradient_allreduce``
    False: no gradient averaging at all after the warm-up. ``iter`` counts the iterations of the warm-up."""

    __slots__ = ["process_group", "subgroup", "start_localSGD_iter", "post_local_gradient_allreduce", "iter"]

    def __init__(self, process_group, subgroup, start_localSGD_iter, post_local_gradient_allreduce=True):
        logger.info("Local SGD will be started after %s iterations", start_localSGD_iter)
        self.process_group = process_group
        self.subgroup = subgroup
        self.start_localSGD_iter = start_localSGD_iter
        self.post_local_gradient_allreduce = post_local_gradient_allreduce
        self.iter = 0

    def maybe_increase_iter(self, bucket):
        """Count an iteration at its last bucket."""
        if bucket.is_last():
            self.iter += 1
        if self.iter == self.start_localSGD_iter:
            logger.info("Start to apply local SGD after %s iterations.", self.iter)


@default._collectives_in_call
def post_localSGD_hook(state, bucket):
    """Average the bucket over ``state.process_group`` during the warm-up, then over ``state.subgroup`` (or leave it
    as it is when ``post_local_gradient_allreduce`` is False); a Future of the bucket's buffer."""
    import ember.distributed as dist

    buffer = bucket.buffer()
    if state.iter < state.start_localSGD_iter:
        state.maybe_increase_iter(bucket)
        return default._allreduce_fut(state.process_group if state.process_group is not None else dist.group.WORLD,
                                      buffer)
    if not state.post_local_gradient_allreduce:
        fut = ember.futures.Future()
        fut.set_result(buffer)
        return fut
    if state.subgroup is None:
        state.subgroup, _ = dist.new_subgroups()
    return default._allreduce_fut(state.subgroup, buffer)
