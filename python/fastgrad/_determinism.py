"""torch.use_deterministic_algorithms: fastgrad's kernels are deterministic already (the same result
for any thread count), so the switch is only remembered, for the programs that read it back."""

__all__ = [
    "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled",
]

_mode = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    for position, (name, value) in enumerate((("mode", mode), ("warn_only", warn_only)), 1):
        if not isinstance(value, bool):
            where = f" (position {position})" if name == "mode" else ""
            raise TypeError(
                f"_set_deterministic_algorithms(): argument '{name}'{where} must be bool, not {type(value).__name__}"
            )
    _mode.update(enabled=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _mode["enabled"]


def is_deterministic_algorithms_warn_only_enabled():
    return _mode["warn_only"]
