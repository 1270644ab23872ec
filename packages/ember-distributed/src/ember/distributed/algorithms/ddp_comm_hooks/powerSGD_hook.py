"""PowerSGD gradient compression (Vogels et al., NeurIPS 2019) as a DDP communication hook.

Each 2-d view of a gradient M (n x m) worth compressing is approximated by P Q^T of rank r: P = M Q (all-reduced,
orthogonalised), Q = M^T P (all-reduced, averaged); M becomes P Q^T. Vectors and small matrices are averaged as
they are. The error of the approximation is kept and added to the next iteration's gradient (error feedback), and
Q is reused as the next iteration's starting point (warm start). The first ``start_powerSGD_iter`` iterations
average plainly. Random starting matrices come from ember's generator seeded as torch's hook seeds its own, so a
run gives torch's numbers.

The collectives after the first are issued from the completion of the one before (never waited for inside a
callback), each bucket's chain finishing before DDP starts the next bucket's, so every rank issues them in the same
order.
"""
import logging
import math
from collections import defaultdict

import numpy as np

import ember

from . import default_hooks as default

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]

logger = logging.getLogger(__name__)


def _dist():
    import ember.distributed as dist
    return dist


def _orthogonalize(matrices, epsilon=0):
    """Orthonormalise the columns of each matrix of the batch ``matrices`` (b x n x r, r <= n) in place:
    Gram-Schmidt for rank 1 or 2 and half precision, else QR."""
    if not (matrices.dim() == 3 and matrices.shape[2] <= matrices.shape[1]):
        raise AssertionError
    rank = matrices.shape[2]
    if rank <= 2 or matrices.dtype in (ember.float16, ember.bfloat16):
        _orthogonalize_gram_schmidt(matrices, epsilon)
    else:
        ember.linalg.qr(matrices, out=(matrices, ember.empty(matrices.shape[0], rank, rank, device=matrices.device,
                                                             dtype=matrices.dtype)))


def _orthogonalize_gram_schmidt(matrices, epsilon=0):
    num_cols = matrices.shape[2]
    for i in range(num_cols):
        col = matrices[:, :, i:i + 1]
        if epsilon == 0:
            col /= ember.norm(col, dim=1, keepdim=True)
        else:
            col /= ember.norm(col, dim=1, keepdim=True) + epsilon
        if i + 1 < num_cols:
            rest = matrices[:, :, i + 1:]
            rest -= ember.sum(col * rest, dim=1, keepdim=True) * col


def _should_compress(num_rows, num_cols, matrix_approximation_rank, min_compression_rate):
    """(whether an n x m matrix is worth compressing at this rank, its size, its compressed size)."""
    uncompressed = num_rows * num_cols
    compressed = (num_rows + num_cols) * matrix_approximation_rank
    return compressed * min_compression_rate < uncompressed, uncompressed, compressed


def _report_compression_stats(bucket, state):
    if bucket.is_last() and state.iter >= state.next_stats_report:
        stats = state.compression_stats()
        logger.info("Compression stats: iter %s, total before compression %s, total after compression %s, rate %s",
                    state.iter, stats[1], stats[2], stats[0])
        state.next_stats_report = state.iter + state.compression_stats_logging_frequency


class PowerSGDState:
    """The hook's configuration and memory across iterations: the error feedback, P and Q per bucket, the
    iteration count and the compression statistics. Arguments as torch's PowerSGDState."""

    __slots__ = ["process_group", "matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                 "orthogonalization_epsilon", "use_error_feedback", "warm_start", "batch_tensors_with_same_shape",
                 "rng", "error_dict", "p_memory_dict", "q_memory_dict", "iter", "total_numel_before_compression",
                 "total_numel_after_compression", "compression_stats_logging_frequency", "next_stats_report"]

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000, min_compression_rate=2,
                 use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape=False):
        logger.info("PowerSGD config: matrix_approximation_rank = %s; start_powerSGD_iter = %s; min_compression_rate "
                    "= %s; orthogonalization_epsilon = %s; use_error_feedback = %s; warm_start = %s; random_seed = %s; "
                    "compression_stats_logging_frequency = %s; batch_tensors_with_same_shape = %s",
                    matrix_approximation_rank, start_powerSGD_iter, min_compression_rate, orthogonalization_epsilon,
                    use_error_feedback, warm_start, random_seed, compression_stats_logging_frequency,
                    batch_tensors_with_same_shape)
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, "
                             "because PowerSGD can only be applied after the first two iterations in DDP.")
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)  # (seeds of the random starting matrices, as torch's)
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def __getstate__(self):
        logger.warning("NOTE: Process group is not serializable and excluded from a saved state.")
        return {slot: getattr(self, slot) for slot in self.__slots__ if slot != "process_group"}

    def __setstate__(self, state):
        self.process_group = _dist().distributed_c10d._get_default_group()
        logger.warning("NOTE: Process group will be set to a default group (i.e. the world size). If a different "
                       "group is desired, please set `self.process_group` after PowerSGD state is loaded.")
        for slot, value in state.items():
            setattr(self, slot, value)

    def maybe_increase_iter(self, bucket):
        """Count an iteration at its last bucket."""
        if bucket.is_last():
            self.iter += 1
        if self.iter == self.start_powerSGD_iter:
            logger.info("Start to apply PowerSGD after %s iterations.", self.iter)

    def compression_stats(self):
        """(compression rate, elements before compression, elements after compression) so far."""
        rate = self.total_numel_before_compression / self.total_numel_after_compression \
            if self.total_numel_after_compression > 0 else 0
        return rate, self.total_numel_before_compression, self.total_numel_after_compression


def _random_fill(tensors, seed, dtype):
    """Fill each tensor with standard normals from a generator seeded with ``seed`` (the global stream left as it
    was), in order."""
    with ember.random.fork_rng(devices=[]):
        ember.manual_seed(seed)
        for t in tensors:
            t.copy_(ember.randn(*t.shape, device="cpu", dtype=dtype))


class _Chain:
    """Collectives issued one after another from their completions: ``step(fn)`` runs ``fn(value)`` when the
    previous collective completes; the last step's value completes ``future``; an error fails it."""

    def __init__(self):
        from ember.distributed._work import Future
        self.future = Future()

    def then(self, fut, fn):
        def run(done):
            try:
                fn(done.value())
            except BaseException as e:  # noqa: BLE001 - reported through the hook's future, not the comm thread
                self.future.set_exception(e if isinstance(e, RuntimeError) else RuntimeError(f"{type(e).__name__}: "
                                                                                             f"{e}"))
        fut.add_done_callback(run)


def _all_reduce(tensor, group):
    return _dist().all_reduce(tensor, group=group, async_op=True).get_future()


def powerSGD_hook(state, bucket):
    """Compress each bucket's matrices to rank ``state.matrix_approximation_rank`` (after
    ``state.start_powerSGD_iter`` plain iterations); a Future of the bucket's averaged (approximated) gradients."""
    group = state.process_group if state.process_group is not None else _dist().group.WORLD
    world_size = group.size()
    input_tensor = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return default._allreduce_fut(group, input_tensor)

    device, dtype = input_tensor.device, input_tensor.dtype
    bucket_index = bucket.index()
    input_tensor_cp = None
    total_length = input_tensor.shape[0]
    if state.use_error_feedback:
        if bucket_index in state.error_dict:
            input_tensor.add_(state.error_dict[bucket_index])
        else:
            logger.info("A zero tensor of length %s that represents local error is created.", total_length)
            state.error_dict[bucket_index] = ember.zeros(total_length, device=device, dtype=dtype)
        input_tensor_cp = input_tensor.detach().clone()

    tensors = bucket.gradients()
    to_compress, uncompressed = [], []
    total_ps = total_qs = 0
    for tensor in tensors:
        matrix = tensor.view(tensor.shape[0], -1)
        n, m = matrix.shape
        rank = min(n, m, state.matrix_approximation_rank)
        worth, before, after = _should_compress(n, m, rank, state.min_compression_rate)
        state.total_numel_before_compression += before
        if worth:
            to_compress.append(matrix)
            total_ps += n * rank
            total_qs += m * rank
            state.total_numel_after_compression += after
        else:
            uncompressed.append(tensor)
            state.total_numel_after_compression += before
    _report_compression_stats(bucket, state)
    uncompressed_memory = ember.cat([t.view(-1) for t in uncompressed]) if uncompressed else \
        ember.tensor([], device=device, dtype=dtype)

    randomize = False
    if not state.warm_start or bucket_index not in state.p_memory_dict:
        randomize = True
        if state.warm_start:
            logger.info("Allocating contiguous memory of length %s for Ps, and of length %s for Qs, respectively.",
                        total_ps, total_qs)
        state.p_memory_dict[bucket_index] = ember.empty(total_ps, device=device, dtype=dtype)
        state.q_memory_dict[bucket_index] = ember.empty(total_qs, device=device, dtype=dtype)

    by_shape = defaultdict(list)
    for matrix in to_compress:
        by_shape[tuple(matrix.shape)].append(matrix)
    batches = []
    for group_of_shape in by_shape.values():
        if state.batch_tensors_with_same_shape:
            batches.append(group_of_shape[0].unsqueeze(0) if len(group_of_shape) == 1 else ember.stack(group_of_shape))
        else:
            batches.extend(t.unsqueeze(0) for t in group_of_shape)
    ps, qs = [], []
    p_idx = q_idx = 0
    for batch in batches:
        b, n, m = batch.shape
        rank = min(n, m, state.matrix_approximation_rank)
        ps.append(state.p_memory_dict[bucket_index][p_idx:p_idx + b * n * rank].view(b, n, rank))
        qs.append(state.q_memory_dict[bucket_index][q_idx:q_idx + b * m * rank].view(b, m, rank))
        p_idx += b * n * rank
        q_idx += b * m * rank

    if randomize:
        _random_fill(qs, state.rng.randint(1_000_000_000), dtype)
    for q in qs:
        _orthogonalize(q, state.orthogonalization_epsilon)
    for batch, q, p in zip(batches, qs, ps):
        ember.bmm(batch, q, out=p)

    chain = _Chain()

    def after_uncompressed(values):
        memory = values[0].div_(world_size)
        lo = 0
        for t in uncompressed:
            t.copy_(memory[lo:lo + t.numel()].view_as(t))
            lo += t.numel()
        chain.then(_all_reduce(state.p_memory_dict[bucket_index], group), after_ps)

    def after_ps(values):
        state.p_memory_dict[bucket_index] = values[0]
        for p in ps:
            _orthogonalize(p, state.orthogonalization_epsilon)
        for batch, p, q in zip(batches, ps, qs):
            ember.bmm(batch.transpose(1, 2), p, out=q)
        chain.then(_all_reduce(state.q_memory_dict[bucket_index], group), after_qs)

    def after_qs(values):
        state.q_memory_dict[bucket_index] = values[0].div_(world_size)
        for p, q, batch in zip(ps, qs, batches):
            ember.bmm(p, q.transpose(1, 2), out=batch)
        if state.batch_tensors_with_same_shape:
            for batch in batches:
                if batch.shape[0] > 1:
                    for k, original in enumerate(by_shape[tuple(batch.shape[1:])]):
                        original.copy_(batch[k])
        if state.use_error_feedback:
            state.error_dict[bucket_index] = input_tensor_cp - input_tensor
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        chain.future.set_result(input_tensor)

    chain.then(_all_reduce(uncompressed_memory, group), after_uncompressed)
    return chain.future


def batched_powerSGD_hook(state, bucket):
    """PowerSGD on the whole bucket seen as one square matrix (zero-padded): one P and one Q per bucket."""
    group = state.process_group if state.process_group is not None else _dist().group.WORLD
    world_size = group.size()
    input_tensor = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return default._allreduce_fut(group, input_tensor)

    device, dtype = input_tensor.device, input_tensor.dtype
    total_length = input_tensor.shape[0]
    state.total_numel_before_compression += total_length
    side = math.ceil(math.sqrt(total_length))
    state.total_numel_after_compression += side * state.matrix_approximation_rank * 2
    padded = ember.zeros(side * side, device=device, dtype=dtype)
    padded[:total_length] = input_tensor
    _report_compression_stats(bucket, state)
    bucket_index = bucket.index()
    padded_cp = None
    if state.use_error_feedback:
        if bucket_index in state.error_dict:
            padded.add_(state.error_dict[bucket_index])
        else:
            logger.info("A zero tensor of length %s that represents local error is created.", side * side)
            state.error_dict[bucket_index] = ember.zeros(side * side, device=device, dtype=dtype)
        padded_cp = padded.detach().clone()
    matrix = padded.view(side, side)

    if not state.warm_start or bucket_index not in state.p_memory_dict:
        if state.warm_start:
            logger.info("Initializing low-rank tensors P and Q, each of which has a shape of %s x %s.", side,
                        state.matrix_approximation_rank)
        state.p_memory_dict[bucket_index] = ember.empty(side, state.matrix_approximation_rank, device=device,
                                                        dtype=dtype)
        q = ember.empty(side, state.matrix_approximation_rank, dtype=dtype)
        _random_fill([q], state.rng.randint(1_000_000_000), dtype)
        state.q_memory_dict[bucket_index] = q.to(device)
    _orthogonalize(state.q_memory_dict[bucket_index].unsqueeze(0))
    ember.matmul(matrix, state.q_memory_dict[bucket_index], out=state.p_memory_dict[bucket_index])

    chain = _Chain()

    def after_p(values):
        state.p_memory_dict[bucket_index] = values[0]
        _orthogonalize(state.p_memory_dict[bucket_index].unsqueeze(0))
        ember.matmul(matrix.t(), state.p_memory_dict[bucket_index], out=state.q_memory_dict[bucket_index])
        chain.then(_all_reduce(state.q_memory_dict[bucket_index], group), after_q)

    def after_q(values):
        state.q_memory_dict[bucket_index] = values[0].div_(world_size)
        ember.matmul(state.p_memory_dict[bucket_index], state.q_memory_dict[bucket_index].t(), out=matrix)
        if state.use_error_feedback:
            state.error_dict[bucket_index] = padded_cp - padded
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        input_tensor.copy_(padded[:total_length])
        state.maybe_increase_iter(bucket)
        chain.future.set_result(input_tensor)

    chain.then(_all_reduce(state.p_memory_dict[bucket_index], group), after_p)
    return chain.future
