"""The differential fuzzer's programs (tests/fuzz_programs.py), and running one on one backend.

A Program is its leaves (numpy arrays) and its lines (Python written against the PyTorch API), with the
ops and arguments the generator drew for each line; run() executes it on one backend (fastgrad,
fastgrad.reference or torch) and returns an Outcome (values, leaf and retained gradients, or the
exception and the line that raised it). Also: the loss weights, shrinking by deleting lines and
leaves (minimize), and backends().
"""

import functools
import importlib
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np

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


def _describe_error(error):
    if error is None:
        return "no exception"
    where, kind, message = error
    return f"{kind.__name__}({message!r}) at {'line ' + str(where) if where != 'backward' else 'backward'}"


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
