"""fastgrad.compile's lowered programs (docs/compile.md, "Programs of 0-d values"): a captured step on
0-d float32 tensors replays as float arithmetic on registers. What it leaves (losses, parameters and
their versions, .grad, the outputs' flags) must be what eager steps leave, bit for bit; where the
lowering cannot follow the steps, or a call's tensors are no longer as it saw them, the steps replay."""

import math
import os
import threading

import numpy as np
import pytest

import fastgrad
from fastgrad.bench import micrograd_loss

if not hasattr(fastgrad._prims, "_capture_begin"):  # pragma: no cover - fastgrad.reference has no compile
    pytest.skip("compile captures nothing in the reference", allow_module_level=True)


def bits(t):
    """A 0-d float32 tensor's bits, any NaN as one: which NaN an operation on two NaNs gives depends on
    the operand order a compiler chose for + or * (docs/compile.md)."""
    value = np.asarray(t.detach().numpy(), dtype=np.float32)
    return np.float32(np.nan).view(np.int32).item() if np.isnan(value) else value.view(np.int32).item()


def state_of(params):
    return [(bits(p), p._version, None if p.grad is None else bits(p.grad)) for p in params]


def lowered(compiled):
    [program] = fastgrad.compiler.lowered_programs(compiled)
    return program


def test_micrograd_steps_replay_as_float_arithmetic_and_equal_eager_steps():
    eager = micrograd_loss(fastgrad, np.random.default_rng(3))
    step = micrograd_loss(fastgrad, np.random.default_rng(3))
    compiled = fastgrad.compile(step)
    for call in range(200):
        got, want = compiled(), eager()
        assert bits(got) == bits(want), call
        if call in (0, 1, 199):
            assert state_of(step.params) == state_of(eager.params), call
    program = lowered(compiled)
    assert program.state == "checked" and program.refusal is None
    # forward, backward and update: more operations than steps, every step's value kept apart
    assert program.operations > program.op_count > 3000 and program.values > program.operations
    # The output: requires grad, its graph spent by the step's backward (as eagerly: a second backward fails).
    assert got.requires_grad and not got.is_leaf and got.grad_fn.name() == "CompiledFunctionBackward"
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        got.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        want.backward()


def lecture_mlp(seed, lib=fastgrad):
    """The 0-d MLP of a micrograd lecture: tanh neurons 3-4-4-1, squared error over four points,
    gradients set to None before backward (so they are set when the next call starts), SGD."""
    rng = np.random.default_rng(seed)

    def scalar(v, grad=False):
        return lib.tensor(float(v), requires_grad=grad)

    sizes = (3, 4, 4, 1)
    layers = [
        [
            ([scalar(rng.uniform(-1, 1), True) for _ in range(n_in)], scalar(rng.uniform(-1, 1), True))
            for _ in range(n_out)
        ]
        for n_in, n_out in zip(sizes, sizes[1:])
    ]
    params = [p for layer in layers for w, b in layer for p in (*w, b)]
    xs = [[scalar(v) for v in row] for row in ([2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0])]
    ys = [1.0, -1.0, -1.0, 1.0]

    def forward(values):
        for layer in layers:
            values = [sum((wi * xi for wi, xi in zip(w, values)), b).tanh() for w, b in layer]
        return values[0]

    def step():
        loss = sum((forward(x) - y) ** 2 for x, y in zip(xs, ys))
        for p in params:
            p.grad = None
        loss.backward()
        with lib.no_grad():
            for p in params:
                p += -0.05 * p.grad
        return loss

    step.params = params
    return step


def test_a_lecture_mlp_that_zeroes_gradients_first_is_lowered():
    eager, step = lecture_mlp(7), lecture_mlp(7)
    compiled = fastgrad.compile(step)
    for call in range(30):
        assert bits(compiled()) == bits(eager()), call
    assert state_of(step.params) == state_of(eager.params)
    # the first call starts without gradients, the others with them: two programs, both lowered; the
    # first never replays
    programs = fastgrad.compiler.lowered_programs(compiled)
    assert [(p.state, p.refusal) for p in programs] == [("unchecked", None), ("checked", None)]


LOWERED_MODELS = {
    "micrograd relu": (lambda lib: micrograd_loss(lib, np.random.default_rng(4)), 0.0),
    "lecture tanh": (lambda lib: lecture_mlp(4, lib), 2e-6),
}


@pytest.mark.parametrize("make, rtol", LOWERED_MODELS.values(), ids=LOWERED_MODELS.keys())
def test_lowered_steps_follow_pytorch(make, rtol, torch):
    """The oracle: the same steps in PyTorch. ReLU, products and sums round as PyTorch's: equal bits
    over 30 steps; tanh's kernel is fastgrad's own: within float32 rounding."""
    ours, theirs = make(fastgrad), make(torch)
    compiled = fastgrad.compile(ours)
    for call in range(30):
        np.testing.assert_allclose(compiled().item(), theirs().item(), rtol=rtol, atol=rtol / 10, err_msg=str(call))
    assert [p.refusal for p in fastgrad.compiler.lowered_programs(compiled)] in ([None], [None, None])
    got = [p.item() for p in ours.params]
    want = [p.item() for p in theirs.params]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol / 10)
    assert [p.grad is None for p in ours.params] == [p.grad is None for p in theirs.params]
    assert [p._version for p in ours.params] == [p._version for p in theirs.params]


SPECIAL = [0.0, -0.0, 1e-30, -3.5, 88.0, 1e30, math.inf, 0.5]


def random_step(seed, clear_grads=True):
    """A random program on 0-d leaves (some special values) and constants: tensor-tensor and
    tensor-number arithmetic (either side), powers by a number, unary functions, backward, then SGD
    on each leaf; each call returns its loss and two intermediates."""
    rng = np.random.default_rng(seed)
    leaves = [fastgrad.tensor(float(v), requires_grad=True) for v in rng.choice(SPECIAL + [1.25, -0.75], 5)]
    consts = [fastgrad.tensor(float(v)) for v in rng.standard_normal(2)]
    plan = []
    for _ in range(40):
        kind = rng.choice(["tt", "tn", "nt", "pow", "unary"], p=[0.35, 0.2, 0.15, 0.1, 0.2])
        plan.append(
            (
                kind,
                rng.choice(["+", "-", "*", "/"]),
                rng.choice(["relu", "neg", "tanh", "exp", "sigmoid", "log"]),
                int(rng.integers(1 << 30)),
                int(rng.integers(1 << 30)),
                float(rng.choice([2, -0.5, 0.1, 0, 3.0, 0.5, -1, -2, 1.5])),
            )
        )

    def binary(op, x, y):
        return x + y if op == "+" else x - y if op == "-" else x * y if op == "*" else x / y

    def step():
        pool = leaves + consts
        for kind, op, fn, i, j, number in plan:
            x, y = pool[i % len(pool)], pool[j % len(pool)]
            if kind == "tt":
                pool.append(binary(op, x, y))
            elif kind == "tn":
                pool.append(binary(op, x, number or 1.5) if op == "/" else binary(op, x, number))
            elif kind == "nt":  # number op tensor: rsub, reflected add and mul (number / tensor is rdiv)
                pool.append(number - x if op in "-/" else number + x if op == "+" else number * x)
            elif kind == "pow":  # x ** number, its special exponents (sqrt, squares, reciprocals) and 0
                pool.append(x**number)
            else:
                pool.append(-x if fn == "neg" else getattr(x, fn)())
        loss = sum(t for t in pool if t.requires_grad) * 0.5
        loss.backward()
        with fastgrad.no_grad():
            for p in leaves:
                if p.grad is not None:
                    p -= 0.01 * p.grad
                    if clear_grads:
                        p.grad = None
        return loss, pool[-1], pool[-2]

    step.params = leaves
    return step


@pytest.mark.parametrize("seed", range(int(os.environ.get("FASTGRAD_SCALAR_PROGRAMS", "8"))))
def test_random_scalar_programs_equal_eager_bit_for_bit(seed):
    eager, step = random_step(seed), random_step(seed)
    compiled = fastgrad.compile(step)
    for call in range(4):
        got, want = compiled(), eager()
        assert [bits(t) for t in got] == [bits(t) for t in want], call
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
        assert state_of(step.params) == state_of(eager.params), call
    program = lowered(compiled)
    assert (program.state, program.refusal) == ("checked", None)


def test_gradients_left_set_are_written_and_the_next_call_replays_its_steps():
    """A step that leaves .grad set: the lowered program writes new gradient tensors; the next call
    (its key says the gradients are set) captures a program that accumulates into them, which the
    lowering refuses (it needs them None): its steps replay, and every call equals eager."""
    eager, step = random_step(11, clear_grads=False), random_step(11, clear_grads=False)
    compiled = fastgrad.compile(step)
    for call in range(4):
        got, want = compiled(), eager()
        assert [bits(t) for t in got] == [bits(t) for t in want], call
        assert state_of(step.params) == state_of(eager.params), call
    programs = fastgrad.compiler.lowered_programs(compiled)
    assert [p.refusal for p in programs] == [None, "a .grad set before the call"]


def sgd_and_reset(params, lr):
    """micrograd's update: p -= lr * p.grad, then no gradient."""
    with fastgrad.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


def scalar_model():
    w = [fastgrad.tensor(v, requires_grad=True) for v in (0.5, -1.5, 2.0)]
    x = fastgrad.tensor(0.75)

    def step():
        loss = ((w[0] * x + w[1]).tanh() * w[2] - 1.0).relu() * (w[0] * 3.0).sigmoid()
        loss.backward()
        sgd_and_reset(w, 0.1)
        return loss

    step.params = w
    return step


def test_a_second_backward_adds_into_grad_in_place():
    """Two backward() passes: the second adds into the .grad the first set (in place, its version
    counter bumped), which the step returns before resetting it."""

    def model():
        w = [fastgrad.tensor(v, requires_grad=True) for v in (0.5, -1.5)]

        def step():
            (w[0] * w[1]).backward()
            (w[0] * 3.0 + w[1].exp()).backward()
            grads = (w[0].grad, w[1].grad)
            sgd_and_reset(w, 0.1)
            return grads

        step.params = w
        return step

    eager, step = model(), model()
    compiled = fastgrad.compile(step)
    for call in range(3):
        got, want = compiled(), eager()
        assert (
            [(bits(t), t._version) for t in got]
            == [(bits(t), t._version) for t in want]
            == [
                (bits(want[0]), 1),
                (bits(want[1]), 1),
            ]
        )
        assert state_of(step.params) == state_of(eager.params), call
    assert lowered(compiled).state == "checked"


def test_a_hook_or_new_data_after_lowering_replays_the_steps():
    eager, step = scalar_model(), scalar_model()
    compiled = fastgrad.compile(step)
    for _ in range(3):
        assert bits(compiled()) == bits(eager())
    assert lowered(compiled).state == "checked"
    seen = []
    for model in (step, eager):
        model.params[1].register_hook(lambda g, seen=seen: seen.append(bits(g)))
    for _ in range(2):
        assert bits(compiled()) == bits(eager())
    assert len(seen) == 4 and seen[0::2] == seen[1::2]  # the hook ran in the compiled calls too
    for model in (step, eager):
        model.params[2].data = fastgrad.tensor(0.25)  # new storage
    assert bits(compiled()) == bits(eager())
    assert state_of(step.params) == state_of(eager.params)
    # a hook on a leaf's AccumulateGrad, which a graph held by the test keeps alive
    accumulators = [(m.params[0] * 1.0).grad_fn.next_functions[0][0] for m in (step, eager)]
    ran = []
    for accumulator, tag in zip(accumulators, "ce"):
        accumulator.register_hook(lambda inputs, outputs, tag=tag: ran.append(tag))
    assert bits(compiled()) == bits(eager())
    assert ran == ["c", "e"]
    assert len(compiled._cache) == 1


def test_what_the_lowering_cannot_follow_replays_its_steps():
    w = fastgrad.tensor(0.5, requires_grad=True)
    x, v = fastgrad.tensor(2.0), fastgrad.ones(2)
    cases = {
        "an output whose graph a backward() outside the function could use": lambda: (w * x).relu(),
        "a backward() that keeps the graph": lambda: (w * x).backward(retain_graph=True),
        "an operation it does not compute": lambda: 2.0 / (w * x),  # rdiv: reciprocal, then mul
        "a tensor that is not a 0-d float32": lambda: w * v,
    }
    for reason, fn in cases.items():
        compiled = fastgrad.compile(fn)
        for _ in range(3):
            out = compiled()
        # (backward() sets w.grad: the next call's key differs, a second program)
        assert {p.refusal for p in fastgrad.compiler.lowered_programs(compiled)} == {reason}
    w.grad = None
    out = fastgrad.compile(lambda: (w * x).relu())()
    out.backward()  # its graph is the steps'
    assert w.grad.item() == 2.0


def test_lowered_replays_leave_no_node_behind():
    from fastgrad._C import graph_stats

    step = micrograd_loss(fastgrad, np.random.default_rng(5))
    compiled = fastgrad.compile(step)
    compiled(), compiled(), compiled()
    assert lowered(compiled).state == "checked"
    warm = graph_stats()
    for _ in range(300):
        loss = compiled()  # each loss, with its CompiledFunctionBackward, dies at the next call
    del loss
    end = graph_stats()
    assert end["live_nodes"] == warm["live_nodes"] and end["arena_bytes"] <= warm["arena_bytes"]


def test_threads_replay_their_own_lowered_programs():
    steps = [micrograd_loss(fastgrad, np.random.default_rng(seed)) for seed in range(4)]
    eagers = [micrograd_loss(fastgrad, np.random.default_rng(seed)) for seed in range(4)]
    compiled = [fastgrad.compile(s) for s in steps]
    for c in compiled:
        c(), c()  # capture, check
    losses = [[] for _ in steps]

    def run(i):
        for _ in range(30):
            losses[i].append(bits(compiled[i]()))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, eager in enumerate(eagers):
        eager(), eager()
        assert losses[i] == [bits(eager()) for _ in range(30)]
        assert state_of(steps[i].params) == state_of(eager.params)
