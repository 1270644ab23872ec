"""Packed sequences for recurrent layers: packing padded batches, padding packed ones, and lists of sequences."""
import collections

import numpy as np

import ember

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence(collections.namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices",
                                                                 "unsorted_indices"])):
    """Variable-length sequences stored time step by time step: ``data`` holds, for each step t, the
    ``batch_sizes[t]`` sequences (sorted longest first) still running."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # (data, batch_sizes) given as one tuple
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _map(self, fn):
        """A copy with ``fn`` applied to ``data`` (indices follow ``data``'s device; batch_sizes stays on the CPU)."""
        data = fn(self.data)
        if data is self.data:
            return self
        def move(t):
            return t if t is None else t.to(data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def to(self, *args, **kwargs):
        return self._map(lambda d: d.to(*args, **kwargs))

    def cuda(self, *args, **kwargs):
        return self._map(lambda d: d.cuda(*args, **kwargs))

    def cpu(self):
        return self._map(lambda d: d.cpu())

    def double(self):
        return self.to(dtype=ember.float64)

    def float(self):
        return self.to(dtype=ember.float32)

    def half(self):
        return self.to(dtype=ember.float16)

    def long(self):
        return self.to(dtype=ember.int64)

    def int(self):
        return self.to(dtype=ember.int32)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def invert_permutation(permutation):
    """The permutation that undoes ``permutation`` (None stays None)."""
    if permutation is None:
        return None
    out = ember.empty_like(permutation)
    out[permutation] = ember.arange(permutation.numel(), device=permutation.device)
    return out


def _lengths_array(lengths):
    return np.asarray(lengths.tolist() if isinstance(lengths, ember.Tensor) else list(lengths), dtype=np.int64)


def _time_index(lengths, T, offsets):
    """(T, B) row of every (step, sequence) in the packed data; -1 past a sequence's end."""
    t = np.arange(T)[:, None]
    return np.where(t < lengths[None, :], offsets[:T, None] + np.arange(len(lengths))[None, :], -1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded (T, B, *) (or batch-first) tensor of sequences with the given lengths."""
    lens = _lengths_array(lengths)
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = ember.from_numpy(order).to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if lens.size and lens.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that is "
                           "<= 0")
    if batch_first:
        input = input.transpose(0, 1)
    T = int(lens.max()) if lens.size else 0
    if T > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to {T}, but got {input.shape[0]}")
    batch_sizes = (lens[None, :] > np.arange(T)[:, None]).sum(1)
    valid = ember.from_numpy(np.arange(T)[:, None] < lens[None, :]).to(input.device)
    data = input[:T][valid]  # time-major order of the valid steps is exactly the packed order
    return PackedSequence(data, ember.from_numpy(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Padded (T, B, *) tensor (or batch-first) and the lengths of a PackedSequence; ``total_length`` pads T."""
    data, batch_sizes = sequence.data, _lengths_array(sequence.batch_sizes)
    T = len(batch_sizes)
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {T}")
    else:
        total_length = T
    B = int(batch_sizes[0]) if T else 0
    lens = (batch_sizes[None, :] > np.arange(B)[:, None]).sum(1)
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    index = _time_index(lens, T, offsets)
    index = np.concatenate([index, np.full((total_length - T, B), -1, dtype=index.dtype)])
    # one padding row appended to the data: padded positions gather it, so the gradient reaches only real steps
    pad_row = ember.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    rows = ember.cat([data, pad_row])
    padded = rows[ember.from_numpy(np.where(index < 0, data.shape[0], index)).to(data.device)]
    lengths = ember.from_numpy(lens)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of different lengths (L_i, *) into (T, B, *) (or batch-first), padded on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, ember.Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    T = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:  # one pad per sequence: a loop over the list the caller gave, not over elements
        extra = [0, 0] * (s.dim() - 1) + ([T - s.shape[0], 0] if padding_side == "left" else [0, T - s.shape[0]])
        padded.append(ember.constant_pad_nd(s, extra, padding_value) if T > s.shape[0] else s)
    return ember.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences, each cut to its length, of a padded batch."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(n)] for seq, n in zip(padded_sequences, _lengths_array(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
