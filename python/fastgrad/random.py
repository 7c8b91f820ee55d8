"""Random number generators: torch.Generator and torch.random's state functions.

Written once for both backends (each gets its own default generator, as each has its own tensors).
Underneath is numpy's PCG64, so a seed gives the same numbers on fastgrad and fastgrad.reference
but not PyTorch's numbers (PyTorch's Mersenne Twister streams are an issue of their own). For the
same reason a state is not PyTorch's 5056-byte uint8 tensor but an int64 tensor of six numbers
(the PCG64 state and increment as signed 64-bit halves, and numpy's buffered 32-bit draw).
"""

import builtins
import contextlib
import operator

import numpy as np

from . import _prims
from fastgrad._types import device as _device, int64

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"]

DEFAULT_SEED = 67280421310721  # a new Generator's seed, as PyTorch's
STATE_SIZE = 6
_WORD = 2**64


class Generator:
    """A stream of random numbers: pass it as `generator=` to any random function; it starts from
    DEFAULT_SEED, and manual_seed() restarts it."""

    def __init__(self, device="cpu"):
        where = _device(device)
        if where.type == "cuda":
            raise RuntimeError("Cannot get CUDA generator without ATen_cuda library.")
        if where.type != "cpu":
            raise RuntimeError(f"Generator(): fastgrad has no generator for device '{where.type}'")
        self.device = _device("cpu")
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        if isinstance(seed, (builtins.bool, builtins.float)) or not hasattr(seed, "__index__"):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = operator.index(seed)
        if not -(2**63) <= seed < _WORD:
            raise ValueError("Overflow when unpacking long long")
        self._initial_seed = seed % _WORD
        self.numpy = np.random.Generator(np.random.PCG64(self._initial_seed))
        return self

    def seed(self):
        """Seeds from the operating system's entropy; returns the seed."""
        self.manual_seed(np.random.SeedSequence().entropy % 2**63)
        return self._initial_seed

    def initial_seed(self):
        return self._initial_seed

    def get_state(self):
        bits = self.numpy.bit_generator.state
        words = [bits["state"]["state"], bits["state"]["inc"]]
        halves = [w >> 64 if i % 2 == 0 else w % _WORD for w in words for i in range(2)]
        values = [h - _WORD if h >= 2**63 else h for h in halves] + [bits["has_uint32"], bits["uinteger"]]
        return _prims.from_values(values, [STATE_SIZE], int64, int64)

    def set_state(self, new_state):
        if not isinstance(new_state, _prims.Tensor):
            raise TypeError(f"expected a fastgrad int64 tensor, but got {type(new_state).__name__}")
        if new_state.dtype is not int64:
            raise TypeError("RNG state must be a fastgrad int64 tensor (as get_state() gives)")
        if new_state.numel() != STATE_SIZE:
            raise RuntimeError(
                f"Expected a generator state of size {STATE_SIZE} but found the input RNG state size to be "
                f"{new_state.numel()}"
            )
        values = [v % _WORD for v in new_state.reshape(-1).tolist()]
        state, inc = (values[0] << 64) | values[1], (values[2] << 64) | values[3]
        self.numpy.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": state, "inc": inc},
            "has_uint32": values[4],
            "uinteger": values[5],
        }
        return self

    def __repr__(self):
        return f"<{__name__.rsplit('.', 1)[0]}.Generator object at {id(self):#x}>"


default_generator = Generator()
default_generator.seed()  # each process starts from fresh entropy, as PyTorch's


def stream(generator):
    """The numpy generator behind a `generator=` argument (None: the default generator)."""
    if generator is None:
        return default_generator.numpy
    if not isinstance(generator, Generator):
        raise TypeError(f"argument 'generator' must be Generator, not {type(generator).__name__}")
    return generator.numpy


def manual_seed(seed):
    """Seeds the default generator and returns it. Like PyTorch's, any int() of the seed is taken."""
    return default_generator.manual_seed(int(seed))


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
    """Draws inside the block leave the default generator where it was before it."""
    if not enabled:
        yield
        return
    saved = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
