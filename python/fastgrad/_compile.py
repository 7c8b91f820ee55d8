"""fastgrad.compile: torch.compile's API over capture and replay (docs/compile.md).

The first call of a compiled function for a signature runs it eagerly while the core records every
tensor operation it performs (csrc/python/capture.h); later calls whose guards match replay that
record from C++ without running the Python body. Whatever the capture cannot replay (a host read
such as item(), an operation it cannot record, a random draw) makes the function run eagerly for
good, with a warning naming the line (fullgraph=True raises instead).

A replay sees only what the guards see: the tensor arguments' shapes, strides, dtypes,
requires_grad and aliasing; the other arguments by value; grad mode; and, reached from the
arguments, the closure and the global names the function's code reads: modules (their training
flags, plain attributes, parameters and buffers), tensors (identity, shape, dtype, requires_grad,
whether .grad is set), containers of those, and Python numbers and strings by value. Python state
read any other way (an attribute of a plain object, a global read by a helper function) is frozen
at capture.
"""

import builtins
import collections
import functools
import os
import sys
import types
import warnings
import weakref

from . import _prims
from ._prims import Tensor
from ._grad_mode import is_grad_enabled
from fastgrad._determinism import are_deterministic_algorithms_enabled
from fastgrad._types import get_default_dtype

__all__ = ["compile"]

DISABLE_ENV = "FASTGRAD_COMPILE_DISABLE"  # "1": compile() returns what it is given, unchanged
RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BACKENDS = ("inductor", "eager", "aot_eager")
# torch.compile's `options` that fastgrad reads. check_every=n: every n-th replay runs the function
# eagerly under a new capture instead, and raises if it did not do what the program replays.
OPTIONS = ("check_every",)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PRIMITIVES = (builtins.bool, builtins.int, builtins.float, builtins.complex, builtins.str, builtins.bytes, type(None))
# How deep the guards look into containers (a list of layers of lists of parameters is 3 levels).
_CONTAINER_DEPTH = 4

# Every compiled function, for fastgrad.compiler.reset().
_compiled = weakref.WeakSet()
# torch.compiler.set_stance's stances; the current one (process-wide, as PyTorch's).
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile")
STANCES += ("aot_eager_then_compile",)
_stance = "default"


class Unsupported(RuntimeError):
    """What fullgraph=True raises where the capture would break (torch._dynamo.exc.Unsupported)."""


def _user_line():
    """The innermost line of the running Python stack outside fastgrad's package: where a capture broke."""
    frame = sys._getframe(0).f_back
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _disabled():
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


# ---- the guards on state the function reaches without arguments --------------------------------

_module_epoch = 0
# module -> (epoch, its structure's key, its tensors): recomputed when any module changed
_module_parts_cache = weakref.WeakKeyDictionary()


def module_changed():
    """nn.Module calls this when an attribute, parameter, buffer or child is set or deleted: the
    guards' cached view of every module is stale."""
    global _module_epoch
    _module_epoch += 1


def _module_parts(module):
    """The key of a module tree's structure (each submodule's identity and plain attributes, such as
    `training`) and the tensors a replay may read from it (parameters, buffers, tensor attributes),
    cached until a module changes."""
    cached = _module_parts_cache.get(module)
    if cached is not None and cached[0] == _module_epoch:
        return cached[1], cached[2]
    parts, tensors = [], []
    for m in module.modules():
        parts.append(id(m))
        for name, v in m.__dict__.items():
            if type(v) in _PRIMITIVES:  # training, and the plain attributes forward() may read
                parts.append((name, v))
            elif isinstance(v, Tensor):
                tensors.append(v)
        tensors.extend(v for registry in (m._parameters, m._buffers) for v in registry.values() if v is not None)
    key = _prims._key_words(builtins.tuple(parts))
    _module_parts_cache[module] = (_module_epoch, key, tensors)
    return key, tensors


def _module_class():
    global _Module
    if _Module is None:
        from .nn import Module as _Module
    return _Module


_Module = None  # nn.Module (nn imports this module)


def _global_names(code):
    """The global names `code` and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


# ---- compiled functions ----------------------------------------------------------------------


class _CompiledFunction:
    """A function with its captured programs, one per signature; called as the function."""

    def __init__(self, fn, fullgraph, check_every=None):
        self._fn = fn
        self._fullgraph = fullgraph
        self._check_every = check_every
        self._replays = 0
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        self._globals = getattr(getattr(fn, "__func__", fn), "__globals__", {})
        self._bound_to = getattr(fn, "__self__", None)
        self._closure = getattr(getattr(fn, "__func__", fn), "__closure__", None) or ()
        self._global_names = builtins.tuple(sorted(_global_names(code))) if code is not None else ()
        self._cache = {}
        self._seen_eagerly = set()  # keys called once under an eager_then_compile stance
        self.eager_reason = None  # (reason, "file:line") once the function runs eagerly for good
        self._limit_warned = False
        _compiled.add(self)
        functools.update_wrapper(self, fn)

    def _name(self):
        return getattr(self._fn, "__qualname__", None) or type(self._fn).__name__

    def _key(self, args, kwargs, tensors, reached):
        """The key of a call (csrc/python/capture.cpp's CallKey, built in C++ as it is on every call):
        the arguments (tensors by position, with their shapes, strides, dtypes and aliasing; other
        values by type and value), the process state a replay depends on, and the guard state of
        everything the function reaches besides its tensor arguments (a bound method's object, the
        closure, the globals its code reads, modules and containers through). Appends the tensor
        arguments to `tensors` and the tensors reached otherwise, which a replay reads as they are
        then, to `reached`. TypeError: an argument that cannot be part of a key (unhashable)."""
        state = (
            is_grad_enabled(),
            _prims.is_inference_mode_enabled(),
            _prims.is_anomaly_enabled(),  # anomaly mode records each node's Python traceback
            are_deterministic_algorithms_enabled(),
            get_default_dtype(),
        )
        return _prims._call_key(
            self._bound_to,
            self._closure,
            self._globals,
            self._global_names,
            (args, kwargs),
            state,
            tensors,
            reached,
            _CONTAINER_DEPTH,
            _module_class(),
            _module_parts,
        )

    def __call__(self, *args, **kwargs):
        if self.eager_reason is not None or _stance == "force_eager" or _prims._capturing():
            return self._fn(*args, **kwargs)  # inside another capture: part of its program
        tensors, reached = [], []
        try:
            key = self._key(args, kwargs, tensors, reached)
        except TypeError:  # an unhashable argument: no key, so no replay
            return self._fn(*args, **kwargs)
        entry = self._cache.get(key)
        if entry is not None:
            self._replays += 1
            if self._check_every is not None and self._replays % self._check_every == 0:
                return self._check(entry, args, kwargs, tensors)
            program, structure = entry
            return _unflatten(structure, program.run(tensors))
        if _stance != "default" and self._eager_under_stance(key):
            return self._fn(*args, **kwargs)
        if len(self._cache) >= RECOMPILE_LIMIT:
            if not self._limit_warned:
                self._limit_warned = True
                warnings.warn(
                    f"fastgrad.compile hit its recompile limit ({RECOMPILE_LIMIT}) for function "
                    f"'{self._name()}': calls with a new signature run eagerly (fastgrad.compiler.reset() "
                    "clears the cache)",
                    UserWarning,
                    stacklevel=2,
                )
            return self._fn(*args, **kwargs)
        return self._capture(key, args, kwargs, tensors, reached)

    def _eager_under_stance(self, key):
        """Whether a call that would capture runs eagerly instead, under the stance set_stance set
        (fail_on_recompile raises instead, with PyTorch's message)."""
        if _stance == "fail_on_recompile":
            code = getattr(getattr(self._fn, "__func__", self._fn), "__code__", None)
            where = (code.co_filename, code.co_name, code.co_firstlineno) if code else ("<unknown>", self._name(), 0)
            raise RuntimeError(
                "Detected recompile when torch.compile stance is 'fail_on_recompile'. "
                f"filename: '{where[0]}', function name: '{where[1]}', line number: {where[2]}"
            )
        if _stance in ("eager_then_compile", "aot_eager_then_compile"):
            first = key not in self._seen_eagerly
            self._seen_eagerly.add(key)
            return first
        return _stance == "eager_on_recompile"

    def _run_captured(self, args, kwargs, tensors):
        """Runs the function under a new capture: (its result, the result's structure or the
        TypeError that makes it one compile cannot return, what _capture_end gave or None); None
        when another thread is capturing (the caller runs the function eagerly)."""
        if not _prims._capture_begin(tensors, _user_line):
            return None
        try:
            result = self._fn(*args, **kwargs)
        except BaseException:
            _prims._capture_abort()
            raise
        outputs = []
        try:
            structure = _flatten_result(result, outputs)
        except TypeError as e:
            _prims._capture_abort()
            return result, e, None
        except BaseException:  # KeyboardInterrupt: the capture must still end
            _prims._capture_abort()
            raise
        return result, structure, _prims._capture_end(outputs)

    def _capture(self, key, args, kwargs, tensors, reached):
        run = self._run_captured(args, kwargs, tensors)
        if run is None:
            return self._fn(*args, **kwargs)
        result, structure, program = run
        if isinstance(structure, TypeError):
            self._give_up(f"returns {structure}", _user_line())
            return result
        if isinstance(program, builtins.tuple):
            self._give_up(*program)
            return result
        covered = {id(t) for t in reached}
        if not all(id(t) in covered for t in program.constants):
            self._give_up(
                "it reads a tensor that is not an argument, nor reachable from its closure, globals or "
                "modules (a replay could not tell that it was replaced)",
                _user_line(),
            )
            return result
        self._cache[key] = (program, structure)
        return result

    def _check(self, entry, args, kwargs, tensors):
        """check_every: run the function eagerly under a new capture, as on its first call, and raise
        if what it did is not what the cached program replays (Python state it reads changed
        without passing through the guards)."""
        run = self._run_captured(args, kwargs, tensors)
        if run is None:
            return self._fn(*args, **kwargs)
        result, structure, fresh = run
        program, cached_structure = entry
        if (
            isinstance(fresh, _prims.CompiledProgram)
            and fresh.fingerprint == program.fingerprint
            and structure == cached_structure
            and [id(t) for t in fresh.constants] == [id(t) for t in program.constants]
        ):
            return result
        self.reset()
        raise RuntimeError(
            f"fastgrad.compile (check_every): '{self._name()}' no longer does what its captured program "
            "replays: Python state it reads changed without passing through its guards (docs/compile.md). "
            "This call ran eagerly; the next one captures again."
        )

    def _give_up(self, reason, location):
        self.eager_reason = (reason, location)
        self._cache.clear()
        message = f"fastgrad.compile: '{self._name()}' runs eagerly from now on: {reason}, at {location}"
        if self._fullgraph:
            raise Unsupported(message + " (fullgraph=True)")
        warnings.warn(message, UserWarning, stacklevel=3)

    def reset(self):
        self._cache.clear()
        self._seen_eagerly.clear()
        self.eager_reason = None
        self._limit_warned = False

    def __get__(self, obj, objtype=None):  # a compiled method binds as the function would
        return self if obj is None else types.MethodType(self, obj)


_MAX_RESULT_NESTING = 64  # a list that contains itself is deeper


def _flatten_result(value, outputs, nesting=0):
    """The structure of a returned value, its tensors replaced by their positions in `outputs`."""
    if nesting > _MAX_RESULT_NESTING:
        raise TypeError(f"a value nested more than {_MAX_RESULT_NESTING} containers deep")
    if isinstance(value, Tensor):
        outputs.append(value)
        return (Tensor, len(outputs) - 1)
    kind = type(value)
    if kind is builtins.list or _is_items_only_tuple(value):
        return (kind, [_flatten_result(v, outputs, nesting + 1) for v in value])
    if kind is builtins.dict:
        return (kind, [(k, _flatten_result(v, outputs, nesting + 1)) for k, v in value.items()])
    if kind in _PRIMITIVES:
        return (None, value)
    raise TypeError(f"a {kind.__name__}, which compile cannot return from a replay")


def _unflatten(structure, tensors):
    kind, content = structure
    if kind is Tensor:
        return tensors[content]
    if kind is None:
        return content
    if kind is builtins.dict:
        return {k: _unflatten(v, tensors) for k, v in content}
    if kind is builtins.list:
        return [_unflatten(v, tensors) for v in content]
    # As the tuple constructor makes it (a namedtuple's takes the items as arguments, torch.return_types' one sequence).
    return builtins.tuple.__new__(kind, [_unflatten(v, tensors) for v in content])


def _is_items_only_tuple(value):
    """A tuple, or one of a subclass whose instances hold nothing but their items (no __dict__; a tuple
    subclass cannot have slots): a namedtuple, torch.return_types, torch.Size. A replay makes it
    again from its items."""
    return isinstance(value, builtins.tuple) and not hasattr(value, "__dict__")


def _check_arguments(fullgraph, dynamic, backend, mode, options, disable):
    """torch.compile's argument checks, with its messages."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
    for name in options or {}:
        if name not in OPTIONS:
            raise RuntimeError(f"Unexpected optimization option {name}, known options are {list(OPTIONS)}")
    check_every = (options or {}).get("check_every", 1)
    if type(check_every) is not builtins.int or check_every < 1:
        raise ValueError(f"options['check_every'] must be a positive int, got {check_every!r}")
    if callable(backend):
        raise NotImplementedError("fastgrad.compile: a custom backend (a callable) is not supported")
    if backend not in BACKENDS:
        raise RuntimeError(f"Invalid backend: {backend!r}, see fastgrad.compiler.list_backends()")
    for name, value in (("fullgraph", fullgraph), ("disable", disable)):
        if not isinstance(value, builtins.bool):
            raise TypeError(f"compile(): argument '{name}' must be bool, not {type(value).__name__}")
    if dynamic not in (None, True, False):
        raise TypeError(f"compile(): argument 'dynamic' must be bool or None, not {type(dynamic).__name__}")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False):
    """torch.compile: `model` (a function or a Module) with its tensor operations captured on the
    first call for each signature and replayed from C++ on later calls. Without `model`, a decorator.
    `dynamic`, `backend` and `mode` are accepted and change nothing: every new shape is a new capture."""
    _check_arguments(fullgraph, dynamic, backend, mode, options, disable)
    if model is None:
        return lambda fn: compile(
            fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if not callable(model):
        raise RuntimeError("compile(): model must be a callable (a function or an nn.Module)")
    check_every = (options or {}).get("check_every")
    if disable or _disabled() or not hasattr(_prims, "_capture_begin"):  # fastgrad.reference captures nothing
        return model
    if getattr(model, "_compile_disabled", False):  # compiler.disable(fn): never compiled
        return model
    from .nn import Module

    if isinstance(model, Module):
        return _optimized_module(model, _CompiledFunction(model._call_impl, fullgraph, check_every))
    return _CompiledFunction(model, fullgraph, check_every)


def compile_module_call(module, *args, **kwargs):
    """Module.compile(*args, **kwargs): the compiled form of module's calls, or None when disabled."""
    compiled = compile(module._call_impl, *args, **kwargs)
    return compiled if isinstance(compiled, _CompiledFunction) else None


def _optimized_module(module, compiled):
    """What compile(module) returns, as torch._dynamo's OptimizedModule: a Module whose one child,
    `_orig_mod`, is the module (so its state_dict keys start with "_orig_mod.", as PyTorch's); calls
    run the compiled module, other attributes are the module's."""
    from .nn import Module

    global OptimizedModule
    if OptimizedModule is None:

        class OptimizedModule(Module):  # noqa: F811  defined once nn is importable
            def __init__(self, module, compiled):
                super().__init__()
                self._orig_mod = module
                self._compiled_call_impl = compiled

            def forward(self, *args, **kwargs):
                return self._orig_mod(*args, **kwargs)

            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self._orig_mod, name)

    return OptimizedModule(module, compiled)


OptimizedModule = None  # the class, made on first use (nn imports this module)


def host_call(method, *args, **kwargs):
    """method(*args, **kwargs) called during a capture (check _prims._capturing() first): the call
    becomes a step of the program that calls the method again on replay, which so reads the learning
    rate, the step count, the gradients as they are then (an optimizer's step and zero_grad, a
    scheduler's step). Tensor arguments (a metric) would be stale on replay: they end the capture."""
    return _host_call(method, args, kwargs, None)


def _host_call(method, args, kwargs, fused):
    """host_call; `fused`: None, or what C++ needs to replay the call without running Python
    (csrc/python/optim_replay.h), which it does whenever the method would do just that."""
    if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
        _prims._capture_abandon(f"a tensor passed to {method.__qualname__}()")
        return method(*args, **kwargs)
    return _prims._capture_host_call(functools.partial(method, *args, **kwargs), fused)


def replayed_as_host_call(method=None, *, fused=None):
    """`method`, made a host call when called during a capture (host_call). `fused(*args, **kwargs)`
    says how C++ may replay that call (_host_call), or None; eager calls run that C++ form too where
    it applies (it returns None, as the methods it stands for). Without `method`, a decorator."""
    if method is None:
        return functools.partial(replayed_as_host_call, fused=fused)

    @functools.wraps(method)
    def call(*args, **kwargs):
        if _prims._capturing():
            return _host_call(method, args, kwargs, fused and fused(*args, **kwargs))
        if fused is not None:
            description = fused(*args, **kwargs)
            if description is not None and _prims._run_fused_update(description):
                return None
        return method(*args, **kwargs)

    return call


class set_stance:
    """torch.compiler.set_stance: how compiled functions behave from now on (called as a function),
    inside a `with` block, or during the calls of a function it decorates. "force_eager": they run
    their Python eagerly; "eager_on_recompile": a call that would capture runs eagerly instead
    (cached programs still replay); "fail_on_recompile": it raises instead; "eager_then_compile"
    (and "aot_eager_then_compile"): the first call with a new signature runs eagerly, the next one
    captures. skip_guard_eval_unsafe is accepted and changes nothing: guards are always checked."""

    def __init__(self, stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        if stance not in STANCES:
            raise RuntimeError(f"invalid torch.compile stance '{stance}'")
        if force_backend is not None:
            _check_arguments(False, None, force_backend, None, None, False)
        self.stance = stance
        self.prev = _set_stance(stance)

    def __call__(self, fn):
        _set_stance(self.prev)

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            with set_stance(self.stance):
                return fn(*args, **kwargs)

        return with_stance

    def __enter__(self):
        _set_stance(self.stance)

    def __exit__(self, *exc_info):
        _set_stance(self.prev)


def _set_stance(stance):
    global _stance
    if _prims._capturing():
        raise RuntimeError("attempted to set_stance in a torch.compile region")
    prior, _stance = _stance, stance
    return prior


def disable(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable: `fn`, never captured (compile(fn) gives it back). A compiled function
    that calls it runs it on every call, as PyTorch runs it outside its graph: a replay calls it
    again (a host call) when it takes no tensors and returns None (logging, bookkeeping); otherwise
    the compiled function runs eagerly from then on, a graph break that fastgrad cannot split the
    program around (fullgraph=True raises). `recursive` changes nothing: fastgrad captures
    operations, not Python frames. Without `fn`, a decorator."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    why = f"{getattr(fn, '__qualname__', fn)!s}, marked with compiler.disable" + (f" ({reason})" if reason else "")

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        if not _prims._capturing():
            return fn(*args, **kwargs)
        if _holds_tensor((args, kwargs), _CONTAINER_DEPTH):
            _prims._capture_abandon(f"a call of {why}, with tensor arguments")
            return fn(*args, **kwargs)
        result = host_call(fn, *args, **kwargs)
        if result is not None:
            _prims._capture_abandon(f"{why}, returned a value")
        return result

    disabled._compile_disabled = True
    return disabled


def _holds_tensor(value, depth):
    if isinstance(value, Tensor):
        return True
    if depth == 0 or not isinstance(value, (builtins.list, builtins.tuple, builtins.dict)):
        return False
    items = value.values() if isinstance(value, builtins.dict) else value
    return any(_holds_tensor(v, depth - 1) for v in items)


def reset():
    """Forget every captured program and every eager fallback (torch.compiler.reset)."""
    for fn in list(_compiled):
        fn.reset()


class ExplainOutput:
    """What explain() found (torch._dynamo.explain's ExplainOutput): the number of captured steps,
    the guards a replay checks, and why the capture broke, if it did."""

    def __init__(self, op_count, guards, break_reasons):
        self.op_count = op_count
        self.guards = guards
        self.break_reasons = break_reasons  # [(reason, "file:line")]
        self.graph_count = 0 if break_reasons else 1
        self.graph_break_count = len(break_reasons)

    def __str__(self):
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
            *(f"  {reason}, at {location}" for reason, location in self.break_reasons),
            "Guards:",
            *(f"  {guard}" for guard in self.guards),
        ]
        return "\n".join(lines)


PlannedMemory = collections.namedtuple("PlannedMemory", "op_count planned_bytes unplanned_bytes misses")
PlannedMemory.__doc__ = """The memory plan of one captured program (memory_plans)."""


def memory_plans(fn):
    """The memory plans of a compiled function's or module's programs (fastgrad's own; docs/compile.md):
    a PlannedMemory per program that has replayed, made from its first replay. planned_bytes: the
    one block that holds its intermediates, reused from one replay to the next; unplanned_bytes:
    what each replay allocates outside it (what outlives the call: outputs, gradients, anything
    allocated by Python code such as a host call's); misses: planned allocations that a replay
    allocated elsewhere because their place was still taken (a tensor kept longer than planned)."""
    if not hasattr(_prims, "_capture_begin"):  # fastgrad.reference: compile() captures nothing
        return []
    compiled = fn if isinstance(fn, _CompiledFunction) else getattr(fn, "_compiled_call_impl", None)
    if not isinstance(compiled, _CompiledFunction):
        raise TypeError(f"memory_plans(): expected a function or module made by fastgrad.compile, got {fn!r}")
    plans = [(program.num_steps, program.memory_plan) for program, _ in compiled._cache.values()]
    return [PlannedMemory(steps, *plan) for steps, plan in plans if plan is not None]


LoweredProgram = collections.namedtuple("LoweredProgram", "op_count values operations state refusal")
LoweredProgram.__doc__ = """One captured program as float arithmetic on 0-d values (lowered_programs)."""


def lowered_programs(fn):
    """What became of each of a compiled function's or module's programs as a lowered program
    (fastgrad's own; docs/compile.md): a program whose every step is arithmetic, a unary function,
    backward() or a .grad read or reset on 0-d float32 tensors (micrograd's steps) replays as a list
    of float operations on registers instead of its steps. A LoweredProgram per program: values (the
    registers) and operations; state "unchecked" until a replay has run the steps and the lowered
    program side by side, then "checked" (used from then on) or "differed" (never used); or, for a
    program that is not lowered, refusal says why and state is None."""
    if not hasattr(_prims, "_capture_begin"):  # fastgrad.reference: compile() captures nothing
        return []
    compiled = fn if isinstance(fn, _CompiledFunction) else getattr(fn, "_compiled_call_impl", None)
    if not isinstance(compiled, _CompiledFunction):
        raise TypeError(f"lowered_programs(): expected a function or module made by fastgrad.compile, got {fn!r}")
    out = []
    for program, _ in compiled._cache.values():
        lowered = program.scalar_program
        if isinstance(lowered, str):
            out.append(LoweredProgram(program.num_steps, 0, 0, None, lowered))
        else:
            out.append(LoweredProgram(program.num_steps, *lowered, None))
    return out


def _describe_guards(compiled, args, kwargs):
    tensors, reached = [], []
    compiled._key(args, kwargs, tensors, reached)
    guards = [
        f"tensor argument {i}: shape {list(t.shape)}, strides {list(_prims.strides(t))}, offset "
        f"{t.storage_offset()}, {t.dtype}, requires_grad={t.requires_grad}"
        for i, t in enumerate(tensors)
    ]
    guards.append("tensor arguments that share memory: the same ones")
    guards.append("other arguments: by value (and type)")
    guards.append(f"grad mode: {'enabled' if is_grad_enabled() else 'disabled'}")
    guards.append(f"default dtype: {get_default_dtype()}")
    covered = {id(t) for t in reached}
    guards.append(
        f"{len(covered)} tensors reached from the closure, globals and modules: identity, shape, dtype, "
        "requires_grad, whether .grad is set"
    )
    names = [name for name in compiled._global_names if name in compiled._globals]
    if names:
        guards.append(f"globals read: {', '.join(names)} (modules and containers through, numbers by value)")
    return guards


def explain(fn, *args, **kwargs):
    """Run fn(*args, **kwargs) once under a new capture (so with its effects, as torch._dynamo.explain
    does) and report what compile makes of it: an ExplainOutput."""
    from .nn import Module

    target = fn._fn if isinstance(fn, _CompiledFunction) else fn._call_impl if isinstance(fn, Module) else fn
    compiled = _CompiledFunction(target, fullgraph=False)
    guards = _describe_guards(compiled, args, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*args, **kwargs)
    programs = [program for program, _ in compiled._cache.values()]
    reasons = [compiled.eager_reason] if compiled.eager_reason is not None else []
    return ExplainOutput(sum(p.num_steps for p in programs), guards, reasons)
