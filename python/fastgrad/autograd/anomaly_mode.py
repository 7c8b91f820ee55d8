"""Anomaly mode, as torch.autograd.anomaly_mode: detect_anomaly and set_detect_anomaly.

While it is on, each recorded node keeps the traceback of its forward call (grad_fn.metadata
["traceback_"]), and backward raises "Function 'LogBackward0' returned nan values in its 0th
output." at the first node whose gradient has a NaN (unless check_nan=False), warning with that
traceback. The flag is process-wide, as PyTorch's; the backend holds it (_prims.set_anomaly_enabled).
"""

import warnings

from .. import _prims

__all__ = ["detect_anomaly", "set_detect_anomaly"]


class detect_anomaly:
    """Context manager that turns anomaly mode on for its block (and warns that it is slow)."""

    def __init__(self, check_nan=True):
        self.prev = _prims.is_anomaly_enabled()
        self.check_nan = check_nan
        self.prev_check_nan = _prims.is_anomaly_check_nan_enabled()
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
            "enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self):
        _prims.set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc):
        _prims.set_anomaly_enabled(self.prev, self.prev_check_nan)


class set_detect_anomaly:
    """Turns anomaly mode on or off right away; used with `with`, the previous mode comes back at the
    end of the block."""

    def __init__(self, mode, check_nan=True):
        self.prev = _prims.is_anomaly_enabled()
        self.prev_check_nan = _prims.is_anomaly_check_nan_enabled()
        _prims.set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _prims.set_anomaly_enabled(self.prev, self.prev_check_nan)
