"""Random number generators: torch.Generator and torch.random's state functions.

Written once for both backends (each gets its own default generator, as each has its own tensors).
Underneath is the backend's _CPUGenerator (the core's csrc/core/generator.h, or the pure-Python
reference/_random.py): PyTorch's CPU generator, so a seed gives PyTorch's numbers, and a state is
PyTorch's: a 5056-byte uint8 tensor that torch.set_rng_state() takes, and the other way round.
"""

import builtins
import contextlib
import operator
import secrets

from . import _prims
from fastgrad._types import device as _device, int64, uint8

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"]

DEFAULT_SEED = 67280421310721  # a new Generator's seed, as PyTorch's
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
        self._engine = _prims._CPUGenerator(DEFAULT_SEED)

    def manual_seed(self, seed):
        if isinstance(seed, (builtins.bool, builtins.float)) or not hasattr(seed, "__index__"):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = operator.index(seed)
        if not -(2**63) <= seed < _WORD:
            raise ValueError("Overflow when unpacking long long")
        self._engine.manual_seed(seed % _WORD)
        return self

    def seed(self):
        """Seeds from the operating system's entropy (53 bits, as PyTorch's); returns the seed."""
        self.manual_seed(secrets.randbits(53))
        return self.initial_seed()

    def initial_seed(self):
        return self._engine.initial_seed()

    def get_state(self):
        state = self._engine.get_state()
        return _prims.from_values(list(state), [len(state)], uint8, int64)

    def set_state(self, new_state):
        if not isinstance(new_state, _prims.Tensor):
            raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        self._engine.set_state(bytes(new_state.reshape(-1).tolist()))
        return self

    def __repr__(self):
        return f"<{__name__.rsplit('.', 1)[0]}.Generator object at {id(self):#x}>"


default_generator = Generator()
default_generator.seed()  # each process starts from fresh entropy, as PyTorch's


def engine(generator):
    """The _CPUGenerator behind a `generator=` argument (None: the default generator)."""
    if generator is None:
        return default_generator._engine
    if not isinstance(generator, Generator):
        raise TypeError(f"argument 'generator' must be Generator, not {type(generator).__name__}")
    return generator._engine


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
