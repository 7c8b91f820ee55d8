"""torch.amp on a CPU-only build: autocast and GradScaler as PyTorch behaves where they do nothing.

Mixed precision needs float16/bfloat16 compute, which fastgrad does not have: CUDA autocast and
scaling warn and disable themselves as in a PyTorch without CUDA, enabled=False is a no-op, and CPU
autocast to a half type (the one case PyTorch runs on a CPU) is an error that says it is missing.
"""

import functools
import warnings

from fastgrad._types import DEVICE_TYPES, device as _device


class autocast:
    """Context manager and decorator: `with torch.autocast(device_type="cuda"): ...`."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        _device(device_type)  # PyTorch's error for a device type it does not know
        self.device = device_type
        self._enabled = enabled
        if not enabled:
            return
        if device_type == "cuda":
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", UserWarning, 2)
        elif device_type == "cpu" and dtype is None:  # bfloat16, which fastgrad does not have
            raise NotImplementedError(
                "torch.autocast on the CPU (bfloat16/float16 compute) is not provided by fastgrad"
            )
        elif device_type == "cpu":  # any dtype fastgrad has
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                UserWarning,
                2,
            )
        elif device_type in DEVICE_TYPES:
            raise NotImplementedError(f"torch.autocast(device_type='{device_type}') is not provided by fastgrad")
        self._enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def run_in_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return run_in_autocast


class GradScaler:
    """Loss scaling for float16 training. Without CUDA it is disabled (warning if asked for it), and
    then every method passes through as PyTorch's does: scale() returns its input, step() is
    optimizer.step(), the scale reads 1.0."""

    def __init__(
        self,
        device="cuda",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        self._device = device
        self._init_scale, self._growth_factor, self._backoff_factor = init_scale, growth_factor, backoff_factor
        self._growth_interval = growth_interval
        if enabled and device == "cuda":
            warnings.warn(
                "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning, 2
            )
        elif enabled:
            raise NotImplementedError(f"torch.amp.GradScaler('{device}') with enabled=True is not provided by fastgrad")
        self._enabled = False

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer):
        return None

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        return None

    def get_scale(self):
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict):
        return None
