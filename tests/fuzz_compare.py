"""Comparing the outcomes of one program on two backends (tests/fuzz_programs.py), and checking its
gradients against finite differences.

assert_same_outcome compares values, gradients and exceptions, within TOLERANCES and the rounding an op
may add; TORCH_BUGS are PyTorch's own bugs a program may hit (the comparison with torch is skipped),
DIFFERENCES the documented places where fastgrad deliberately differs from PyTorch.
assert_gradients_match_finite_differences checks float64 programs' leaf gradients on fastgrad.
"""

import math

import numpy as np

import fastgrad

from fuzz_run import FLOAT, _describe_error, run

# ---------------------------------------------------------------------------------------------
# Comparing outcomes

TOLERANCES = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-7, atol=1e-9)}

# Exception types that legitimately differ from PyTorch's: (fastgrad's type, torch's type, why).
TORCH_EXCEPTION_DIFFERENCES = []


def _uses(program, *templates):
    return any(op.template in templates for op in program.ops)


def _raised_at(outcome, text):
    return outcome.error is not None and text in outcome.error[2]


def _raised_by_line(outcome, line):
    """Whether the program raised at or before `line` (a line number, or 'backward')."""
    if outcome.error is None or outcome.error[0] == "backward":
        return outcome.error is not None and line == "backward"
    return line == "backward" or outcome.error[0] <= line


# PyTorch 2.13 bugs: (what, test on the program and the two outcomes). Where one applies, the
# program is not compared with torch (it still is with the reference and finite differences).
TORCH_BUGS = [
    (
        "clamp(x, min, max) with tensor bounds: backward fails when a bound that requires grad is smaller than the "
        "broadcast result (RuntimeError: output with shape [..] doesn't match the broadcast shape [..])",
        lambda program, ours, theirs: (
            ours.error is None
            and _raised_at(theirs, "doesn't match the broadcast shape")
            and theirs.error[0] == "backward"
            and _uses(program, "torch.clamp({a}, {lo}, {hi})", "{a}.clamp(min={lo})")
        ),
    ),
    (
        "an integer or bool tensor that a tensor requiring grad was written into (x_bool[mask] = y) requires grad",
        lambda program, ours, theirs: (
            theirs.values is not None and any(v[0] not in FLOAT and v[2] for v in theirs.values.values())
        ),
    ),
    (
        'an INTERNAL ASSERT fails ("please report a bug to PyTorch"): e.g. backward after writing a tensor that '
        "requires grad into an integer tensor, x_int[...] = x_float",
        lambda program, ours, theirs: _raised_at(theirs, "INTERNAL ASSERT FAILED"),
    ),
    (
        "huber_loss of an input and a target of different dtypes: backward fails (RuntimeError: Found dtype Double but "
        "expected Float)",
        lambda program, ours, theirs: (
            _raised_at(theirs, "Found dtype")
            and theirs.error[0] == "backward"
            and not _raised_by_line(ours, "backward")
            and any(op.template.startswith("torch.nn.functional.huber_loss(") for op in program.ops)
        ),
    ),
    (
        "bmm (and matmul, which uses it) of operands of different dtypes does not raise when the result is empty or "
        "the inner dim is 0 (and then returns the second operand's dtype)",
        lambda program, ours, theirs: (
            _raised_at(ours, "to have the same dtype")
            and not _raised_by_line(theirs, ours.error[0])
            and _uses(program, "{a}.bmm({b})", "{a} @ {b}", "torch.matmul({a}, {b})")
        ),
    ),
    (
        "adaptive average pooling of an input with an empty channel dim: the forward gives the empty result, its "
        "backward then refuses it (Expected grad_output to have non-zero size for non-batch dimensions)",
        lambda program, ours, theirs: (
            ours.error is None
            and theirs.error is not None
            and theirs.error[0] == "backward"
            and _raised_at(theirs, "Expected grad_output to have non-zero size for non-batch dimensions")
        ),
    ),
]


def _stale_view_leaf_error(program, ours, theirs):
    if not _raised_at(theirs, "a leaf Variable that requires grad is being used") or theirs.error[0] == "backward":
        return False
    line = theirs.error[0]
    ours_later = ours.error is None or ours.error[0] == "backward" or ours.error[0] > line
    return ours_later and program.args[line].get("a", "x").startswith("v")


TORCH_BUGS.append(
    (
        "an in-place op on a view made before its base started to require grad (through another in-place op) "
        "raises 'a leaf Variable that requires grad is being used in an in-place operation.' unless the view's "
        "grad_fn was read first (is_leaf reads the stale grad_fn, requires_grad does not)",
        _stale_view_leaf_error,
    )
)


def _layout_dependent_view(program, ours, theirs):
    raised = [o for o in (ours, theirs) if _raised_at(o, "view size is not compatible")]
    if len(raised) != 1 or raised[0].error[0] == "backward":
        return False
    other = theirs if raised[0] is ours else ours
    line = raised[0].error[0]
    return program.ops[line].template.startswith("{a}.view(") and (other.error is None or other.error[0] != line)


COMPOSED_FUNCTIONS = tuple(
    f"torch.nn.functional.{name}("
    for name in (
        "leaky_relu",
        "mse_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy_with_logits",
        "soft_margin_loss",
        "multi_margin_loss",
        "multilabel_margin_loss",
        "multilabel_soft_margin_loss",
    )
)


TORCH_BUGS.append(
    (
        "median(dim) of a tensor expanded along dim (stride 0) returns values read from the wrong memory",
        lambda program, ours, theirs: (
            _uses(program, "{a}.median({d}, keepdim=True)[0]")
            and _uses(program, "{a}.expand({s})", "{a}.expand_as({b})")
        ),
    )
)


# Deliberate differences from PyTorch (also in the README): (what, test as for TORCH_BUGS).
DIFFERENCES = [
    (
        "matmul with a batch (>= 3-D) operand: PyTorch sometimes copies an operand (to fold it into a matrix), "
        "fastgrad always works on views of it, so changing that operand in place before backward fails in "
        "fastgrad only",
        lambda program, ours, theirs: (
            theirs.error is None
            and ours.error is not None
            and ours.error[0] == "backward"
            and "modified by an inplace operation" in ours.error[2]
            and _uses(program, "{a} @ {b}", "torch.matmul({a}, {b})")
        ),
    ),
    (
        "leaky_relu, mse_loss, smooth_l1_loss, huber_loss, binary_cross_entropy_with_logits, soft_margin_loss, "
        "multi_margin_loss, multilabel_margin_loss and multilabel_soft_margin_loss are composed of "
        "tensor ops, which save what they need (input - target, ...), not the function's inputs themselves: writing "
        "into those in place afterwards leaves fastgrad's backward valid (it gives the gradient at the values the "
        "function saw), where PyTorch's fused backward refuses",
        lambda program, ours, theirs: (
            ours.error is None
            and _raised_at(theirs, "modified by an inplace operation")
            and theirs.error[0] == "backward"
            and any(op.template.startswith(COMPOSED_FUNCTIONS) for op in program.ops)
        ),
    ),
    (
        "the same composed losses have a second derivative (that of their tensor ops), where PyTorch's fused "
        "backward of some (multi_margin_loss, multilabel_margin_loss) has none: 'derivative for "
        "aten::multi_margin_loss_backward is not implemented'",
        lambda program, ours, theirs: (
            ours.error is None
            and _raised_at(theirs, "_backward is not implemented")
            and theirs.error[0] == "backward"
            and any(op.template.startswith(COMPOSED_FUNCTIONS) for op in program.ops)
        ),
    ),
    (
        "an op on a view made under no_grad whose memory was written since, when the op also has another error (a "
        "dtype it refuses): PyTorch reports the view first (its autograd layer runs before the kernel), fastgrad the "
        "other error",
        lambda program, ours, theirs: (
            _raised_at(theirs, "its base or another view of its base has been")
            and ours.error is not None
            and ours.error[0] == theirs.error[0]
        ),
    ),
    (
        "results of elementwise ops and reductions are contiguous in fastgrad; PyTorch gives them the layout of a "
        "non-contiguous input (x.t() + 2 is stored transposed), so whether a later .view() of them is possible "
        "can differ",
        _layout_dependent_view,
    ),
]


def torch_bug(program, ours, theirs):
    """The TORCH_BUGS or DIFFERENCES entry that explains why torch's outcome differs from ours."""
    return next((what for what, applies in TORCH_BUGS + DIFFERENCES if applies(program, ours, theirs)), None)


def _same_exception(ours, theirs, strict):
    if ours is theirs:
        return True
    return not strict and any(issubclass(ours, a) and issubclass(theirs, b) for a, b, _ in TORCH_EXCEPTION_DIFFERENCES)


# Rounding. Two backends round differently (summation order, libm), so a float32 result may
# differ by more than the tolerance where the program is ill-conditioned (a difference of huge,
# nearly equal terms), and a comparison of nearly equal numbers may come out either way. Each
# backend's float32 result is then compared with its own run of the program in float64: where one
# of them moved by at least 1/SLACK of the difference, the difference is rounding, not a bug (a
# wrong formula gives the same wrong answer in float64).
SLACK = 8


def _within(a, b, dtype, slack=0.0):
    tol = TOLERANCES[dtype]
    with np.errstate(invalid="ignore"):
        ok = np.abs(a - b) <= tol["atol"] + tol["rtol"] * np.abs(b) + slack
        return ok | (np.isnan(a) & np.isnan(b)) | (a == b)  # NaN pairs, equal infinities


def _rounding(x, exact):
    """How far a float32 result is from the float64 one (infinite where only one is NaN), as a
    1-d-or-more array."""
    x, exact = x.astype(np.float64), exact.astype(np.float64)
    with np.errstate(invalid="ignore"):
        d = np.array(np.abs(x - exact), ndmin=1)
    x, exact = np.array(x, ndmin=1), np.array(exact, ndmin=1)
    d[(x == exact) | (np.isnan(x) & np.isnan(exact))] = 0.0
    d[np.isnan(d)] = np.inf
    return d


def _assert_arrays(what, a, b, dtype, names, exact=None, any_nonfinite=False):
    """`exact()` gives both backends' float64 results for this array (or None). `any_nonfinite`:
    inf, -inf and NaN all match each other (see SIGNED_ZERO)."""
    close = _within(a, b, dtype) if dtype in TOLERANCES else (a == b)
    if any_nonfinite and dtype in TOLERANCES:
        close = close | (~np.isfinite(a) & ~np.isfinite(b))
    if a.shape == b.shape and not np.all(close) and exact is not None:
        a64, b64 = exact()
        if a64 is not None and b64 is not None and a64.shape == b64.shape == a.shape:
            if dtype in TOLERANCES:
                slack = SLACK * (_rounding(a, a64) + _rounding(b, b64))
                # An infinite slack: a float32 result is NaN or infinite where its own float64 one is
                # not, rounding blown up (a log of a difference that rounded to 0 in one library): it
                # says nothing about the other's value.
                close = close | _within(a, b, dtype, slack) | np.isinf(slack)
            else:
                close = close | (a != a64) | (b != b64)
    if a.shape != b.shape or not np.all(close):
        with np.printoptions(precision=7, threshold=50):
            raise AssertionError(f"{what}: {names[0]} and {names[1]} differ\n{names[0]}: {a!r}\n{names[1]}: {b!r}")


# The sign of a zero that a matrix product computes differs: PyTorch's BLAS gives -0.25 * 0 as -0.
# for some sizes and 0. for others; fastgrad always 0. A later 1 / x or x ** -2 then turns it
# into inf or -inf (and further on NaN). Against PyTorch, non-finite values of programs with a
# product therefore match whatever their sign or NaN-ness.
PRODUCTS = (
    "{a} @ {b}",
    "torch.matmul({a}, {b})",
    "torch.mm({a}, {b})",
    "{a}.bmm({b})",
    "torch.mv({a}, {b})",
    "torch.dot({a}, {b})",
)


def assert_same_outcome(program, ours, theirs, strict=True, exact=None, second_order=False):
    """`strict` compares exception types exactly (fastgrad vs its reference); otherwise the known
    differences from PyTorch are allowed. `exact` = (ours, theirs): functions that run the program
    in float64 on either backend (see SLACK); used only for float32 programs. `second_order`: the
    gradients are second derivatives, whose formulas differ from PyTorch's where they meet inf or
    NaN (x / 0), so against PyTorch any non-finite gradient matches any other."""
    names = (ours.backend, theirs.backend)
    if ours.error or theirs.error:
        same = (
            ours.error
            and theirs.error
            and ours.error[0] == theirs.error[0]
            and _same_exception(ours.error[1], theirs.error[1], strict)
        )
        if not same:
            raise AssertionError(
                f"{names[0]}: {_describe_error(ours.error)}\n{names[1]}: {_describe_error(theirs.error)}"
            )
        return
    # float32 rounding carries over into the float64 values computed from float32 ones
    single = any(v[0] == "float32" for v in ours.values.values())
    signed_zeros = not strict and _uses(program, *PRODUCTS)
    upcast = {}

    def exact_arrays(kind, name):
        if not upcast:
            upcast.update(enumerate(run_() for run_ in exact))
        found = []
        for outcome in upcast.values():
            array = None
            if outcome.error is None:
                array = outcome.values[name][4] if kind == "value" else outcome.grads.get(name)
            found.append(array)
        return found

    def check(what, a, b, dtype, kind, name):
        if dtype in FLOAT and single:
            dtype = "float32"
        more = (lambda: exact_arrays(kind, name)) if single and exact is not None else None
        _assert_arrays(what, a, b, dtype, names, more, signed_zeros or (kind == "grad" and second_order and not strict))

    for name in program.values:
        (d0, s0, r0, l0, v0), (d1, s1, r1, l1, v1) = ours.values[name], theirs.values[name]
        if (d0, s0) != (d1, s1):
            raise AssertionError(f"{name}: dtype/shape {d0} {s0} on {names[0]}, {d1} {s1} on {names[1]}")
        if (r0, l0) != (r1, l1):
            raise AssertionError(f"{name}: requires_grad/is_leaf {r0}/{l0} on {names[0]}, {r1}/{l1} on {names[1]}")
        check(name, v0, v1, d0, "value", name)
    if (ours.loss is None) != (theirs.loss is None):
        raise AssertionError(f"loss: {ours.loss} on {names[0]}, {theirs.loss} on {names[1]}")
    if ours.grads.keys() != theirs.grads.keys():
        raise AssertionError(
            f"gradients kept: {sorted(ours.grads)} on {names[0]}, {sorted(theirs.grads)} on {names[1]}"
        )
    for name, g0 in ours.grads.items():
        g1 = theirs.grads[name]
        if (g0 is None) != (g1 is None):
            raise AssertionError(f"{name}.grad: {type(g0).__name__} on {names[0]}, {type(g1).__name__} on {names[1]}")
        if g0 is not None:
            check(f"{name}.grad", g0, g1, ours.values[name][0], "grad", name)


# ---------------------------------------------------------------------------------------------
# Finite differences (float64 programs, on fastgrad)

FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-5, 1e-3
FD_MAX_ELEMENTS = 48  # per program, so the check stays cheap


def _close(a, b, scale, noise=0.0):
    return abs(a - b) <= FD_ATOL + FD_RTOL * scale + noise


def assert_gradients_match_finite_differences(program, outcome, m=fastgrad):
    """Central differences of the loss against each leaf element's gradient. Elements where the
    loss is not differentiable (a kink or a jump: the one-sided slopes differ, as at relu(0), a
    tie of max, or a comparison flipping) and non-finite values are skipped."""
    if outcome.error or outcome.loss is None or not math.isfinite(outcome.loss):
        return
    if any(meta[0] == "float32" for meta in outcome.values.values()):
        return  # a float32 value rounds too coarsely for differences with eps = 1e-6
    if not all(
        op_.smooth(args) if callable(op_.smooth) else op_.smooth for op_, args in zip(program.ops, program.args)
    ):
        return
    arrays = [leaf.array.astype(np.float64) if leaf.dtype == "float64" else leaf.array for leaf in program.leaves]

    def loss_at(i, flat, delta):
        changed = list(arrays)
        changed[i] = arrays[i].copy()
        changed[i].reshape(-1)[flat] += delta
        result = run(program, m, changed, backward=False)
        return math.nan if result.error or result.loss is None else result.loss

    checked = 0
    for i, leaf in enumerate(program.leaves):
        grad = outcome.grads.get(leaf.name)
        if not leaf.requires_grad or leaf.dtype != "float64" or grad is None:
            continue
        for flat in range(leaf.array.size):
            if checked == FD_MAX_ELEMENTS:
                return
            checked += 1
            plus, minus = loss_at(i, flat, FD_EPS), loss_at(i, flat, -FD_EPS)
            analytic = float(grad.reshape(-1)[flat])
            if not all(map(math.isfinite, (plus, minus, analytic))):
                continue
            right, left = (plus - outcome.loss) / FD_EPS, (outcome.loss - minus) / FD_EPS
            # the rounding error of a difference of two large losses, divided by the step
            noise = 8 * np.finfo(np.float64).eps * max(abs(plus), abs(minus), abs(outcome.loss)) / FD_EPS
            if not _close(right, left, max(abs(right), abs(left)), 2 * noise):
                continue  # not differentiable here
            central = (plus - minus) / (2 * FD_EPS)
            if _close(analytic, central, abs(central), noise):
                continue
            # A jump with equal one-sided slopes (sign(0), a comparison at a tie) grows as the
            # step shrinks; a true derivative does not.
            half = (loss_at(i, flat, FD_EPS / 2) - loss_at(i, flat, -FD_EPS / 2)) / FD_EPS
            if _close(central, half, abs(central), 2 * noise):
                raise AssertionError(
                    f"{leaf.name}.grad[{np.unravel_index(flat, leaf.array.shape)}]: "
                    f"backward gives {analytic!r}, finite differences {central!r}"
                )
