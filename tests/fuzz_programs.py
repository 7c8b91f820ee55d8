"""Random tensor programs, run on every backend and compared (the differential fuzzer).

A program is a list of Python lines written against the PyTorch API, e.g.

    x0 = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    v0 = x0.t()[::2]
    v1 = torch.maximum(v0, 0.5 * v0)
    v1.add_(x1)

`torch` in those lines is whichever backend runs them (fastgrad, fastgrad.reference, torch), so
the repr of a program is also its source. Every backend gets the same leaves (built from the same
numpy arrays); the program ends with a scalar loss (a weighted sum of every float value, with
fixed weights) and `loss.backward()`.

The generator draws ops from OPS, one entry per op form: a template whose {placeholders} are each
filled by a drawer (pick a tensor of some dtype, a broadcastable partner, dims, an index, ...).
While it draws, the generator runs each line on fastgrad, so drawers see real shapes (including
data-dependent ones such as mask indexing); when fastgrad raises, the program ends there and the
other backends must raise the same exception at the same line.
"""

import functools
import importlib
import math
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import fastgrad

FLOAT = ("float32", "float64")
NUM = FLOAT + ("int64",)
ANY = NUM + ("bool",)


def dtype_name(dtype):
    """'torch.float32' / 'fastgrad.float32' -> 'float32'."""
    return str(dtype).split(".")[-1]


# ---------------------------------------------------------------------------------------------
# Programs


@dataclass
class Leaf:
    name: str
    array: np.ndarray  # values, in the leaf's numpy dtype
    dtype: str
    requires_grad: bool

    def source(self):
        dtype = "" if self.dtype == "float32" else f", dtype=torch.{self.dtype}"
        grad = ", requires_grad=True" if self.requires_grad else ""
        if self.array.size == 0:  # torch.tensor([]) would lose the shape
            return f"{self.name} = torch.zeros({tuple(self.array.shape)}{dtype}{grad})"
        return f"{self.name} = torch.tensor({_literal(self.array)}{dtype}{grad})"


def _literal(array):
    """Nested-list source of an array, each number in its shortest exact spelling."""
    if array.ndim:
        return "[" + ", ".join(_literal(a) for a in array) + "]"
    if array.dtype.kind == "f":
        return np.format_float_positional(array[()], unique=True, trim="0")
    return repr(array.item())


class Program:
    def __init__(self, dtype):
        self.dtype = dtype  # the float dtype of most leaves
        self.leaves = []  # [Leaf]
        self.lines = []  # Python statements
        self.ops = []  # the Op of each line
        self.args = []  # and the text of its placeholders
        self.values = []  # names of leaves and results, in creation order
        self.floats = []  # names that enter the loss (float values at the end)

    def source(self):
        body = [leaf.source() for leaf in self.leaves] + list(self.lines)
        body += [
            f"loss = sum((v * w(i, v)).sum() for i, v in enumerate([{', '.join(self.floats)}]))  # w: loss_weight",
            "if getattr(loss, 'requires_grad', False):  # (run() does not call backward otherwise)",
            "    loss.backward()",
        ]
        return "\n".join(body)

    def __repr__(self):
        return "\n" + self.source() + "\n"

    def _copy(self):
        p = Program(self.dtype)
        for name in ("leaves", "lines", "ops", "args", "values", "floats"):
            setattr(p, name, list(getattr(self, name)))
        return p

    def _forget(self, name):
        self.values = [v for v in self.values if v != name]
        self.floats = [v for v in self.floats if v != name]

    def without_line(self, k):
        p = self._copy()
        defined = re.match(r"(?:with [^:]*: )?(v\d+) = ", p.lines[k])
        del p.lines[k], p.ops[k], p.args[k]
        if defined:
            p._forget(defined.group(1))
        return p

    def without_leaf(self, k):
        p = self._copy()
        p._forget(p.leaves.pop(k).name)
        return p


def minimize(program, fails):
    """Deletes lines, then leaves, one at a time while `fails(smaller)` still holds (hypothesis's
    shrinking cannot always delete a line, as later draws depend on it)."""
    changed = True
    while changed:
        changed = False
        for without, count in ((Program.without_line, len(program.lines)), (Program.without_leaf, len(program.leaves))):
            for k in reversed(range(count)):
                smaller = without(program, k)
                if fails(smaller):
                    program, changed = smaller, True
    return program


def loss_weight(i, shape):
    """The fixed weight that multiplies the i-th float value in the loss; depends only on i and the
    shape. Weights rarely coincide, so that kinks of two ops at one point seldom cancel out into a
    slope that finite differences cannot tell from a derivative."""
    rng = np.random.default_rng([i] + list(shape))
    return rng.integers(5000, 15000, size=shape) / 10000.0


@functools.lru_cache(maxsize=None)
def _compiled(line):
    return compile(line, "<program>", "exec")


def _leaf_tensor(m, leaf, array=None, requires_grad=True, upcast=False):
    array = leaf.array if array is None else array
    dtype = "float64" if upcast and leaf.dtype == "float32" else leaf.dtype
    return m.tensor(array, dtype=getattr(m, dtype), requires_grad=leaf.requires_grad and requires_grad)


# ---------------------------------------------------------------------------------------------
# Running a program on one backend


@dataclass
class Outcome:
    backend: str
    error: tuple = None  # (line number or "backward", exception type, message)
    values: dict = None  # name -> (dtype, shape, requires_grad, is_leaf, numpy values)
    loss: object = None  # float, or None when nothing required grad
    grads: dict = None  # leaf name -> numpy gradient or None

    def __repr__(self):
        return f"<{self.backend}: {_describe_error(self.error)}, loss {self.loss}>"


def _snapshot(t):
    return (
        dtype_name(t.dtype),
        tuple(t.shape),
        bool(t.requires_grad),
        bool(t.is_leaf),
        np.array(t.detach().numpy(), copy=True),
    )


def _loss(m, ns, names):
    loss = None
    for i, name in enumerate(names):
        t = ns[name]
        term = (t * m.tensor(loss_weight(i, tuple(t.shape)), dtype=t.dtype)).sum()
        loss = term if loss is None else loss + term
    return loss


def _second_order_grads(m, program, ns, loss):
    """Each leaf's gradient of a weighted sum (loss_weight) of the loss's gradients, computed with
    create_graph=True: a Hessian-vector product. Zeros where none arrives (whether a gradient that
    does not depend on a leaf is connected to it at all differs between the backends' formulas)."""
    leaves = [leaf.name for leaf in program.leaves if leaf.requires_grad]
    firsts = m.autograd.grad(loss, [ns[name] for name in leaves], create_graph=True, allow_unused=True)
    # Weighted by leaf, and only the gradients that require grad: one that is constant (relu's,
    # for example) may or may not be connected to the leaves, depending on the backend's formula.
    total = None
    for i, g in enumerate(firsts):
        if g is not None and g.requires_grad:
            term = (g * m.tensor(loss_weight(i, tuple(g.shape)), dtype=g.dtype)).sum()
            total = term if total is None else total + term
    if total is None:
        return {name: m.zeros_like(ns[name]) for name in leaves}
    seconds = m.autograd.grad(total, [ns[name] for name in leaves], materialize_grads=True)
    return dict(zip(leaves, seconds))


def run(program, m, arrays=None, backward=True, upcast=False, order=1):
    """Runs `program` on tensor module `m`. `arrays` replaces the leaves' values (finite
    differences); backward=False skips the backward pass and builds leaves without grad; upcast
    makes float32 leaves float64 (an estimate of the exact result). order=2 replaces the leaves'
    gradients with second derivatives (_second_order_grads)."""
    ns = {"torch": m, "np": np}
    out = Outcome(m.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, leaf in enumerate(program.leaves):
            ns[leaf.name] = _leaf_tensor(m, leaf, None if arrays is None else arrays[i], backward, upcast)
        for number, line in enumerate(program.lines):
            try:
                exec(_compiled(line), ns)
            except Exception as e:  # noqa: BLE001 -- any exception is a result to compare
                out.error = (number, type(e), str(e).split("\n")[0])
                return out
        try:  # the loss reads every value's history: PyTorch refuses a multi-output view whose base changed
            loss = _loss(m, ns, program.floats)
        except Exception as e:  # noqa: BLE001
            out.error = ("backward", type(e), str(e).split("\n")[0])
            return out
        out.loss = None if loss is None else float(loss.detach().item())
        if backward:
            out.values = {name: _snapshot(ns[name]) for name in program.values}
            grads = {}
            if loss is not None and loss.requires_grad:
                try:
                    if order == 2:
                        grads = _second_order_grads(m, program, ns, loss)
                    else:
                        loss.backward()
                except Exception as e:  # noqa: BLE001
                    out.error = ("backward", type(e), str(e).split("\n")[0])
                    return out
            out.grads = {}
            for leaf in program.leaves:
                if leaf.requires_grad:
                    g = grads.get(leaf.name) if order == 2 else ns[leaf.name].grad
                    # clone(): PyTorch may give a gradient it knows to be zero as a ZeroTensor, with no memory
                    out.grads[leaf.name] = None if g is None else np.array(g.clone().numpy(), copy=True)
            if order == 1:  # and the gradients that non-leaves were asked to keep (retain_grad)
                for name in program.values:
                    t = ns[name]
                    if not t.is_leaf and t.retains_grad:
                        out.grads[name] = None if t.grad is None else np.array(t.grad.clone().numpy(), copy=True)
    return out


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
    for name in ("leaky_relu", "mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits")
)


# Deliberate differences from PyTorch (also in the README): (what, test as for TORCH_BUGS).
DIFFERENCES = [
    (
        "split/chunk outputs are ordinary views (slices) in fastgrad, and may be modified in place; PyTorch marks them "
        "as outputs of a multi-view function and refuses that (and later use of them once their base changed)",
        lambda program, ours, theirs: (
            _raised_at(theirs, "output of a function that returns multiple views")
            and _uses(program, "{a}.split({n}, {d})[-1]", "torch.chunk({a}, {n}, {d})[0]")
        ),
    ),
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
        "leaky_relu, mse_loss, smooth_l1_loss, huber_loss and binary_cross_entropy_with_logits are composed of "
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


def _describe_error(error):
    if error is None:
        return "no exception"
    where, kind, message = error
    return f"{kind.__name__}({message!r}) at {'line ' + str(where) if where != 'backward' else 'backward'}"


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
                close = close | _within(a, b, dtype, SLACK * (_rounding(a, a64) + _rounding(b, b64)))
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


# ---------------------------------------------------------------------------------------------
# Backends


def backends():
    """fastgrad first (the generator's oracle for shapes), then the reference and torch when
    importable. FASTGRAD_FUZZ_BACKENDS=fastgrad,torch picks a subset."""
    wanted = os.environ.get("FASTGRAD_FUZZ_BACKENDS", "fastgrad,fastgrad.reference,torch").split(",")
    found = [fastgrad]
    for name in wanted:
        if name and name != "fastgrad":
            try:
                found.append(importlib.import_module(name))
            except ImportError:
                pass
    return found


# ---------------------------------------------------------------------------------------------
# The generator's state: the program so far, and its values as fastgrad tensors.

SIZES = [2, 3, 1, 4, 2, 3, 1, 2, 3, 1, 4, 2, 3, 0]  # dim sizes, simplest first (hypothesis shrinks towards the front)
RANKS = [1, 2, 0, 3, 2, 1, 4]
SCALARS = ["2", "0.5", "-1", "1.5", "3", "-2.5", "0", "1", "-0.5"]


class Gen:
    def __init__(self, draw, dtype):
        self.draw = draw
        self.program = Program(dtype)
        self.ns = {"torch": fastgrad, "np": np}

    # -- hypothesis draws (each shrinks towards its first / most common option)
    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def rarely(self, percent=5):
        return self.draw(st.integers(0, 99)) >= 100 - percent

    # -- values
    def tensor(self, name):
        return self.ns[name]

    def meta(self, name):
        t = self.ns[name]
        return tuple(t.shape), dtype_name(t.dtype)

    def _is_leaf_requiring_grad(self, name):
        try:
            return self.tensor(name).is_leaf and self.tensor(name).requires_grad
        except RuntimeError:  # a view made under no_grad whose memory was written since: is_leaf raises
            return False

    def run(self, line):
        """Adds a line to the program, running it on fastgrad; returns False if it raised."""
        self.program.lines.append(line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(_compiled(line), self.ns)
            except Exception:  # noqa: BLE001 -- the program ends with this error
                return False
        return True

    def evaluate(self, expression):
        """Runs an expression on fastgrad without adding it to the program (None if it raises)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return eval(_compiled_eval(expression), self.ns)
            except Exception:  # noqa: BLE001
                return None

    def new_value(self, line_template):
        name = f"v{len(self.program.values) - len(self.program.leaves)}"
        ok = self.run(line_template.format(out=name))
        # (a 0-d tensor compared with an ndarray is a Python bool, in PyTorch too: not a value)
        if ok and isinstance(self.ns[name], fastgrad.Tensor):
            self.program.values.append(name)
        return ok

    def finish(self):
        """The program, its loss made of every float value."""
        self.program.floats = [name for name in self.program.values if self.meta(name)[1] in FLOAT]
        return self.program

    def shape(self, rank=None):
        rank = self.choice(RANKS) if rank is None else rank
        return tuple(self.choice(SIZES) for _ in range(rank))

    def leaf(self, shape=None, dtype=None, requires_grad=None):
        """A new leaf input. Float leaves hold small dyadic numbers (exact in float32, with ties
        and zeros) or, seeded, standard normal values; integer leaves small integers."""
        shape = self.shape() if shape is None else tuple(shape)
        dtype = dtype or self.program.dtype
        n = int(np.prod(shape))
        if dtype == "bool":
            array = np.array(self.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        elif dtype == "int64":
            array = np.array(self.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.int64)
        elif self.choice(["grid", "normal"]) == "grid":
            array = np.array(self.draw(st.lists(st.integers(-8, 8), min_size=n, max_size=n)), dtype=np.float64) / 4
        else:
            array = np.random.default_rng(self.integer(0, 2**16)).standard_normal(n).round(3)
        array = array.reshape(shape).astype(dtype if dtype != "bool" else bool)
        if requires_grad is None:
            requires_grad = dtype in FLOAT and not self.rarely(15)
        leaf = Leaf(f"x{len(self.program.leaves)}", array, dtype, requires_grad)
        self.program.leaves.append(leaf)
        self.program.values.insert(len(self.program.leaves) - 1, leaf.name)
        self.ns[leaf.name] = _leaf_tensor(fastgrad, leaf)
        return leaf.name

    def pick(self, dtypes=FLOAT, accept=None, fresh_shape=None, target=False, exclude=None):
        """A value of the program (usually the newest that fits) or a new leaf. `accept(shape)`
        filters by shape, `fresh_shape()` makes the shape of a new leaf. Now and then the dtype is
        any (promotion and dtype errors). `target`: about to be written in place, so prefer values
        that may be (not leaves requiring grad)."""
        if self.rarely(4):
            dtypes = ANY
        candidates = []
        for name in self.program.values:
            if name == exclude:
                continue
            shape, dtype = self.meta(name)
            if dtype in dtypes and (accept is None or accept(shape)):
                if not target or not self._is_leaf_requiring_grad(name):
                    candidates.append(name)
        if candidates and not self.rarely(12):
            return candidates[-1] if self.draw(st.booleans()) else self.choice(candidates)
        dtype = self.program.dtype if self.program.dtype in dtypes else dtypes[0]
        if self.rarely(10):
            dtype = self.choice(dtypes)
        return self.leaf(
            fresh_shape() if fresh_shape else None,
            dtype,
            requires_grad=False if target and not self.rarely(10) else None,
        )


@functools.lru_cache(maxsize=None)
def _compiled_eval(expression):
    return compile(expression, "<program>", "eval")


# ---------------------------------------------------------------------------------------------
# Drawers: each fills one placeholder of an op template, given the placeholders drawn before it
# (`got`: placeholder -> text). Tensors are named by their variable.


def tensor(dtypes=FLOAT, rank=None, min_rank=0, target=False):
    """A value of one of `dtypes` (of a rank in `rank` / at least `min_rank`), or a new leaf."""
    ranks = (rank,) if isinstance(rank, int) else rank

    def drawer(g, got):
        def accept(shape):
            return (ranks is None or len(shape) in ranks) and len(shape) >= min_rank

        fresh = None
        if ranks or min_rank:
            fresh = lambda: g.shape(g.choice(ranks) if ranks else max(min_rank, g.choice(RANKS)))  # noqa: E731
        return g.pick(dtypes, accept, fresh, target)

    return drawer


def _broadcastable(a, b):
    return all(x == y or x == 1 or y == 1 for x, y in zip(a[::-1], b[::-1]))


def _broadcast_into(a, b):
    """b broadcasts to exactly shape a."""
    return len(b) <= len(a) and all(y in (x, 1) for x, y in zip(a[::-1], b[::-1]))


def _partner_shape(g, shape, into):
    """A shape broadcastable with `shape` (`into`: that broadcasts to `shape`)."""
    out = []
    for n in shape:
        option = g.choice(["same", "one", "other"])
        out.append(n if option == "same" else 1 if option == "one" else (g.choice(SIZES) if n == 1 and not into else n))
    if g.draw(st.booleans()):
        out = out[g.integer(0, len(out)) :]  # drop leading dims
    elif not into and g.rarely(25):
        out = [g.choice(SIZES)] + out
    if g.rarely(4) and out:  # not broadcastable, most of the time
        k = g.integer(0, len(out) - 1)
        out[k] += 2
    return tuple(out)


def partner(of, dtypes=None, into=False, not_itself=False):
    """A tensor broadcastable with placeholder `of` (`into`: broadcasting to its shape, as the
    other operand of an in-place op). Mostly of the same dtype; sometimes a 0-d or another dtype."""

    def drawer(g, got):
        shape, dtype = g.meta(got[of])
        allowed = dtypes or ((dtype,) + tuple(d for d in NUM if d != dtype) if dtype in NUM else (dtype,))
        fits = (lambda s: _broadcast_into(shape, s)) if into else (lambda s: _broadcastable(shape, s))
        if g.rarely(20):  # other dtype, often as a 0-d tensor: promotion rules
            allowed = tuple(d for d in allowed[1:] if d != dtype) or allowed
            if g.draw(st.booleans()):
                return g.leaf((), g.choice(allowed))
        return g.pick(
            allowed[:1] if not g.rarely(10) else allowed,
            fits,
            lambda: _partner_shape(g, shape, into),
            exclude=got[of] if not_itself else None,
        )

    return drawer


def bool_partner(of):
    """A bool tensor broadcastable with `of` (a condition for where)."""

    def drawer(g, got):
        shape, _ = g.meta(got[of])
        return g.pick(("bool",), lambda s: _broadcastable(shape, s), lambda: _partner_shape(g, shape, False))

    return drawer


def scalar(kinds=SCALARS):
    return lambda g, got: g.choice(kinds)


def options(*texts):
    return lambda g, got: g.choice(texts)


def _dim(g, rank, *, wrong=True):
    n = max(rank, 1)
    if wrong and g.rarely(3):
        return g.choice([n, -n - 1])
    return g.integer(-n, n - 1)


def _dim_list(g, rank):
    dims = sorted({_dim(g, rank) % max(rank, 1) for _ in range(g.integer(1, max(rank, 1)))})
    dims = [d - rank if rank and g.rarely(30) else d for d in dims]
    if g.rarely(3):
        dims.append(dims[0])  # repeated dim
    return dims


def reduce_args(of, multi=True, optional=True, keepdim=True, extra=(), dim_keyword=False):
    """Arguments of a reduction: dim (int, tuple or none), keepdim, and one of `extra`."""

    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        args = []
        form = g.choice((["none"] if optional else []) + ["int"] + (["tuple"] if multi else []))
        if form == "int":
            args.append(("dim=" if dim_keyword else "") + str(_dim(g, rank)))
        elif form == "tuple":
            dims = _dim_list(g, rank)
            args.append(f"dim={tuple(dims)}" if dim_keyword or g.draw(st.booleans()) else str(tuple(dims)))
        if form != "none" and keepdim and g.draw(st.booleans()):
            args.append("keepdim=True")
        if extra and g.draw(st.booleans()):
            args.append(g.choice(extra))
        return ", ".join(args)

    return drawer


def dim(of, extra=0, wrong=True):
    """A dim of `of` (extra=1: one past the end too, as unsqueeze and stack take)."""
    return lambda g, got: str(_dim(g, len(g.meta(got[of])[0]) + extra, wrong=wrong))


def permutation(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        dims = list(g.draw(st.permutations(range(rank))))
        if dims and g.rarely(10):
            dims[0] -= rank
        if g.rarely(3):
            dims = dims[1:] if dims else [0]
        return ", ".join(map(str, dims)) if g.draw(st.booleans()) or not dims else str(tuple(dims))

    return drawer


def _factor(g, n, rank):
    """`rank` sizes whose product is n."""
    sizes = []
    for _ in range(rank - 1):
        divisors = [d for d in range(1, min(n, 6) + 1) if n % d == 0] if n else [0, 1, 2, 3]
        d = g.choice(divisors)
        sizes.append(d)
        n = n // d if d else (n if n else g.choice([1, 2]))
    sizes.append(n)
    return sizes


def new_shape(of, as_tuple=False):
    """A shape with as many elements as `of` (reshape/view), sometimes with -1 or wrong."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        sizes = _factor(g, int(np.prod(shape)), g.choice([1, 2, 3, 0, 4]))
        if sizes and g.rarely(30):
            sizes[g.integer(0, len(sizes) - 1)] = -1
        if g.rarely(4):
            sizes.append(2)
        return ", ".join(map(str, sizes)) if sizes and not as_tuple and g.draw(st.booleans()) else str(tuple(sizes))

    return drawer


def expand_sizes(of):
    def drawer(g, got):
        shape = g.meta(got[of])[0]
        sizes = [g.choice([n, n, -1, 2, 3]) if n == 1 else g.choice([n, -1]) for n in shape]
        sizes = [g.choice([1, 2, 3]) for _ in range(g.choice([0, 0, 1, 2]))] + sizes
        if g.rarely(4) and sizes:
            sizes[-1] = 5
        return ", ".join(map(str, sizes)) if sizes and g.draw(st.booleans()) else str(tuple(sizes))

    return drawer


def squeeze_args(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        form = g.choice(["none", "int", "tuple"])
        return "" if form == "none" else str(_dim(g, rank)) if form == "int" else str(tuple(_dim_list(g, rank)))

    return drawer


def flatten_args(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        start, end = sorted((_dim(g, rank), _dim(g, rank)), key=lambda d: d % max(rank, 1))
        if g.rarely(5):
            start, end = end, start
        form = g.choice(["both", "none", "start"])
        return "" if form == "none" else str(start) if form == "start" else f"{start}, {end}"

    return drawer


def matmul_partner(of, kind="matmul"):
    """The right operand of a product: the inner size matches (mostly); the rank depends on
    `kind` (matmul: any; mm/bmm/mv/dot: theirs), batch dims broadcast."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        k = shape[-1] if shape else 2
        if g.rarely(5):
            k += 1
        m = g.choice(SIZES)
        if kind == "dot" or kind == "mv":
            wanted = (k,)
        elif kind == "mm":
            wanted = (k, m)
        elif kind == "bmm":
            wanted = (shape[0] if len(shape) == 3 else 2, k, m)
        else:
            rank = g.choice([2, 1, 3, 4])
            batch = _partner_shape(g, shape[:-2], False) if len(shape) > 2 else ()
            extra = tuple(g.choice(SIZES) for _ in range(max(rank - 2 - len(batch), 0)))
            wanted = (k,) if rank == 1 else (extra + batch)[-max(rank - 2, 0) :] + (k, m) if rank > 2 else (k, m)
        dtype = g.meta(got[of])[1]
        return g.pick((dtype,), lambda s: s == wanted, lambda: wanted)

    return drawer


def cat_args(of, stack=False):
    """[a, b, ...], dim: tensors whose shapes agree except along dim (all equal for stack)."""

    def drawer(g, got):
        shape, dtype = g.meta(got[of])
        d = _dim(g, len(shape) + (1 if stack else 0))
        names = [got[of]]
        for _ in range(g.choice([1, 0, 2])):
            other = list(shape)
            if not stack and shape and g.draw(st.booleans()):
                other[d % len(shape)] = g.choice(SIZES)
            if g.rarely(4) and other:
                other[0] += 1
            names.append(g.pick((dtype,), lambda s, o=tuple(other): s == o, lambda o=tuple(other): o))
        return f"[{', '.join(names)}], {'dim=' if g.draw(st.booleans()) else ''}{d}"

    return drawer


def _index_item(g, n, for_set):
    """One index item for a dim of size n, and how many dims it consumes."""
    kind = g.choice(["slice", "int", "none", "list", "tensor", "slice", "mask"])
    if kind == "int" and (n or g.rarely(10)):
        return str(g.integer(-n, n - 1) if n and not g.rarely(3) else n), 1
    if kind in ("list", "tensor", "mask") and (n or kind == "mask"):
        if kind == "mask":
            values = [g.draw(st.booleans()) for _ in range(n)]
            return f"torch.tensor({values}, dtype=torch.bool)", 1
        count = g.choice([2, 1, 3, 0])
        if for_set:  # distinct positions: duplicate writes have no defined winner
            values = list(g.draw(st.permutations(range(n))))[:count]
            values = [v - n if g.rarely(30) else v for v in values]
        else:
            values = [g.integer(-n, n - 1) for _ in range(count)]
        if kind == "list":
            return str(values), 1
        if not for_set and len(values) == 2 and g.draw(st.booleans()):
            return f"torch.tensor([{values}])", 1  # a 2-D index tensor
        return f"torch.tensor({values}, dtype=torch.int64)", 1
    if kind == "none":
        return "None", 0
    start = g.choice(["", "", "1", "-1", "0", "2", "-2", "5"])
    stop = g.choice(["", "", "-1", "2", "1", "3", "0"])
    step = g.choice(["", "", "2", "3", "1"]) if not g.rarely(2) else "-1"
    return f"{start}:{stop}" + (f":{step}" if step else ""), 1


def index_key(of, for_set=False):
    """A key for x[key]: ints, slices (with steps), None, ..., index lists/tensors, masks. Items
    before a "..." index x's first dims, items after it its last ones."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        if g.rarely(10):  # a bool mask of some other value with the same shape
            masks = [name for name in g.program.values if g.meta(name) == (shape, "bool")]
            if masks:
                return g.choice(masks)
        count = g.choice([1, 2, 1, 3, 0])
        ellipsis_at = g.integer(0, count) if g.rarely(20) else None
        front, back = 0, len(shape) - 1  # the next dims an item indexes, from either end
        items = []
        for k in range(count):
            from_back = ellipsis_at is not None and k >= ellipsis_at
            dim = back if from_back else front
            if front <= back and not g.rarely(3):
                text, used = _index_item(g, shape[dim], for_set)
            else:
                text, used = "None", 0
            if text.startswith(("torch.tensor", "[")) and any(i.startswith(("torch.tensor", "[")) for i in items):
                # several advanced indices: tensors, not lists (and, for writes, one at most)
                text = ":" if for_set or text.startswith("[") else text
            items.append(text)
            if from_back:
                back -= used
            else:
                front += used
        if ellipsis_at is not None:  # the items after it were drawn from the last dim backwards
            items = items[:ellipsis_at] + ["..."] + items[ellipsis_at:][::-1]
        if len(items) == 1 and not items[0].startswith("[") and g.draw(st.booleans()):
            return items[0]
        return ", ".join(items) + ("," if len(items) == 1 else "") if items else "..."

    return drawer


def setitem_value(of, key):
    """A scalar, or a tensor broadcasting to the shape of x[key] (not x itself: see OVERLAP in
    the README of this file)."""

    def drawer(g, got):
        target = g.evaluate(f"{got[of]}[{got[key]}]")
        if target is None or g.draw(st.booleans()):
            return g.choice(SCALARS)
        shape = tuple(target.shape)
        return g.pick(
            (g.meta(got[of])[1],),
            lambda s: _broadcast_into(shape, s),
            lambda: _partner_shape(g, shape, True),
            exclude=got[of],
        )

    return drawer


NUMPY_SCALARS = [
    "np.float64(0.5)",
    "np.float32(2)",
    "np.int64(3)",
    "np.int32(-1)",
    "np.bool_(True)",
    "np.float64(-1.5)",
    "np.float32(0)",
]


def numpy_operand(of):
    """A numpy scalar, or a numpy array (float64, float32 or int64) broadcastable with `of`: numpy
    on either side of an operator decides by itself what to do with a tensor (__array__,
    __array_priority__), and the gradient must not be lost on the way."""

    def drawer(g, got):
        if g.draw(st.booleans()):
            return g.choice(NUMPY_SCALARS)
        shape = _partner_shape(g, g.meta(got[of])[0], False)
        dtype = g.choice(["float64", "float32", "int64"])
        values = (
            np.array(
                g.draw(st.lists(st.integers(-6, 6), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                dtype=np.float64,
            ).reshape(shape)
            / 2
        )
        if not values.size:
            return f"np.zeros({shape}, dtype=np.{dtype})"
        return f"np.array({_literal(values.astype(dtype))}, dtype=np.{dtype})"

    return drawer


def last_dims(of):
    """The sizes of `of`'s last dim (or last two), as layer_norm's normalized_shape."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        return str(list(shape[-g.choice([1, 2]) :]) if shape else [1])

    return drawer


def class_targets(of, ignore=False):
    """Class indices for an (N, C) or (C,) input `of`: an int64 tensor of N (or 0-d) values in [0, C)."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        classes = shape[1] if len(shape) > 1 else shape[0] if shape else 1
        count = shape[0] if len(shape) > 1 else None
        values = [g.integer(0, max(classes - 1, 0)) for _ in range(count or 1)]
        if ignore and values and g.rarely(30):
            values[0] = -100
        return f"torch.tensor({values if count is not None else values[0]})"

    return drawer


def indices_into(of):
    """An int64 tensor of row indices of `of` (embedding)."""

    def drawer(g, got):
        rows = g.meta(got[of])[0][0] if g.meta(got[of])[0] else 1
        values = [g.integer(0, max(rows - 1, 0)) for _ in range(g.choice([2, 1, 3, 4]))]
        return f"torch.tensor({values})"

    return drawer


# ---------------------------------------------------------------------------------------------
# The op table: one entry per op form. A template is a Python expression (its value becomes a new
# variable) or, with statement=True, a statement (in-place writes); {name} placeholders are filled
# by the drawers given as keywords, in order.


@dataclass(frozen=True)
class Op:
    template: str
    drawers: tuple  # ((placeholder, drawer), ...)
    statement: bool = False
    smooth: object = True  # False, or False for some arguments (a function of them): finite
    # differences see what backward does not (detach), or PyTorch's
    # gradient takes a convention there

    def __repr__(self):
        return self.template


OPS = []


def op(template, statement=False, weight=1, smooth=True, **drawers):
    OPS.extend([Op(template, tuple(drawers.items()), statement, smooth)] * weight)


# elementwise, two tensors (broadcasting) or a tensor and a Python number on either side
for _t in [
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "{a} / {b}",
    "{a} ** {b}",
    "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})",
    "torch.add({a}, {b}, alpha=2)",
    "{a}.sub({b})",
    "torch.mul({a}, {b})",
    "torch.div({a}, {b})",
    "{a}.pow({b})",
    "torch.max({a}, {b})",
    "{a}.min({b})",
    "{a} // {b}",
    "{a} % {b}",
    "torch.fmod({a}, {b})",
    "{a}.remainder({b})",
    "{a} & {b}",
    "{a} | {b}",
    "torch.bitwise_xor({a}, {b})",
]:
    op(_t, a=tensor(NUM), b=partner("a"))
for _t in [
    "{a} + {s}",
    "{s} + {a}",
    "{a} - {s}",
    "{s} - {a}",
    "{a} * {s}",
    "{s} * {a}",
    "{a} / {s}",
    "{s} / {a}",
    "{a} ** {s}",
    "{s} ** {a}",
    "torch.pow({a}, {s})",
    "torch.add({a}, {s})",
    "{a} // {s}",
    "{s} // {a}",
    "{a} % {s}",
    "{s} % {a}",
    "{a}.fmod({s})",
    "{a} ^ {s}",
    "{s} | {a}",
    "{a}.div({s}, rounding_mode='trunc')",
    "torch.div({a}, {s}, rounding_mode='floor')",
]:
    op(_t, a=tensor(NUM), s=scalar())
op("{a} ** {s}", a=tensor(), s=options("2", "3", "0.5", "-1", "-2", "0", "1.5", "-0.5"))
# unary
for _t in [
    "-{a}",
    "torch.neg({a})",
    "abs({a})",
    "{a}.abs()",
    "{a}.exp()",
    "torch.exp({a})",
    "{a}.log()",
    "torch.log({a})",
    "{a}.sqrt()",
    "torch.sqrt({a})",
    "{a}.sin()",
    "torch.cos({a})",
    "{a}.tanh()",
    "torch.sigmoid({a})",
    "{a}.relu()",
    "torch.relu({a})",
    "{a}.sign()",
    "~{a}",
    "torch.logical_not({a})",
]:
    op(_t, a=tensor(NUM))
# clamp, where, comparisons
op("{a}.clamp({lo}, {hi})", a=tensor(NUM), lo=options("-1", "-0.5", "0", "None"), hi=options("1", "0.5", "2", "None"))
op("torch.clamp({a}, min={lo})", a=tensor(NUM), lo=options("0", "-0.5", "0.25", "1"))
op("{a}.clamp(max={hi})", a=tensor(NUM), hi=options("0", "0.5", "-1"))
op("torch.clip({a}, {lo}, {hi})", a=tensor(), lo=options("-1", "-0.25"), hi=options("1", "0.75"))
# Where min == max, PyTorch's gradient takes conventions that no derivative matches (x gets all of
# it at x == min == max, neither bound gets it elsewhere): no finite differences.
op("torch.clamp({a}, {lo}, {hi})", a=tensor(), lo=partner("a"), hi=partner("a"), smooth=False)
op("{a}.clamp(min={lo})", a=tensor(), lo=partner("a"))
op("torch.where({c}, {a}, {b})", weight=2, a=tensor(NUM), b=partner("a"), c=bool_partner("a"))
op("torch.where({a} > {s}, {a}, {b})", a=tensor(NUM), s=scalar(), b=partner("a"))
op("torch.where({c}, {a}, {s})", a=tensor(NUM), c=bool_partner("a"), s=scalar())
op("{a}.where({c}, {b})", a=tensor(NUM), c=bool_partner("a"), b=partner("a"))
for _t in [
    "{a} > {b}",
    "{a} < {b}",
    "{a} <= {b}",
    "{a} >= {b}",
    "{a} == {b}",
    "{a} != {b}",
    "torch.gt({a}, {b})",
    "{a}.le({b})",
]:
    op(_t, a=tensor(NUM), b=partner("a"))
for _t in ["{a} > {s}", "{a} <= {s}", "{s} < {a}", "{a} == {s}", "{a}.ne({s})"]:
    op(_t, a=tensor(NUM), s=scalar())
# reductions
for _t in [
    "{a}.sum({args})",
    "torch.sum({a}, {args})",
    "{a}.mean({args})",
    "torch.mean({a}, {args})",
    "{a}.amax({args})",
    "torch.amin({a}, {args})",
]:
    op(_t, a=tensor(ANY if "sum" in _t else NUM), args=reduce_args("a", optional="torch." not in _t))
op("{a}.var({args})", a=tensor(), args=reduce_args("a", extra=("unbiased=False", "correction=0", "correction=2")))
op("torch.std({a}, {args})", a=tensor(), args=reduce_args("a", optional=False, extra=("unbiased=False",)))
op(
    "{a}.norm({args})",
    a=tensor(),
    args=reduce_args(
        "a",
        dim_keyword=True,
        extra=("p=1", "p=3", "p='fro'", "p=0", "p=-1", "p=0.5", "p=float('inf')", "p=-float('inf')"),
    ),
)
op("torch.norm({a}, {p})", a=tensor(), p=options("2", "1", "3", "0.5", "0", "-0.5", "float('inf')"))
op("{a}.prod({args})", a=tensor(NUM), args=reduce_args("a", multi=False))
op("torch.prod({a}, {d})", a=tensor(NUM), d=dim("a"))
for _t in [
    "{a}.max()",
    "torch.min({a})",
    "{a}.max({d}).values",
    "torch.max({a}, {d}, keepdim=True)[0]",
    "{a}.min(dim={d}).values",
    "{a}.max({d})[1]",
    "torch.min({a}, {d}).indices",
]:
    op(_t, a=tensor(NUM), **({"d": dim("a")} if "{d}" in _t else {}))
op("{a}.argmax({args})", a=tensor(NUM), args=reduce_args("a", multi=False))
# composed in the shared layer
op("{a}.split({n}, {d})[-1]", a=tensor(ANY), n=options("1", "2", "3", "[1, 1]"), d=dim("a"))
op("torch.chunk({a}, {n}, {d})[0]", a=tensor(ANY), n=options("1", "2", "3"), d=dim("a"))
op("{a}.masked_fill({c}, {s})", a=tensor(NUM), c=bool_partner("a"), s=scalar())
op("{a}.all({d})", a=tensor(ANY), d=dim("a"))
op("torch.any({a})", a=tensor(ANY))
# the fused nn ops (integer inputs: the errors)
op("{a}.softmax({d})", weight=2, a=tensor(NUM), d=dim("a"))
op("torch.log_softmax({a}, {d})", weight=2, a=tensor(NUM), d=dim("a"))
op("{a}.log_softmax({d}, dtype=torch.float64)", a=tensor(NUM), d=dim("a"))
op("torch.nn.functional.gelu({a}{approximate})", a=tensor(NUM), approximate=options("", ", approximate='tanh'"))
op("torch.argmin({a}{args})", a=tensor(NUM), args=options("", ", 0", ", dim=-1", ", 1, keepdim=True"))
# products, every rank combination
op("{a} @ {b}", weight=3, a=tensor(), b=matmul_partner("a"))
op("torch.matmul({a}, {b})", weight=2, a=tensor(min_rank=1), b=matmul_partner("a"))
op("torch.mm({a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mm"))
op("{a}.bmm({b})", a=tensor(rank=3), b=matmul_partner("a", "bmm"))
op("torch.mv({a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mv"))
op("torch.dot({a}, {b})", a=tensor(rank=1), b=matmul_partner("a", "dot"))
# shapes and views
op("{a}.reshape({s})", a=tensor(ANY), s=new_shape("a"))
op("torch.reshape({a}, {s})", a=tensor(), s=new_shape("a", as_tuple=True))
op("{a}.view({s})", a=tensor(ANY), s=new_shape("a"))
op("{a}.flatten({args})", a=tensor(ANY), args=flatten_args("a"))
op("{a}.squeeze({args})", a=tensor(ANY), args=squeeze_args("a"))
op("torch.unsqueeze({a}, {d})", a=tensor(ANY), d=dim("a", extra=1))
op("{a}.transpose({d0}, {d1})", weight=2, a=tensor(ANY), d0=dim("a"), d1=dim("a"))
op("{a}.permute({p})", a=tensor(ANY), p=permutation("a"))
op("{a}.t()", a=tensor(ANY, rank=(2, 1, 0, 2, 2, 3)))
op("{a}.T", a=tensor(NUM))
op("{a}.expand({s})", weight=2, a=tensor(ANY), s=expand_sizes("a"))
op("{a}.expand_as({b})", a=tensor(), b=partner("a"))
op("torch.cat({args})", a=tensor(ANY), args=cat_args("a"))
op("torch.stack({args})", a=tensor(), args=cat_args("a", stack=True))
op("{a}.clone()", a=tensor(ANY))
op("{a}.contiguous()", a=tensor())
op("{a}.detach()", a=tensor(), smooth=False)
op("{a}.double()", a=tensor(NUM))
op("{a}.to(torch.float32)", a=tensor(NUM))
op("{a}.long()", a=tensor(FLOAT))
# indexing
op("{a}[{key}]", weight=6, a=tensor(ANY), key=index_key("a"))
op(
    "{a}[{key}] = {value}",
    statement=True,
    weight=3,
    a=tensor(ANY, target=True),
    key=index_key("a", for_set=True),
    value=setitem_value("a", "key"),
)
# in place, on non-leaves (the drawer also picks the odd leaf that requires grad: an error)
for _t in [
    "{a}.add_({b})",
    "{a} += {b}",
    "{a}.sub_({b})",
    "{a}.mul_({b})",
    "{a} *= {b}",
    "{a}.div_({b})",
    "{a} /= {b}",
    "{a} //= {b}",
    "{a} %= {b}",
    "{a}.fmod_({b})",
    "{a} &= {b}",
    "{a} |= {b}",
    "{a} ^= {b}",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), b=partner("a", into=True))
op("{a}.copy_({b})", statement=True, a=tensor(ANY, target=True), b=partner("a", into=True, not_itself=True))
for _t in [
    "{a}.add_({s})",
    "{a} -= {s}",
    "{a}.mul_({s})",
    "{a}.div_({s})",
    "{a}.floor_divide_({s})",
    "{a} %= {s}",
    "{a} |= {s}",
    "{a} &= {s}",
    "{a} ^= {s}",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), s=scalar())
op("{a}.fill_({s})", statement=True, a=tensor(ANY, target=True), s=scalar())
op("{a}.zero_()", statement=True, a=tensor(ANY, target=True))
op(
    "{a}.clamp_({lo}, {hi})",
    statement=True,
    a=tensor(target=True),
    lo=options("-1", "0", "None"),
    hi=options("1", "0.5", "None"),
)
# the augmented operators that are not shorthand for one of the in-place methods above
op("{a} **= {s}", statement=True, a=tensor(NUM, target=True), s=options("2", "0.5", "-1", "3"))
op("{a} **= {b}", statement=True, a=tensor(target=True), b=partner("a", into=True))
op("{a} @= {b}", statement=True, a=tensor(target=True), b=matmul_partner("a"))

# numpy scalars and arrays on either side of an operator. numpy on the left may hand back an ndarray
# (PyTorch's result too, for a tensor that does not require grad): as_tensor makes it a value.
for _t in ["+", "-", "*", "/", "**", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", "@"]:
    op(f"{{a}} {_t} {{n}}", a=tensor(ANY), n=numpy_operand("a"))
    op(f"torch.as_tensor({{n}} {_t} {{a}})", a=tensor(ANY), n=numpy_operand("a"))

# the history around in-place writes: retained gradients, views made without grad, .data, requires_grad_
op("{a}.retain_grad()", statement=True, weight=3, a=tensor())
op(
    "with torch.no_grad(): {out} = {a}{view}",
    weight=2,
    smooth=False,
    a=tensor(ANY),
    view=options("[...]", "[1:]", ".view(-1)", ".unsqueeze(0)", ".transpose(0, -1)", "[0]", ".t()"),
)
op("{a}.data", a=tensor(ANY), smooth=False)
op(
    "{a}.data.{write}",
    statement=True,
    a=tensor(),
    write=options("mul_(2)", "clamp_(-1.5, 1.5)", "zero_()", "add_(0.5)"),
    smooth=False,
)
op("{a}.requires_grad_({flag})", statement=True, a=tensor(ANY), flag=options("", "True", "False"), smooth=False)
op(
    "torch.as_tensor({a}{dtype})",
    a=tensor(ANY),
    dtype=options("", ", dtype=torch.float64", ", dtype=torch.float32", ", dtype=torch.int64"),
)

# nn.functional (with create_graph, test_second_derivatives_agree takes their second derivatives)
for _t in [
    "torch.nn.functional.relu({a})",
    "torch.nn.functional.sigmoid({a})",
    "torch.nn.functional.tanh({a})",
    "torch.nn.functional.dropout({a}, p=0.0)",
    "torch.nn.functional.dropout({a}, 0.5, training=False)",
]:
    op(_t, a=tensor(NUM))
op("torch.nn.functional.leaky_relu({a}{slope})", weight=2, a=tensor(NUM), slope=options("", ", 0.2", ", -0.5", ", 1.5"))
for _t in [
    "torch.nn.functional.mse_loss({a}, {b}{reduction})",
    "torch.nn.functional.l1_loss({a}, {b}{reduction})",
    "torch.nn.functional.smooth_l1_loss({a}, {b}{reduction}, beta=0.5)",
    "torch.nn.functional.huber_loss({a}, {b}{reduction}, delta=0.75)",
    "torch.nn.functional.binary_cross_entropy_with_logits({a}, {b}{reduction})",
]:
    op(_t, a=tensor(), b=partner("a"), reduction=options("", ", reduction='sum'", ", reduction='none'"))
op("torch.nn.functional.linear({a}, {b}.t())", a=tensor(min_rank=1), b=matmul_partner("a", "mm"))
op("torch.nn.functional.linear({a}, {b}.t(), {b}[0])", a=tensor(min_rank=1), b=matmul_partner("a", "mm"))
op("torch.nn.functional.layer_norm({a}, {shape})", a=tensor(min_rank=1), shape=last_dims("a"))
op("torch.nn.functional.cross_entropy({a}, {t})", weight=2, a=tensor(rank=(2, 1)), t=class_targets("a", ignore=True))
op("torch.nn.functional.cross_entropy({a}, {t}, label_smoothing=0.1)", a=tensor(rank=2), t=class_targets("a"))
op("torch.nn.functional.nll_loss({a}.log_softmax(-1), {t})", a=tensor(rank=(2, 1)), t=class_targets("a", ignore=True))
op("torch.nn.functional.embedding({i}, {a})", a=tensor(rank=2), i=indices_into("a"))
op("torch.nn.functional.one_hot({i}, 5).float() * {a}.sum()", a=tensor(), i=indices_into("a"))


# What the census counts (FASTGRAD_FUZZ_CENSUS in test_fuzz_programs.py): the constructs that fuzzers
# without them let bugs through, each recognised by the templates that make it.
CONSTRUCTS = {
    "numpy operand on the left": lambda t: t.startswith("torch.as_tensor({n} "),
    "numpy operand on the right": lambda t: re.fullmatch(r"\{a\} \S+ \{n\}", t) is not None,
    "augmented assignment": lambda t: re.search(r" \S*= ", t) is not None,
    "retain_grad": lambda t: t.endswith(".retain_grad()"),
    "view made under no_grad": lambda t: t.startswith("with torch.no_grad():"),
    ".data read or written": lambda t: ".data" in t,
    "requires_grad_": lambda t: ".requires_grad_(" in t,
    "as_tensor of a tensor": lambda t: t.startswith("torch.as_tensor({a}"),
    "nn.functional": lambda t: t.startswith("torch.nn.functional.") or "torch.nn.functional." in t,
}


def constructs(program):
    """The CONSTRUCTS a program uses, and "retain_grad, then an in-place write" when one follows."""
    found = {name for op_ in program.ops for name, makes in CONSTRUCTS.items() if makes(op_.template)}
    retained = [k for k, op_ in enumerate(program.ops) if op_.template.endswith(".retain_grad()")]
    if retained and any(op_.statement and "retain_grad" not in op_.template for op_ in program.ops[retained[0] :]):
        found.add("retain_grad, then an in-place write")
    return found


def draw_step(g, op_):
    got = {}
    for placeholder, drawer in op_.drawers:
        got[placeholder] = drawer(g, got)
    g.program.ops.append(op_)
    g.program.args.append(got)
    if op_.statement:
        return g.run(op_.template.format(**got))
    if "{out}" in op_.template:  # a statement that makes the value itself (with ...: {out} = ...)
        return g.new_value(op_.template.format(**got, out="{out}"))
    return g.new_value("{out} = " + op_.template.format(**got))


@st.composite
def programs(draw, max_ops=20, first=None):
    """Random programs; with `first` (an entry of OPS), programs whose first op is that one."""
    g = Gen(draw, draw(st.sampled_from(FLOAT)))
    g.leaf()
    if draw(st.booleans()):
        g.leaf()
    if first is not None and not draw_step(g, first):
        return g.finish()
    # One "go on" draw before each op (rather than a length drawn first), so that shrinking can
    # delete any op with its draws.
    while len(g.program.lines) < max_ops and (not g.program.lines or draw(st.integers(0, 15)) < 15):
        if not draw_step(g, draw(st.sampled_from(OPS))):
            break  # fastgrad raised: the program ends with this line
    return g.finish()
