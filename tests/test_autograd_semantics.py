"""The autograd rules of the core issue, one test each, plus the leaf/requires_grad details around them."""

import itertools
import math
import re

import numpy as np
import pytest

from oracle_helpers import same_on_both
from semantics_helpers import assert_values, grad_of, graph_names

NON_LEAF_GRAD_WARNING = re.escape("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.")
LEAF_FLAG_ONLY = "^" + re.escape("you can only change requires_grad flags of leaf variables.")
SECOND_BACKWARD = "^" + re.escape("Trying to backward through the graph a second time")


# --- requires_grad propagation and is_leaf -------------------------------------------------------


@pytest.mark.parametrize("a_grad,b_grad,grad_mode", list(itertools.product([False, True], repeat=3)))
def test_result_requires_grad_iff_grad_mode_and_some_input_requires(fg, a_grad, b_grad, grad_mode):
    a = fg.tensor([1.0, 2.0], requires_grad=a_grad)
    b = fg.tensor([3.0, 4.0], requires_grad=b_grad)
    with fg.set_grad_enabled(grad_mode):
        c = a * b + a
    tracked = grad_mode and (a_grad or b_grad)
    assert c.requires_grad is tracked
    assert c.is_leaf is (not tracked)
    assert (c.grad_fn is not None) is tracked
    assert a.is_leaf and b.is_leaf
    assert a.grad_fn is None and b.grad_fn is None


def test_scalar_operand_does_not_make_result_require_grad(fg):
    a = fg.tensor([1.0, 2.0])
    for c in (a * 2.0, 2.0 + a, a / 3, 1 - a, a**2):
        assert c.requires_grad is False
        assert c.is_leaf is True


def test_requires_grad_settable_on_leaf(fg):
    x = fg.tensor([1.0, 2.0])
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    (x * 3).sum().backward()
    assert grad_of(x) == [3.0, 3.0]
    x.requires_grad = False
    assert x.requires_grad is False and x.is_leaf
    assert (x * 3).requires_grad is False
    y = fg.tensor([1.0])
    assert y.requires_grad_() is y
    assert y.requires_grad is True


@pytest.mark.parametrize("flag", [True, False])
def test_setting_requires_grad_on_non_leaf_raises(fg, flag):
    y = fg.tensor([1.0, 2.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=LEAF_FLAG_ONLY):
        y.requires_grad = flag
    assert y.requires_grad is True
    with pytest.raises(RuntimeError, match=LEAF_FLAG_ONLY):
        y.requires_grad_(False)


def test_integer_tensors_cannot_require_grad(fg):
    with pytest.raises(
        RuntimeError, match=re.escape("Only Tensors of floating point and complex dtype can require gradients")
    ):
        fg.tensor([1, 2], requires_grad=True)
    with pytest.raises(
        RuntimeError, match=re.escape("Only Tensors of floating point and complex dtype can require gradients")
    ):
        fg.zeros(2, dtype=fg.int64, requires_grad=True)
    i = fg.tensor([1, 2])
    with pytest.raises(
        RuntimeError, match=re.escape("only Tensors of floating point and complex dtype can require gradients")
    ):
        i.requires_grad = True
    with pytest.raises(RuntimeError, match=re.escape("only Tensors of floating point dtype can require gradients")):
        i.requires_grad_()
    assert i.requires_grad is False


# --- .grad of leaves and non-leaves --------------------------------------------------------------


def test_non_leaf_grad_is_none_with_warning(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match=NON_LEAF_GRAD_WARNING):
        assert y.grad is None
    assert grad_of(x) == [2.0, 2.0]


def test_retain_grad_keeps_non_leaf_grad(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.retains_grad is False
    y.retain_grad()
    assert y.retains_grad is True
    (y * 3).sum().backward()
    assert grad_of(y) == [3.0, 3.0]
    assert grad_of(x) == [6.0, 12.0]


def test_retain_grad_on_leaf_is_a_no_op(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    x.retain_grad()
    assert x.retains_grad is False
    x.sum().backward()
    assert grad_of(x) == [1.0, 1.0]


def test_grad_is_settable(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    assert x.grad is None
    x.grad = fg.tensor([10.0, 20.0])
    (x * 2).sum().backward()
    assert grad_of(x) == [12.0, 22.0]
    x.grad = None
    assert x.grad is None
    (x * 2).sum().backward()
    assert grad_of(x) == [2.0, 2.0]


# --- backward() arguments ------------------------------------------------------------------------


def test_backward_needs_gradient_for_non_scalar(fg):
    y = fg.tensor([1.0, 2.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="^" + re.escape("grad can be implicitly created only for scalar outputs")):
        y.backward()


def test_backward_without_gradient_on_one_element_tensor(fg):
    x = fg.tensor([3.0], requires_grad=True)
    (x * x).backward()  # shape [1], as in the seed code
    assert grad_of(x) == [6.0]
    s = fg.tensor(2.0, requires_grad=True)
    s.backward()  # a 0-d leaf: d s / d s = 1
    assert s.grad.tolist() == 1.0


def test_backward_with_gradient(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(fg.tensor([1.0, 0.5, -1.0]))
    assert grad_of(x) == [2.0, 2.0, -6.0]


@pytest.mark.parametrize("shape", [(3,), (2, 1)])
def test_backward_gradient_of_wrong_shape(fg, shape):
    y = fg.tensor([1.0, 2.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="^Mismatch in shape") as info:
        y.backward(fg.ones(*shape))
    message = str(info.value)
    assert str(list(shape)) in message and "[2]" in message


def test_backward_on_tensor_that_does_not_require_grad(fg):
    message = "^" + re.escape("element 0 of tensors does not require grad and does not have a grad_fn")
    with pytest.raises(RuntimeError, match=message):
        fg.tensor(1.0).backward()
    with pytest.raises(RuntimeError, match=message):
        (fg.tensor([1.0, 2.0]) * 2).sum().backward()


# --- accumulation, diamonds, retain_graph ---------------------------------------------------------


def test_gradients_accumulate_across_backward_calls(fg):
    x = fg.tensor([1.0, -2.0], requires_grad=True)
    for step in range(1, 4):
        (x * x).sum().backward()
        assert grad_of(x) == [2.0 * step, -4.0 * step]
    x.grad.zero_()
    (x * 5).sum().backward()
    assert grad_of(x) == [5.0, 5.0]


def test_first_gradient_is_kept_without_a_copy_as_torch(torch):
    """A leaf's first gradient becomes its .grad without a copy when nothing else holds it, also
    when it comes out of its node as a view (a Linear weight's as t() of a product, a bias's as a
    reshaped sum); one that another tensor can see (sum's expanded gradient) is copied. Only the
    core has addresses (data_ptr)."""
    import fastgrad

    def program(lib):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(6, 5), lib.nn.ReLU(), lib.nn.Linear(5, 3))
        x = lib.ones(3, requires_grad=True)
        seen = {}
        for name, p in [*model.named_parameters(), ("x", x)]:
            p.register_hook(lambda g, name=name: seen.__setitem__(name, g.data_ptr()))
        loss = lib.nn.functional.cross_entropy(model(lib.randn(4, 6)), lib.tensor([0, 1, 2, 0]))
        (loss + x.sum()).backward()
        grads = {**dict(model.named_parameters()), "x": x}
        return {n: (p.grad.data_ptr() == seen[n], p.grad._base is None) for n, p in grads.items()}

    kept = same_on_both(fastgrad, torch, program)
    assert kept == {n: (n != "x", True) for n in ("0.weight", "0.bias", "2.weight", "2.bias", "x")}


def test_diamond_graph_sums_both_paths(fg):
    a = fg.tensor(2.0, requires_grad=True)
    b = fg.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)  # de/da = ab + (a+b)b = 21, de/db = ab + (a+b)a = 16
    e.backward()
    assert a.grad.tolist() == 21.0
    assert b.grad.tolist() == 16.0


def test_tensor_used_twice_in_one_op(fg):
    x = fg.tensor([1.5, -2.0], requires_grad=True)
    y = x * x + x
    h = y * y  # a non-leaf used twice
    h.sum().backward()
    expected = [2 * (v * v + v) * (2 * v + 1) for v in (1.5, -2.0)]
    assert_values(x.grad, expected)


def test_second_backward_through_freed_graph_raises(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    z = (x * x).sum()
    z.backward()
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        z.backward()
    assert grad_of(x) == [2.0, 4.0]


def test_retain_graph_allows_second_backward(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward(retain_graph=True)
    assert grad_of(x) == [4.0, 8.0]
    z.backward()
    assert grad_of(x) == [6.0, 12.0]
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        z.backward()


# --- detach / data --------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["detach", "data"])
def test_detach_and_data_share_storage_and_do_not_require_grad(fg, how):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    for source in (x, y):
        d = source.detach() if how == "detach" else source.data
        assert d.requires_grad is False
        assert d.is_leaf is True
        assert d.grad_fn is None
        assert d.tolist() == source.tolist()
        before = source.tolist()
        d.mul_(10)  # allowed: d does not require grad
        assert source.tolist() == [10 * v for v in before]
        assert source.requires_grad is True


def test_detach_in_place(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.detach_() is y
    assert y.requires_grad is False
    assert y.is_leaf is True
    assert y.grad_fn is None
    assert y.tolist() == [2.0, 4.0]
    x.detach_()
    assert x.requires_grad is False


# --- grad_fn of the seed graphs -------------------------------------------------------------------


def test_grad_fn_of_seed000_linear(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    w = fg.tensor([0.5, -0.5], requires_grad=True)
    b = fg.tensor([1.0], requires_grad=True)
    y = fg.matmul(x, w) + b
    assert y.grad_fn.name() == "AddBackward0"
    assert graph_names(y.grad_fn) == ["DotBackward0", "AccumulateGrad"]
    assert [index for _, index in y.grad_fn.next_functions] == [0, 0]
    dot, acc_b = (fn for fn, _ in y.grad_fn.next_functions)
    assert acc_b.variable is b
    assert graph_names(dot) == ["AccumulateGrad", "AccumulateGrad"]
    assert all(fn.variable is leaf for (fn, _), leaf in zip(dot.next_functions, (x, w)))
    assert x.grad_fn is None and w.grad_fn is None and b.grad_fn is None


def test_grad_fn_of_seed000_graph(fg):
    a = fg.tensor(2.0, requires_grad=True)
    b = fg.tensor(3.0, requires_grad=True)
    c = a + b
    d = a * b
    e = c * d
    assert [t.grad_fn.name() for t in (c, d, e)] == ["AddBackward0", "MulBackward0", "MulBackward0"]
    assert graph_names(e.grad_fn) == ["AddBackward0", "MulBackward0"]
    for node in (c.grad_fn, d.grad_fn):
        assert graph_names(node) == ["AccumulateGrad", "AccumulateGrad"]
        assert node.next_functions[0][0].variable is a
        assert node.next_functions[1][0].variable is b


def test_grad_fn_of_seed001_graph(fg):
    w = fg.tensor([1.0], requires_grad=True)
    x = fg.tensor([2.0], requires_grad=True)
    a = fg.add(x, w)
    b = fg.add(w, 1)
    y = fg.mul(a, b)
    assert [t.grad_fn.name() for t in (a, b, y)] == ["AddBackward0", "AddBackward0", "MulBackward0"]
    assert graph_names(y.grad_fn) == ["AddBackward0", "AddBackward0"]
    assert graph_names(b.grad_fn) == ["AccumulateGrad", None]  # the Python scalar needs no gradient
    assert b.grad_fn.next_functions[0][0].variable is w
    assert a.grad_fn.next_functions[0][0].variable is x
    assert a.grad_fn.next_functions[1][0].variable is w
    y.backward()
    assert grad_of(w) == [5.0] and grad_of(x) == [2.0]


def test_grad_fn_for_input_that_does_not_require_grad(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    c = fg.tensor([3.0, 4.0])
    y = x * c
    assert graph_names(y.grad_fn) == ["AccumulateGrad", None]
    assert graph_names((c * x).grad_fn) == [None, "AccumulateGrad"]


# --- dynamic graphs and long chains ---------------------------------------------------------------


def test_graph_is_rebuilt_every_iteration(fg):
    """Control flow decides the graph; each iteration gets its own graph and gradient."""
    w = fg.tensor(1.0, requires_grad=True)
    names, grads = [], []
    for step in range(4):
        y = w * w if step % 2 == 0 else w * 3.0 + 1.0
        names.append(y.grad_fn.name())
        y.backward()
        grads.append(w.grad.item())
        w.grad = None
    assert names == ["MulBackward0", "AddBackward0", "MulBackward0", "AddBackward0"]
    assert grads == [2.0, 3.0, 2.0, 3.0]


def test_gradient_descent_loop(fg):
    """The usual training loop: forward, backward, update under no_grad, zero the gradient."""
    w = fg.tensor([0.0, 0.0], requires_grad=True)
    target = fg.tensor([1.0, -2.0])
    expected = np.zeros(2)
    for _ in range(20):
        loss = ((w - target) ** 2).sum()
        loss.backward()
        with fg.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
        expected -= 0.1 * 2 * (expected - np.array([1.0, -2.0]))
        assert w.is_leaf and w.requires_grad
    assert_values(w, expected, rtol=1e-5)


@pytest.mark.slow
def test_long_chain(fg):
    x = fg.tensor(1.0, dtype=fg.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0001
    y.backward()
    assert math.isclose(y.item(), 1.0001**100_000, rel_tol=1e-9)
    assert math.isclose(x.grad.item(), 1.0001**100_000, rel_tol=1e-9)


def test_grad_fn_metadata_lives_with_the_node(fg):
    import gc
    import weakref

    class Payload:
        pass

    a = fg.tensor([1.0, 2.0], requires_grad=True)
    c = (a * 2).sum()
    assert c.grad_fn.metadata == {}
    payload = Payload()
    c.grad_fn.metadata["payload"] = payload  # the grad_fn object is a temporary: the dict is the node's
    assert c.grad_fn.metadata["payload"] is payload and c.grad_fn.metadata is c.grad_fn.metadata
    watcher = weakref.ref(payload)
    del payload, c
    gc.collect()
    assert watcher() is None  # released with the node


def test_cpp_only_nodes_are_named_with_their_namespace(fg):
    """PyTorch's AccumulateGrad and CopySlices exist only in C++: name() carries the namespace, the
    reprs do not."""
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    sink = (a * 2).grad_fn.next_functions[0][0]
    assert sink.name() == "torch::autograd::AccumulateGrad" and repr(sink).startswith("<AccumulateGrad object at")
    c = a.clone()
    c[0] = 5
    assert c.grad_fn.name() == "torch::autograd::CopySlices" and repr(c.grad_fn).startswith("<CopySlices object at")
    assert repr(c) == "tensor([5., 2.], grad_fn=<CopySlices>)"


# --- one backward formula, several node names --------------------------------------------------


def gradient_with_graph(lib, x, y):
    """The gradient of sum(y ** 2) w.r.t. x, itself recorded (create_graph)."""
    return lib.autograd.grad((y**2).sum(), x, create_graph=True)[0]


# Programs whose result's node shares its backward with other names (as PyTorch's nodes do): each
# must show PyTorch's name for the op and give PyTorch's gradient.
SHARED_FORMULA_NODES = {
    "SumBackward0": lambda lib, x: x.sum(),
    "SumBackward1": lambda lib, x: x.sum(1),
    "MeanBackward0": lambda lib, x: x.mean(),
    "MeanBackward1": lambda lib, x: x.mean(0),
    "ViewBackward0": lambda lib, x: x.view(6),
    "UnsafeViewBackward0": lambda lib, x: lib.ones(2, 2, 3, dtype=x.dtype) @ x.t(),
    "SqueezeBackward0": lambda lib, x: x.reshape(2, 1, 3).squeeze(),
    "SqueezeBackward1": lambda lib, x: x.reshape(2, 1, 3).squeeze(1),
    "SqueezeBackward2": lambda lib, x: x.reshape(2, 1, 3).squeeze((0, 1)),
    "UnsqueezeBackward0": lambda lib, x: x.unsqueeze(1),
    "CloneBackward0": lambda lib, x: x.clone(),
    "AliasBackward0": lambda lib, x: x[...],
    "RemainderBackward0": lambda lib, x: x % 2,
    "FmodBackward0": lambda lib, x: lib.fmod(x, 2),
    "ZeroBackward0": lambda lib, x: (x * 1).zero_(),
    "FillBackward2": lambda lib, x: (x * 1).fill_(2.0),
    "FillBackward3": lambda lib, x: (x * 1).fill_(x[0, 0]),
    "torch::autograd::CopyBackwards": lambda lib, x: (x * 0).copy_(x * 2),
    "AmaxBackward0": lambda lib, x: x.amax(1),
    "AminBackward0": lambda lib, x: x.amin(1),
    "MaxBackward1": lambda lib, x: x.max(),
    "MinBackward1": lambda lib, x: x.min(),
    "MaxBackward0": lambda lib, x: x.max(1).values,
    "MinBackward0": lambda lib, x: x.min(1).values,
    "SoftmaxBackward0": lambda lib, x: x.softmax(1),
    "LogSoftmaxBackward0": lambda lib, x: x.log_softmax(1),
    "SoftmaxBackwardDataBackward0": lambda lib, x: gradient_with_graph(lib, x, x.softmax(1)),
    "LogSoftmaxBackwardDataBackward0": lambda lib, x: gradient_with_graph(lib, x, x.log_softmax(1)),
}


@pytest.mark.parametrize("name", SHARED_FORMULA_NODES)
def test_node_name_of_a_shared_formula(fg, torch, name):
    def program(lib):
        x = lib.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], dtype=lib.float64, requires_grad=True)
        out = SHARED_FORMULA_NODES[name](lib, x)
        (out * lib.arange(out.numel()).reshape(out.shape)).sum().backward()
        return out.grad_fn.name(), x.grad.tolist()

    assert same_on_both(fg, torch, program)[0] == name
