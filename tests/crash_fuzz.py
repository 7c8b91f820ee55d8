"""The crash fuzzer's engine: random calls of every public fastgrad function and Tensor method.

A call is generated as one line of Python source (`fg.sum(fg.randn(2, 0), dim=2**63)`), logged, then
executed, so the line in the log is the reproducer. Any Python exception is an acceptable outcome;
what must never happen is a crash (signal), a hang, or an exception that means the binding itself
broke (SystemError, pybind11's "unknown exception"). tests/test_crash_fuzz.py runs batches of calls
in child processes (`python crash_fuzz.py LOG SEED EXAMPLES`) so that a crash cannot take pytest down.

The child caps its address space (MEMORY_CAP) so that huge shapes end in MemoryError instead of the
machine swapping; generated tensors themselves stay small.
"""

import inspect
import os
import resource
import sys

import fastgrad as fg
import numpy as np
from fastgrad import _api

MEMORY_CAP = 3 << 30

# ---- values, each as Python source ---------------------------------------------------------------
INTS = [
    "0",
    "1",
    "-1",
    "2",
    "3",
    "-2",
    "5",
    "2**31 - 1",
    "2**31",
    "-2**31 - 1",
    "2**63 - 1",
    "-2**63",
    "2**63",
    "2**64",
    "10**30",
    "-10**30",
]
SMALL_INTS = ["0", "1", "-1", "2", "-2", "3"]
FLOATS = [
    "0.0",
    "-0.0",
    "0.5",
    "-1.5",
    "1e308",
    "-1e308",
    "5e-324",
    "float('nan')",
    "float('inf')",
    "float('-inf')",
    "1e-8",
]
DTYPES = ["fg.float32", "fg.float64", "fg.int64", "fg.bool", "float", "int", "bool", "'float32'"]
STRINGS = ["''", "'mean'", "'sum'", "'none'", "'tanh'", "'cpu'", "'cuda'", "'abc'", "'fro'", "'\\x00'"]
CALLABLES = ["lambda *a, **k: None", "lambda *a, **k: a[0]", "lambda *a, **k: 1 / 0", "lambda *a, **k: 1.5"]
ODDITIES = [
    "None",
    "True",
    "False",
    "object()",
    "fg",
    "Ellipsis",
    "slice(None)",
    "slice(None, None, -1)",
    "slice(0, 2**63)",
    "slice(None, None, 0)",
    "fg.Size([2, 3])",
    "fg.device('cpu')",
    "1j",
    "b'ab'",
    "{}",
    "{'lr': 1}",
    "iter([1, 2])",
    "range(3)",
    "np.float32(2)",
    "np.int64(-1)",
] + CALLABLES
ARRAYS = [
    "np.ones((2, 3))",
    "np.arange(6, dtype=np.int64).reshape(2, 3)[:, ::2]",
    "np.zeros((0, 3))",
    "np.array(['a'])",
    "np.array([1 + 2j])",
    "np.array([None, 1], dtype=object)",
    "np.ones(3, dtype=np.float16)",
    "np.ones(3, dtype=np.uint8)",
    "np.broadcast_to(np.ones(3), (4, 3))",
    "np.ones((2, 3), order='F')",
    "np.array(5.0)",
    "np.ones(4)[::-1]",
    "np.ones((2, 3), dtype='>f4')",
]
SEQUENCES = [
    "[]",
    "()",
    "[0]",
    "[1, 0]",
    "[0, 0]",
    "(0, -1)",
    "[2, 3]",
    "(3, 2)",
    "[-1]",
    "[2**63]",
    "[[]]",
    "[[1, 2], [3]]",
    "[1, 'a']",
    "[1.5, float('nan')]",
    "[[True, False]]",
    "[2, -3]",
    "(0, 1, 2, 3)",
    "[[1, 2], [3, 4]]",
    "[[[1.0]]]",
    "[None]",
    "(slice(None), None)",
    "(0, ..., 1)",
    "[0, 1, 1, 0]",
]

SHAPES = [
    "()",
    "(0,)",
    "(1,)",
    "(3,)",
    "(2, 3)",
    "(3, 3)",
    "(0, 3)",
    "(2, 0, 3)",
    "(1, 3, 1)",
    "(2, 3, 4)",
    "(2, 1, 2, 2)",
]
TENSOR_DTYPES = ["fg.float32", "fg.float64", "fg.float32", "fg.int64", "fg.bool"]
VIEWS = [
    ".t()",
    ".transpose(0, -1)",
    "[::2]",
    "[..., 1:]",
    ".expand(2, *{s})",
    ".unsqueeze(0)",
    "[None]",
    ".flatten()",
    ".clone()",
    " * 2",
    ".detach()",
    ".sum(0, keepdim=True)",
    ".softmax(-1)",
]

KWARG_POOL = [
    "dim",
    "keepdim",
    "dtype",
    "requires_grad",
    "alpha",
    "min",
    "max",
    "reduction",
    "p",
    "weight",
    "gradient",
    "retain_graph",
    "create_graph",
    "inputs",
    "out",
    "correction",
    "size",
    "ignore_index",
]


class Call:
    """The random state of one call: most tensors of a call share one shape so that validation passes."""

    def __init__(self, rng):
        self.rng = rng
        self.shape = rng.choice(SHAPES)


def tensor_source(call, dtype=None):
    """A small tensor: random shape and dtype, perhaps a view, perhaps requiring grad or with a grad_fn."""
    rng = call.rng
    shape = call.shape if rng.random() < 0.7 else rng.choice(SHAPES)
    dtype = dtype or rng.choice(TENSOR_DTYPES)
    if rng.random() < 0.1:
        return f"fg.tensor({rng.choice(SEQUENCES)})"
    if dtype == "fg.int64":
        source = f"fg.randint(-1, 4, {shape})"
    elif dtype == "fg.bool":
        source = f"(fg.randn({shape}) > 0)"
    elif rng.random() < 0.15:
        source = f"fg.full({shape}, {rng.choice(FLOATS)}, dtype={dtype}, requires_grad=True)"
    else:
        grad = ", requires_grad=True" if rng.random() < 0.6 else ""
        fill = rng.choice(["randn", "randn", "ones", "zeros", "rand"])
        source = f"fg.{fill}({shape}, dtype={dtype}{grad})"
    if rng.random() < 0.3 and shape != "()":
        source = f"({source}{rng.choice(VIEWS).format(s=shape)})"
    return source


def wild_source(call, depth=0):
    """Any value at all."""
    rng = call.rng
    pick = rng.random()
    if pick < 0.3:
        return tensor_source(call)
    if pick < 0.45:
        return rng.choice(SMALL_INTS)
    pool = rng.choice([INTS, FLOATS, DTYPES, STRINGS, ODDITIES, ARRAYS, SEQUENCES])
    if pool is SEQUENCES and depth == 0 and rng.random() < 0.3:  # a list holding tensors (cat, stack, optim)
        return "[" + ", ".join(wild_source(call, 1) for _ in range(rng.randrange(4))) + "]"
    return rng.choice(pool)


def _tensors(call):
    return "[" + ", ".join(tensor_source(call) for _ in range(call.rng.randrange(1, 4))) + "]"


# What a parameter of this name usually receives; a wild value stays likely (WILD) to test validation.
BY_NAME = [
    (("index", "target", "indices"), lambda c: tensor_source(c, "fg.int64")),
    (("mask", "condition", "attn_mask", "key_padding_mask"), lambda c: tensor_source(c, "fg.bool")),
    (
        (
            "input",
            "other",
            "self",
            "tensor",
            "weight",
            "bias",
            "grad",
            "gradient",
            "mat1",
            "mat2",
            "vec",
            "x",
            "y",
            "v",
            "src",
            "pos_weight",
            "outputs",
            "grad_outputs",
            # attention (scaled_dot_product_attention, multi_head_attention_forward)
            "query",
            "key",
            "value",
            "in_proj_weight",
            "in_proj_bias",
            "out_proj_weight",
            "out_proj_bias",
            "bias_k",
            "bias_v",
            "q_proj_weight",
            "k_proj_weight",
            "v_proj_weight",
            "static_k",
            "static_v",
        ),
        lambda c: tensor_source(c),
    ),
    (("tensors", "inputs", "params", "tensor_list"), _tensors),
    (
        (
            "dim",
            "dim0",
            "dim1",
            "axis",
            "start_dim",
            "end_dim",
            "split_size_or_sections",
            "chunks",
            "diagonal",
            "num_classes",
            "padding_idx",
            "ignore_index",
            "step_size",
            "T_max",
            "num_heads",
            "embed_dim_to_check",
        ),
        lambda c: c.rng.choice(SMALL_INTS + ["(0, -1)", "[1]"]),
    ),
    (("dims", "size", "shape", "normalized_shape"), lambda c: c.rng.choice(SHAPES + ["-1", "(-1, 2)"])),
    (
        (
            "keepdim",
            "requires_grad",
            "retain_graph",
            "create_graph",
            "training",
            "inplace",
            "unbiased",
            "allow_unused",
            "amsgrad",
            "nesterov",
            "maximize",
            "foreach",
            "equal_nan",
            "elementwise_affine",
            "strict",
            "vectorize",
            "is_causal",
            "need_weights",
            "average_attn_weights",
            "add_zero_attn",
            "use_separate_proj_weight",
            "enable_gqa",
        ),
        lambda c: c.rng.choice(["True", "False"]),
    ),
    (("dtype",), lambda c: c.rng.choice(DTYPES)),
    (("reduction",), lambda c: c.rng.choice(["'mean'", "'sum'", "'none'"])),
    (("approximate",), lambda c: c.rng.choice(["'none'", "'tanh'"])),
    (("func", "hook", "fn"), lambda c: c.rng.choice(CALLABLES)),
]
NAMED = {name: make for names, make in BY_NAME for name in names}
WILD = 0.25


def value_source(call, name=None):
    make = NAMED.get(name)
    if make is None or call.rng.random() < WILD:
        if name is not None and call.rng.random() < 0.5:  # numbers: lr, eps, alpha, p, min, max, value ...
            return call.rng.choice(SMALL_INTS + FLOATS[:5])
        return wild_source(call)
    return make(call)


def _parameters(obj):
    try:
        return list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return []


def arguments_source(call, obj, first_is_tensor=False):
    """Positional and keyword arguments: mostly as many as the signature has, sometimes any number."""
    rng = call.rng
    params = [p for p in _parameters(obj) if p.name != "self"]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    if not params or rng.random() < 0.15:
        count = rng.randrange(5)
    else:
        required = sum(p.default is p.empty for p in positional)
        count = rng.randint(required, len(positional) + (2 if varargs else 0))
    names = [p.name for p in positional] + [varargs or "input"] * 4
    if first_is_tensor:  # a Tensor method's signature lists `input` first: the tensor it is called on
        names = names[1:]
    args = [value_source(call, names[i] if i < len(names) else None) for i in range(count)]
    candidates = keywords[count:] if rng.random() < 0.9 else KWARG_POOL
    for name in sorted(set(rng.sample(candidates, min(len(candidates), rng.randrange(3))))):
        args.append(f"{name}={value_source(call, name)}")
    return ", ".join(args)


# ---- targets: (source prefix, the object whose signature guides the arguments, source suffix) -----
def _public_callables(module, names=None):
    names = (
        names
        if names is not None
        else getattr(module, "__all__", None)
        or [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__
        ]
    )
    return [(name, getattr(module, name)) for name in names if callable(getattr(module, name, None))]


# The fused primitives that nn.functional calls after its own checks, called directly: their checks
# must keep any arguments from reading out of bounds. Stand-ins with the bindings' signatures.
def _batch_norm_primitive(input, weight, bias, running_mean, running_var, training, momentum, eps): ...


def _group_norm_primitive(input, weight, bias, groups, eps): ...


def _layer_norm_primitive(input, weight, bias, normalized_dims, eps): ...


def _leaky_relu_primitive(input, slope): ...


def _hardtanh_primitive(input, min, max): ...


def _upsample_primitive(x, mode, output_size, scales, align_corners, antialias): ...


def _recurrent_layer_primitive(mode, projected, h0, c0, w_hh, b_hh, reverse): ...


def _linear_primitive(input, weight, bias): ...


def _flash_attention_primitive(query, key, value, scale, causal): ...


def _float_binary_primitive(input, other): ...  # atan2, hypot, ...: the values under the Python layer's checks


PRIMITIVES = {
    "batch_norm": _batch_norm_primitive,
    "group_norm": _group_norm_primitive,
    "layer_norm": _layer_norm_primitive,
    "leaky_relu": _leaky_relu_primitive,
    "leaky_relu_": _leaky_relu_primitive,
    "hardtanh": _hardtanh_primitive,
    "hardtanh_": _hardtanh_primitive,
    "upsample": _upsample_primitive,
    "recurrent_layer": _recurrent_layer_primitive,
    "linear": _linear_primitive,
    "flash_attention": _flash_attention_primitive,
    **{name: _float_binary_primitive for name in ["atan2", "hypot", "logaddexp", "logaddexp2", "copysign"]},
}


def targets():
    found = []
    for name, obj in _public_callables(fg, _api.MODULE):
        if not isinstance(obj, fg.dtype):
            found.append((f"fg.{name}", obj, ""))
    for module, path in [
        (fg.nn.functional, "fg.nn.functional"),
        (fg.nn.init, "fg.nn.init"),
        (fg.autograd.functional, "fg.autograd.functional"),
        (fg.viz, "fg.viz"),
    ]:
        found += [(f"{path}.{name}", obj, "") for name, obj in _public_callables(module)]
    # the functions nn.functional re-exports from files of their own
    for module in (fg.nn._functional_pooling, fg.nn._functional_grid, fg.nn._functional_attention):
        names = module.__all__
        found += [(f"fg.nn.functional.{name}", obj, "") for name, obj in _public_callables(fg.nn.functional, names)]
    found += [(f"fg._prims.{name}", signature, "") for name, signature in PRIMITIVES.items()]
    for name in ["backward", "grad", "gradcheck", "gradgradcheck"]:
        found.append((f"fg.autograd.{name}", getattr(fg.autograd, name), ""))
    for name in ["SGD", "Adam", "AdamW"]:
        optimizer = getattr(fg.optim, name)
        found.append((f"fg.optim.{name}", optimizer, ".step()"))
        found.append((f"fg.optim.{name}", optimizer, ".zero_grad()"))
    for name, obj in vars(fg.nn).items():
        if isinstance(obj, type) and issubclass(obj, fg.nn.Module) and obj is not fg.nn.Module:
            found.append((f"fg.nn.{name}", obj, ""))
            found.append((f"fg.nn.{name}", obj, "({tensor})"))
    for name in _api.TENSOR:
        attribute = getattr(fg.Tensor, name)
        if not callable(attribute):  # a property: assigning to it is the interesting call
            found.append(("{tensor}." + name + " = ", None, ""))
            continue
        found.append(("{tensor}." + name, attribute, ""))
        if name.endswith("_") and not name.startswith("_"):  # in place, then backward through a graph using it
            found.append(("(_x := {tensor}); (_y := _x.exp()); _x." + name, attribute, "; _y.sum().backward()"))
    for name in ["register_hook", "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_"]:
        found.append(("(_x := {tensor}); _x." + name, getattr(fg.Tensor, name), "; (_x * 2).sum().backward()"))
    return found


# Backward through a call's result. Not after expand: a view of 2**62 elements is legal, and so is
# summing it, which would take years (in PyTorch too).
BACKWARDS = [
    ".sum().backward()",
    ".backward({tensor})",
    ".sum().backward(create_graph=True)",
    ".mean().backward(retain_graph=True)",
]


# The share of function calls made through fastgrad.compile, three times with the same argument
# sources: a capture (or a fallback), the first replay (it makes the memory plan), then a replay on
# planned memory, on hostile arguments. Not of classes: compiling a
# constructor (nn.Transformer's takes seconds under the sanitizers) tests nothing a plain call does not.
COMPILED = 0.15


def call_source(rng, target):
    prefix, obj, suffix = target
    call = Call(rng)
    fill = lambda text: text.replace("{tensor}", tensor_source(call))  # noqa: E731
    if prefix.endswith(" = "):
        return fill(prefix) + value_source(call, prefix.split(".")[-1][:-3])
    if prefix.startswith("fg.") and not suffix and rng.random() < COMPILED and not isinstance(obj, type):
        arguments = arguments_source(call, obj)
        return f"(_c := fg.compile({prefix}))({arguments}); _c({arguments}); _c({arguments})"
    source = f"{fill(prefix)}({arguments_source(call, obj, '{tensor}' in prefix)}){fill(suffix)}"
    if not suffix and "expand" not in prefix and rng.random() < 0.3:
        source = f"({source}){fill(rng.choice(BACKWARDS))}"
    return source


def calls(rng, count):
    """`count` call sources, each target in turn (so every target is called) from a shuffled order."""
    all_targets = targets()
    for i in range(count):
        if i % len(all_targets) == 0:
            rng.shuffle(all_targets)
        yield call_source(rng, all_targets[i % len(all_targets)])


# ---- running, in the child process ---------------------------------------------------------------
BROKEN_BINDING = (
    "Caught an unknown exception",
    "std::",
    "returned NULL without setting an exception",
    "returned a result with an exception set",
)


def execute(source, namespace):
    """Runs one call; returns a description of a broken-binding exception, else None."""
    try:
        exec(source, namespace)  # noqa: S102 - the source is ours
    except SystemError as error:
        return f"SystemError: {error}"
    except MemoryError:
        return None
    except Exception as error:  # noqa: BLE001 - every Python exception is an accepted outcome
        message = str(error)
        if any(marker in message for marker in BROKEN_BINDING):
            return f"{type(error).__name__}: {message}"
    return None


def under_address_sanitizer():
    return "ASAN_OPTIONS" in os.environ or "asan" in os.environ.get("LD_PRELOAD", "")


# Under ASan, a huge allocation must fail as it does with the cap (std::bad_alloc -> MemoryError),
# not end the process with an out-of-memory report. The cap is per allocation there, and lower: the
# generated tensors are small, so a larger buffer comes from a hostile size (BatchNorm3d(2**31 - 1)),
# and ASan took 5 s to fill one of 2 GiB.
ASAN_MEMORY_CAP = "allocator_may_return_null=1:max_allocation_size_mb=256"


def run(log_path, seed, count):
    """Generates and runs `count` calls, logging each before it runs. Exit status 3: a broken binding."""
    import random
    import warnings

    if not under_address_sanitizer():  # ASan maps terabytes of shadow: there the cap is ASan's own option
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    namespace_base = {"fg": fg, "np": np}
    with open(log_path, "w", buffering=1) as log:
        for index, source in enumerate(calls(rng, count)):
            log.write(f"{index}\t{source}\n")
            fg.manual_seed(index)  # each call starts from the default process state
            fg.set_grad_enabled(True)
            fg.set_printoptions(profile="default")
            fg.use_deterministic_algorithms(False)
            broken = execute(source, dict(namespace_base))
            if broken is not None:
                log.write(f"BROKEN\t{broken}\n")
                return 3
        log.write("DONE\n")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
