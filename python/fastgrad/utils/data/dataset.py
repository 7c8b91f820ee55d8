"""Datasets: torch.utils.data's map-style and iterable-style datasets, their combinations and
random_split, with PyTorch's checks and messages."""

import bisect
import collections.abc
import itertools
import math
import typing
import warnings

from ...random import default_generator
from ..._sampling import randperm

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]


_T_co = typing.TypeVar("_T_co", covariant=True)


class Dataset(typing.Generic[_T_co]):
    """A map from keys to samples: subclasses define __getitem__ (and usually __len__, which the
    samplers read). `a + b` concatenates. Generic as PyTorch's: `Dataset[Tensor]` annotates."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    # No default __len__: list() and the like fall back to iteration on a missing one, not on one
    # that raises.

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset[_T_co], collections.abc.Iterable):
    """A stream of samples: subclasses define __iter__ (abstract, as in PyTorch). `a + b` chains."""

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for each tensor t): the tensors share their first dimension."""

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != tensor.size(0) for tensor in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


def _common_length(datasets):
    length = len(datasets[0])
    if any(len(dataset) != length for dataset in datasets):
        raise ValueError("Size mismatch between datasets")
    return length


class StackDataset(Dataset):
    """Sample i is (d[i] for each dataset d), or {name: d[i]} for datasets given by keyword."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or"
                "``dict``- (via ``kwargs``) like input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets = args or kwargs
        self._length = _common_length(list(self.datasets.values()) if kwargs else args)

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {name: dataset[index] for name, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices):
        """A batch of samples, each part fetched by its dataset's __getitems__ where it has one."""
        named = isinstance(self.datasets, dict)
        parts = self.datasets.items() if named else enumerate(self.datasets)
        columns = {key: _fetch_many(dataset, indices) for key, dataset in parts}
        if named:
            return [{key: column[i] for key, column in columns.items()} for i in range(len(indices))]
        return [tuple(column[i] for column in columns.values()) for i in range(len(indices))]

    def __len__(self):
        return self._length


def _fetch_many(dataset, indices):
    if not callable(getattr(dataset, "__getitems__", None)):
        return [dataset[i] for i in indices]
    items = dataset.__getitems__(indices)
    if len(items) != len(indices):
        raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}")
    return items


class ConcatDataset(Dataset):
    """The datasets one after the other; cumulative_sizes[k] is where dataset k ends."""

    @staticmethod
    def cumsum(sequence):
        return list(itertools.accumulate(len(dataset) for dataset in sequence))

    def __init__(self, datasets):
        super().__init__()
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(dataset, IterableDataset) for dataset in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]

    @property
    def cummulative_sizes(self):
        warnings.warn("`cummulative_sizes` attribute is renamed to `cumulative_sizes`", FutureWarning, stacklevel=2)
        return self.cumulative_sizes


def _only_iterable(dataset):
    if not isinstance(dataset, IterableDataset):
        raise AssertionError("ChainDataset only supports IterableDataset")
    return dataset


class ChainDataset(IterableDataset):
    """The iterable datasets' streams one after the other."""

    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            yield from _only_iterable(dataset)

    def __len__(self):
        return sum(len(_only_iterable(dataset)) for dataset in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        # The DataLoader fetches batches through __getitems__: one that bypasses an overridden
        # __getitem__ would load other samples than the subclass means.
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. "
                "When subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]"
            )

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        wanted = [self.indices[i] for i in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__(wanted)
        return [self.dataset[i] for i in wanted]

    def __len__(self):
        return len(self.indices)


def _lengths_of_fractions(fractions, total):
    """floor(fraction * total) each, then the remainder handed out one by one from the first split on."""
    lengths = []
    for i, fraction in enumerate(fractions):
        if fraction < 0 or fraction > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(total * fraction))
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=default_generator):
    """Subsets of the given lengths (or fractions of len(dataset) summing to 1) over one random
    permutation of the dataset's indices."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_of_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, indices[end - length : end]) for end, length in zip(ends, lengths)]
