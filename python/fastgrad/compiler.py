"""torch.compiler: the controls of fastgrad.compile (docs/compile.md)."""

from ._compile import BACKENDS, DISABLE_ENV, RECOMPILE_LIMIT, ExplainOutput, PlannedMemory, Unsupported, explain
from ._compile import memory_plans, reset
from . import _prims

__all__ = ["reset", "explain", "is_compiling", "list_backends", "ExplainOutput", "Unsupported"]
__all__ += ["DISABLE_ENV", "RECOMPILE_LIMIT", "memory_plans", "PlannedMemory"]


def is_compiling():
    """Whether this thread is capturing a compiled function now (its Python body runs once per capture)."""
    return _prims._capturing()


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names compile() accepts (each captures and replays the same way)."""
    return sorted(BACKENDS)
