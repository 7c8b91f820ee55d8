"""Samplers: the orders (and batches) of dataset indices a DataLoader loads, as torch.utils.data's."""

import itertools
import typing

from ..._factories import as_tensor, empty
from ..._sampling import multinomial, randint, randperm
from ...random import Generator
from fastgrad._types import float64, int64

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

_T_co = typing.TypeVar("_T_co", covariant=True)
_REPLACEMENT_CHUNK = 32  # draws with replacement come in chunks of this many, as PyTorch's


class Sampler(typing.Generic[_T_co]):
    """An iterable of indices (or of lists of indices); __len__ is optional, as for Dataset."""

    def __iter__(self):
        raise NotImplementedError


def _check_positive_int(value, name):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random permutation of the indices (repeated to num_samples), or num_samples independent
    draws with replacement. Without a generator each iteration seeds a fresh one from the default."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        # read on use: the dataset may grow or shrink between epochs
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(int(empty((), dtype=int64).random_().item()))
        if self.replacement:
            chunks, rest = divmod(self.num_samples, _REPLACEMENT_CHUNK)
            for size in [_REPLACEMENT_CHUNK] * chunks + [rest]:
                yield from randint(high=n, size=(size,), dtype=int64, generator=generator).tolist()
        else:
            rounds, rest = divmod(self.num_samples, n)
            for _ in range(rounds):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[:rest]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """num_samples indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int(num_samples, "num_samples")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = as_tensor(weights, dtype=float64)
        if weights.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        draws = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from draws.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler[list]):
    """The sampler's indices in lists of batch_size (the last one shorter, or dropped)."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int(batch_size, "batch_size")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
