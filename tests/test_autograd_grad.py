"""fastgrad.autograd.grad and fastgrad.autograd.backward, checked against PyTorch."""

import pytest

from semantics_helpers import strip_module
from oracle_helpers import doubling_function, mul_sin_function, same_error, same_on_both


def leaves(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, -4.0], requires_grad=True)
    return x, w


# ---- autograd.grad


def test_grad_of_leaves_leaves_dot_grad_alone(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        y = (x * w + x.sin()).sum()
        one = lib.autograd.grad(y, x, retain_graph=True)
        both = lib.autograd.grad(y, [x, w])
        return type(one).__name__, one, both, x.grad, w.grad

    assert same_on_both(fg, torch, program)[3:] == (None, None)


def test_grad_of_non_leaf_inputs(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        h = x * w
        out = (h * h).sum()
        return lib.autograd.grad(out, h, retain_graph=True), lib.autograd.grad(out, [h, x, w])

    same_on_both(fg, torch, program)


def test_grad_of_an_output_with_respect_to_itself_is_the_seed(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        h = x * w
        seed = lib.tensor([5.0, 6.0])
        return lib.autograd.grad(x, x, seed), lib.autograd.grad(h, h, seed), lib.autograd.grad(h, [x, h], seed)

    same_on_both(fg, torch, program)


def test_grad_runs_only_what_leads_to_the_inputs(fg, torch):
    def program(lib):
        calls = []

        class Traced(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, tag):
                ctx.tag = tag
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                calls.append(ctx.tag)
                return grad * 2, None

        x, w = leaves(lib)
        h = Traced.apply(x, "to x")
        out = (h * Traced.apply(w, "to w")).sum()
        (gx,) = lib.autograd.grad(out, x)
        return gx, sorted(calls)

    assert same_on_both(fg, torch, program)[1] == ["to x"]


def test_grad_fills_retained_grads_on_the_way(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        h = x * w
        h.retain_grad()
        out = (h * h).sum()
        (gx,) = lib.autograd.grad(out, x)
        return gx, h.grad, x.grad, w.grad

    same_on_both(fg, torch, program)


def test_grad_through_custom_function(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        c = mul_sin_function(lib).apply(x * w, x)
        return lib.autograd.grad(c.sum(), [c, x, w])

    same_on_both(fg, torch, program)


def test_grad_outputs_for_several_outputs(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        a, b = (x * w).sum(), x * x
        return lib.autograd.grad([a, b], [x, w], grad_outputs=[None, lib.tensor([1.0, -1.0], dtype=lib.float64)])

    same_on_both(fg, torch, program)


def test_grad_inputs_as_a_dict(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        result = lib.autograd.grad((x * w).sum(), {"x": x, "w": w})
        return sorted(result), result["x"], result["w"]

    same_on_both(fg, torch, program)


def test_grad_in_no_grad_mode_for_a_graph_built_before(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        y = (x * w).sum()
        with lib.no_grad():
            return lib.autograd.grad(y, w)

    same_on_both(fg, torch, program)


def test_unused_inputs(fg, torch):
    def program(lib, **options):
        x, w = leaves(lib)
        unused = lib.zeros(2, 2, requires_grad=True)
        return lib.autograd.grad((x * 2).sum(), [x, unused, w], **options)

    error = same_error(fg, torch, program)
    assert str(error) == (
        "The differentiated Tensor at index 1 appears to not have been used in the graph. "
        "Set allow_unused=True if this is the desired behavior."
    )
    same_on_both(fg, torch, lambda lib: program(lib, allow_unused=True))
    same_on_both(fg, torch, lambda lib: program(lib, materialize_grads=True))
    same_on_both(fg, torch, lambda lib: program(lib, allow_unused=True, materialize_grads=True))
    error = same_error(fg, torch, lambda lib: program(lib, allow_unused=False, materialize_grads=True))
    assert isinstance(error, ValueError)


def test_gradient_that_is_none_counts_as_unused(fg, torch):
    def program(lib, **options):
        Drop = doubling_function(lib, lambda lib, grad: None)
        x, _ = leaves(lib)
        return lib.autograd.grad(Drop.apply(x).sum(), x, **options)

    assert "index 0 appears to not have been used" in str(same_error(fg, torch, program))
    assert same_on_both(fg, torch, lambda lib: program(lib, allow_unused=True)) == (None,)


def test_second_grad_needs_retain_graph(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        y = x.exp().sum()
        first = lib.autograd.grad(y, x, retain_graph=True)
        second = lib.autograd.grad(y, x)
        return first, second, lib.autograd.grad(y, x)

    error = same_error(fg, torch, program)
    assert str(error).startswith("Trying to backward through the graph a second time")


@pytest.mark.parametrize(
    "case,message",
    [
        ("input_without_grad", "One of the differentiated Tensors does not require grad"),
        ("input_not_tensor", "all inputs have to be Tensors or GradientEdges, but got int"),
        ("no_inputs", "`inputs` argument to `grad()` cannot be empty."),
        ("non_scalar_output", "grad can be implicitly created only for scalar outputs"),
        ("output_without_grad", "element 1 of tensors does not require grad and does not have a grad_fn"),
        (
            "grad_output_shape",
            "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a "
            "shape of torch.Size([2]).",
        ),
        ("grad_output_count", "got 2 tensors and 1 gradients"),
        ("grad_output_type", "gradients can be either Tensors or None, but got str"),
        ("outputs_not_iterable", "'int' object is not iterable"),
    ],
)
def test_grad_errors(fg, torch, case, message):
    def program(lib):
        x, w = leaves(lib)
        y = x * w
        grad = lib.autograd.grad
        if case == "input_without_grad":
            grad(y.sum(), [x, lib.ones(2)])
        elif case == "input_not_tensor":
            grad(y.sum(), [x, 3])
        elif case == "no_inputs":
            grad(y.sum(), [])
        elif case == "non_scalar_output":
            grad(y, x)
        elif case == "output_without_grad":
            grad([y.sum(), lib.ones(2).sum()], x)
        elif case == "grad_output_shape":
            grad(y, x, lib.ones(3))
        elif case == "grad_output_count":
            grad([y.sum(), y.sum()], x, [None])
        elif case == "grad_output_type":
            grad(y, x, ["seed"])
        elif case == "outputs_not_iterable":
            grad(3, x)

    error = same_error(fg, torch, program)
    assert strip_module(error).replace("torch.", "") == strip_module(message).replace("torch.", "")


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_create_graph_in_every_form(fg, torch):
    """grad, backward and Tensor.backward with create_graph=True record the backward pass: the
    gradients differentiate again, and the graph is kept (retain_graph defaults to create_graph)."""

    def program(lib):
        x, w = leaves(lib)
        y = (x * x * w).sum()
        (gx,) = lib.autograd.grad(y, x, create_graph=True)
        second = lib.autograd.grad(gx.sum(), [x, w])
        lib.autograd.backward(y, create_graph=True)
        y.backward(create_graph=True)
        return gx, second, x.grad, w.grad, lib.autograd.grad(x.grad.sum(), w)

    same_on_both(fg, torch, program)


def test_retain_graph_false_frees_a_create_graph_pass(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        y = x.exp().sum()
        lib.autograd.grad(y, x, create_graph=True, retain_graph=False)
        lib.autograd.grad(y, x)

    assert str(same_error(fg, torch, program)).startswith("Trying to backward through the graph a second time")


# ---- autograd.backward


def test_backward_of_several_tensors(fg, torch):
    def program(lib):
        x, w = leaves(lib)
        lib.autograd.backward([(x * w).sum(), x * x], [None, lib.tensor([1.0, 0.5])])
        first = x.grad.tolist(), w.grad.tolist()
        lib.autograd.backward((x * 3).sum())
        return first, x.grad, w.grad

    same_on_both(fg, torch, program)


def test_backward_retain_graph(fg, torch):
    def program(lib):
        x, _ = leaves(lib)
        y = x.exp().sum()
        lib.autograd.backward(y, retain_graph=True)
        lib.autograd.backward(y)
        grads = x.grad
        lib.autograd.backward(y)
        return grads

    assert str(same_error(fg, torch, program)).startswith("Trying to backward through the graph a second time")


@pytest.mark.parametrize(
    "case,message",
    [
        ("non_scalar", "grad can be implicitly created only for scalar outputs"),
        ("without_grad", "element 1 of tensors does not require grad and does not have a grad_fn"),
        ("grad_count", "got 2 tensors and 1 gradients"),
    ],
)
def test_backward_errors(fg, torch, case, message):
    def program(lib):
        x, w = leaves(lib)
        if case == "non_scalar":
            lib.autograd.backward(x * w)
        elif case == "without_grad":
            lib.autograd.backward([(x * w).sum(), lib.ones(2).sum()])
        else:
            lib.autograd.backward([(x * w).sum(), x.sum()], [lib.tensor(1.0)])

    assert str(same_error(fg, torch, program)) == message
