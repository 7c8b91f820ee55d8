"""Collation: default_collate turns a list of samples into a batch (tensors stacked along a new first
dimension, numbers into tensors, containers collated per field); default_convert turns one sample's
numpy data into tensors. Both keep PyTorch's type rules and messages; the tensors are the backend's.

`collate(batch, collate_fn_map=...)` is PyTorch's extension point: the map sends an element type
(or a tuple of types) to the function that collates a batch of it.
"""

import collections.abc
import copy
import re

import numpy as np

from ...._factories import as_tensor, tensor
from ...._methods import FUNCTIONS
from ...._prims import Tensor
from fastgrad._types import float64

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

# numpy dtypes of strings and objects (dtype.str such as '<U3', '|S2', '|O'): no tensor holds them
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _rebuilt_mapping(mapping, values):
    """`values` ({key: value}) in a mapping of mapping's type: a copy updated where the type is
    mutable (it may carry more than its items), else the type built from a dict, else a dict."""
    try:
        if isinstance(mapping, collections.abc.MutableMapping):
            clone = copy.copy(mapping)
            clone.update(values)
            return clone
        return type(mapping)(values)
    except TypeError:  # a type without copy()/update() or a constructor from a dict
        return values


def _rebuilt_sequence(sequence, values):
    """`values` (a list) in a sequence of sequence's type, as _rebuilt_mapping does for mappings."""
    try:
        if isinstance(sequence, collections.abc.MutableSequence):
            clone = copy.copy(sequence)
            for i, value in enumerate(values):
                clone[i] = value
            return clone
        return type(sequence)(values)
    except TypeError:  # a type without item assignment or a constructor from a list (range, ...)
        return values


def _is_namedtuple(value):
    return isinstance(value, tuple) and hasattr(value, "_fields")


def default_convert(data):
    """numpy arrays and scalars in `data` (through mappings and sequences) as tensors; the rest as is."""
    data_type = type(data)
    if isinstance(data, Tensor):
        return data
    if data_type.__module__ == "numpy" and data_type.__name__ not in ("str_", "string_"):
        if data_type.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuilt_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return data_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch's
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map=None):
    """The batch's elements collated by the map's function for their type (looked up exactly, then
    by isinstance in the map's order), or field by field for mappings, named tuples and sequences."""
    elem = batch[0]
    if collate_fn_map is not None:
        if type(elem) in collate_fn_map:
            return collate_fn_map[type(elem)](batch, collate_fn_map=collate_fn_map)
        for collate_type, collate_fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return collate_fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuilt_mapping(
            elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        )
    if _is_namedtuple(elem):
        return type(elem)(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields  # a list, as PyTorch's
        return _rebuilt_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(type(elem)))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return FUNCTIONS["stack"](batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    dtype = batch[0].dtype
    if np_str_obj_array_pattern.search(dtype.str):
        raise TypeError(default_collate_err_msg_format.format(dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    return tensor(batch, dtype=float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(batch)  # int64, or bool for Python bools


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,  # and its subclasses (memmap)
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,  # numpy's scalars less its strings
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """A batch of samples as one sample of batches: tensors and numpy arrays stacked, Python ints
    as int64 and floats as float64 tensors, strings kept in a list, containers collated per field."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
