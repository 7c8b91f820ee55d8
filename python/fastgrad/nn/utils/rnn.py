"""torch.nn.utils.rnn: pad_sequence."""

import collections.abc

from ..._factories import full
from ..._grad_mode import no_grad


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
