"""nn.functional and nn.init against PyTorch: values and gradients in float32 and float64 (every
reduction, class weights, ignore_index, label smoothing, probability targets), float64 gradcheck,
argument errors with PyTorch's wording, and the statistics of dropout and the initializers.

A case is a function of (F, t, *inputs) run on both libraries with the same numpy data; the float
inputs require grad and the output is backpropagated with the same upstream gradient.
"""

import math
import re
import warnings

import numpy as np
import pytest

from op_helpers import gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error, same_on_both
from semantics_helpers import strip_module

IGNORED = -100


def _floats(shape, low=-2.0, high=2.0):
    return ("float", shape, lambda rng: rng.uniform(low, high, size=shape))


def _probabilities(shape):
    """Rows (along dim 1, or dim 0 for a vector) that sum to 1."""

    def make(rng):
        p = rng.uniform(0.1, 1.0, size=shape)
        return p / p.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)

    return ("const", shape, make)


def _classes(shape, classes, ignored=False):
    """Class indices; with `ignored`, every third one is IGNORED."""

    def make(rng):
        target = rng.integers(0, classes, size=shape)
        if ignored:
            target.reshape(-1)[::3] = IGNORED
        return target

    return ("index", shape, make)


def _index(values):
    return ("index", np.shape(values), lambda rng: np.array(values))


def _constant(shape, low=-2.0, high=2.0):
    return ("const", shape, lambda rng: rng.uniform(low, high, size=shape))


W5 = _constant((5,), 0.5, 2.0)  # class weights for 5 classes

CASES = {  # id: (fn(F, t, *inputs), input specs)
    "linear": (lambda F, t, x, w, b: F.linear(x, w, b), [_floats((2, 3, 4)), _floats((5, 4)), _floats((5,))]),
    "linear no bias": (lambda F, t, x, w: F.linear(x, w), [_floats((3, 4)), _floats((2, 4))]),
    "linear vector": (lambda F, t, x, w, b: F.linear(x, w, b), [_floats((4,)), _floats((2, 4)), _floats((2,))]),
    "linear matrix": (lambda F, t, x, w, b: F.linear(x, w, b), [_floats((3, 4)), _floats((5, 4)), _floats((5,))]),
    "linear column bias": (
        lambda F, t, x, w, b: F.linear(x, w, b),
        [_floats((3, 4)), _floats((5, 4)), _floats((3, 1))],
    ),
    "linear 4-d": (lambda F, t, x, w, b: F.linear(x, w, b), [_floats((2, 2, 3, 4)), _floats((5, 4)), _floats((1, 5))]),
    "linear batch bias": (
        lambda F, t, x, w, b: F.linear(x, w, b),
        [_floats((2, 3, 4)), _floats((5, 4)), _floats((3, 5))],
    ),
    "linear transposed input": (
        lambda F, t, x, w, b: F.linear(x.transpose(0, 1), w, b),
        [_floats((3, 2, 4)), _floats((5, 4)), _floats((5,))],
    ),
    "relu": (lambda F, t, x: F.relu(x), [_floats((3, 4))]),
    "leaky_relu": (lambda F, t, x: F.leaky_relu(x), [_floats((3, 4))]),
    "leaky_relu 0.2": (lambda F, t, x: F.leaky_relu(x, 0.2), [_floats((3, 4))]),
    "gelu": (lambda F, t, x: F.gelu(x), [_floats((3, 4), -4, 4)]),
    "gelu tanh": (lambda F, t, x: F.gelu(x, approximate="tanh"), [_floats((3, 4), -4, 4)]),
    "sigmoid": (lambda F, t, x: F.sigmoid(x), [_floats((3, 4), -6, 6)]),
    "tanh": (lambda F, t, x: F.tanh(x), [_floats((3, 4))]),
    "softmax": (lambda F, t, x: F.softmax(x, dim=1), [_floats((2, 3, 4), -5, 5)]),
    "softmax dim 0": (lambda F, t, x: F.softmax(x, 0), [_floats((3, 4), -5, 5)]),
    "log_softmax": (lambda F, t, x: F.log_softmax(x, dim=-1), [_floats((2, 3, 4), -5, 5)]),
    "layer_norm": (
        lambda F, t, x, w, b: F.layer_norm(x, [3, 4], w, b),
        [_floats((2, 3, 4)), _floats((3, 4)), _floats((3, 4))],
    ),
    "layer_norm plain": (lambda F, t, x: F.layer_norm(x, (4,), eps=1e-3), [_floats((2, 3, 4))]),
    "rms_norm": (lambda F, t, x, w: F.rms_norm(x, [3, 4], w), [_floats((2, 3, 4)), _floats((3, 4))]),
    "rms_norm plain": (lambda F, t, x: F.rms_norm(x, (4,), eps=1e-3), [_floats((2, 3, 4))]),
    "RMSNorm module": (lambda F, t, x: t.nn.RMSNorm(4, dtype=x.dtype)(x), [_floats((3, 4))]),
    "embedding": (lambda F, t, i, w: F.embedding(i, w), [_index([[0, 2, 5], [2, 2, 1]]), _floats((6, 3))]),
    "embedding padding": (
        lambda F, t, i, w: F.embedding(i, w, padding_idx=2),
        [_index([[0, 2, 5], [2, 2, 1]]), _floats((6, 3))],
    ),
    "embedding padding -1": (
        lambda F, t, i, w: F.embedding(i, w, padding_idx=-1),
        [_index([5, 0, 5, 3]), _floats((6, 3))],
    ),
    # regression losses
    **{
        f"mse_loss {r}": (lambda F, t, x, y, r=r: F.mse_loss(x, y, reduction=r), [_floats((3, 4)), _floats((3, 4))])
        for r in ("mean", "sum", "none")
    },
    "mse_loss weight": (
        lambda F, t, x, y, w: F.mse_loss(x, y, weight=w),
        [_floats((3, 4)), _floats((3, 4)), _constant((3, 4), 0.5, 2)],
    ),
    **{
        f"l1_loss {r}": (lambda F, t, x, y, r=r: F.l1_loss(x, y, reduction=r), [_floats((3, 4)), _floats((3, 4))])
        for r in ("mean", "sum", "none")
    },
    "l1_loss weight": (
        lambda F, t, x, y, w: F.l1_loss(x, y, reduction="sum", weight=w),
        [_floats((3, 4)), _floats((3, 4)), _constant((3, 4), 0.5, 2)],
    ),
    **{
        f"smooth_l1_loss {r}": (
            lambda F, t, x, y, r=r: F.smooth_l1_loss(x, y, reduction=r),
            [_floats((4, 5)), _floats((4, 5))],
        )
        for r in ("mean", "sum", "none")
    },
    "smooth_l1_loss beta 0.5": (
        lambda F, t, x, y: F.smooth_l1_loss(x, y, beta=0.5),
        [_floats((4, 5)), _floats((4, 5))],
    ),
    "smooth_l1_loss beta 0": (lambda F, t, x, y: F.smooth_l1_loss(x, y, beta=0.0), [_floats((4, 5)), _floats((4, 5))]),
    **{
        f"huber_loss {r}": (
            lambda F, t, x, y, r=r: F.huber_loss(x, y, reduction=r, delta=0.7),
            [_floats((4, 5)), _floats((4, 5))],
        )
        for r in ("mean", "sum", "none")
    },
    "huber_loss weight": (
        lambda F, t, x, y, w: F.huber_loss(x, y, weight=w),
        [_floats((4, 5)), _floats((4, 5)), _constant((4, 5), 0.5, 2)],
    ),
    # nll_loss
    **{
        f"nll_loss {r}": (lambda F, t, x, y, r=r: F.nll_loss(x, y, reduction=r), [_floats((4, 5)), _classes((4,), 5)])
        for r in ("mean", "sum", "none")
    },
    **{
        f"nll_loss weight ignore {r}": (
            lambda F, t, x, y, w, r=r: F.nll_loss(x, y, weight=w, ignore_index=IGNORED, reduction=r),
            [_floats((6, 5)), _classes((6,), 5, ignored=True), W5],
        )
        for r in ("mean", "sum", "none")
    },
    "nll_loss ignore a class": (
        lambda F, t, x, y: F.nll_loss(x, y, ignore_index=3),
        [_floats((4, 5)), _index([3, 1, 3, 0])],
    ),
    "nll_loss vector": (lambda F, t, x, y: F.nll_loss(x, y), [_floats((5,)), _index(2)]),
    **{
        f"nll_loss 3d {r}": (
            lambda F, t, x, y, w, r=r: F.nll_loss(x, y, weight=w, reduction=r),
            [_floats((2, 5, 3)), _classes((2, 3), 5), W5],
        )
        for r in ("mean", "none")
    },
    **{
        f"nll_loss 4d {r}": (
            lambda F, t, x, y, r=r: F.nll_loss(x, y, ignore_index=IGNORED, reduction=r),
            [_floats((2, 5, 2, 3)), _classes((2, 2, 3), 5, ignored=True)],
        )
        for r in ("mean", "none")
    },
    # cross_entropy with class indices
    **{
        f"cross_entropy {r}": (
            lambda F, t, x, y, r=r: F.cross_entropy(x, y, reduction=r),
            [_floats((4, 5)), _classes((4,), 5)],
        )
        for r in ("mean", "sum", "none")
    },
    "cross_entropy vector": (lambda F, t, x, y: F.cross_entropy(x, y), [_floats((5,)), _index(4)]),
    **{
        f"cross_entropy weight ignore {r}": (
            lambda F, t, x, y, w, r=r: F.cross_entropy(x, y, weight=w, ignore_index=IGNORED, reduction=r),
            [_floats((6, 5)), _classes((6,), 5, ignored=True), W5],
        )
        for r in ("mean", "sum", "none")
    },
    "cross_entropy 4d": (
        lambda F, t, x, y, w: F.cross_entropy(x, y, w),
        [_floats((2, 5, 2, 2)), _classes((2, 2, 2), 5), W5],
    ),
    **{
        f"cross_entropy smoothing {r}": (
            lambda F, t, x, y, r=r: F.cross_entropy(x, y, reduction=r, label_smoothing=0.2),
            [_floats((4, 5)), _classes((4,), 5)],
        )
        for r in ("mean", "sum", "none")
    },
    **{
        f"cross_entropy smoothing weight ignore {r}": (
            lambda F, t, x, y, w, r=r: F.cross_entropy(x, y, w, ignore_index=IGNORED, reduction=r, label_smoothing=0.3),
            [_floats((6, 5)), _classes((6,), 5, ignored=True), W5],
        )
        for r in ("mean", "sum", "none")
    },
    "cross_entropy smoothing 3d": (
        lambda F, t, x, y: F.cross_entropy(x, y, label_smoothing=0.1),
        [_floats((2, 5, 3)), _classes((2, 3), 5)],
    ),
    "cross_entropy smoothing vector": (
        lambda F, t, x, y: F.cross_entropy(x, y, label_smoothing=0.1),
        [_floats((5,)), _index(1)],
    ),
    # cross_entropy with class probabilities
    **{
        f"cross_entropy probabilities {r}": (
            lambda F, t, x, p, r=r: F.cross_entropy(x, p, reduction=r),
            [_floats((4, 5)), _probabilities((4, 5))],
        )
        for r in ("mean", "sum", "none")
    },
    "cross_entropy probabilities weight smoothing": (
        lambda F, t, x, p, w: F.cross_entropy(x, p, weight=w, label_smoothing=0.25),
        [_floats((4, 5)), _probabilities((4, 5)), W5],
    ),
    "cross_entropy probabilities 3d weight": (
        lambda F, t, x, p, w: F.cross_entropy(x, p, w, reduction="none"),
        [_floats((2, 5, 3)), _probabilities((2, 5, 3)), W5],
    ),
    "cross_entropy probabilities vector": (
        lambda F, t, x, p: F.cross_entropy(x, p),
        [_floats((5,)), _probabilities((5,))],
    ),
    "cross_entropy soft targets with grad": (
        lambda F, t, x, p: F.cross_entropy(x, p.softmax(1)),
        [_floats((3, 4)), _floats((3, 4))],
    ),
    # binary cross entropy with logits
    **{
        f"bce_with_logits {r}": (
            lambda F, t, x, y, r=r: F.binary_cross_entropy_with_logits(x, y, reduction=r),
            [_floats((3, 4), -5, 5), _constant((3, 4), 0, 1)],
        )
        for r in ("mean", "sum", "none")
    },
    "bce_with_logits weights": (
        lambda F, t, x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        [_floats((3, 4), -5, 5), _constant((3, 4), 0, 1), _constant((3, 4), 0.5, 2), _constant((4,), 0.5, 3)],
    ),
    "bce_with_logits large logits": (
        lambda F, t, x, y: F.binary_cross_entropy_with_logits(x * 50, y),
        [_floats((3, 4)), _constant((3, 4), 0, 1)],
    ),
    "bce_with_logits target grad": (
        lambda F, t, x, y: F.binary_cross_entropy_with_logits(x, y),
        [_floats((3, 4)), _floats((3, 4), 0, 1)],
    ),
}


def _inputs(t, case, dtype_name, specs):
    rng = rng_for("functional", case)
    dtype = getattr(t, dtype_name)
    tensors = []
    for kind, _, make in specs:
        values = make(rng)
        if kind == "index":
            tensors.append(t.tensor(values, dtype=t.int64))
        else:
            tensors.append(t.tensor(values, dtype=dtype, requires_grad=kind == "float"))
    return tensors


def _run(t, case, dtype_name):
    fn, specs = CASES[case]
    inputs = _inputs(t, case, dtype_name, specs)
    out = fn(t.nn.functional, t, *inputs)
    upstream = rng_for("upstream", case).uniform(0.5, 1.5, size=tuple(out.shape))
    out.backward(t.tensor(upstream, dtype=out.dtype))
    return out, [x.grad for x in inputs if x.requires_grad]


TOLERANCES = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(fg, torch, case, dtype):
    out, grads = _run(fg, case, dtype)
    expected_out, expected_grads = _run(torch, case, dtype)
    assert strip_module(out.dtype) == strip_module(expected_out.dtype)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected_out), **TOLERANCES[dtype], err_msg="values")
    for got, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(to_numpy(got), to_numpy(expected), **TOLERANCES[dtype], err_msg="gradient")


# Not checked: the padding row of an embedding is read but gets no gradient (by design, as in
# PyTorch), and logits times 50 are too steep for central differences.
@pytest.mark.parametrize("case", [c for c in CASES if "large" not in c and "padding" not in c])
def test_gradcheck(fg, case):
    fn, specs = CASES[case]
    inputs = _inputs(fg, case, "float64", specs)
    assert gradcheck_for(fg)(lambda *xs: fn(fg.nn.functional, fg, *xs), inputs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "fn, node",
    [
        (lambda F, t: F.cross_entropy(t.zeros(2, 3, requires_grad=True), t.tensor([0, 2])), "NllLossBackward0"),
        (lambda F, t: F.nll_loss(t.zeros(2, 3, requires_grad=True), t.tensor([0, 2])), "NllLossBackward0"),
        (lambda F, t: F.softmax(t.zeros(2, 3, requires_grad=True), 1), "SoftmaxBackward0"),
        (lambda F, t: F.log_softmax(t.zeros(2, 3, requires_grad=True), 1), "LogSoftmaxBackward0"),
        (lambda F, t: F.gelu(t.zeros(2, 3, requires_grad=True)), "GeluBackward0"),
    ],
)
def test_fused_grad_fn_names(fg, torch, fn, node):
    assert fn(fg.nn.functional, fg).grad_fn.name() == fn(torch.nn.functional, torch).grad_fn.name() == node


def _first_nodes(out):
    """The names of out's grad_fn and of the nodes down its first edge that is not a leaf's or W.t()'s."""
    names, node = [], out.grad_fn
    while node is not None and "AccumulateGrad" not in node.name():
        names.append(node.name())
        inner = [n for n, _ in node.next_functions if n is not None and n.name() != "TBackward0"]
        node = next((n for n in inner if "AccumulateGrad" not in n.name()), None)
    return names


# PyTorch's routing of linear: addmm for a 2-D input with a bias; a contiguous input of another rank
# viewed as 2-D around it when the bias is contiguous and a vector once squeezed; else matmul and an
# in-place add. (Not here: a non-contiguous input, whose reshape PyTorch records as
# UnsafeViewBackward0 over the copy where fastgrad's reshape records ViewBackward0.)
@pytest.mark.parametrize(
    "x_shape, bias_shape",
    [
        ((2, 3), (4,)),
        ((2, 3), (2, 1)),
        ((2, 3), ()),
        ((2, 3), None),
        ((0, 3), (4,)),
        ((5, 2, 3), (4,)),
        ((5, 2, 3), (1, 4)),
        ((5, 2, 3), (1, 1)),
        ((5, 2, 3), (2, 4)),
        ((5, 2, 3), None),
        ((2, 2, 2, 3), (1,)),
        ((3,), (4,)),
        ((3,), ()),
        ((3,), None),
    ],
)
def test_linear_nodes_as_pytorch(fg, torch, x_shape, bias_shape):
    def nodes(t):
        x, w = t.ones(x_shape, requires_grad=True), t.ones(4, 3, requires_grad=True)
        bias = None if bias_shape is None else t.ones(bias_shape, requires_grad=True)
        return _first_nodes(t.nn.functional.linear(x, w, bias))

    assert nodes(fg) == nodes(torch)


def test_linear_layer_is_one_addmm(fg):
    layer = fg.nn.Linear(3, 4)
    assert layer(fg.ones(2, 3)).grad_fn.name() == "AddmmBackward0"
    with fg.no_grad():
        assert layer(fg.ones(2, 3)).grad_fn is None


def test_implicit_softmax_dim_warns(fg):
    x = fg.tensor([[1.0, 2.0], [3.0, 5.0]])
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        out = fg.nn.functional.softmax(x)
    np.testing.assert_allclose(out.sum(1).tolist(), [1.0, 1.0], rtol=1e-6)  # dim 1 for a matrix
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        fg.nn.LogSoftmax()(fg.ones(3))


def test_mismatched_target_size_warns(fg):
    with pytest.warns(UserWarning, match=re.escape("that is different to the input size")):
        loss = fg.nn.functional.mse_loss(fg.zeros(3, 1), fg.ones(3))
    assert loss.item() == 1.0  # broadcast to (3, 3), as PyTorch does


def test_bce_with_logits_is_stable(fg):
    x = fg.tensor([-1000.0, -30.0, 0.0, 30.0, 1000.0], requires_grad=True)
    y = fg.tensor([1.0, 1.0, 0.5, 0.0, 0.0])
    loss = fg.nn.functional.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(loss.tolist(), [1000.0, 30.0, math.log(2), 30.0, 1000.0], rtol=1e-6)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [-1.0, -1.0, 0.0, 1.0, 1.0], atol=1e-6)


# ---- one_hot, dropout


def test_one_hot(fg, torch):
    for args in [([2, 0, 1],), ([[1, 3], [0, 0]], 5), ([], 3)]:
        got = fg.nn.functional.one_hot(fg.tensor(args[0], dtype=fg.int64), *args[1:])
        expected = torch.nn.functional.one_hot(torch.tensor(args[0], dtype=torch.int64), *args[1:])
        assert got.dtype == fg.int64 and got.tolist() == expected.tolist()


def test_dropout(fg):
    F = fg.nn.functional
    x = fg.full((20000,), 3.0, requires_grad=True)
    fg.manual_seed(0)
    out = F.dropout(x, 0.3)
    values = to_numpy(out)
    kept = values != 0
    assert abs(kept.mean() - 0.7) < 0.015
    np.testing.assert_allclose(values[kept], 3.0 / 0.7, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), kept / 0.7, rtol=1e-6)  # the same mask, scaled
    assert F.dropout(x, 0.3, training=False) is x
    assert to_numpy(F.dropout(x, 1.0)).max() == 0.0
    np.testing.assert_array_equal(to_numpy(F.dropout(x, 0.0)), to_numpy(x))
    y = fg.ones(1000)
    assert F.dropout(y, 0.5, inplace=True) is y and set(y.tolist()) == {0.0, 2.0}


@pytest.mark.parametrize("p, training, size", [(0.0, True, 3), (0.5, False, 3), (0.5, True, 0), (1.0, True, 3)])
def test_dropout_that_cannot_drop_returns_its_input(fg, torch, p, training, size):
    """p = 0, eval mode or no elements: the input itself (a leaf stays a leaf), as PyTorch's."""

    def program(lib):
        x = lib.ones(size, requires_grad=True)
        out = lib.nn.functional.dropout(x, p, training=training)
        return out is x, out.is_leaf, out.grad_fn is None

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", ["dropout", "alpha_dropout", "feature_alpha_dropout", "dropout2d", "dropout1d"])
@pytest.mark.parametrize("training", [1, None])
def test_dropout_training_must_be_a_bool(fg, torch, name, training):
    """PyTorch's kernels parse `train` strictly (their names: dropout1d/2d/3d call feature_dropout)."""
    same_error(fg, torch, lambda m: getattr(m.nn.functional, name)(m.ones(2, 3, 4), 0.5, training=training))


def test_inplace_activations(fg):
    F = fg.nn.functional
    x = fg.tensor([-2.0, 0.5])
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 0.5]
    x = fg.tensor([-2.0, 0.5])
    assert F.leaky_relu(x, 0.5, inplace=True) is x and x.tolist() == [-1.0, 0.5]
    leaf = fg.tensor([-2.0, 0.5], requires_grad=True)
    h = leaf * 1
    fg.nn.ReLU(inplace=True)(h).sum().backward()
    assert leaf.grad.tolist() == [0.0, 1.0]


# ---- errors

ERRORS = {
    "dropout p": lambda F, t: F.dropout(t.ones(2), 1.5),
    "layer_norm shape": lambda F, t: F.layer_norm(t.ones(2, 3), [4]),
    "layer_norm weight": lambda F, t: F.layer_norm(t.ones(2, 3), [2, 3], t.ones(3)),
    "layer_norm int shape": lambda F, t: F.layer_norm(t.ones(2, 3), 3),
    "layer_norm rank": lambda F, t: F.layer_norm(t.ones(3), [2, 3]),
    "layer_norm bias": lambda F, t: F.layer_norm(t.ones(2, 3), [3], t.ones(3), t.ones(1, 3)),
    "layer_norm integer input": lambda F, t: F.layer_norm(t.ones(2, 3, dtype=t.long), [3]),
    "rms_norm shape": lambda F, t: F.rms_norm(t.ones(2, 3), [2, 4]),
    "rms_norm rank": lambda F, t: F.rms_norm(t.ones(2, 3), [1, 2, 3]),
    "rms_norm weight": lambda F, t: F.rms_norm(t.ones(2, 3), [2, 3], t.ones(3)),
    "rms_norm int shape": lambda F, t: F.rms_norm(t.ones(2, 3), 3),
    "rms_norm integer input": lambda F, t: F.rms_norm(t.ones(2, 3, dtype=t.long), [3]),
    "embedding float indices": lambda F, t: F.embedding(t.tensor([1.0]), t.ones(3, 2)),
    "embedding index too large": lambda F, t: F.embedding(t.tensor([3]), t.ones(3, 2)),
    "embedding negative index": lambda F, t: F.embedding(t.tensor([-1]), t.ones(3, 2)),
    "linear shapes": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 5), t.ones(4)),
    "linear vector shapes": lambda F, t: F.linear(t.ones(3), t.ones(4, 5), t.ones(4)),
    "linear bias size": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 3), t.ones(5)),
    "linear bias rank": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 3), t.ones(1, 1, 4)),
    "linear bias broadcast": lambda F, t: F.linear(t.ones(3), t.ones(4, 3), t.ones(2, 4)),
    "linear bias dtype": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 3), t.ones(4, dtype=t.float64)),
    "linear weight dtype": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 3, dtype=t.float64)),
    "linear bias number": lambda F, t: F.linear(t.ones(2, 3), t.ones(4, 3), 3),
    "linear input list": lambda F, t: F.linear([1.0, 2.0, 3.0], t.ones(4, 3)),
    "linear weight None": lambda F, t: F.linear(t.ones(2, 3), None),
    "linear 0-d input": lambda F, t: F.linear(t.ones(()), t.ones(4, 3)),
    "linear 3-d weight": lambda F, t: F.linear(t.ones(2, 3), t.ones(1, 4, 3)),
    "embedding padding_idx": lambda F, t: F.embedding(t.tensor([1]), t.ones(3, 2), padding_idx=-4),
    "one_hot float": lambda F, t: F.one_hot(t.tensor([1.0])),
    "one_hot negative": lambda F, t: F.one_hot(t.tensor([-1])),
    "one_hot too large": lambda F, t: F.one_hot(t.tensor([3]), 2),
    "one_hot empty": lambda F, t: F.one_hot(t.tensor([], dtype=t.int64)),
    "huber delta": lambda F, t: F.huber_loss(t.ones(2), t.ones(2), delta=0),
    "smooth_l1 beta": lambda F, t: F.smooth_l1_loss(t.ones(2), t.ones(2), beta=-1),
    "reduction": lambda F, t: F.mse_loss(t.ones(2), t.ones(2), reduction="avg"),
    "weighted reduction": lambda F, t: F.l1_loss(t.ones(2), t.ones(2), reduction="avg", weight=t.ones(2)),
    "loss weight size": lambda F, t: F.mse_loss(t.ones(2), t.ones(2), weight=t.ones(3)),
    "nll 0-d input": lambda F, t: F.nll_loss(t.ones(()), t.tensor(0)),
    "nll batch": lambda F, t: F.nll_loss(t.ones(2, 3), t.zeros(3, dtype=t.int64)),
    "nll 0-d target": lambda F, t: F.nll_loss(t.ones(2, 3), t.tensor(0)),
    "nll target out of range": lambda F, t: F.nll_loss(t.ones(2, 3, 4), t.tensor([[0, 3, 1, 1]] * 2)),
    "nll float target": lambda F, t: F.cross_entropy(t.ones(2, 3), t.tensor([0.5, 1.0])),
    "nll 3d target": lambda F, t: F.nll_loss(t.ones(2, 3, 4), t.zeros(2, 3, dtype=t.int64)),
    "nll 4d target dims": lambda F, t: F.nll_loss(t.ones(2, 3, 4, 5), t.zeros(2, 4, dtype=t.int64)),
    "nll 4d target size": lambda F, t: F.nll_loss(t.ones(2, 3, 4, 5), t.zeros(2, 3, 5, dtype=t.int64)),
    "nll 5d target": lambda F, t: F.nll_loss(t.ones(2, 3, 4, 5, 6), t.zeros(2, 4, 5, 5, dtype=t.int64)),
    "cross_entropy int probabilities": lambda F, t: F.cross_entropy(t.ones(2, 3), t.zeros(2, 3, dtype=t.int64)),
    "cross_entropy probabilities ignore": lambda F, t: F.cross_entropy(t.ones(2, 3), t.zeros(2, 3), ignore_index=1),
    "cross_entropy probabilities weight": lambda F, t: F.cross_entropy(t.ones(2, 3), t.zeros(2, 3), weight=t.ones(2)),
    "cross_entropy smoothing": lambda F, t: F.cross_entropy(
        t.ones(2, 3), t.zeros(2, dtype=t.int64), label_smoothing=1.5
    ),
    "cross_entropy probabilities smoothing": lambda F, t: F.cross_entropy(
        t.ones(2, 3), t.zeros(2, 3), label_smoothing=1.5
    ),
    "cross_entropy reduction": lambda F, t: F.cross_entropy(t.ones(2, 3), t.zeros(2, dtype=t.int64), reduction="bad"),
    "bce target size": lambda F, t: F.binary_cross_entropy_with_logits(t.ones(2, 3), t.zeros(3)),
    "fan of a vector": lambda F, t: t.nn.init.xavier_uniform_(t.ones(3)),
    "kaiming mode": lambda F, t: t.nn.init.kaiming_normal_(t.ones(3, 3), mode="fan"),
    "gain": lambda F, t: t.nn.init.calculate_gain("swish"),
    "gain slope": lambda F, t: t.nn.init.calculate_gain("leaky_relu", "x"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_match_torch(fg, torch, case):
    with pytest.raises(Exception) as expected:
        ERRORS[case](torch.nn.functional, torch)
    with pytest.raises(expected.type) as got:
        ERRORS[case](fg.nn.functional, fg)
    assert strip_module(got.value).replace("fastgrad", "torch") == strip_module(expected.value)


# ---- init


def test_init_fills_in_place_without_grad(fg):
    p = fg.nn.Parameter(fg.empty(40, 50))
    for fill in (
        lambda: fg.nn.init.uniform_(p, -0.5, 0.25),
        lambda: fg.nn.init.normal_(p, 1.0, 0.1),
        lambda: fg.nn.init.constant_(p, 0.5),
        lambda: fg.nn.init.ones_(p),
        lambda: fg.nn.init.zeros_(p),
        lambda: fg.nn.init.kaiming_uniform_(p),
        lambda: fg.nn.init.xavier_normal_(p),
    ):
        assert fill() is p and p.is_leaf and p.grad_fn is None and p.requires_grad
    assert fg.nn.init.constant_(p, 0.5).tolist() == [[0.5] * 50] * 40
    assert set(to_numpy(fg.nn.init.ones_(p)).ravel()) == {1.0}
    assert set(to_numpy(fg.nn.init.zeros_(p)).ravel()) == {0.0}


def test_init_is_seeded(fg):
    def draw():
        fg.manual_seed(7)
        return to_numpy(fg.nn.init.normal_(fg.empty(3, 4)))

    np.testing.assert_array_equal(draw(), draw())


def test_structured_inits_match_torch(fg, torch):
    """eye_ and dirac_ are deterministic: the same tensors as PyTorch's; and their argument errors."""
    for shape, fill in [
        ((2, 3), lambda t, x: t.nn.init.eye_(x)),
        ((4, 2, 3), lambda t, x: t.nn.init.dirac_(x, groups=2)),
        ((3, 2, 3, 3), lambda t, x: t.nn.init.dirac_(x)),
        ((2, 2, 1, 3, 3), lambda t, x: t.nn.init.dirac_(x)),
    ]:
        np.testing.assert_array_equal(to_numpy(fill(fg, fg.empty(*shape))), fill(torch, torch.empty(*shape)).numpy())
    for call in [
        lambda t: t.nn.init.eye_(t.empty(2, 3, 4)),
        lambda t: t.nn.init.dirac_(t.empty(2, 3)),
        lambda t: t.nn.init.dirac_(t.empty(3, 2, 2), groups=2),
        lambda t: t.nn.init.orthogonal_(t.empty(3)),
        lambda t: t.nn.init.sparse_(t.empty(3), 0.1),
    ]:
        same_error(fg, torch, call)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 2)])
def test_orthogonal_init(fg, shape):
    fg.manual_seed(2)
    q = to_numpy(fg.nn.init.orthogonal_(fg.empty(*shape), gain=2.0)).reshape(shape[0], -1)
    small = min(q.shape)
    gram = q @ q.T if q.shape[0] == small else q.T @ q
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_trunc_normal_and_sparse_inits(fg):
    fg.manual_seed(6)
    values = to_numpy(fg.nn.init.trunc_normal_(fg.empty(300, 200), mean=0.5, std=1.0, a=-1.0, b=1.5))
    assert values.min() >= -1.0 and values.max() <= 1.5
    # the mean of N(0.5, 1) restricted to [-1, 1.5]: mu + (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    assert abs(values.mean() - (0.5 + (pdf(-1.5) - pdf(1.0)) / (cdf(1.0) - cdf(-1.5)))) < 0.01
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        fg.nn.init.trunc_normal_(fg.empty(3), mean=5.0)
    sparse = to_numpy(fg.nn.init.sparse_(fg.empty(10, 40), sparsity=0.25, std=0.5))
    assert ((sparse == 0).sum(0) == 3).all() and abs(sparse[sparse != 0].std() - 0.5) < 0.1


def test_init_generator_and_deprecated_names(fg):
    def draw(fill):
        return to_numpy(fill(fg.empty(20, 30), generator=fg.Generator().manual_seed(9)))

    init = fg.nn.init
    for fill in (init.uniform_, init.normal_, init.trunc_normal_, init.orthogonal_, init.kaiming_uniform_,
                 init.kaiming_normal_, init.xavier_uniform_, init.xavier_normal_):  # fmt: skip
        np.testing.assert_array_equal(draw(fill), draw(fill))
        p = fg.nn.Parameter(fg.empty(3, 4))
        assert fill(p) is p and p.is_leaf and p.grad_fn is None
    for old in ["uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform",
                "kaiming_normal", "orthogonal", "sparse", "dirac"]:  # fmt: skip
        args = {"constant": (0.5,), "sparse": (0.5,)}.get(old, ())
        message = f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`."
        with pytest.warns(FutureWarning, match=re.escape(message)):
            getattr(init, old)(fg.empty(3, 4, 3) if old == "dirac" else fg.empty(3, 4), *args)


UNIFORM_INITS = {  # name: (fill, expected bound for a (300, 200) tensor: fan_in 200, fan_out 300)
    "uniform_": (lambda init, x: init.uniform_(x, -0.3, 0.7), (-0.3, 0.7)),
    "xavier_uniform_": (lambda init, x: init.xavier_uniform_(x, gain=2.0), 2.0 * math.sqrt(6 / 500)),
    "kaiming_uniform_": (lambda init, x: init.kaiming_uniform_(x), math.sqrt(3) * math.sqrt(2) / math.sqrt(200)),
    "kaiming_uniform_ relu fan_out": (
        lambda init, x: init.kaiming_uniform_(x, mode="fan_out", nonlinearity="relu"),
        math.sqrt(3) * math.sqrt(2) / math.sqrt(300),
    ),
    "kaiming_uniform_ a=sqrt(5)": (lambda init, x: init.kaiming_uniform_(x, a=math.sqrt(5)), 1 / math.sqrt(200)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNIFORM_INITS)
def test_uniform_inits(fg, name, dtype):
    fill, bound = UNIFORM_INITS[name]
    low, high = bound if isinstance(bound, tuple) else (-bound, bound)
    fg.manual_seed(3)
    values = to_numpy(fill(fg.nn.init, fg.empty(300, 200, dtype=getattr(fg, dtype))))
    width = high - low
    assert values.min() >= low and values.max() <= high
    assert values.min() < low + 0.01 * width and values.max() > high - 0.01 * width
    assert abs(values.mean() - (low + high) / 2) < 0.01 * width
    assert abs(values.std() - width / math.sqrt(12)) < 0.01 * width


NORMAL_INITS = {  # name: (fill, expected mean, expected std for a (300, 200) tensor)
    "normal_": (lambda init, x: init.normal_(x, 0.5, 2.0), 0.5, 2.0),
    "xavier_normal_": (lambda init, x: init.xavier_normal_(x), 0.0, math.sqrt(2 / 500)),
    "kaiming_normal_": (lambda init, x: init.kaiming_normal_(x, nonlinearity="relu"), 0.0, math.sqrt(2 / 200)),
    "kaiming_normal_ tanh fan_out": (
        lambda init, x: init.kaiming_normal_(x, mode="fan_out", nonlinearity="tanh"),
        0.0,
        5 / 3 / math.sqrt(300),
    ),
}


@pytest.mark.parametrize("name", NORMAL_INITS)
def test_normal_inits(fg, name):
    fill, mean, std = NORMAL_INITS[name]
    fg.manual_seed(4)
    values = to_numpy(fill(fg.nn.init, fg.empty(300, 200)))
    assert abs(values.mean() - mean) < 0.02 * std
    assert abs(values.std() - std) < 0.02 * std


def test_calculate_gain_and_fans_match_torch(fg, torch):
    for args in [
        ("linear",),
        ("conv2d",),
        ("sigmoid",),
        ("tanh",),
        ("relu",),
        ("leaky_relu",),
        ("leaky_relu", 0.2),
        ("leaky_relu", 3),
        ("selu",),
    ]:
        assert fg.nn.init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args), args
    for shape in [(3, 4), (5, 2, 3, 3), (2, 0)]:
        assert fg.nn.init._calculate_fan_in_and_fan_out(
            fg.empty(*shape)
        ) == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))


def test_kaiming_of_an_empty_tensor_warns(fg):
    x = fg.empty(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert fg.nn.init.kaiming_uniform_(x) is x


def test_losses_of_mixed_dtypes_follow_pytorch(fg, torch):
    """Which dtype a loss of two dtypes has, or which error: PyTorch's kernels differ per loss (huber
    writes into a tensor like the input, bce_with_logits accumulates into 1 - target), and so
    must the composed ones; and they broadcast first, so a 0-d target promotes like any tensor.
    Found by the fuzzer."""

    def outcome(lib, name, input_dtype, target_dtype, target_values=(1, 0)):
        input = (
            lib.tensor([0.5, -1.25], dtype=getattr(lib, input_dtype), requires_grad=True)
            if input_dtype != "int64"
            else lib.tensor([1, 0])
        )
        target = lib.tensor(target_values, dtype=getattr(lib, target_dtype))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a 0-d target: "Using a target size ..."
                loss = getattr(lib.nn.functional, name)(input, target)
        except Exception as e:  # noqa: BLE001 -- the error is the outcome
            return (type(e).__name__, str(e).replace("fastgrad.", "torch.").split(".")[0]), None
        try:  # (PyTorch's huber_loss backward refuses two dtypes: "Found dtype Double but expected Float")
            grad = [round(g, 5) for g in lib.autograd.grad(loss, input)[0].tolist()] if input.requires_grad else None
        except RuntimeError:
            grad = "no gradient"
        return (str(loss.dtype).split(".")[-1], round(loss.item(), 5)), grad

    pairs = [
        ("float32", "float64"),
        ("float64", "float32"),
        ("float32", "int64"),
        ("float64", "int64"),
        ("float32", "bool"),
        ("int64", "float32"),
        ("float32", "float64", 1),
        ("float64", "float32", 1),
    ]
    for name in ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits"]:
        for pair in pairs:
            (ours, our_grad), (theirs, their_grad) = outcome(fg, name, *pair), outcome(torch, name, *pair)
            assert ours == theirs, (name, pair)
            assert our_grad == their_grad or their_grad == "no gradient", (name, pair)


def test_trunc_normal_gives_up_on_a_hopeless_tail(fg, monkeypatch):
    """PyTorch's tail sampler loops for ever when no candidate can pass (here a negative std);
    fastgrad's raises after its round limit (made small here), a reachable tail still fills."""
    t = fg.nn.init.trunc_normal_(fg.zeros(200), 0, 1, 3, 4)
    assert 3 <= t.min().item() and t.max().item() <= 4
    monkeypatch.setattr(fg.nn.init, "_TRUNC_NORMAL_ROUNDS", 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="no value accepted in 5 rounds"):
            fg.nn.init.trunc_normal_(fg.zeros(3, 3, dtype=fg.float64), -1, -2, 1e30, 1e308)
