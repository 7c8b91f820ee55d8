"""torch.compiler: the controls of fastgrad.compile (docs/compile.md)."""

from ._compile import BACKENDS, DISABLE_ENV, RECOMPILE_LIMIT, ExplainOutput, PlannedMemory, Unsupported, explain
from ._compile import STANCES, LoweredProgram, compile, disable, lowered_programs, memory_plans, reset, set_stance
from . import _prims

__all__ = ["reset", "explain", "is_compiling", "list_backends", "ExplainOutput", "Unsupported"]
__all__ += ["DISABLE_ENV", "RECOMPILE_LIMIT", "memory_plans", "PlannedMemory", "compile", "disable", "set_stance"]
__all__ += ["STANCES", "is_dynamo_compiling", "is_exporting", "cudagraph_mark_step_begin", "allow_in_graph"]
__all__ += ["assume_constant_result", "lowered_programs", "LoweredProgram"]


def is_compiling():
    """Whether this thread is capturing a compiled function now (its Python body runs once per capture)."""
    return _prims._capturing()


def is_dynamo_compiling():
    """torch.compiler.is_dynamo_compiling: is_compiling() (fastgrad's capture stands for Dynamo's tracing)."""
    return _prims._capturing()


def is_exporting():
    """torch.compiler.is_exporting: fastgrad has no torch.export, so never."""
    return False


def cudagraph_mark_step_begin():
    """torch.compiler.cudagraph_mark_step_begin: nothing to do (no CUDA graphs; a replay's returned
    tensors are never overwritten by the next one anyway)."""


def allow_in_graph(fn):
    """torch.compiler.allow_in_graph: `fn` itself (fastgrad captures the operations fn performs)."""
    return fn


def assume_constant_result(fn):
    """torch.compiler.assume_constant_result: `fn` itself (a Python value a compiled function computes
    is constant in its program anyway: docs/compile.md, Python state a replay cannot see)."""
    return fn


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names compile() accepts (each captures and replays the same way)."""
    return sorted(BACKENDS)
