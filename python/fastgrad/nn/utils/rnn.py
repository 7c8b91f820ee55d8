"""torch.nn.utils.rnn: PackedSequence (the rows of a batch of sequences of different lengths, step by
step, longest first) and the functions that make and unmake it; pad_sequence."""

import collections.abc
from typing import NamedTuple

from ... import _prims
from ..._factories import arange, as_tensor, empty_like, full, tensor
from ..._grad_mode import no_grad
from fastgrad._types import float16, float32, float64, int32, int64


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks tensors of different lengths (dim 0) into one, padded with padding_value to the longest:
    (longest, batch, *) or, batch_first, (batch, longest, *). Differentiable."""
    if not isinstance(sequences, collections.abc.Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    longest = max(seq.size(0) for seq in sequences)
    first = sequences[0]
    shape = (len(sequences), longest) if batch_first else (longest, len(sequences))
    with no_grad():  # the padding is a constant; the copies below are what is recorded
        out = full(shape + tuple(first.shape[1:]), 0, dtype=first.dtype).fill_(padding_value)
    for i, seq in enumerate(sequences):
        length = seq.size(0)
        start = longest - length if padding_side == "left" else 0
        rows = slice(start, start + length)
        out[(i, rows) if batch_first else (rows, i)] = seq
    return out


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence: the list of sequences, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[: int(length)] for seq, length in zip(padded_sequences, lengths, strict=True)]


class _PackedSequenceFields(NamedTuple):
    data: object
    batch_sizes: object
    sorted_indices: object
    unsorted_indices: object


class PackedSequence(_PackedSequenceFields):
    """data holds the sequences' rows step by step (batch_sizes[t] rows at step t, the sequences
    sorted longest first); sorted_indices is the order they were sorted into, unsorted_indices its
    inverse. Made by pack_padded_sequence / pack_sequence, accepted by the recurrent layers."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return (
            self
            if data is self.data
            else type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)
        )

    def cpu(self):
        return self

    def double(self):
        return self.to(dtype=float64)

    def float(self):
        return self.to(dtype=float32)

    def half(self):
        return self.to(dtype=float16)

    def long(self):
        return self.to(dtype=int64)

    def int(self):
        return self.to(dtype=int32)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a permutation of 0..n-1 (None stays None)."""
    if permutation is None:
        return None
    return empty_like(permutation).scatter_(0, permutation, arange(permutation.numel()))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (time, batch, *) — (batch, time, *) when batch_first — of sequences of
    the given lengths; enforce_sorted=False sorts them longest first (sorted_indices)."""
    lengths = lengths.to(dtype=int64) if hasattr(lengths, "to") else as_tensor(lengths, dtype=int64)
    sorted_indices = None
    if not enforce_sorted:
        lengths, sorted_indices = lengths.sort(descending=True)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    counts = [int(n) for n in lengths.tolist()]
    if lengths.dim() != 1 or len(counts) != input.shape[1]:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(counts)} (batch_size={input.shape[1]})"
        )
    if counts and counts[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if any(a < b for a, b in zip(counts, counts[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
            "you do not need ONNX exportability."
        )
    if counts and counts[0] > input.shape[0]:
        raise RuntimeError(f"lengths has a sequence of length {counts[0]} but the input has {input.shape[0]} steps")
    batch_sizes = [sum(1 for n in counts if n > t) for t in range(counts[0] if counts else 0)]
    data = _prims.cat([input[t, :rows] for t, rows in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: the padded batch (time, batch, *) — (batch, time, *) when
    batch_first — in the original order, and the lengths."""
    batch_sizes = [int(n) for n in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    data = sequence.data
    with no_grad():  # the padding is a constant; the copies below are what is recorded
        padded = full((steps, batch_sizes[0], *data.shape[1:]), 0, dtype=data.dtype).fill_(padding_value)
    for t, part in enumerate(data.split(batch_sizes)):
        padded[t, : batch_sizes[t]] = part
    lengths = tensor([sum(1 for rows in batch_sizes if rows > b) for b in range(batch_sizes[0])], dtype=int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """pad_sequence then pack_padded_sequence."""
    lengths = as_tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The inverse of pack_sequence: the list of sequences."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
