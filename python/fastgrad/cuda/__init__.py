"""torch.cuda as PyTorch answers without CUDA: nothing is available; queries that need a GPU fail
with PyTorch's AssertionError, the seeding and cache calls that are harmless without one do nothing."""

from fastgrad._types import check_cpu as _check_cpu
from . import amp  # noqa: F401  torch.cuda.amp.GradScaler / autocast (deprecated spellings)


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def is_bf16_supported(including_emulation=True):
    return False


def manual_seed(seed):
    """Seeds the generators of GPUs that do not exist: nothing to do, as in PyTorch."""


def manual_seed_all(seed):
    """Seeds the generators of GPUs that do not exist: nothing to do, as in PyTorch."""


def empty_cache():
    """Frees the GPU memory cache, which is empty without a GPU."""


def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def _needs_cuda(*args, **kwargs):
    _check_cpu("cuda")


synchronize = current_device = get_device_name = get_device_capability = get_device_properties = _needs_cuda
set_device = current_stream = get_rng_state = set_rng_state = _needs_cuda
