"""Tensor repr/str text, identical to PyTorch's (torch/_tensor_str.py) under default print options.

Pure Python + numpy so the C++ core only has to hand over its data as an ndarray.
"""

import math

import numpy as np


class PrintOptions:
    """What set_printoptions sets, shared by both backends as PyTorch's PRINT_OPTS."""

    precision = 4  # digits after the point
    threshold = 1000  # more elements than this are summarized with '...'
    edgeitems = 3  # elements kept at each end of a summarized dimension
    linewidth = 80
    sci_mode = None  # None: scientific notation when the values' range asks for it


PRINT_OPTS = PrintOptions()
PROFILES = {  # precision, threshold, edgeitems, linewidth
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """As PyTorch's: a profile first (an unknown one is ignored, as there), then each option given;
    sci_mode is always set, so leaving it out returns to automatic."""
    if profile in PROFILES:
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = PROFILES[profile]
    for name, value in [
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ]:
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """Formats single elements with one shared style and width, so that all columns line up.

    The style is chosen from the tensor's nonzero finite values only: zeros, nan and inf never
    decide it and never widen it, exactly as in torch.
    """

    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = values.ravel()
        if not self.floating:
            self.width = max(len(str(v)) for v in flat.tolist())
            return
        chosen = flat[np.isfinite(flat) & (flat != 0)]
        if chosen.size == 0:
            return
        magnitudes = np.abs(chosen).astype(np.float64)
        smallest, largest = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(chosen == np.ceil(chosen)))
        self.sci_mode = bool(largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode
        if self.sci_mode:
            self.width = max(len(format(v, f".{PRINT_OPTS.precision}e")) for v in chosen.tolist())
        elif self.int_mode:
            # +1 for the '.' that marks integral values as floating point ('2.').
            self.width = max(len(format(v, ".0f")) + 1 for v in chosen.tolist())
        else:
            self.width = max(len(format(v, f".{PRINT_OPTS.precision}f")) for v in chosen.tolist())

    def format(self, value):
        """value: a Python scalar (from ndarray.tolist / item, so float32 prints as its exact double)."""
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = format(value, f".{PRINT_OPTS.precision}e")
        elif self.int_mode:
            text = format(value, ".0f")
            if math.isfinite(value):  # nan and inf get no '.'
                text += "."
        else:
            text = format(value, f".{PRINT_OPTS.precision}f")
        return text.rjust(self.width)


def _summarized(values):
    """The elements a summarized print shows: PRINT_OPTS.edgeitems from each end of every long dimension.

    The formatter is built from these alone, so hidden elements do not change the style. One
    gather over all dimensions at once reads only these elements (a stride-0 view from expand may
    stand for far more elements than fit in memory).
    """
    keep = [
        list(range(PRINT_OPTS.edgeitems)) + list(range(size - PRINT_OPTS.edgeitems, size))
        if size > 2 * PRINT_OPTS.edgeitems
        else list(range(size))
        for size in values.shape
    ]
    return values[np.ix_(*keep)]


def _body(values, indent, summarize, formatter):
    """The bracketed text of a non-empty array; indent is the column its '[' sits in."""
    if values.ndim == 0:
        return formatter.format(values.item())

    if values.ndim == 1:

        def pieces(part):
            return [formatter.format(v) for v in part.tolist()]
    else:

        def pieces(part):
            return [_body(row, indent + 1, summarize, formatter) for row in part]

    if summarize and values.shape[0] > 2 * PRINT_OPTS.edgeitems:
        # Vectors give ' ...' so it lines up with the space-padded numbers around it.
        gap = " ..." if values.ndim == 1 else "..."
        items = pieces(values[: PRINT_OPTS.edgeitems]) + [gap] + pieces(values[-PRINT_OPTS.edgeitems :])
    else:
        items = pieces(values)

    if values.ndim == 1:
        # Each element takes its width plus ', '; torch wraps by count, not by measured length.
        per_line = max(1, (PRINT_OPTS.linewidth - indent) // (formatter.width + 2))
        items = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
        separator = ",\n" + " " * (indent + 1)
    else:
        # Sub-blocks of a d-dim tensor are set apart by d-1 newlines (blank lines between matrices).
        separator = "," + "\n" * (values.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(items) + "]"


def _add_suffixes(text, suffixes, indent):
    """Append ', suffix' items and the closing ')', moving a suffix to its own line when it would overflow."""
    # torch takes the last line's length as len - rfind('\n') + 1, i.e. two more than it is;
    # copied as is so the wrap happens at the same column.
    line_length = len(text) - text.rfind("\n") + 1
    parts = [text]
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(values, *, dtype_name, show_dtype, grad_fn=None, requires_grad=False, prefix="tensor("):
    """values: numpy.ndarray (any of the tensor dtypes numpy has; bfloat16 as float32) holding the tensor's
    data in its shape.
    dtype_name: what to print after 'dtype=' (e.g. 'fastgrad.float64').
    show_dtype: whether PyTorch would print the dtype suffix (the caller decides: float32, int64 and bool
    omit it, every other dtype shows it).
    grad_fn: name like 'MulBackward0' -> suffix 'grad_fn=<MulBackward0>'; else requires_grad=True ->
    'requires_grad=True'.
    Returns the full string, e.g. 'tensor([2.], requires_grad=True)', 'tensor(30., grad_fn=<MulBackward0>)'."""
    values = np.asarray(values)
    indent = len(prefix)
    suffixes = []
    if values.size == 0:
        body = "[]"
        # '[]' alone reads as shape (0,); any other empty shape is spelled out.
        if values.ndim != 1:
            suffixes.append(f"size={tuple(values.shape)}")
        # With no elements to tell ints and bools apart from floats, torch names every dtype
        # except the default float32, so int64 and bool show it here too.
        if show_dtype or values.dtype.kind != "f":
            suffixes.append(f"dtype={dtype_name}")
    else:
        summarize = values.size > PRINT_OPTS.threshold
        formatter = _Formatter(_summarized(values) if summarize else values)
        body = _body(values, indent, summarize, formatter)
        if show_dtype:
            suffixes.append(f"dtype={dtype_name}")
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def format_scalar(value, spec):
    """Tensor.__format__ for a 0-d tensor: format(tensor.item(), spec).

    torch does this even for an empty spec, so f"{t}" is '30.0', not 'tensor(30.)', and a float32
    shows its exact double ('0.10000000149011612'). value may be a Python scalar, a numpy scalar or a
    0-d array: numpy formats those through the same Python scalar.
    Tensors with one or more dims (even one-element ones) are not formatted here: torch falls back to
    object.__format__, so an empty spec gives str(tensor) and any other spec raises TypeError.
    """
    return format(value, spec)
