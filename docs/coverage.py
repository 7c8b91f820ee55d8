"""Writes docs/coverage.md: which names of PyTorch's API fastgrad provides.

    python docs/coverage.py            # docs/coverage.md from docs/pytorch_api.txt and fastgrad
    python docs/coverage.py --torch    # first re-read PyTorch's names into docs/pytorch_api.txt

The PyTorch side is a list kept in the repository (docs/pytorch_api.txt, read from torch 2.13 by
--torch), so the document can be regenerated, and checked (tests/test_coverage_doc.py), without
PyTorch installed. A name counts as provided when fastgrad has an attribute of that name in the same
place (fastgrad.X, fastgrad.Tensor.X, fastgrad.nn.X, ...); tests/test_api.py checks that the
reference backend has the same names.

The surface is what a CPU program in float and integer dtypes calls: the listed namespaces' public
names, less the families in EXCLUDED (each with its reason), which a program written for fastgrad's
scope does not reach. Counts before exclusion are shown too.
"""

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
SURFACE_FILE = DOCS / "pytorch_api.txt"
COVERAGE_FILE = DOCS / "coverage.md"

# Namespace -> where its names live in PyTorch. Tensor is a class, the rest are modules.
NAMESPACES = [
    "torch",
    "torch.Tensor",
    "torch.nn",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.optim",
    "torch.optim.lr_scheduler",
    "torch.utils.data",
    "torch.linalg",
    "torch.autograd",
]

# Name patterns left out of the surface, and why.
EXCLUDED = [
    (
        r"^(cudnn|miopen|mkldnn|fbgemm|mps|xpu|vulkan|cuda|nnpack|mtia)_|_(cudnn|miopen|mkldnn|vulkan)$",
        "accelerator and vendor-library entry points",
    ),
    (
        r"quantiz|^q_|^qint|^quint|^int_repr$|^fake_quant|^choose_qparams|^dequantize$|_per_(channel|tensor)",
        "quantized tensors",
    ),
    (
        r"sparse|^(c|r)ow_indices|^ccol_|^col_indices|^(indices|values)(_copy)?$|^to_dense$|^hspmm$|^dsmm$|^hsmm$|^smm$|^spmm$|_nnz$|^coalesce|^is_coalesced$",
        "sparse tensors",
    ),
    (
        r"^(complex\d*|chalf|cfloat|cdouble|conj.*|is_conj|resolve_conj|resolve_neg|is_neg|imag|real|angle|polar|view_as_(real|complex)|adjoint|sgn_)$",
        "complex numbers",
    ),
    (r"^(float8_|float4_|bits|uint(1|2|3|4|5|6|7|16|32|64)$|int[1-7]$|bit$)", "dtypes without arithmetic on CPU"),
    (
        r"^sym_|^Sym|Type$|^(AVG|SUM|import_ir_module.*|parse_ir|parse_schema|parse_type_comment|merge_type_from_type_comment|unify_type_list|fork|wait|jit)$",
        "TorchScript and symbolic shapes",
    ),
    (
        r"^(compiled_with_cxx11_abi|export|cond|vmap|func|library|fx|onnx|_?dynamo|cpp)$",
        "the compiler stack beyond compile (fastgrad.compile captures and replays: docs/compile.md)",
    ),
    (r"^(?!autocast$).*autocast", "mixed-precision autocast internals"),
    (
        r"^(?!index_copy$).*_copy$|^(select|slice|diagonal|as_strided)_scatter$",
        "view-copy and scatter variants for compiler backends",
    ),
    (
        r"Storage$|^storage$|^untyped_storage$|^is_storage$|^from_file$|^share_memory_$|^is_shared$",
        "storage objects and shared memory",
    ),
    (
        r"^(is_distributed|distributed|DistributedSampler|get_device|is_pinned|pin_memory|is_vulkan_available|is_nested|nested.*|is_mkldnn|is_meta|is_quantized|is_sparse.*|is_xla|is_ipu|is_mps|is_mtia|is_xpu|is_maia|is_hpu|Event|Stream)$",
        "distributed, pinned, nested and device-specific queries",
    ),
    (
        r"DataPipe$|^DataChunk$|^functional_datapipe$|^guaranteed_datapipes_determinism$|^non_deterministic$|^runtime_validation.*|^argument_validation$",
        "torch.utils.data's deprecated DataPipes",
    ),
]
EXCLUDED_RE = [(re.compile(pattern), why) for pattern, why in EXCLUDED]


def excluded_because(name):
    for pattern, why in EXCLUDED_RE:
        if pattern.search(name):
            return why
    return None


# ---- reading PyTorch's names (--torch)


def torch_names(namespace):
    """The public names of one PyTorch namespace: a module's __all__ (or its public functions and
    classes when it has none), a class's public attributes."""
    import torch  # noqa: F401  (the namespaces below are its submodules)

    if namespace == "torch.Tensor":
        return sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
    module = importlib.import_module(namespace)
    names = getattr(module, "__all__", None)
    if namespace == "torch":  # less the C++ classes of TorchScript's IR and compiler (pybind11 types)
        names = [n for n in names if type(getattr(torch, n, None)).__name__ != "pybind11_type"]
    if names is None:  # torch.nn.functional: its functions and classes, not what it imports for typing
        names = [
            n
            for n, obj in vars(module).items()
            if (inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.isclass(obj))
            and getattr(obj, "__module__", "").startswith("torch")
        ]
    return sorted({n for n in names if not n.startswith("_") and not inspect.ismodule(getattr(module, n, None))})


def write_surface():
    import torch

    lines = [
        f"# PyTorch {torch.__version__.split('+')[0]}: public names per namespace (python docs/coverage.py --torch)"
    ]
    for namespace in NAMESPACES:
        lines += ["", f"[{namespace}]", *torch_names(namespace)]
    SURFACE_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_surface():
    """{namespace: [names]} and the PyTorch version line, from docs/pytorch_api.txt."""
    surface, namespace = {}, None
    text = SURFACE_FILE.read_text(encoding="utf-8")
    for line in text.splitlines()[1:]:
        if line.startswith("["):
            namespace = line.strip("[]")
            surface[namespace] = []
        elif line:
            surface[namespace].append(line)
    return surface, text.splitlines()[0]


# ---- what fastgrad provides


def fastgrad_object(namespace):
    """fastgrad's counterpart of a PyTorch namespace, or None if fastgrad has none."""
    path = namespace.replace("torch", "fastgrad", 1)
    module_name, _, last = path.rpartition(".")
    try:
        if last == "Tensor":
            return importlib.import_module(module_name).Tensor
        return importlib.import_module(path)
    except ImportError:
        return None


def render():
    surface, version_line = read_surface()
    rows, sections = [], []
    total_names = total_provided = 0
    for namespace, names in surface.items():
        counterpart = fastgrad_object(namespace)
        in_scope = [n for n in names if excluded_because(n) is None]
        provided = [n for n in in_scope if counterpart is not None and hasattr(counterpart, n)]
        missing = [n for n in in_scope if n not in provided]
        total_names += len(in_scope)
        total_provided += len(provided)
        share = percent(len(provided), len(in_scope))
        rows.append(f"| `{namespace}` | {len(names)} | {len(in_scope)} | {len(provided)} | {share} |")
        sections += [
            "",
            f"## `{namespace}`",
            "",
            f"Provided ({len(provided)}): " + (", ".join(f"`{n}`" for n in provided) or "none"),
            "",
            f"Missing ({len(missing)}): " + (", ".join(f"`{n}`" for n in missing) or "none"),
        ]
    rows.append(f"| all | | {total_names} | {total_provided} | {percent(total_provided, total_names)} |")
    reasons = sorted({why for _, why in EXCLUDED})
    return (
        "\n".join(
            [
                "# PyTorch API coverage",
                "",
                "Generated by `python docs/coverage.py` (tests/test_coverage_doc.py fails when this file is stale).",
                f"PyTorch's side: docs/pytorch_api.txt ({version_line.lstrip('# ').split(':')[0]}).",
                "A name is provided when fastgrad has it in the same place; fastgrad.reference has the same names.",
                "",
                "In scope: each namespace's public names less these families (patterns in docs/coverage.py): "
                + "; ".join(reasons)
                + ".",
                "",
                "| namespace | PyTorch names | in scope | provided | coverage |",
                "|---|---:|---:|---:|---:|",
                *rows,
                *sections,
            ]
        )
        + "\n"
    )


def percent(part, whole):
    return f"{100 * part / whole:.0f}%" if whole else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", action="store_true", help="re-read PyTorch's names first (needs torch)")
    args = parser.parse_args(argv)
    if args.torch:
        write_surface()
    COVERAGE_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {COVERAGE_FILE.relative_to(DOCS.parent)}")


if __name__ == "__main__":
    sys.exit(main())
