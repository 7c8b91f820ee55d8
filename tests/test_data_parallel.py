"""nn.utils.flatten_grads_ (the gradients as views of one flat buffer) and examples/data_parallel.py.

PyTorch has no flatten_grads_: on its side the same views are made by hand (_flatten_by_hand), so
the tests check that backward and zero_grad treat such a .grad as PyTorch's do (in place)."""

import os
import threading

import numpy as np
import pytest

from op_helpers import to_numpy
from oracle_helpers import same_on_both

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _model(t):
    """Linear(3, 2) with fixed weights, a 0-dim scale and a frozen offset (left out of the buffer)."""
    linear = t.nn.Linear(3, 2)
    with t.no_grad():
        linear.weight.copy_(t.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]))
        linear.bias.copy_(t.tensor([0.1, -0.2]))
    scale = t.nn.Parameter(t.tensor(1.5))
    offset = t.nn.Parameter(t.tensor([0.3, 0.4]), requires_grad=False)
    inputs = t.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])

    def loss():
        return ((linear(inputs) * scale + offset) ** 2).sum()

    return [linear.weight, offset, linear.bias, scale], loss


def _flatten_by_hand(t, params):
    """What flatten_grads_ does, spelled out for PyTorch (which has no such function)."""
    params = [p for p in params if p.requires_grad]
    buffer = t.zeros(sum(p.numel() for p in params))
    start = 0
    for p in params:
        p.grad = buffer[start : start + p.numel()].view(p.shape)
        start += p.numel()
    return buffer


def _flatten(t, params):
    return _flatten_by_hand(t, params) if t.__name__ == "torch" else t.nn.utils.flatten_grads_(params)


@pytest.fixture
def flatten_grads_(fg):
    if fg.__name__ == "torch":
        pytest.skip("fastgrad's own function")
    return fg.nn.utils.flatten_grads_


def test_backward_and_zero_grad_work_in_the_buffer_as_in_pytorch(fg, torch):
    def program(t):
        params, loss = _model(t)
        flat = _flatten(t, params)
        loss().backward()
        once = flat.clone()
        loss().backward()  # accumulates into the buffer
        twice = flat.clone()
        grads = [p.grad.clone() for p in params if p.grad is not None]
        flat.mul_(-1)  # seen through every .grad: they are views
        negated = [p.grad.clone() for p in params if p.grad is not None]
        t.optim.SGD(params, lr=0.1).zero_grad(set_to_none=False)
        zeroed = flat.clone()
        loss().backward()
        return once, twice, grads, negated, zeroed, flat, params[1].grad is None

    ours = same_on_both(fg, torch, program)
    assert ours[1][0] == [2 * g for g in ours[0][0]] and any(ours[0][0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_create_graph_replaces_the_views_as_in_pytorch(fg, torch):
    # With create_graph, PyTorch adds gradients out of place (a .grad with history is never written
    # in place), so .grad stops being a view of the buffer.
    def program(t):
        params, loss = _model(t)
        flat = _flatten(t, params)
        loss().backward()
        loss().backward(create_graph=True)
        flat.zero_()
        return flat, [p.grad for p in params if p.grad is not None]

    same_on_both(fg, torch, program)


def test_existing_gradients_are_copied_in(fg, torch, flatten_grads_):
    def grads_after_two_backwards(t):
        params, loss = _model(t)
        loss().backward()
        flat = flatten_grads_(params) if t is fg else None
        loss().backward()
        grads = t.cat([p.grad.reshape(-1) for p in params if p.requires_grad])
        return grads if flat is None else flat

    np.testing.assert_allclose(to_numpy(grads_after_two_backwards(fg)), grads_after_two_backwards(torch).numpy())


def test_the_buffer_reattaches_after_set_to_none(fg, flatten_grads_):
    params, loss = _model(fg)
    flat = flatten_grads_(params)
    loss().backward()
    expected = flat.clone()
    fg.optim.SGD(params, lr=0.1).zero_grad()  # set_to_none=True: the views are dropped
    loss().backward()
    assert fg.equal(flat, expected)  # the new gradients went elsewhere
    assert flatten_grads_(params, flat) is flat
    assert fg.equal(flat, expected)  # copied in
    flat.zero_()
    assert all(not p.grad.any() for p in params if p.requires_grad)


def test_shared_and_frozen_parameters(fg, flatten_grads_):
    shared, frozen, other = fg.ones(2, requires_grad=True), fg.ones(3), fg.ones(1, requires_grad=True)
    flat = flatten_grads_([shared, frozen, shared, other])
    assert flat.shape == (3,) and frozen.grad is None
    (shared * fg.tensor([2.0, 3.0])).sum().backward()
    (other * 4).sum().backward()
    assert flat.tolist() == [2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda t: [t.zeros(2, requires_grad=True), t.zeros(2, dtype=t.float64, requires_grad=True)],
            TypeError,
            "one dtype",
        ),
        (lambda t: [t.zeros(2)], ValueError, "no parameters that require grad"),
        (lambda t: [t.zeros(2, requires_grad=True), [1.0]], TypeError, "expected torch.Tensor, but got: list"),
    ],
)
def test_bad_parameters(fg, flatten_grads_, make, error, match):
    with pytest.raises(error, match=match):
        flatten_grads_(make(fg))


@pytest.mark.parametrize(
    "buffer",
    [
        lambda t: t.zeros(5),
        lambda t: t.zeros(4, dtype=t.float64),
        lambda t: t.zeros(2, 2),
        lambda t: t.zeros(8)[::2],
        lambda t: t.zeros(4, requires_grad=True),
    ],
)
def test_bad_buffer(fg, flatten_grads_, buffer):
    param = fg.zeros(2, 2, requires_grad=True)
    with pytest.raises(ValueError, match="buffer must be a contiguous 1-D tensor of 4 elements of dtype"):
        flatten_grads_(param, buffer(fg))
    assert param.grad is None


def test_data_parallel_replicas_stay_bitwise_equal(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES)  # the spawned replicas import the example by name too
    import data_parallel

    replicas = data_parallel.run(world_size=2, steps=4)
    # One replica in this process, on whole batches: plain single-process training.
    single_losses, single_state = data_parallel.train(
        0, 1, 4, bytearray(4 * data_parallel.gradient_count()), threading.Barrier(1)
    )
    (losses0, state0), (losses1, state1) = replicas
    assert list(state0) == list(single_state)
    for name, value in single_state.items():
        assert np.array_equal(state0[name].numpy(), state1[name].numpy()), name
        np.testing.assert_allclose(state0[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.array_equal(state0["0.weight"].numpy(), data_parallel.make_model().state_dict()["0.weight"].numpy())
    np.testing.assert_allclose([(a + b) / 2 for a, b in zip(losses0, losses1)], single_losses, rtol=1e-5)
