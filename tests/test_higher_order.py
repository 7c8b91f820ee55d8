"""Higher-order gradients: backward(create_graph=True), autograd.gradgradcheck, autograd.functional.

(a) gradgradcheck in float64 of every differentiable op of tests/op_cases.py (in its memory layouts)
and of the nn.functional, indexing and in-place programs below, on each backend (the reference's only
where PyTorch is missing: conftest.FINITE_DIFFERENCE_BACKENDS);
(b) the same programs' second derivatives against PyTorch's (float64, same data);
(c) the semantics: x.grad with history, out-of-place accumulation, saved outputs given back with
their node, custom Functions, grad_fn names; a Hessian-vector product of an MLP loss against finite
differences of its gradient; a gradient penalty against PyTorch;
(d) autograd.functional against torch.autograd.functional, and gradgradcheck on torch tensors.
"""

from dataclasses import dataclass

import fastgrad
import numpy as np
import pytest

from op_cases import CASES
from op_helpers import apply_layout, assert_close, gradcheck_for, layout_changes, make_arrays, rng_for, source_shape
from oracle_helpers import mul_sin_function, same_error, same_on_both

# PyTorch warns that backward(create_graph=True) makes a cycle between a leaf and its .grad
pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")


@dataclass(frozen=True)
class Program:
    name: str
    fn: object  # fn(m, *tensors) -> a tensor or a tuple of them
    shapes: tuple
    domain: object = "real"

    def __repr__(self):
        return self.name


def F(m):
    return m.nn.functional


def _constant(m, values, dtype=None):
    return m.tensor(values) if dtype is None else m.tensor(values, dtype=dtype)


def _setitem_program(m, x, y):
    z = x * 1
    z[0] = y.sin()
    z[1:, 1] = y[:2] * y[1:3]
    return z * x


def _advanced_setitem_program(m, x, y):
    z = x * 1
    z[m.tensor([0, 2])] = y
    return z * z


def _inplace_program(m, x, y):
    z = x.clone()
    z.mul_(y)
    z.add_(y.exp())
    z.div_(2.0)
    z.sub_(x * x)
    return z


def _inplace_view_program(m, x, y):
    z = x.clone()
    row = z[1]
    row.mul_(y)  # through a view: z's history becomes CopySlices, row's a view of it
    return z.sum(0) * row


NN = [
    Program("F.softmax(dim=1)", lambda m, x: F(m).softmax(x, dim=1), [(2, 3)]),
    Program("F.log_softmax(dim=0) of 3-D", lambda m, x: F(m).log_softmax(x, dim=0), [(2, 2, 3)]),
    Program("F.gelu", lambda m, x: F(m).gelu(x), [(5,)]),
    Program("F.gelu(tanh)", lambda m, x: F(m).gelu(x, approximate="tanh"), [(5,)]),
    Program("F.cross_entropy", lambda m, x: F(m).cross_entropy(x, _constant(m, [0, 2, 1])), [(3, 4)]),
    Program(
        "F.cross_entropy(weight,ignore_index)",
        lambda m, x: F(m).cross_entropy(
            x, _constant(m, [0, 1, 3]), weight=_constant(m, [0.5, 1.0, 2.0, 1.5], x.dtype), ignore_index=1
        ),
        [(3, 4)],
    ),
    Program(
        "F.cross_entropy(label_smoothing)",
        lambda m, x: F(m).cross_entropy(x, _constant(m, [3, 0, 1]), label_smoothing=0.2),
        [(3, 4)],
    ),
    Program(
        "F.cross_entropy(probabilities)",
        lambda m, x: F(m).cross_entropy(x, _constant(m, [[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], x.dtype)),
        [(2, 4)],
    ),
    Program("F.nll_loss(sum)", lambda m, x: F(m).nll_loss(x, _constant(m, [1, 0, 3]), reduction="sum"), [(3, 4)]),
    Program(
        "F.nll_loss(none) of log_softmax",
        lambda m, x: F(m).nll_loss(x.log_softmax(1), _constant(m, [1, 0, 3]), reduction="none"),
        [(3, 4)],
    ),
    Program("F.nll_loss 1-D", lambda m, x: F(m).nll_loss(x.exp(), _constant(m, 2)), [(4,)]),
    Program("F.mse_loss", lambda m, a, b: F(m).mse_loss(a, b), [(3, 4), (3, 4)]),
    Program("F.l1_loss", lambda m, a, b: F(m).l1_loss(a * a, b + 3.0), [(3, 4), (3, 4)], "unit"),
    Program("F.smooth_l1_loss", lambda m, a, b: F(m).smooth_l1_loss(a.exp(), b, beta=0.5), [(3, 4), (3, 4)]),
    Program("F.huber_loss", lambda m, a, b: F(m).huber_loss(a.sin(), b, delta=0.7), [(3, 4), (3, 4)]),
    Program(
        "F.binary_cross_entropy_with_logits",
        lambda m, x: F(m).binary_cross_entropy_with_logits(
            x,
            _constant(m, [[0.0, 1.0, 0.3], [0.9, 0.5, 0.0]], x.dtype),
            pos_weight=_constant(m, [1.0, 2.0, 0.5], x.dtype),
        ),
        [(2, 3)],
    ),
    Program("F.layer_norm", lambda m, x, w, b: F(m).layer_norm(x, (5,), w, b), [(2, 5), (5,), (5,)]),
    Program("F.leaky_relu", lambda m, x: F(m).leaky_relu(x, 0.1) * x, [(3, 4)], "nonzero"),
    Program("F.leaky_relu alone", lambda m, x: F(m).leaky_relu(x), [(3, 4)], "nonzero"),
    Program("F.relu alone", lambda m, x: F(m).relu(x), [(3, 4)], "nonzero"),
    Program("F.linear", lambda m, x, w, b: F(m).linear(x, w, b).tanh(), [(2, 3), (4, 3), (4,)]),
    Program(
        "F.embedding(padding_idx)",
        lambda m, w: F(m).embedding(_constant(m, [[0, 2], [4, 2]]), w, padding_idx=2).exp(),
        [(5, 3)],
    ),
    Program(
        "masked_fill", lambda m, x: x.masked_fill(_constant(m, [[True, False, False, True]] * 3), 0.5) * x, [(3, 4)]
    ),
    Program("gather", lambda m, x: x.gather(1, _constant(m, [[0, 0], [3, 1], [2, 2]])) ** 2, [(3, 4)]),
    Program("split", lambda m, x: tuple(p * p for p in x.split([1, 3], dim=1)), [(3, 4)]),
    Program("chunk", lambda m, x: tuple(p.exp() for p in x.chunk(2)), [(4, 3)]),
    Program("x[index] with a repeat", lambda m, x: x[_constant(m, [2, 0, 2])] * x[0], [(3, 4)]),
    Program("x[mask]", lambda m, x: x[x > 0] ** 3, [(3, 4)], "nonzero"),
    Program("x[1:, ::2] and x[1]", lambda m, x: x[1:, ::2] * x[1][:2], [(3, 4)]),
    Program("x[key] = value", _setitem_program, [(3, 4), (4,)]),
    Program("x[index tensor] = value", _advanced_setitem_program, [(3, 4), (4,)]),
    Program("in-place arithmetic", _inplace_program, [(3, 4), (4,)]),
    Program("in-place through a view", _inplace_view_program, [(3, 4), (4,)]),
    Program("clamp_", lambda m, x: x.clone().clamp_(-0.5, 0.5) * x, [(3, 4)], "clamp"),
    # prod with zeros: its gradient is the product of the other elements (an op with its own node)
    Program("prod() with zeros", lambda m, x: (x * _constant(m, [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])).prod(), [(2, 3)]),
    Program(
        "prod(1) of 3-D with zeros",
        lambda m, x: (
            x * _constant(m, [[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]])
        ).prod(1),
        [(2, 3, 2)],
    ),
]
PROGRAMS = [Program(c.name, c.fn, c.shapes, c.domain) for c in CASES] + NN


def _tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def make_leaves(m, program):
    arrays = make_arrays(program.shapes, program.domain, np.float64, program.name)
    return [m.tensor(a, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_gradgradcheck(fg_finite_differences, program):
    fg = fg_finite_differences
    gradgradcheck = gradcheck_for(fg, "gradgradcheck")
    leaves = make_leaves(fg, program)
    assert gradgradcheck(lambda *xs: program.fn(fg, *xs), tuple(leaves))


def _one_view_layout(index, case):
    """One of the case's layouts that makes views (taken in turn over the table, so that every layout
    is met): the views' backward formulas are the same for every op, and test_ops checks each op's
    first derivatives in all of them."""
    layouts = [layout for layout in case.layouts if layout != "contiguous" and layout_changes(case.shapes, layout)]
    return layouts[index % len(layouts)] if layouts else None


LAYOUT_PARAMS = [
    pytest.param(c, layout, id=f"{c.name}-{layout}")
    for c, layout in ((c, _one_view_layout(i, c)) for i, c in enumerate(CASES))
    if layout is not None
]


@pytest.mark.parametrize("case,layout", LAYOUT_PARAMS)
def test_gradgradcheck_in_layouts(case, layout):
    """The op on strided or expanded views of the leaves: the views' own backward formulas are
    differentiated too. fastgrad only: the layouts reach the core's strided kernels and view
    nodes; the reference (17 s of CPU here, against fastgrad's 2) takes views through the same
    Python shape rules in every layout, checked to first order by test_ops' gradcheck in layouts."""
    fg = fastgrad
    gradgradcheck = gradcheck_for(fg, "gradgradcheck")
    arrays = make_arrays([source_shape(s, layout) for s in case.shapes], case.domain, np.float64, case.name, layout)
    leaves = [fg.tensor(a, requires_grad=True) for a in arrays]

    def on_views(*xs):
        return case.fn(fg, *[apply_layout(x, s, layout) for x, s in zip(xs, case.shapes)])

    assert gradgradcheck(on_views, tuple(leaves))


def second_derivatives(m, program):
    """First-order gradients (for random output vectors v) recorded with create_graph, then the
    gradient of their dot product with random vectors w, with respect to the inputs and v."""
    leaves = make_leaves(m, program)
    outputs = [out for out in _tuple(program.fn(m, *leaves)) if out.requires_grad]
    rng = rng_for(program.name, "vectors")
    vs = [m.tensor(rng.standard_normal(tuple(out.shape)), requires_grad=True) for out in outputs]
    firsts = m.autograd.grad(outputs, leaves, vs, create_graph=True, allow_unused=True)
    ws = [m.tensor(rng.standard_normal(tuple(x.shape))) for x in leaves]
    dot = sum((g * w).sum() for g, w in zip(firsts, ws) if g is not None)
    seconds = m.autograd.grad(dot, leaves + vs, materialize_grads=True)
    # clone(): PyTorch may give a gradient it knows to be zero as a ZeroTensor, with no memory to read
    return [None if g is None else g.detach().numpy() for g in firsts], [g.clone().numpy() for g in seconds]


def _torch_second_derivatives(torch, program):
    """second_derivatives on PyTorch, its scaled_dot_product_attention on the math path: its flash
    kernel's backward has no derivative (it raises), fastgrad's create_graph formulas are the math
    path's."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return second_derivatives(torch, program)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_second_derivatives_match_torch(fg, torch, program):
    (firsts, seconds), (t_firsts, t_seconds) = (
        second_derivatives(fg, program),
        _torch_second_derivatives(torch, program),
    )
    for i, (g, t_g) in enumerate(zip(firsts, t_firsts)):
        assert (g is None) == (t_g is None), f"first-order gradient of input {i}"
        if g is not None:
            assert_close(g, t_g, rtol=1e-7, atol=1e-9, what=f"first-order gradient of input {i}")
    for i, (h, t_h) in enumerate(zip(seconds, t_seconds)):
        assert_close(h, t_h, rtol=1e-6, atol=1e-8, what=f"second derivative along input {i}")


# The first gradient's graph where it is zero or constant in the inputs: PyTorch still records it
# when its backward formula refers to an input (relu, leaky_relu), and not otherwise.
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_first_gradient_graph_matches_torch(fg, torch, program):
    """Gradients taken with create_graph=True for constant output vectors (a loss's ones): the same
    values, requires_grad and grad_fn presence as PyTorch's, so a gradient penalty works where it does."""

    def program_grads(lib):
        leaves = make_leaves(lib, program)
        outputs = [out for out in _tuple(program.fn(lib, *leaves)) if out.requires_grad]
        grads = lib.autograd.grad(
            outputs, leaves, [lib.ones_like(out) for out in outputs], create_graph=True, allow_unused=True
        )
        return [None if g is None else (g.detach().numpy(), g.requires_grad, g.grad_fn is None) for g in grads]

    for i, (got, want) in enumerate(zip(program_grads(fg), program_grads(torch))):
        assert (got is None) == (want is None), f"gradient of input {i}"
        if got is not None:
            assert_close(got[0], want[0], rtol=1e-7, atol=1e-9, what=f"gradient of input {i}")
            assert got[1:] == want[1:], f"(requires_grad, grad_fn is None) of the gradient of input {i}"


THIRD_ORDER = [
    "x.softmax(0)",
    "x.log_softmax(0)",
    "F.gelu(x)",
    "F.gelu(x, approximate='tanh')",
    "(x * x[1]).prod()",
    "x.norm()",
    "x[1:].exp() * x[0]",
    "x.std()",
    "x.tanh()",
    "x.sigmoid()",
    "x.abs() ** 2.5",
    "F.cross_entropy(x.unsqueeze(0), lib.tensor([1]))",
]


@pytest.mark.parametrize("expr", THIRD_ORDER)
def test_third_derivatives_match_torch(fg, torch, expr):
    def program(lib):
        x = lib.tensor([0.5, -1.0, 2.0, 0.0 if "prod" in expr else 0.3], dtype=lib.float64, requires_grad=True)
        out = eval(expr, {"x": x, "lib": lib, "F": F(lib)}).sum()
        (first,) = lib.autograd.grad(out, x, create_graph=True)
        (second,) = lib.autograd.grad(
            (first * lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)).sum(), x, create_graph=True
        )
        return first, second, lib.autograd.grad(second.sum(), x)

    same_on_both(fg, torch, program)


def test_layer_norm_third_derivatives_against_finite_differences(fg):
    """layer_norm's gradient node has a backward of its own, composed of ops, so its third
    derivatives are right too (PyTorch 2.13's layer_norm double backward is not differentiable in all
    its inputs, so they are checked against finite differences, not against PyTorch)."""

    def gradients(x, w, b, grad):
        out = F(fg).layer_norm(x, (3,), w, b)
        return fg.autograd.grad(out, (x, w, b), grad, create_graph=True)

    leaves = [
        fg.tensor(v, dtype=fg.float64, requires_grad=True)
        for v in (
            [[0.5, -1.0, 2.0], [0.3, 0.7, -0.2]],
            [1.5, -0.5, 0.8],
            [0.1, 0.2, -0.3],
            [[1.0, -2.0, 0.5], [0.4, 0.9, -1.1]],
        )
    ]
    assert fg.autograd.gradgradcheck(gradients, leaves)


# Gradients constant in an input that their backward formula still refers to: PyTorch's second
# derivative w.r.t. that input is zeros (not "unused"), and the incoming gradient's own gradient is
# the op's gradient again.
ZERO_SECOND_DERIVATIVE = {
    "relu": lambda F, lib, x: F.relu(x),
    "leaky_relu": lambda F, lib, x: F.leaky_relu(x, 0.2),
    "nll_loss": lambda F, lib, x: F.nll_loss(x, lib.tensor([1, 0])),
    "nll_loss(sum, ignore_index)": lambda F, lib, x: F.nll_loss(x, lib.tensor([1, 2]), reduction="sum", ignore_index=2),
    "nll_loss(none, weight)": lambda F, lib, x: F.nll_loss(
        x, lib.tensor([1, 0]), lib.tensor([0.5, 2.0, 1.0], dtype=lib.float64), reduction="none"
    ),
    "nll_loss 1-D": lambda F, lib, x: F.nll_loss(x[0], lib.tensor(2)),
}


@pytest.mark.parametrize("op", ZERO_SECOND_DERIVATIVE.values(), ids=ZERO_SECOND_DERIVATIVE.keys())
def test_second_derivative_of_a_gradient_constant_in_the_input(fg, torch, op):
    def program(lib):
        x = lib.tensor([[0.5, -1.0, 2.0], [-0.3, 0.0, 1.5]], dtype=lib.float64, requires_grad=True)
        out = op(F(lib), lib, x)
        seed = lib.full(out.shape, 1.5, dtype=lib.float64, requires_grad=True)
        (first,) = lib.autograd.grad(out, x, seed, create_graph=True)
        weights = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lib.float64)
        return first, lib.autograd.grad((first * weights).sum(), (x, seed))

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("loss", ["smooth_l1_loss", "huber_loss"])
def test_second_derivative_where_input_equals_target(fg, torch, loss):
    """The quadratic branch squares the difference, not its absolute value (whose derivative at 0 is
    0 and zeroed the second derivative there). Found by the fuzzer's second-derivative programs."""

    def program(lib):
        x = lib.tensor([0.0, 0.25, 3.0, -1.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([0.0, 0.0, 0.0, 0.0], dtype=lib.float64, requires_grad=True)
        first = lib.autograd.grad(getattr(F(lib), loss)(x, y, reduction="sum"), (x, y), create_graph=True)
        return lib.autograd.grad(first[0].sum() + 2 * first[1].sum(), (x, y))

    same_on_both(fg, torch, program)


# ---- semantics


def leaves(lib):
    x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = lib.tensor([1.5, 0.25, -0.75], dtype=lib.float64, requires_grad=True)
    return x, y


def test_x_grad_depends_on_x(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        (x.sin() * x).sum().backward(create_graph=True)
        g = x.grad
        return g, g.grad_fn.name().rpartition("::")[2], lib.autograd.grad(g.sum(), x)  # torch::autograd::...

    same_on_both(fg, torch, program)


def test_backward_twice_with_create_graph_accumulates_out_of_place(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        (x**3).sum().backward(create_graph=True)
        first = x.grad
        (x.exp() * x).sum().backward(create_graph=True)
        # the first .grad is left as it was: the sum is a new tensor, recorded
        return first, x.grad, x.grad.grad_fn.name(), lib.autograd.grad(x.grad.sum(), x)

    same_on_both(fg, torch, program)


def test_backward_without_create_graph_adds_into_a_grad_with_history(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        (x**3).sum().backward(create_graph=True)
        (x * 2).sum().backward()
        return x.grad, x.grad.requires_grad

    same_on_both(fg, torch, program)


def test_retained_grad_of_a_create_graph_pass(fg, torch):
    """y.grad of a retained non-leaf is recorded too. As PyTorch's retains_grad hook, every later
    gradient is added out of place (grad mode or not), so the y.grad returned here keeps its values
    when the last autograd.grad runs through y's node again."""

    def program(lib):
        x, _ = leaves(lib)
        y = x * x
        y.retain_grad()
        lib.autograd.backward((y * y).sum(), create_graph=True)
        lib.autograd.backward((y * x).sum(), create_graph=True)
        return y.grad, y.grad.grad_fn.name(), lib.autograd.grad(y.grad.sum(), x)

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "expr",
    [
        "x * y",
        "x.exp()",
        "x.sin()",
        "x.cos()",
        "x ** 3",
        "x / y",
        "x.sqrt()",
        "x.log()",
        "x @ y",
        "x.abs()",
        "x.prod()",
    ],
)
def test_gradient_grad_fn_names(fg, torch, expr):
    def program(lib):
        x, y = leaves(lib)
        x = x.abs() if expr in ("x.sqrt()", "x.log()") else x
        (g,) = lib.autograd.grad(eval(expr, {"x": x, "y": y}).sum(), x, create_graph=True)
        return g, g.grad_fn.name()

    same_on_both(fg, torch, program)


# A fused op's gradient is an op with a node of its own, as PyTorch's (SoftmaxBackwardDataBackward0,
# ...), which defines its derivative once; prod's over all elements with zeros is viewed back.
# (next_functions of prod's gradients differ: PyTorch composes the product of the others of cumprods.)
@pytest.mark.parametrize(
    "expr,compare_next",
    [
        ("x.softmax(1)", True),
        ("x.log_softmax(0)", True),
        ("F.gelu(x)", True),
        ("F.gelu(x, approximate='tanh')", True),
        ("F.nll_loss(x.log_softmax(1), lib.tensor([2, 0]))", True),
        ("x.prod()", False),
        ("(x * lib.tensor([1.0, 1.0, 0.0], dtype=lib.float64)).prod()", False),
        ("x.prod(1)", False),
    ],
)
def test_fused_gradients_are_ops_with_their_own_nodes(fg, torch, expr, compare_next):
    def program(lib):
        x = lib.tensor([[0.5, -1.0, 2.0], [0.0, 0.3, 1.5]], dtype=lib.float64, requires_grad=True)
        out = eval(expr, {"x": x, "lib": lib, "F": F(lib)})
        weights = lib.arange(1, out.numel() + 1, dtype=lib.float64).reshape(out.shape)
        (g,) = lib.autograd.grad((out * weights).sum(), x, create_graph=True)
        names = [g.grad_fn.name()]
        if compare_next:
            names += [None if fn is None else fn.name() for fn, _ in g.grad_fn.next_functions]
        return g, names, lib.autograd.grad((g * g).sum(), x)

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("op", ["exp", "sin"])
def test_a_saved_output_comes_back_with_its_node(fg, torch, op):
    """exp's gradient reads exp's own output (saved without history): under create_graph it is
    given back as the output of ExpBackward0, so the second derivative flows through it."""

    def program(lib):
        x, _ = leaves(lib)
        (g,) = lib.autograd.grad(getattr(x, op)().sum(), x, create_graph=True)
        return [None if fn is None else fn.name() for fn, _ in g.grad_fn.next_functions], lib.autograd.grad(g.sum(), x)

    same_on_both(fg, torch, program)


def test_create_graph_records_even_under_no_grad(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        y = (x**3).sum()
        with lib.no_grad():
            (g,) = lib.autograd.grad(y, x, create_graph=True)
        return g, g.requires_grad, lib.autograd.grad(g.sum(), x)

    same_on_both(fg, torch, program)


def test_custom_function_backward_is_recorded(fg, torch):
    """A custom Function's backward runs in grad mode under create_graph, and its saved output
    comes back with history."""

    def program(lib):
        class MyExp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                (y,) = ctx.saved_tensors
                return grad * y

        MulSin = mul_sin_function(lib)
        x, y = leaves(lib)
        (g,) = lib.autograd.grad((MyExp.apply(x) * x).sum(), x, create_graph=True)
        gx, gy = lib.autograd.grad(MulSin.apply(x, y).sum(), (x, y), create_graph=True)
        return g, lib.autograd.grad(g.sum(), x), lib.autograd.grad((gx * gy).sum(), (x, y))

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("how", ["backward", "grad"])
def test_once_differentiable_gradients_cannot_be_differentiated_again(fg, torch, how):
    def program(lib):
        MulSin = mul_sin_function(lib, decorate=lib.autograd.function.once_differentiable)
        x, y = leaves(lib)
        gx, gy = lib.autograd.grad((MulSin.apply(x, y) ** 2).sum(), (x, y), create_graph=True)
        assert gx.requires_grad and gy.requires_grad
        if how == "backward":  # reaches the node that refuses
            (gx * gy).sum().backward()
        else:  # the gradients are not connected to the inputs
            lib.autograd.grad(gx.sum(), x)

    same_error(fg, torch, program)


def _mlp_loss(m, params, x, target):
    w1, b1, w2, b2 = params
    hidden = F(m).gelu(x @ w1 + b1).tanh()
    return F(m).cross_entropy(hidden @ w2 + b2, target)


def _mlp_data(m):
    rng = rng_for("mlp")
    params = [m.tensor(rng.standard_normal(shape) * 0.7, requires_grad=True) for shape in [(3, 5), (5,), (5, 4), (4,)]]
    vs = [m.tensor(rng.standard_normal(tuple(p.shape))) for p in params]
    return params, vs, m.tensor(rng.standard_normal((6, 3))), m.tensor([0, 3, 1, 1, 2, 0])


def test_hessian_vector_product_of_an_mlp_matches_finite_differences(fg):
    params, vs, x, target = _mlp_data(fg)
    grads = fg.autograd.grad(_mlp_loss(fg, params, x, target), params, create_graph=True)
    hv = fg.autograd.grad(sum((g * v).sum() for g, v in zip(grads, vs)), params)

    eps = 1e-6

    def gradient_at(step):
        moved = [(p + step * v).detach().requires_grad_() for p, v in zip(params, vs)]
        return fg.autograd.grad(_mlp_loss(fg, moved, x, target), moved)

    plus, minus = gradient_at(eps), gradient_at(-eps)
    for h, p, m in zip(hv, plus, minus):
        assert_close(h.numpy(), (p.numpy() - m.numpy()) / (2 * eps), rtol=1e-5, atol=1e-7, what="H v")
    _, functional_hv = fg.autograd.functional.hvp(lambda *ps: _mlp_loss(fg, ps, x, target), tuple(params), tuple(vs))
    for h, f in zip(hv, functional_hv):
        assert_close(f.numpy(), h.numpy(), rtol=1e-9, atol=1e-12, what="functional.hvp")


def test_gradient_penalty_matches_torch(fg, torch):
    """A WGAN-GP style penalty: the norm of a critic's gradient with respect to its input, then
    backward into the critic's parameters through that gradient."""

    def program(lib):
        rng = rng_for("penalty")
        w1, b1, w2 = (lib.tensor(rng.standard_normal(s), requires_grad=True) for s in [(4, 6), (6,), (6, 1)])
        x = lib.tensor(rng.standard_normal((5, 4)), requires_grad=True)
        critic = ((x @ w1 + b1).tanh() * (x @ w1).sigmoid()) @ w2
        (g,) = lib.autograd.grad(critic.sum(), x, create_graph=True)
        penalty = ((g.norm(dim=1) - 1) ** 2).mean()
        penalty.backward()
        return penalty, w1.grad, b1.grad, w2.grad, x.grad

    same_on_both(fg, torch, program)


# ---- gradgradcheck itself


def _square_with_a_constant_derivative(lib):
    """x * x whose backward detaches x: right first derivatives, second derivatives all zero."""

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x.detach()

    return Square


def test_gradgradcheck_finds_a_wrong_second_derivative(fg):
    check_finds_a_wrong_second_derivative(fg)


def test_gradgradcheck_on_torch_tensors(torch):
    check_finds_a_wrong_second_derivative(torch)


def check_finds_a_wrong_second_derivative(lib):
    gradcheck, gradgradcheck = gradcheck_for(lib), gradcheck_for(lib, "gradgradcheck")
    square = _square_with_a_constant_derivative(lib).apply
    x = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
    assert gradcheck(square, x)
    assert gradgradcheck(square, x, raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradgradcheck(square, x)
    assert gradgradcheck(lambda t: t * t, x)


def test_gradgradcheck_with_given_grad_outputs(fg, torch):
    for lib in (fg, torch):
        gradgradcheck = gradcheck_for(lib, "gradgradcheck")
        x, y = leaves(lib)
        v = lib.tensor([1.0, -0.5, 2.0], dtype=lib.float64)  # not requiring grad: only the inputs are checked
        assert gradgradcheck(lambda a, b: (a * b).exp(), (x, y), v)
        assert gradgradcheck(lambda a, b: (a.sin() * b, a.sum() * b), (x, y), (v, v.requires_grad_()))


# ---- autograd.functional, against torch.autograd.functional


def _cubic(a):
    return (a**3).sum() + (a[0] * a[1]).exp()


FUNCTIONAL = {
    "jacobian": lambda lib, F, x, y, v: F.jacobian(lambda a: a.exp() * a.sum(), x),
    "jacobian, tuples": lambda lib, F, x, y, v: F.jacobian(lambda a, b: (a * b.sum(), (a**2).sum()), (x, y)),
    "jacobian, unused input": lambda lib, F, x, y, v: F.jacobian(lambda a, b: a.sin(), (x, y)),
    "hessian": lambda lib, F, x, y, v: F.hessian(_cubic, x),
    "hessian, tuples": lambda lib, F, x, y, v: F.hessian(lambda a, b: (a.sin() * b * b).sum(), (x, y)),
    "vjp": lambda lib, F, x, y, v: F.vjp(lambda a: a.exp() * a, x, v),
    "vjp, tuples": lambda lib, F, x, y, v: F.vjp(
        lambda a, b: (a * b, a.sum()), (x, y), (v, lib.tensor(2.0, dtype=lib.float64))
    ),
    "vjp of a scalar, v=None": lambda lib, F, x, y, v: F.vjp(lambda a: (a**2).sum(), x),
    "jvp": lambda lib, F, x, y, v: F.jvp(lambda a: a.exp() * a.sum(), x, v),
    "jvp, tuples": lambda lib, F, x, y, v: F.jvp(lambda a, b: ((a * b).sum(), a.tanh()), (x, y), (v, v)),
    "hvp": lambda lib, F, x, y, v: F.hvp(_cubic, x, v),
    "vhp": lambda lib, F, x, y, v: F.vhp(_cubic, x, v),
    "hvp, tuples": lambda lib, F, x, y, v: F.hvp(lambda a, b: (a.exp() * b).sum(), (x, y), (v, v)),
    "vhp, tuples": lambda lib, F, x, y, v: F.vhp(lambda a, b: (a.exp() * b).sum(), (x, y), (v, v)),
}
CREATE_GRAPH = {
    "jacobian": lambda F, x, v: F.jacobian(lambda a: a.exp() * a.sum(), x, create_graph=True),
    "hessian": lambda F, x, v: F.hessian(_cubic, x, create_graph=True),
    "vjp": lambda F, x, v: F.vjp(lambda a: a.exp() * a, x, v, create_graph=True)[1],
    "jvp": lambda F, x, v: F.jvp(lambda a: a.exp() * a, x, v, create_graph=True)[1],
    "hvp": lambda F, x, v: F.hvp(_cubic, x, v, create_graph=True)[1],
    "vhp": lambda F, x, v: F.vhp(_cubic, x, v, create_graph=True)[1],
}


def _functional(lib):
    return lib.autograd.functional


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_matches_torch(fg, torch, name):
    def program(lib):
        x, y = leaves(lib)
        v = lib.tensor([1.0, -0.5, 2.0], dtype=lib.float64)
        result = FUNCTIONAL[name](lib, _functional(lib), x, y, v)
        return result, x.grad, y.grad

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", CREATE_GRAPH)
def test_functional_create_graph_matches_torch(fg, torch, name):
    def program(lib):
        x, _ = leaves(lib)
        v = lib.tensor([1.0, -0.5, 2.0], dtype=lib.float64)
        result = CREATE_GRAPH[name](_functional(lib), x, v)
        return result, lib.autograd.grad(result.sum(), x)

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "case",
    [
        "strict, unused input",
        "strict, linear function",
        "hessian of a vector",
        "hessian of a tuple",
        "vjp of a vector without v",
        "jvp with a v of the wrong size",
        "vjp with a v of the wrong length",
        "inputs as a list",
        "hvp strict, linear function",
    ],
)
def test_functional_errors_match_torch(fg, torch, case):
    def program(lib):
        F = _functional(lib)
        x, y = leaves(lib)
        if case == "strict, unused input":
            F.jacobian(lambda a, b: a * 2, (x, y), strict=True)
        elif case == "strict, linear function":
            F.jacobian(lambda a: a * 2, x, create_graph=True, strict=True)
        elif case == "hessian of a vector":
            F.hessian(lambda a: a * 2, x)
        elif case == "hessian of a tuple":
            F.hessian(lambda a: (a.sum(), a.sum()), x)
        elif case == "vjp of a vector without v":
            F.vjp(lambda a: a * 2, x)
        elif case == "jvp with a v of the wrong size":
            F.jvp(lambda a: a * 2, x, lib.ones(2, dtype=lib.float64))
        elif case == "vjp with a v of the wrong length":
            F.vjp(lambda a: (a, a), x, (y,))
        elif case == "inputs as a list":
            F.jacobian(lambda a: a * 2, [x])
        else:
            F.hvp(lambda a: (a * 2).sum(), x, y, strict=True)

    same_error(fg, torch, program)


def test_functional_vectorize_is_not_supported(fg):
    if fg.__name__ == "torch":
        pytest.skip("PyTorch has vmap")
    x, _ = leaves(fg)
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        fg.autograd.functional.jacobian(lambda a: a * 2, x, vectorize=True)
    with pytest.raises(NotImplementedError, match="forward-mode"):
        fg.autograd.functional.jacobian(lambda a: a * 2, x, strategy="forward-mode")
