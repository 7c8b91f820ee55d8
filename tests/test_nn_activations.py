"""torch.nn's activations and small layers against PyTorch: values, gradients (at the kinks too),
grad_fn names, in-place forms, reprs, errors; the random layers by the structure of what they drop.

Every case is a function of the library module (`fg` or real `torch`), so the same thing is built
in both and compared.
"""

import warnings

import numpy as np
import pytest

from op_helpers import assert_close, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error

# the kinks and thresholds of the activations below (0, +-0.5, +-1, +-3, 6, beta x = threshold),
# points either side of them, and a large value (exp overflow on the unused side)
KINKS = [-60.0, -6.0, -3.0, -2.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 2.5, 3.0, 6.0, 7.0, 60.0]

POINTS = KINKS + [0.1, -0.1, 1.5]  # an even count: glu halves them

ACTIVATIONS = {
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "leaky_relu_slope": lambda F, x: F.leaky_relu(x, 0.2),
    "leaky_relu_negative_slope": lambda F, x: F.leaky_relu(x, -0.5),
    "elu": lambda F, x: F.elu(x),
    "elu_alpha": lambda F, x: F.elu(x, 0.5),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x, 2.0),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "softplus": lambda F, x: F.softplus(x),
    "softplus_beta": lambda F, x: F.softplus(x, beta=2, threshold=1.5),
    "softsign": lambda F, x: F.softsign(x),
    "softmin": lambda F, x: F.softmin(x, 0),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh_range": lambda F, x: F.hardtanh(x, -0.5, 3.0),
    "relu6": lambda F, x: F.relu6(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "rrelu_eval": lambda F, x: F.rrelu(x, 0.1, 0.3),
    "tanhshrink": lambda F, x: F.tanhshrink(x),
    "softshrink": lambda F, x: F.softshrink(x),
    "hardshrink": lambda F, x: F.hardshrink(x, 1.0),
    "threshold": lambda F, x: F.threshold(x, 0.5, -2.0),
    "glu": lambda F, x: F.glu(x.reshape(-1, 2), 0),
    "prelu": lambda F, x: F.prelu(x, x.new_tensor([0.25])),
}


def activation_result(lib, name, values, dtype, backward=True):
    """(the activation of `values`, the input's gradient for a weighted sum of it)."""
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    y = ACTIVATIONS[name](lib.nn.functional, x)
    if backward:
        (y * lib.arange(1.0, y.numel() + 1, dtype=y.dtype).reshape(y.shape)).sum().backward()
    return y, x.grad


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_values_gradients_and_node_match_torch(fg, torch, name):
    ours, ours_grad = activation_result(fg, name, POINTS, "float64")
    theirs, their_grad = activation_result(torch, name, POINTS, "float64")
    assert_close(to_numpy(ours), theirs.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert_close(ours_grad.numpy(), their_grad.numpy(), rtol=1e-13, atol=1e-15, what="gradients")
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    # float32: PyTorch's order of operations, so within a couple of ulps
    ours32, _ = activation_result(fg, name, POINTS, "float32", backward=False)
    theirs32, _ = activation_result(torch, name, POINTS, "float32", backward=False)
    assert ours32.dtype == fg.float32
    np.testing.assert_allclose(to_numpy(ours32), theirs32.detach().numpy(), rtol=3e-7, atol=1e-7)


SMOOTH = [-2.2, -1.3, -0.7, -0.3, 0.2, 0.6, 1.4, 2.7]  # away from every kink: finite differences hold


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_gradcheck_and_gradgradcheck(fg, name):
    x = fg.tensor(SMOOTH, dtype=fg.float64, requires_grad=True)

    def f(t):
        return ACTIVATIONS[name](fg.nn.functional, t)

    assert gradcheck_for(fg)(f, (x,))
    if name != "hardsigmoid":  # PyTorch's has no double backward (below)
        assert gradcheck_for(fg, "gradgradcheck")(f, (x,))


def weighted_sum(lib, t, low, high):
    return (t * lib.linspace(low, high, t.numel(), dtype=t.dtype).reshape(t.shape)).sum()


@pytest.mark.parametrize("name", [name for name in ACTIVATIONS if name != "hardsigmoid"])
def test_gradient_with_create_graph_reaches_the_input_as_in_torch(fg, torch, name):
    """A gradient taken with create_graph depends on the input, even where the activation is
    piecewise linear (then with zero second derivative), as PyTorch's backward nodes do; at the
    kinks the second derivative takes PyTorch's side."""

    def second_derivative(lib):
        x = lib.tensor(POINTS, dtype=lib.float64, requires_grad=True)
        y = ACTIVATIONS[name](lib.nn.functional, x)
        (grad,) = lib.autograd.grad(weighted_sum(lib, y, -1, 2), x, create_graph=True)
        return lib.autograd.grad(weighted_sum(lib, grad, 1, 3), x)[0] if grad.requires_grad else None

    ours, theirs = second_derivative(fg), second_derivative(torch)
    assert (ours is None) == (theirs is None)
    if theirs is not None:
        assert_close(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-14, what="second derivatives")


def test_hardsigmoid_has_no_double_backward(fg, torch):
    def program(lib):
        x = lib.tensor([0.5, 4.0], requires_grad=True)
        (grad,) = lib.autograd.grad(lib.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        assert abs(grad[0].item() - 1 / 6) < 1e-7 and grad[1].item() == 0
        lib.autograd.grad(grad.sum(), x)

    same_error(fg, torch, program)


INPLACE = {
    "elu_": (lambda F, x: F.elu_(x, 0.5), lambda F, x: F.elu(x, 0.5)),
    "elu": (lambda F, x: F.elu(x, inplace=True), lambda F, x: F.elu(x)),
    "selu_": (lambda F, x: F.selu_(x), lambda F, x: F.selu(x)),
    "celu_": (lambda F, x: F.celu_(x, 1.5), lambda F, x: F.celu(x, 1.5)),
    "silu": (lambda F, x: F.silu(x, inplace=True), lambda F, x: F.silu(x)),
    "mish": (lambda F, x: F.mish(x, inplace=True), lambda F, x: F.mish(x)),
    "hardtanh_": (lambda F, x: F.hardtanh_(x, -0.5, 0.5), lambda F, x: F.hardtanh(x, -0.5, 0.5)),
    "relu6": (lambda F, x: F.relu6(x, inplace=True), lambda F, x: F.relu6(x)),
    "hardswish": (lambda F, x: F.hardswish(x, inplace=True), lambda F, x: F.hardswish(x)),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x, inplace=True), lambda F, x: F.hardsigmoid(x)),
    "threshold_": (lambda F, x: F.threshold_(x, 0.5, 9.0), lambda F, x: F.threshold(x, 0.5, 9.0)),
    "rrelu_": (lambda F, x: F.rrelu_(x), lambda F, x: F.rrelu(x)),
    "relu_": (lambda F, x: F.relu_(x), lambda F, x: F.relu(x)),
    "leaky_relu_": (lambda F, x: F.leaky_relu_(x, 0.2), lambda F, x: F.leaky_relu(x, 0.2)),
    "leaky_relu": (lambda F, x: F.leaky_relu(x, inplace=True), lambda F, x: F.leaky_relu(x)),
    "hardtanh": (lambda F, x: F.hardtanh(x, -2.0, 3.0, True), lambda F, x: F.hardtanh(x, -2.0, 3.0)),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_forms_write_the_input_and_keep_the_gradient(fg, torch, name):
    in_place, out_of_place = INPLACE[name]

    def run(lib, form):
        leaf = lib.tensor(KINKS, dtype=lib.float64, requires_grad=True)
        x = leaf * 1  # not a leaf: it may be written in place
        y = form(lib.nn.functional, x)
        y.backward(lib.linspace(-1, 2, len(KINKS), dtype=lib.float64))
        return x, y, leaf.grad

    x, y, grad = run(fg, in_place)
    _, in_place_result, _ = run(torch, in_place)
    assert y is x and y.grad_fn.name() == in_place_result.grad_fn.name()
    _, expected, expected_grad = run(torch, out_of_place)
    assert_close(to_numpy(y), expected.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert_close(grad.numpy(), expected_grad.numpy(), rtol=1e-13, atol=1e-15, what="gradients")
    # a leaf that requires grad may not be written in place
    same_error(fg, torch, lambda lib: in_place(lib.nn.functional, lib.ones(2, requires_grad=True)))


# the activations computed with PyTorch's own kernel formulas: its bits in every floating dtype
EXACT = ["leaky_relu", "leaky_relu_slope", "leaky_relu_negative_slope", "hardtanh", "hardtanh_range", "relu6"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", EXACT)
def test_piecewise_linear_activations_give_torchs_bits(fg, torch, name, dtype):
    rng = rng_for("exact activations", name, dtype)
    values = KINKS + list(rng.normal(size=40) * 4) + [float("nan"), float("inf"), -float("inf"), -0.0]
    upstream = list(rng.normal(size=len(values)))

    def run(lib):
        x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
        y = ACTIVATIONS[name](lib.nn.functional, x)
        y.backward(lib.tensor(upstream, dtype=x.dtype))
        return [t.detach().double().numpy() for t in (y, x.grad)]

    for ours, theirs in zip(run(fg), run(torch)):
        np.testing.assert_array_equal(ours, theirs)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs))


def test_hardtanh_and_relu6_of_integers_clamp_as_torch(fg, torch):
    for form in (lambda F, x: F.hardtanh(x, -2.5, 3.9), lambda F, x: F.relu6(x), lambda F, x: F.relu6(x, True)):
        ours, theirs = (form(lib.nn.functional, lib.arange(-9, 9)) for lib in (fg, torch))
        assert ours.dtype == fg.int64 and ours.tolist() == theirs.tolist()


def test_inplace_leaky_relu_with_a_negative_slope_has_no_backward(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, -2.0], requires_grad=True) * 1
        lib.nn.functional.leaky_relu_(x, -0.1).sum().backward()

    same_error(fg, torch, program)


@pytest.mark.parametrize("name", ["leaky_relu", "hardtanh"])
def test_backward_after_the_input_changed_in_place_raises_as_torch(fg, torch, name):
    def program(lib):
        x = lib.tensor([1.0, -2.0], requires_grad=True) * 1
        y = ACTIVATIONS[name](lib.nn.functional, x)
        x.add_(1)
        y.sum().backward()

    same_error(fg, torch, program)


# In place twice, then backward: PyTorch's node of elu_/celu_/selu_/leaky_relu_/rrelu_/relu_ saves the
# result, which the second write changes (an error); hardtanh_'s, threshold_'s and silu's save the old values.
IN_PLACE_TWICE = {
    "elu_": (lambda F, v: F.elu_(v), True),
    "celu_": (lambda F, v: F.celu_(v, 0.5), True),
    "selu_": (lambda F, v: F.selu_(v), True),
    "leaky_relu_": (lambda F, v: F.leaky_relu_(v), True),
    "rrelu_": (lambda F, v: F.rrelu_(v), True),
    "relu_": (lambda F, v: F.relu_(v), True),
    "hardtanh_": (lambda F, v: F.hardtanh_(v), False),
    "relu6": (lambda F, v: F.relu6(v, inplace=True), False),
    "threshold_": (lambda F, v: F.threshold_(v, 0.1, 0.0), False),
    "silu": (lambda F, v: F.silu(v, inplace=True), False),
}


@pytest.mark.parametrize("name", list(IN_PLACE_TWICE))
def test_in_place_twice_then_backward_as_torch(fg, torch, name):
    activation, fails = IN_PLACE_TWICE[name]

    def program(lib):
        x = lib.tensor([0.5, -0.3], requires_grad=True)
        v = x * 1
        activation(lib.nn.functional, v)
        activation(lib.nn.functional, v)
        v.sum().backward()
        return x.grad

    if fails:
        same_error(fg, torch, program)
    else:
        assert_close(to_numpy(program(fg)), to_numpy(program(torch)))


ERRORS = [
    lambda lib: lib.nn.functional.leaky_relu(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.leaky_relu(lib.tensor([1, 2]), inplace=True),
    lambda lib: lib.nn.functional.celu(lib.ones(2), 0.0),
    lambda lib: lib.nn.functional.softshrink(lib.ones(2), -1.0),
    lambda lib: lib.nn.functional.softshrink(lib.ones(2, dtype=lib.float64), -0.25),
    lambda lib: lib.nn.functional.hardtanh(lib.ones(2), 2.0, 1.0),
    lambda lib: lib.nn.functional.glu(lib.ones(3, 3)),
    lambda lib: lib.nn.functional.glu(lib.ones(4), 2),
    lambda lib: lib.nn.functional.glu(lib.tensor(1.0)),
    lambda lib: lib.nn.functional.prelu(lib.ones(2, 3), lib.ones(2)),
    lambda lib: lib.nn.functional.prelu(lib.ones(2, 3), lib.ones(1, 3)),
    lambda lib: lib.nn.functional.prelu(lib.ones(2, 3), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.nn.functional.prelu(lib.tensor([1, 2]), lib.tensor([1])),
    lambda lib: lib.nn.functional.rrelu(lib.ones(2), 0.5, 0.1, training=True),
    lambda lib: lib.nn.functional.elu(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.silu(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.softplus(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.hardswish(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.logsigmoid(lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.softshrink(lib.tensor([1, 2]), -1),
    lambda lib: lib.nn.Hardtanh(1.0, 1.0),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1,)),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1,) * 8),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1.5, 1)),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1, 1), "foo"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1, 1), "reflect", 2.0),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (4, 2), "reflect"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1, 1, 3, 1), "reflect"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (1,) * 6, "replicate"),
    lambda lib: lib.nn.functional.pad(lib.ones(4), (1, 1), "circular"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 0, 4), (1, 1), "reflect"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (-2, -2), "replicate"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (0, 0, -3, -1), "replicate"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (5, 1), "circular"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 4), (-4, -1), "circular"),
    lambda lib: lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(2, 4), lib.ones(5, 3, 3)),
    lambda lib: lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(3, 4), lib.ones(5, 3, 4)),
    lambda lib: lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(2, 4, 1), lib.ones(5, 3, 4)),
    lambda lib: lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(2, 4), lib.ones(5, 3, 4), lib.ones(4)),
    lambda lib: lib.nn.Bilinear(0, 2, 3),
    lambda lib: lib.nn.Unflatten(1, 6),
    lambda lib: lib.nn.Unflatten(1, (2, 3.0)),
    lambda lib: lib.nn.Embedding.from_pretrained(lib.ones(3)),
    lambda lib: lib.nn.functional.embedding(lib.tensor([0]), lib.ones(3, 2), padding_idx=3),
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 1]), lib.ones(3, 2)),
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 1]), lib.ones(3, 2), lib.tensor([0]), mode="min"),
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 1]), lib.ones(3, 2), lib.tensor([1])),
    lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([0, 1]), lib.ones(3, 2), lib.tensor([0]), per_sample_weights=lib.ones(2)
    ),
    lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([0, 1]), lib.ones(3, 2), lib.tensor([0]), mode="sum", per_sample_weights=lib.ones(3)
    ),
    lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([0, 1]), lib.ones(3, 2), lib.tensor([0]), mode="max", scale_grad_by_freq=True
    ),
    lambda lib: lib.nn.functional.dropout1d(lib.ones(4), 0.5),
    lambda lib: lib.nn.functional.dropout2d(lib.ones(4), 1.5),
    lambda lib: lib.nn.functional.feature_alpha_dropout(lib.ones(4), 0.5, True),
    lambda lib: lib.nn.Dropout2d(-0.1),
    lambda lib: lib.nn.CircularPad2d(1)(lib.ones(4, 4)),
    lambda lib: lib.nn.Softmax2d()(lib.ones(4, 4)),
]


@pytest.mark.parametrize("program", ERRORS)
def test_errors_match_torch(fg, torch, program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(fg, torch, program)


MODULES = [
    lambda nn: nn.ELU(),
    lambda nn: nn.ELU(0.5, True),
    lambda nn: nn.SELU(),
    lambda nn: nn.SELU(True),
    lambda nn: nn.CELU(2.0),
    lambda nn: nn.SiLU(inplace=True),
    lambda nn: nn.Mish(),
    lambda nn: nn.Softplus(2, 10),
    lambda nn: nn.Softsign(),
    lambda nn: nn.Softmin(1),
    lambda nn: nn.Hardtanh(-2, 2, True),
    lambda nn: nn.ReLU6(),
    lambda nn: nn.ReLU6(True),
    lambda nn: nn.Hardswish(),
    lambda nn: nn.Hardsigmoid(True),
    lambda nn: nn.LogSigmoid(),
    lambda nn: nn.PReLU(3, 0.1),
    lambda nn: nn.RReLU(0.1, 0.3, True),
    lambda nn: nn.GLU(0),
    lambda nn: nn.Tanhshrink(),
    lambda nn: nn.Softshrink(1),
    lambda nn: nn.Hardshrink(),
    lambda nn: nn.Threshold(0.1, 20, True),
    lambda nn: nn.Unflatten(1, (2, 3)),
    lambda nn: nn.Bilinear(2, 3, 4, bias=False),
    lambda nn: nn.CosineSimilarity(0, 1e-6),
    lambda nn: nn.PairwiseDistance(1.0, 1e-5, True),
    lambda nn: nn.EmbeddingBag(5, 3),
    lambda nn: nn.EmbeddingBag(5, 3, max_norm=1.0, norm_type=1.0, mode="max", padding_idx=-1),
    lambda nn: nn.Embedding.from_pretrained(nn.Parameter(nn.Linear(3, 5).weight.detach()), padding_idx=1),
    lambda nn: nn.Dropout1d(),
    lambda nn: nn.Dropout2d(0.3, True),
    lambda nn: nn.Dropout3d(),
    lambda nn: nn.AlphaDropout(0.2),
    lambda nn: nn.FeatureAlphaDropout(0.2),
    lambda nn: nn.Softmax2d(),
    lambda nn: nn.ReflectionPad1d(2),
    lambda nn: nn.ReplicationPad2d((1, 0, 2, 1)),
    lambda nn: nn.CircularPad3d([1, 0, 1, 1, 0, 1]),
    lambda nn: nn.ConstantPad2d(1, 2.5),
    lambda nn: nn.ZeroPad1d((0, 3)),
    lambda nn: nn.ZeroPad3d(1),
]


@pytest.mark.parametrize("build", MODULES)
def test_module_repr_attributes_and_state_dict_match_torch(fg, torch, build):
    ours, theirs = build(fg.nn), build(torch.nn)
    assert repr(ours) == repr(theirs)
    public = [k for k in vars(theirs) if not k.startswith("_") and k != "training"]
    assert [getattr(ours, k) for k in public] == [getattr(theirs, k) for k in public]
    assert {k: list(v.shape) for k, v in ours.state_dict().items()} == {
        k: list(v.shape) for k, v in theirs.state_dict().items()
    }


def test_module_class_hierarchy_matches_torch(fg, torch):
    pairs = [
        ("CELU", "ELU"),
        ("ReLU6", "Hardtanh"),
        ("Dropout2d", "Dropout"),
        ("Softshrink", "Hardshrink"),
        ("ZeroPad2d", "ConstantPad2d"),
        ("ZeroPad2d", "ConstantPad1d"),
        ("CircularPad1d", "ReflectionPad1d"),
    ]
    for sub, base in pairs:
        assert issubclass(getattr(fg.nn, sub), getattr(fg.nn, base)) == issubclass(
            getattr(torch.nn, sub), getattr(torch.nn, base)
        )


def test_modules_call_their_functional_forms(fg, torch):
    data = rng_for("modules").normal(size=(2, 4, 3))
    for build in (lambda nn: nn.CELU(0.7), lambda nn: nn.Softmin(2), lambda nn: nn.GLU(1), lambda nn: nn.Softplus(3)):
        ours = build(fg.nn)(fg.tensor(data))
        theirs = build(torch.nn)(torch.tensor(data))
        assert_close(to_numpy(ours), theirs.numpy(), rtol=1e-13, atol=1e-15)


def test_prelu_module_learns_a_slope_per_channel(fg, torch):
    data = rng_for("prelu").normal(size=(2, 3, 4))

    def run(lib):
        layer = lib.nn.PReLU(3, 0.2).double()
        x = lib.tensor(data, requires_grad=True)
        (layer(x) * x).sum().backward()
        return layer, x.grad

    (ours, our_grad), (theirs, their_grad) = run(fg), run(torch)
    assert isinstance(ours.weight, fg.nn.Parameter) and [n for n, _ in ours.named_parameters()] == ["weight"]
    assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-13, what="weight gradient")
    assert_close(our_grad.numpy(), their_grad.numpy(), rtol=1e-13, what="input gradient")


def test_rrelu_training_draws_a_slope_per_negative_element(fg):
    x = fg.linspace(-3, 3, 4001, dtype=fg.float64, requires_grad=True)
    fg.manual_seed(0)
    y = fg.nn.RReLU(0.1, 0.3)(x)  # a module is in training mode
    y.sum().backward()
    negative, positive = x.detach() < 0, x.detach() > 0
    slopes = (y.detach() / x.detach())[negative]
    assert 0.1 <= slopes.min().item() and slopes.max().item() <= 0.3
    assert abs(slopes.mean().item() - 0.2) < 0.01 and slopes.std().item() > 0.05  # uniform on [0.1, 0.3]
    assert fg.equal(y.detach()[positive], x.detach()[positive])
    assert_close(x.grad[negative].numpy(), slopes.numpy(), rtol=1e-15, what="the drawn slopes")
    assert y.grad_fn.name() == "RreluWithNoiseBackward0"


# ---- small layers


PADS = [
    ((2, 3, 4), (1, 2), "constant", 0.5),
    ((2, 3, 4), (1, -2, 0, 1), "constant", None),
    ((2, 3, 4), (2, 1, 1, 2, 1, 0), "constant", -1.0),
    ((2, 3, 4), (3, 3), "reflect", None),
    ((2, 3, 4), (-1, 2), "reflect", None),
    ((2, 3, 4), (1, 1, 2, 1), "reflect", 0.0),
    ((1, 2, 3, 4), (1, 2, 2, 1, 1, 1), "reflect", None),
    ((3, 4), (5, -1), "replicate", None),
    ((2, 3, 4), (1, 2, 2, 0), "replicate", None),
    ((1, 2, 3, 4), (1, 2, 2, 1, 3, 1), "replicate", None),
    ((2, 3, 4), (4, 1), "circular", None),
    ((2, 3, 4), (-1, 2, 3, 1), "circular", None),
    ((1, 2, 3, 4), (1, 2, 2, 1, 2, 1), "circular", None),
]


@pytest.mark.parametrize("shape, pad, mode, value", PADS)
def test_pad_matches_torch(fg, torch, shape, pad, mode, value):
    data = rng_for("pad", shape, pad, mode).normal(size=shape)

    def run(lib):
        x = lib.tensor(data, requires_grad=True)
        y = lib.nn.functional.pad(x, pad, mode, value)
        (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        return y, x.grad

    (ours, our_grad), (theirs, their_grad) = run(fg), run(torch)
    assert_close(to_numpy(ours), theirs.detach().numpy(), rtol=0, atol=0)
    assert_close(our_grad.numpy(), their_grad.numpy(), rtol=1e-15, what="gradients")


PAD_LAYERS = [
    (lambda nn: nn.ReflectionPad2d((1, 2, 0, 1)), (1, 2, 3, 4)),
    (lambda nn: nn.ReplicationPad1d(3), (2, 4)),
    (lambda nn: nn.CircularPad2d(1), (2, 3, 4)),
    (lambda nn: nn.ConstantPad3d((1, 0, 0, 1, 2, 0), -1.5), (2, 2, 2, 3)),
    (lambda nn: nn.ZeroPad2d((1, -1, 0, 2)), (3, 4)),
    (lambda nn: nn.Softmax2d(), (2, 3, 2, 2)),
]


@pytest.mark.parametrize("build, shape", PAD_LAYERS)
def test_pad_layers_and_softmax2d_match_torch(fg, torch, build, shape):
    data = rng_for("pad layers", shape).normal(size=shape)
    ours, theirs = build(fg.nn)(fg.tensor(data)), build(torch.nn)(torch.tensor(data))
    assert_close(to_numpy(ours), theirs.numpy(), rtol=1e-15, atol=0)


def test_pad_of_integers_reads_the_value_as_an_integer(fg, torch):
    ours = fg.nn.functional.pad(fg.arange(6).reshape(2, 3), (1, 1), value=2.7)
    theirs = torch.nn.functional.pad(torch.arange(6).reshape(2, 3), (1, 1), value=2.7)
    assert ours.dtype == fg.int64 and ours.tolist() == theirs.tolist()


BINARY = {
    "bilinear": lambda lib, a, b, w: lib.nn.functional.bilinear(a, b, w[0], w[1]),
    "bilinear_batched": lambda lib, a, b, w: lib.nn.functional.bilinear(a.reshape(3, 1, 4), b.reshape(3, 1, 4), w[0]),
    "cosine_similarity": lambda lib, a, b, w: lib.nn.CosineSimilarity(1, 1e-3)(a, b),
    "cosine_similarity_dim0": lambda lib, a, b, w: lib.nn.functional.cosine_similarity(a, b, 0),
    "pairwise_distance": lambda lib, a, b, w: lib.nn.PairwiseDistance()(a, b),
    "pairwise_distance_p1": lambda lib, a, b, w: lib.nn.functional.pairwise_distance(a, b, 1.0, 1e-3, True),
    "normalize": lambda lib, a, b, w: lib.nn.functional.normalize(a * b),
    "normalize_p3": lambda lib, a, b, w: lib.nn.functional.normalize(a, 3.0, 0, 0.5),
}


@pytest.mark.parametrize("name", BINARY)
def test_binary_layers_match_torch(fg, torch, name):
    rng = rng_for("binary", name)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    a[1] = b[2] = 0.0  # zero rows: the eps clamps
    weights = rng.normal(size=(5, 4, 4)), rng.normal(size=5)

    def run(lib):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        w = [lib.tensor(t, requires_grad=True) for t in weights]
        out = BINARY[name](lib, x, y, w)
        (out * lib.arange(1.0, out.numel() + 1, dtype=out.dtype).reshape(out.shape)).sum().backward()
        return [out] + [t.grad for t in (x, y, *w)]

    for ours, theirs in zip(run(fg), run(torch)):
        assert (ours is None) == (theirs is None)
        if theirs is not None:
            assert_close(to_numpy(ours), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_bilinear_module_init_and_forward(fg, torch):
    fg.manual_seed(0)
    layer = fg.nn.Bilinear(25, 3, 4)
    bound = 1 / 5
    for p in (layer.weight, layer.bias):
        assert -bound <= p.min().item() and p.max().item() <= bound and p.std().item() > bound / 3
    x1, x2 = fg.randn(6, 25), fg.randn(6, 3)
    expected = fg.nn.functional.bilinear(x1, x2, layer.weight, layer.bias)
    assert fg.equal(layer(x1, x2), expected) and list(expected.shape) == [6, 4]


def test_unflatten(fg, torch):
    for lib in (fg, torch):
        assert list(lib.nn.Unflatten(1, (2, -1))(lib.ones(4, 6, 5)).shape) == [4, 2, 3, 5]
        assert list(lib.nn.Unflatten(-1, [3, 2])(lib.ones(4, 6)).shape) == [4, 3, 2]


def embedding_weight(lib):
    data = rng_for("embedding").normal(size=(6, 3))
    return lib.tensor(data, requires_grad=True)


def test_embedding_from_pretrained(fg, torch):
    weight = fg.ones(4, 2)
    frozen = fg.nn.Embedding.from_pretrained(weight, padding_idx=-1)
    assert frozen.weight.requires_grad is False and frozen.padding_idx == 3
    weight.add_(1)
    assert frozen.weight.tolist() == [[2.0, 2.0]] * 4  # used, not copied
    assert fg.nn.Embedding.from_pretrained(weight, freeze=False).weight.requires_grad is True
    bag = fg.nn.EmbeddingBag.from_pretrained(weight, mode="sum", freeze=False)
    assert bag.weight.requires_grad is True and bag(fg.tensor([[0, 3]])).tolist() == [[4.0, 4.0]]


EMBEDDINGS = {
    "plain": {},
    "max_norm": dict(max_norm=1.5),
    "max_norm_p1": dict(max_norm=1.0, norm_type=1.0),
    "scale_grad_by_freq": dict(scale_grad_by_freq=True, padding_idx=1),
    "padding_idx": dict(padding_idx=-2),
    "int32 indices": dict(scale_grad_by_freq=True, indices_dtype="int32"),
}


@pytest.mark.parametrize("name", EMBEDDINGS)
def test_embedding_options_match_torch(fg, torch, name):
    def run(lib):
        weight = embedding_weight(lib)
        options = dict(EMBEDDINGS[name])
        indices = lib.tensor([[0, 1, 1], [4, 1, 3]], dtype=getattr(lib, options.pop("indices_dtype", "int64")))
        y = lib.nn.functional.embedding(indices, weight, **options)
        node = y.grad_fn.name()  # EmbeddingBackward0 in every form
        (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        return node, (y, weight.grad, weight.detach())  # max_norm renormalizes the looked-up rows in place

    (our_node, ours), (their_node, theirs) = run(fg), run(torch)
    assert our_node == their_node
    for a, b in zip(ours, theirs):
        assert_close(to_numpy(a), b.detach().numpy(), rtol=1e-13, atol=1e-15)


def test_embedding_refuses_a_weight_not_2d_before_its_indices(fg, torch):
    for lib in (fg, torch):  # index 7 is out of range too: the weight's check comes first
        with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
            lib.nn.functional.embedding(lib.tensor([7]), lib.ones(5))


def test_embedding_gathers_rows_of_any_layout_and_checks_the_range_as_torch(fg, torch):
    """The primitive copies the rows itself: a transposed weight (strided rows), indices of any
    rank and none; an index out of range (either side), or any index into an empty weight, raise
    PyTorch's errors."""
    data = rng_for("embedding", "layouts").normal(size=(3, 5))
    indices = [[[0, 4], [4, 2]], [[1, 1], [3, 0]]]
    for weight in (lambda lib: lib.tensor(data).t(), lambda lib: lib.tensor(data.T.copy())):
        for idx in (indices, [], 3):
            ours, theirs = (
                lib.nn.functional.embedding(lib.tensor(idx, dtype=lib.int64), weight(lib)) for lib in (fg, torch)
            )
            assert tuple(ours.shape) == tuple(theirs.shape)
            assert_close(to_numpy(ours), theirs.numpy(), rtol=0, atol=0)
    for lib in (fg, torch):
        F = lib.nn.functional
        for bad in ([0, 5], [-1, 2]):
            with pytest.raises(IndexError, match="index out of range in self"):
                F.embedding(lib.tensor(bad), lib.ones(5, 2))
        with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
            F.embedding(lib.tensor([0]), lib.ones(0, 2))
        assert tuple(F.embedding(lib.tensor([], dtype=lib.int64), lib.ones(0, 2)).shape) == (0, 2)
        with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices'"):
            F.embedding(lib.tensor([0.0]), lib.ones(5, 2))


BAGS = {
    "rows_mean": dict(input=[[0, 2, 2], [5, 1, 2]]),
    "offsets_sum_empty_bag": dict(input=[0, 2, 2, 5, 1, 2, 4], offsets=[0, 2, 2, 5], mode="sum"),
    "include_last_offset": dict(input=[0, 2, 2, 5, 1, 2, 4], offsets=[0, 2, 2, 7], include_last_offset=True),
    "padding_mean": dict(input=[0, 2, 2, 5, 1, 2, 4], offsets=[0, 3], padding_idx=2),
    "padding_rows_sum": dict(input=[[0, 2, 5], [5, 5, 5]], padding_idx=-1, mode="sum"),
    "max": dict(input=[0, 2, 3, 5, 1, 2, 4], offsets=[0, 2, 2, 5], mode="max"),
    "per_sample_weights": dict(input=[0, 2, 2, 5, 1, 4], offsets=[0, 2, 2, 5], mode="sum", weights=True),
    "max_norm": dict(input=[0, 2, 2, 5, 1, 2, 4], offsets=[0, 3], max_norm=1.0),
}


@pytest.mark.parametrize("name", BAGS)
def test_embedding_bag_matches_torch(fg, torch, name):
    case = dict(BAGS[name])
    sample_weights = rng_for("bag", name).normal(size=len(case["input"])) if case.pop("weights", False) else None

    def run(lib):
        weight = embedding_weight(lib)
        options = {k: lib.tensor(v) if k == "offsets" else v for k, v in case.items() if k != "input"}
        if sample_weights is not None:
            options["per_sample_weights"] = lib.tensor(sample_weights, requires_grad=True)
        y = lib.nn.functional.embedding_bag(lib.tensor(case["input"]), weight, **options)
        (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        psw = options.get("per_sample_weights")
        return y, weight.grad, weight.detach(), None if psw is None else psw.grad

    for ours, theirs in zip(run(fg), run(torch)):
        if theirs is not None:
            assert_close(to_numpy(ours), theirs.detach().numpy(), rtol=1e-13, atol=1e-15)


def test_embedding_bag_module(fg, torch):
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        fg.nn.functional.embedding_bag(fg.tensor([[0, 1]]), fg.ones(3, 2), fg.tensor([0]))
    weight = embedding_weight(fg).detach()
    bag = fg.nn.EmbeddingBag(6, 3, mode="sum", _weight=weight)
    out = bag(fg.tensor([1, 2, 4]), fg.tensor([0, 1]), per_sample_weights=fg.tensor([2.0, 1.0, 1.0], dtype=fg.float64))
    assert_close(out.detach().numpy(), [2 * weight[1].numpy(), weight[2].numpy() + weight[4].numpy()])


# ---- random layers: the structure of what they drop, not PyTorch's random stream


@pytest.mark.parametrize(
    "function, shape, batched",
    [
        ("dropout1d", (3, 40, 5), True),
        ("dropout1d", (40, 5), False),
        ("dropout2d", (2, 40, 2, 3), True),
        ("dropout3d", (2, 40, 2, 1, 2), True),
        ("dropout3d", (40, 2, 1, 2), False),
    ],
)
def test_channel_dropout_zeroes_whole_channels(fg, function, shape, batched):
    fg.manual_seed(0)
    x = fg.rand(*shape, dtype=fg.float64) + 1  # no zeros of its own
    y = getattr(fg.nn.functional, function)(x, 0.25)
    dropped = (y == 0).double().reshape(shape[0], shape[1], -1) if batched else (y == 0).double().reshape(shape[0], -1)
    assert fg.equal(dropped.amax(-1), dropped.amin(-1))  # a channel is dropped as a whole
    assert 0.05 < dropped.mean().item() < 0.5
    kept = y != 0
    assert_close(y[kept].numpy(), (x[kept] / 0.75).numpy(), rtol=1e-15, what="the kept values, scaled by 1/(1-p)")
    evaluated = getattr(fg.nn.functional, function)(x, 0.25, training=False)
    assert (evaluated is x) == batched and fg.equal(evaluated, x)  # unbatched: a view through the added batch dim


def test_dropout2d_warns_about_a_3d_input_and_its_modules_follow_the_mode(fg, torch):
    for lib in (fg, torch):
        with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
            lib.nn.functional.dropout2d(lib.ones(2, 3, 4))
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
            lib.nn.functional.dropout2d(lib.ones(2, 3))
    for layer, x in [
        (fg.nn.Dropout1d(), fg.ones(2, 3, 4)),
        (fg.nn.Dropout2d(), fg.ones(2, 3, 4, 4)),
        (fg.nn.Dropout3d(), fg.ones(2, 3, 4, 4, 1)),
        (fg.nn.FeatureAlphaDropout(), fg.ones(2, 3, 4)),
    ]:
        assert layer.eval()(x) is x and not isinstance(layer, fg.nn.Dropout)
        assert layer.train()(x).shape == x.shape
    assert fg.nn.Dropout2d(1.0)(fg.ones(2, 3, 4, 4)).abs().sum().item() == 0


ALPHA = 1.7580993408473766  # PyTorch's alpha dropout constant


def alpha_dropout_kept(x, y, p):
    """Where alpha dropout kept x: there y = a x + alpha a p (dropped values are -alpha a + alpha a p)."""
    a = 1 / np.sqrt((ALPHA**2 * p + 1) * (1 - p))
    return (y - (x * a + ALPHA * a * p)).abs() < 1e-12, -ALPHA * a + ALPHA * a * p


def test_alpha_dropout_keeps_mean_and_variance(fg, torch):
    fg.manual_seed(0)
    x = fg.randn(20000, dtype=fg.float64)
    y = fg.nn.functional.alpha_dropout(x, 0.2, training=True)
    assert abs(y.mean().item()) < 0.05 and abs(y.std().item() - 1) < 0.05
    kept, dropped_value = alpha_dropout_kept(x, y, 0.2)
    dropped = y[~kept]
    assert_close(dropped.numpy(), np.full(dropped.numel(), dropped_value), rtol=1e-12)
    assert 0.15 < dropped.numel() / 20000 < 0.25
    assert fg.nn.functional.alpha_dropout(x, 0.2) is x  # training=False by default
    assert fg.nn.AlphaDropout(0.2).eval()(x) is x


def test_feature_alpha_dropout_drops_whole_channels(fg):
    fg.manual_seed(0)
    x = fg.randn(4, 50, 6, dtype=fg.float64)
    y = fg.nn.FeatureAlphaDropout(0.5)(x)
    kept, dropped_value = alpha_dropout_kept(x, y, 0.5)
    dropped = (~kept).double()
    assert fg.equal(dropped.amax(-1), dropped.amin(-1))
    assert 0.3 < dropped.mean().item() < 0.7
    assert_close(y[~kept].numpy(), np.full(int(dropped.sum().item()), dropped_value), rtol=1e-12)
