"""fastgrad.compile (docs/compile.md): compiled steps equal eager steps bit for bit, every guard
recaptures instead of replaying stale work, and what cannot be replayed runs eagerly with a warning
that names the line (fullgraph=True raises)."""

import collections
import inspect
import os
import threading
import types
import warnings

import numpy as np
import pytest

import fastgrad
import fastgrad.nn as nn
import fastgrad.nn.functional as F
from fastgrad.bench import micrograd_loss

HERE = os.path.basename(__file__)


def values(t):
    return t.detach().numpy().copy()


def line_of(fn, text):
    """The line number of the first line of `fn`'s source containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def mlp_setup(optimizer, seed=0):
    fastgrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = fastgrad.optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam" else None
    opt = opt or fastgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt


def mlp_data(steps, batch=32):
    rng = np.random.default_rng(1)
    xs = [fastgrad.tensor(rng.standard_normal((batch, 64)).astype(np.float32)) for _ in range(steps)]
    ys = [fastgrad.tensor(rng.integers(0, 10, batch)) for _ in range(steps)]
    return xs, ys


def cross_entropy_step(model, opt, scheduler=None):
    """One training step of model and opt (and the scheduler's step, if any) on a batch (x, y),
    returning the loss: what the tests compile."""

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        return loss

    return step


def train(step, xs, ys):
    return [values(step(x, y)) for x, y in zip(xs, ys)]


def optimizer_state(opt):
    return [values(v) for state in opt.state.values() for v in state.values()]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_mlp_training_matches_eager_bit_for_bit(optimizer, threads):
    previous = fastgrad.get_num_threads()
    fastgrad.set_num_threads(threads)
    try:
        xs, ys = mlp_data(200)
        runs = []
        for compiled in (False, True):
            model, opt = mlp_setup(optimizer)
            loss_fn = nn.CrossEntropyLoss()
            bodies = types.SimpleNamespace(runs=0)  # an object: guarded by identity, not contents

            def step(x, y):
                bodies.runs += 1
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                return loss

            run = fastgrad.compile(step) if compiled else step
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no fallback
                losses = train(run, xs, ys)
            runs.append((losses, [values(p) for p in model.parameters()], optimizer_state(opt), bodies.runs))
        (eager_losses, eager_params, eager_state, _), (losses, params, state, bodies) = runs
        # the first call captures with no gradients yet, the second with them; then only replays
        assert bodies == 2
        for got, want in zip(losses + params + state, eager_losses + eager_params + eager_state):
            np.testing.assert_array_equal(got, want)
    finally:
        fastgrad.set_num_threads(previous)


def micrograd_setup(seed):
    """The bench's micrograd step (0-d tensors, SGD on every scalar) and its parameters."""
    step = micrograd_loss(fastgrad, np.random.default_rng(seed))
    return step, step.params


def test_micrograd_scalar_mlp_matches_eager():
    eager, eager_params = micrograd_setup(0)
    step, params = micrograd_setup(0)
    compiled = fastgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            np.testing.assert_array_equal(values(compiled()), values(eager()))
    for p, q in zip(params, eager_params):
        np.testing.assert_array_equal(values(p), values(q))
    assert compiled.eager_reason is None and len(compiled._cache) == 1


def test_micrograd_replays_take_their_intermediates_from_one_planned_block():
    eager, _ = micrograd_setup(1)
    step, _ = micrograd_setup(1)
    compiled = fastgrad.compile(step)
    for call in range(6):
        np.testing.assert_array_equal(values(compiled()), values(eager()))
        if call == 0:
            assert fastgrad.compiler.memory_plans(compiled) == []  # the first replay makes the plan
    [plan] = fastgrad.compiler.memory_plans(compiled)
    # Thousands of 0-d intermediates (64-byte blocks) in a block a fraction of their total; outside
    # it only the returned loss (the gradients are set to None in the step).
    assert plan.op_count > 3000 and 0 < plan.planned_bytes < plan.op_count * 64 / 4
    assert (plan.unplanned_bytes, plan.misses) == (64, 0)


def test_a_tensor_kept_past_its_planned_death_keeps_its_memory():
    """A hook registered after the plan was made keeps each replay's incoming gradient of a weight,
    which died at once when the plan was made (it was added into .grad): later replays must find its
    place taken and allocate elsewhere, not overwrite it."""

    def setup():
        fastgrad.manual_seed(0)
        layer = fastgrad.nn.Linear(4, 3)
        opt = fastgrad.optim.SGD(layer.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad(set_to_none=False)  # backward then adds into the existing .grad
            loss = layer(x).square().sum()
            loss.backward()
            opt.step()
            return loss

        layer(fastgrad.ones(1, 4)).sum().backward()  # .grad exists from the first call on
        return layer, step

    xs = [fastgrad.randn(5, 4) for _ in range(6)]
    kept = {"eager": [], "compiled": []}
    for mode in kept:
        layer, step = setup()
        run = fastgrad.compile(step) if mode == "compiled" else step
        for i, x in enumerate(xs):
            if i == 3:
                layer.weight.register_hook(kept[mode].append)
            run(x)
    assert fastgrad.compiler.memory_plans(run)[0].misses > 0
    run.reset()  # the program goes; its block stays while a kept gradient is in it (ASan: no use after free)
    del run
    assert len(kept["compiled"]) == 3
    for got, want in zip(kept["compiled"], kept["eager"]):
        np.testing.assert_array_equal(values(got), values(want))


def test_threads_replaying_one_program_at_once_give_their_own_results():
    @fastgrad.compile
    def f(x):
        for _ in range(200):
            x = (x * 1.0001).sin()
        return x.exp()

    inputs = [fastgrad.randn(64) + i for i in range(8)]
    want = [f(x) for x in inputs]  # the capture, the first replay (it makes the plan), replays
    got = [None] * len(inputs)

    def replay(i):
        for _ in range(50):
            got[i] = f(inputs[i])

    threads = [threading.Thread(target=replay, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(values(g), values(w))
    assert len(fastgrad.compiler.memory_plans(f)) == 1


def test_returned_tensors_are_not_overwritten_by_the_next_replay():
    w = fastgrad.ones(3, requires_grad=True)
    f = fastgrad.compile(lambda x: (x * w).sum() + x)
    x1, x2 = fastgrad.tensor([1.0, 2.0, 3.0]), fastgrad.tensor([4.0, 5.0, 6.0])
    outs = [f(x1), f(x1), f(x2)]
    np.testing.assert_array_equal(values(outs[1]), [7.0, 8.0, 9.0])
    np.testing.assert_array_equal(values(outs[2]), [19.0, 20.0, 21.0])
    assert outs[1] is not outs[0]
    assert len(f._cache) == 1  # the same signature: one program, replayed twice


def test_compiled_module_and_backward_outside():
    fastgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    compiled = fastgrad.compile(model)
    assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
    assert list(compiled.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]  # as PyTorch's
    x = fastgrad.randn(5, 4)
    for _ in range(2):  # a capture, then a replay
        model.zero_grad()
        out = compiled(x)
        out.sum().backward()
        grads = [values(p.grad) for p in model.parameters()]
        model.zero_grad()
        model(x).sum().backward()
        np.testing.assert_array_equal(values(out), values(model(x)))
        for g, p in zip(grads, model.parameters()):
            np.testing.assert_array_equal(g, values(p.grad))
    assert compiled._compiled_call_impl.eager_reason is None
    model.compile()
    np.testing.assert_array_equal(values(model(x)), values(compiled(x)))
    assert model._compiled_call_impl is not None


# ---- guards ----------------------------------------------------------------------------------


class Branchy(nn.Module):
    """forward reads the training flag, a plain attribute and its parameter."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x):
        y = self.lin(x) * self.scale
        return y.relu() if self.training else y.tanh()


def test_guards_recapture_instead_of_replaying_stale_work():
    fastgrad.manual_seed(0)
    model = Branchy()
    compiled = fastgrad.compile(model)

    def check(x):
        np.testing.assert_array_equal(values(compiled(x)), values(model(x)))

    x = fastgrad.randn(4, 3)
    check(x)
    check(x)
    model.eval()  # module.training
    check(x)
    model.scale = 3.0  # a plain attribute, by value
    check(x)
    model.lin.weight = nn.Parameter(fastgrad.randn(3, 3))  # a replaced parameter
    check(x)
    check(fastgrad.randn(2, 3))  # a shape
    check(fastgrad.randn(3, 4).t())  # strides
    check(fastgrad.randn(4, 3, dtype=fastgrad.float64).float())
    check(fastgrad.randn(4, 3, requires_grad=True))  # requires_grad
    with fastgrad.no_grad():  # grad mode
        check(x)
    assert compiled._compiled_call_impl.eager_reason is None


SCALE = 2.0


def scaled(x, power):
    return x**power * SCALE


def test_non_tensor_arguments_and_globals_are_guarded_by_value():
    global SCALE
    f = fastgrad.compile(scaled)
    x = fastgrad.tensor([1.0, 2.0])
    np.testing.assert_array_equal(values(f(x, 2)), [2.0, 8.0])
    np.testing.assert_array_equal(values(f(x, 3)), [2.0, 16.0])
    SCALE = 10.0
    try:
        np.testing.assert_array_equal(values(f(x, 3)), [10.0, 80.0])
    finally:
        SCALE = 2.0
    assert len(f._cache) == 3


def test_arguments_in_containers_and_closure_state_are_keys():
    """Tensors inside lists and dicts are inputs; numbers by value and type; an unhashable argument
    runs eagerly; a list in the closure is guarded by its contents."""
    weights = [fastgrad.tensor([1.0, 2.0])]
    holder = types.SimpleNamespace(scale=2.0)

    def f(parts, options):
        return parts[0] * options["k"] + parts[1] * weights[0] * holder.scale

    compiled = fastgrad.compile(f)
    a, b = fastgrad.tensor([1.0, 1.0]), fastgrad.tensor([3.0, 4.0])

    def check(parts, options, programs):
        np.testing.assert_array_equal(values(compiled(parts, options)), values(f(parts, options)))
        assert len(compiled._cache) == programs

    check([a, b], {"k": 2}, 1)
    check([b, a], {"k": 2}, 1)  # other tensors, the same signature
    check((a, b), {"k": 2}, 2)  # a tuple is not a list
    check([a, b], {"k": 2.0}, 3)  # a float is not an int
    check([a, a], {"k": 2}, 4)  # the same tensor twice
    weights[0] = fastgrad.tensor([5.0, 6.0])  # a list of the closure: by contents
    check([a, b], {"k": 2}, 5)
    check([a, b], {"k": 2, "tag": {1}}, 5)  # an unhashable argument (a set): run eagerly, not cached


def test_argument_values_are_keys_by_their_bits(torch):
    """A number argument is a key by its exact value: -0.0 is not 0.0 (x * -0.0 gives -0.0, as eager
    and PyTorch), a NaN replays the NaN's program, integers beyond 64 bits by their digits; strings
    by their characters, lone surrogates too."""

    def f(x, s):
        return x * s

    compiled = fastgrad.compile(f)
    x = fastgrad.tensor([1.0, -2.0])
    for s, programs in [(0.0, 1), (-0.0, 2), (0.0, 2), (float("nan"), 3), (float("nan"), 3)]:
        got = compiled(x, s)
        np.testing.assert_array_equal(np.signbit(values(got)), np.signbit((torch.tensor([1.0, -2.0]) * s).numpy()))
        np.testing.assert_array_equal(values(got), values(f(x, s)))
        assert len(compiled._cache) == programs, s

    def h(x, n):
        return x * (n % 7)  # Python arithmetic: a replay keeps its result, so n must be a key by value

    compiled = fastgrad.compile(h)
    for n, programs in [(2**70, 1), (2**70, 1), (2**70 + 1, 2)]:
        np.testing.assert_array_equal(values(compiled(x, n)), values(h(x, n)))
        assert len(compiled._cache) == programs

    def g(x, name):
        return x * 2.0 if name.startswith("a") else -x

    compiled = fastgrad.compile(g)
    for name, programs in [("a\ud800", 1), ("a\ud800", 1), ("a\udc00", 2), ("b\ud800", 3)]:
        np.testing.assert_array_equal(values(compiled(x, name)), values(g(x, name)))
        assert len(compiled._cache) == programs


def test_numpy_scalars_and_namedtuples_are_keys_by_value():
    """A numpy scalar argument is a key by its type and bytes, a namedtuple by its fields (its tensors
    are inputs): fresh ones with the same values replay, as PyTorch's compile guards them by value."""
    Batch = collections.namedtuple("Batch", "inputs scale")

    def f(batch, shift):
        return batch.inputs * batch.scale + shift

    compiled = fastgrad.compile(f)
    rng = np.random.default_rng(0)
    cases = [(2.0, np.float64(1.0), 1), (2.0, np.float64(1.0), 1), (2.0, np.float64(-0.0), 2)]
    cases += [(3.0, np.float64(1.0), 3), (2.0, np.float32(1.0), 4), (2.0, np.float32(1.0), 4)]
    for scale, shift, programs in cases:
        batch = Batch(fastgrad.tensor(rng.standard_normal(3)), scale)
        np.testing.assert_array_equal(values(compiled(batch, shift)), values(f(batch, shift)))
        assert len(compiled._cache) == programs
    assert compiled.eager_reason is None


def test_shapes_are_keys_by_value_and_returned(torch):
    """x.shape as an argument is a key by its ints (a fresh Size each call replays; it captured again
    on every call), and a returned shape is a Size; Size holds nothing else, as torch.Size."""

    def f(x, shape):
        return x.reshape(shape[::-1]), shape

    compiled = fastgrad.compile(f)
    for shape, programs in [((2, 3), 1), ((2, 3), 1), ((3, 4), 2), ((2, 3), 2)]:
        x = fastgrad.ones(shape)
        (y, s), (expected, expected_shape) = compiled(x, x.shape), f(x, x.shape)
        assert y.shape == expected.shape and type(s) is fastgrad.Size and s == expected_shape
        assert len(compiled._cache) == programs
    for lib in (fastgrad, torch):
        with pytest.raises(AttributeError, match="object has no attribute 'name'"):
            lib.ones(2).shape.name = "x"


def test_namedtuples_are_returned_from_replays():
    """A function that returns torch.return_types (max(dim)) or a namedtuple of its own is replayed, and
    the replay returns the same type, as torch.compile does (it ran eagerly for good before)."""
    Out = collections.namedtuple("Out", "loss parts")

    def f(x):
        return x.max(dim=0), Out(x.sum(), [x * 2, 3])

    compiled = fastgrad.compile(f)
    for scale in (1.0, 2.0, -1.0):
        x = fastgrad.tensor([[1.0, 5.0], [3.0, 2.0]]) * scale
        (top, out), (expected_top, expected_out) = compiled(x), f(x)
        assert type(top) is type(expected_top) and type(out) is Out
        np.testing.assert_array_equal(values(top.values), values(expected_top.values))
        np.testing.assert_array_equal(values(top.indices), values(expected_top.indices))
        np.testing.assert_array_equal(values(out.loss), values(expected_out.loss))
        np.testing.assert_array_equal(values(out.parts[0]), values(expected_out.parts[0]))
        assert out.parts[1] == 3
    assert compiled.eager_reason is None and len(compiled._cache) == 1


def test_self_containing_arguments_and_results_run_eagerly():
    """A list that contains itself has no key (it crashed the key's walk) and cannot be returned from a
    replay (its RecursionError left the capture running): both calls run eagerly, as they would."""
    loop = [1.0]
    loop.append(loop)
    compiled = fastgrad.compile(lambda x, items: x * items[0])
    for _ in range(2):
        np.testing.assert_array_equal(values(compiled(fastgrad.ones(2), loop)), [1.0, 1.0])
    assert len(compiled._cache) == 0

    def returns_loop(x):
        out = [x * 2]
        out.append(out)
        return out

    compiled = fastgrad.compile(returns_loop)
    with pytest.warns(UserWarning, match="returns a value nested more than 64 containers deep"):
        result = compiled(fastgrad.ones(2))
    assert result[1] is result
    np.testing.assert_array_equal(values(result[0]), [2.0, 2.0])
    assert not fastgrad._prims._capturing()
    np.testing.assert_array_equal(values(compiled(fastgrad.ones(2))[0]), [2.0, 2.0])


def test_aliased_inputs_are_part_of_the_signature():
    f = fastgrad.compile(lambda a, b: a.add_(1) + b)
    x, y = fastgrad.zeros(2), fastgrad.zeros(2)
    f(x, y)
    # the same tensor twice: b sees a's write
    np.testing.assert_array_equal(values(f(x, x)), [4.0, 4.0])
    assert len(f._cache) == 2


def test_scheduler_and_learning_rate_are_read_at_replay():
    xs, ys = mlp_data(12, batch=4)
    runs = []
    for compiled in (False, True):
        model, opt = mlp_setup("sgd")
        step = cross_entropy_step(model, opt, fastgrad.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5))
        runs.append(train(fastgrad.compile(step) if compiled else step, xs, ys))
        runs.append(opt.param_groups[0]["lr"])
    np.testing.assert_array_equal(runs[0], runs[2])
    assert runs[1] == runs[3] == 0.1 * 0.5**4


# Each optimizer (LBFGS, which takes a closure, and SparseAdam, for sparse gradients, aside) with a
# scheduler stepped inside the compiled step.
OPTIMIZERS_AND_SCHEDULERS = {
    "SGD nesterov, StepLR": (
        lambda ps: fastgrad.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        lambda o: fastgrad.optim.lr_scheduler.StepLR(o, 7, 0.5),
    ),
    "Adam, ExponentialLR": (
        lambda ps: fastgrad.optim.Adam(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.ExponentialLR(o, 0.99),
    ),
    "AdamW, CosineAnnealingLR": (
        lambda ps: fastgrad.optim.AdamW(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.CosineAnnealingLR(o, 50),
    ),
    "RMSprop, OneCycleLR": (
        lambda ps: fastgrad.optim.RMSprop(ps, lr=0.01, momentum=0.5),
        lambda o: fastgrad.optim.lr_scheduler.OneCycleLR(o, 0.02, total_steps=400),
    ),
    "Adagrad, LinearLR": (
        lambda ps: fastgrad.optim.Adagrad(ps, lr=0.05),
        lambda o: fastgrad.optim.lr_scheduler.LinearLR(o, 0.5, 1.0, 30),
    ),
    "Adadelta, MultiStepLR": (
        lambda ps: fastgrad.optim.Adadelta(ps, lr=1.0),
        lambda o: fastgrad.optim.lr_scheduler.MultiStepLR(o, [20, 90], 0.3),
    ),
    "Adamax, LambdaLR": (
        lambda ps: fastgrad.optim.Adamax(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.LambdaLR(o, lambda epoch: 1 / (1 + epoch)),
    ),
    "NAdam, PolynomialLR": (
        lambda ps: fastgrad.optim.NAdam(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.PolynomialLR(o, 300, 2.0),
    ),
    "RAdam, ConstantLR": (
        lambda ps: fastgrad.optim.RAdam(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.ConstantLR(o, 0.5, 40),
    ),
    "ASGD, CyclicLR": (
        lambda ps: fastgrad.optim.ASGD(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.CyclicLR(o, 0.001, 0.02, 25, cycle_momentum=False),
    ),
    "Rprop, StepLR": (
        lambda ps: fastgrad.optim.Rprop(ps, lr=0.01),
        lambda o: fastgrad.optim.lr_scheduler.StepLR(o, 11, 0.7),
    ),
}


def _tagger_model():
    """Embedding, LayerNorm, dropout: token windows to a class."""
    return nn.Sequential(
        nn.Embedding(11, 6),
        nn.Flatten(),
        nn.Linear(18, 16),
        nn.LayerNorm(16),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(16, 5),
    )


def _tagger_batches(steps):
    rng = np.random.default_rng(2)
    return [
        (fastgrad.tensor(rng.integers(0, 11, (4, 3))), fastgrad.tensor(rng.integers(0, 5, 4))) for _ in range(steps)
    ]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("make", OPTIMIZERS_AND_SCHEDULERS.values(), ids=OPTIMIZERS_AND_SCHEDULERS.keys())
def test_every_optimizer_and_scheduler_trains_200_steps_as_eager(make, threads):
    make_optimizer, make_scheduler = make
    batches = _tagger_batches(200)
    previous = fastgrad.get_num_threads()
    fastgrad.set_num_threads(threads)
    runs = []
    try:
        for compiled in (False, True):
            fastgrad.manual_seed(0)  # the weights, then dropout's draws
            model = _tagger_model()
            opt = make_optimizer(list(model.parameters()))
            step = cross_entropy_step(model, opt, make_scheduler(opt))
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no fallback
                losses = train(fastgrad.compile(step) if compiled else step, *zip(*batches))
            runs.append(losses + [values(p) for p in model.parameters()] + optimizer_state(opt))
            runs[-1].append(np.float64(opt.param_groups[0]["lr"]))
    finally:
        fastgrad.set_num_threads(previous)
    assert len(runs[0]) == len(runs[1])
    for got, want in zip(runs[1], runs[0]):
        np.testing.assert_array_equal(got, want)


def test_cache_limit_then_eager_with_one_warning():
    f = fastgrad.compile(lambda x: x * 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            np.testing.assert_array_equal(values(f(fastgrad.ones(n))), np.full(n, 2.0))
    assert len(f._cache) == fastgrad.compiler.RECOMPILE_LIMIT
    assert [str(w.message) for w in caught if "recompile limit" in str(w.message)] != []
    assert len(caught) == 1
    fastgrad.compiler.reset()
    assert len(f._cache) == 0


# ---- fallbacks --------------------------------------------------------------------------------


def reads_host(x):
    y = x * 2
    if y.sum() > 0:  # a host read
        return y + 1
    return y - 1


def test_host_read_falls_back_to_eager_naming_the_line():
    f = fastgrad.compile(reads_host)
    x = fastgrad.tensor([1.0, -3.0])
    with pytest.warns(UserWarning, match=rf"{HERE}:{line_of(reads_host, 'if y.sum()')}"):
        np.testing.assert_array_equal(values(f(x)), [1.0, -7.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # eager for good, without more warnings
        np.testing.assert_array_equal(values(f(-x)), [-1.0, 7.0])
    assert "item()" in f.eager_reason[0]
    with pytest.raises(fastgrad.compiler.Unsupported, match="fullgraph"):
        fastgrad.compile(reads_host, fullgraph=True)(x)


def test_positions_from_arange_are_captured():
    # A transformer's forward makes its positions with arange(T) on every call (and scratch with empty):
    # both are steps of the program, replayed for the captured T.
    table = fastgrad.randn(8, 3, requires_grad=True)

    def embed(idx):
        positions = fastgrad.arange(idx.shape[1])
        scratch = fastgrad.empty(idx.shape[1], 3)
        embedding = fastgrad.nn.functional.embedding
        return (embedding(idx, table) + embedding(positions, table) + scratch.zero_()).sum()

    f = fastgrad.compile(embed)
    for seed in range(3):
        idx = fastgrad.tensor(np.random.default_rng(seed).integers(0, 8, (2, 5)))
        np.testing.assert_array_equal(values(f(idx)), values(embed(idx)))
    assert f.eager_reason is None and f._replays == 2


def test_gpt_step_with_split_attention_is_captured_and_matches_eager():
    # nanoGPT's step: its attention splits one projection into q, k and v (one node with three
    # outputs), then AdamW; the whole step is one program whose replays give the eager bits.
    from fastgrad import bench

    def make():
        fastgrad.manual_seed(0)
        model = bench.tiny_gpt(fastgrad, vocab=11, block=8, layers=1, heads=2, embd=8)
        optimizer = fastgrad.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            optimizer.zero_grad()
            loss = fastgrad.nn.functional.cross_entropy(model(x).view(-1, 11), y.view(-1))
            loss.backward()
            optimizer.step()
            return loss

        return model, step

    rng = np.random.default_rng(0)
    x, y = (fastgrad.tensor(rng.integers(0, 11, (3, 8))) for _ in range(2))
    (eager_model, eager_step), (model, step) = make(), make()
    compiled = fastgrad.compile(step)
    for _ in range(5):
        assert values(compiled(x, y)) == values(eager_step(x, y))
    assert compiled.eager_reason is None and compiled._replays == 3  # captured again once .grad is set
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_array_equal(values(p), values(q))


def _lstm_language_model():
    nn = fastgrad.nn
    embed, lstm, decoder = nn.Embedding(7, 4), nn.LSTM(4, 5, num_layers=2), nn.Linear(5, 7)
    params = [*embed.parameters(), *lstm.parameters(), *decoder.parameters()]
    optimizer = fastgrad.optim.Adam(params, lr=1e-2)

    def step(x, y):
        optimizer.zero_grad()
        output, _ = lstm(embed(x))
        loss = fastgrad.nn.functional.cross_entropy(decoder(output).view(-1, 7), y.view(-1))
        loss.backward()
        optimizer.step()
        return loss

    return params, step, (7, (3, 2))


def _small_cnn():
    nn = fastgrad.nn
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 4))
    optimizer = fastgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        optimizer.zero_grad()
        loss = fastgrad.nn.functional.cross_entropy(model(x.float().view(2, 1, 4, 4)), y.narrow(1, 0, 1).view(2) % 4)
        loss.backward()
        optimizer.step()
        return loss

    return list(model.parameters()), step, (9, (2, 16))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("make", [_lstm_language_model, _small_cnn], ids=["lstm", "cnn"])
def test_recurrent_and_convolutional_models_train_200_steps_as_eager(make, threads):
    previous = fastgrad.get_num_threads()
    fastgrad.set_num_threads(threads)
    try:
        fastgrad.manual_seed(0)
        eager_params, eager_step, (high, shape) = make()
        fastgrad.manual_seed(0)
        params, step, _ = make()
        compiled = fastgrad.compile(step)
        rng = np.random.default_rng(3)
        for _ in range(200):
            x, y = (fastgrad.tensor(rng.integers(0, high, shape)) for _ in range(2))
            assert values(compiled(x, y)) == values(eager_step(x, y))
    finally:
        fastgrad.set_num_threads(previous)
    assert compiled.eager_reason is None and compiled._replays == 198  # captured again once .grad is set
    for p, q in zip(params, eager_params):
        np.testing.assert_array_equal(values(p), values(q))


def test_random_draws_replay_as_eager_draws():
    # dropout, randn, rand_like and a draw from a Generator of its own: each replay draws anew from the
    # generators' state then, the numbers eager calls would give, and advances them as those would
    weight = fastgrad.randn(4, 3, requires_grad=True)
    own = fastgrad.Generator().manual_seed(7)

    def noisy(x):
        h = fastgrad.nn.functional.dropout(x @ weight, 0.3) + fastgrad.randn(3) * fastgrad.rand_like(x.narrow(1, 0, 3))
        loss = (h + fastgrad.rand(3, generator=own)).sum()
        loss.backward()
        return loss

    def run(fn):
        fastgrad.manual_seed(3)
        own.manual_seed(7)
        weight.grad = None
        losses = [fn(fastgrad.ones(2, 4)).tolist() for _ in range(5)]
        return losses, weight.grad.tolist(), fastgrad.rand(2).tolist(), fastgrad.rand(2, generator=own).tolist()

    compiled = fastgrad.compile(noisy)
    assert run(compiled) == run(noisy)
    assert compiled.eager_reason is None and compiled._replays == 3  # captured again once .grad is set


def test_uncaptured_ops_fall_back():
    def masked(x):
        return x[x > 0].sum()

    f = fastgrad.compile(masked)
    with pytest.warns(UserWarning, match="runs eagerly"):
        got = f(fastgrad.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(values(got), values(masked(fastgrad.tensor([1.0, 2.0]))))
    assert f.eager_reason is not None


def indexes(x, table):
    """Every kind of key, read and written: ints, slices, None, Ellipsis, tensor, list and bool indices."""
    rows = x[:, -1, :] * 2 + x[1:3, [0, 2]].sum() + x[..., None, 1].sum() + x[True].sum()
    picked = table[fastgrad.tensor([2, 0])].sum() + table[[[1], [3]], [0, 2]].sum()
    out = rows.clone()
    out[0] = 3.0
    out[:, 1:3] = rows[:, :2] * picked
    out[[1, 2], [0, 1]] = fastgrad.tensor(7.0)
    out[-1, ...] += fastgrad.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    return out.sum()


def test_indexing_is_captured_and_replays_the_eager_bits():
    rng = np.random.default_rng(0)
    table = fastgrad.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    f = fastgrad.compile(indexes)
    for seed in range(4):
        data = np.random.default_rng(seed).standard_normal((4, 5, 6)).astype(np.float32)
        x, x_eager = (fastgrad.tensor(data, requires_grad=True) for _ in range(2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            got = f(x, table)
        got.backward()
        grad, table.grad = values(table.grad), None
        want = indexes(x_eager, table)
        want.backward()
        assert values(got) == values(want)
        np.testing.assert_array_equal(values(x.grad), values(x_eager.grad))
        np.testing.assert_array_equal(grad, values(table.grad))
        table.grad = None
    assert f.eager_reason is None and f._replays == 3


def test_causal_mask_buffer_slices_are_captured():
    # nanoGPT's attention without the fused kernel: the causal mask is a buffer sliced to the sequence
    # length (self.bias[:, :, :T, :T]) and filled with -inf; the last position's logits are x[:, [-1], :].
    fastgrad.manual_seed(0)
    proj = nn.Linear(4, 12)
    bias = fastgrad.tril(fastgrad.ones(6, 6)).view(1, 1, 6, 6)
    opt = fastgrad.optim.SGD(proj.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        T = x.shape[1]
        q, k, v = proj(x).view(2, T, 3, 4).transpose(1, 2).split(1, dim=1)
        att = (q @ k.transpose(-2, -1)).masked_fill(bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        loss = (att @ v)[:, :, [-1], :].square().mean()
        loss.backward()
        opt.step()
        return loss

    compiled = fastgrad.compile(step)
    xs = [fastgrad.tensor(np.random.default_rng(i).standard_normal((2, 5, 4)).astype(np.float32)) for i in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        losses = [values(compiled(x)) for x in xs]
    weights = [values(p) for p in proj.parameters()]
    fastgrad.manual_seed(0)
    proj.weight.data, proj.bias.data = (fastgrad.tensor(w) for w in (values(p) for p in nn.Linear(4, 12).parameters()))
    assert [values(step(x)) for x in xs] == losses
    for p, w in zip(proj.parameters(), weights):
        np.testing.assert_array_equal(values(p), w)
    assert compiled.eager_reason is None and compiled._replays == 3  # captured again once .grad is set


def test_index_data_is_kept_by_value_and_arrays_fall_back():
    x = fastgrad.arange(6.0)
    positions = [0, 1]  # Python data: guarded by value, and part of the program's fingerprint

    def pick(x):
        return x[positions] + fastgrad.tensor(positions)

    f = fastgrad.compile(pick)
    f(x), f(x)
    positions[0] = 4
    np.testing.assert_array_equal(values(f(x)), [8.0, 2.0])  # captured again: the list changed
    # A numpy array's values may change unseen (arrays are guarded by identity): never replayed
    array = np.array([0, 1])

    def pick_array(x):
        return x[array] + fastgrad.tensor(array)

    g = fastgrad.compile(pick_array)
    with pytest.warns(UserWarning, match=rf"a copy of a numpy array .* at .*{HERE}:{line_of(pick_array, 'x[array]')}"):
        g(x)
    array[0] = 5
    np.testing.assert_array_equal(values(g(x)), [10.0, 2.0])
    # A boolean mask's selection has the shape of its values; a 0-d bool tensor index is read on the host
    for key, reason in ((fastgrad.tensor([True, False] * 3), "boolean mask"), (fastgrad.tensor(True), "0-d bool")):
        h = fastgrad.compile(lambda x, key: x[key].sum())
        with pytest.warns(UserWarning, match=reason):
            np.testing.assert_array_equal(values(h(x, key)), values(x[key].sum()))


PYTHON_MADE_NODES = {  # ops written in Python whose result gets a node of its own (_methods._recorded)
    "LogsumexpBackward0": lambda x, y: x.logsumexp(1),
    "FlipBackward0": lambda x, y: x.flip(0),
    "RollBackward0": lambda x, y: x.roll(1, 1),
    "TrilBackward0": lambda x, y: x.tril(),
    "FmaxBackward0": lambda x, y: fastgrad.fmax(x, y),
    "XlogyBackward0": lambda x, y: fastgrad.xlogy(x, y.abs()),
}


@pytest.mark.parametrize("name", PYTHON_MADE_NODES)
def test_python_made_nodes_are_steps_whose_backward_reads_the_replay(name):
    # Every call has other values: a node made again by the replay must save the replay's tensors.
    op = PYTHON_MADE_NODES[name]

    def step(x, y):
        out = op(x, y)
        (out * out * y.sum()).sum().backward(create_graph=True)
        return out.grad_fn.name(), x.grad.sum().backward()  # the gradient's own gradient too

    f = fastgrad.compile(step)
    for seed in range(4):
        data = np.random.default_rng(seed).standard_normal((2, 3, 3)).astype(np.float64)
        eager, compiled = ([fastgrad.tensor(a, requires_grad=True) for a in data] for _ in range(2))
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no fallback
            warnings.filterwarnings("ignore", "Using backward\\(\\) with create_graph")
            assert f(*compiled)[0] == step(*eager)[0] == name
        for got, want in zip(compiled, eager):
            np.testing.assert_array_equal(values(got.grad), values(want.grad))
    assert f.eager_reason is None and f._replays >= 2


def test_python_made_nodes_holding_tensors_of_the_call_fall_back():
    from fastgrad import _methods

    def tripled(x):  # a backward holding a tensor of its call, which a replay could not give its own
        twice = x.detach() * 2
        return _methods._recorded("TripledBackward0", [x], [x.detach() * 3], [], lambda grads: [grads[0] + twice])[0]

    f = fastgrad.compile(tripled)
    x = fastgrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="the node of TripledBackward0 .its backward holds tensors"):
        f(x).sum().backward()
    np.testing.assert_array_equal(values(x.grad), [3.0, 5.0])


class Legendre3(fastgrad.autograd.Function):  # the PyTorch tutorial's custom Function, with a number on ctx
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return 0.5 * (5 * x**3 - 3 * x) * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 1.5 * (5 * x**2 - 1) * ctx.scale, None


class KeepsInputAsAttribute(fastgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # not saved: a replay's backward could only see this call's x
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad * ctx.x


def test_custom_functions_are_captured_with_a_node_per_replay():
    weight = fastgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def step(x):
        y = Legendre3.apply(x * weight, 2.0)
        (y * y).sum().backward()
        return y, y.grad_fn.name()

    f = fastgrad.compile(step)
    for seed in range(4):
        x = fastgrad.tensor(np.random.default_rng(seed).standard_normal(3).astype(np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            got, name = f(x)
        grad, weight.grad = values(weight.grad), None
        want, _ = step(x)
        assert name == "Legendre3Backward"
        assert values(got).tolist() == values(want).tolist()
        np.testing.assert_array_equal(grad, values(weight.grad))
        weight.grad = None
    assert f.eager_reason is None and f._replays == 3
    g = fastgrad.compile(lambda x: KeepsInputAsAttribute.apply(x).sum().backward())
    with pytest.warns(UserWarning, match="ctx keeps a tensor as an attribute"):
        g(weight)
    np.testing.assert_array_equal(values(weight.grad), [1.0, -2.0, 4.0])


def test_a_sample_per_row_is_drawn_again_on_replay():
    """multinomial(p, 1) is one op (multinomial_one): a replay draws from the generator's state then."""
    g = fastgrad.Generator()

    def sample(p):
        return fastgrad.cat([fastgrad.multinomial(p * 1.0, 1), fastgrad.multinomial(p, 1, generator=g)], 1)

    p = fastgrad.softmax(fastgrad.arange(130.0).reshape(2, 65) % 7, -1)
    f = fastgrad.compile(sample)
    drawn = []
    for compiled in (f, sample):
        fastgrad.manual_seed(5), g.manual_seed(6)
        drawn.append([values(compiled(p)) for _ in range(4)])
    np.testing.assert_array_equal(drawn[0], drawn[1])
    assert f.eager_reason is None and f._replays == 3


def test_explain_and_disable(monkeypatch):
    x = fastgrad.tensor([1.0, 2.0])
    clean = fastgrad.compiler.explain(lambda t: (t * 2).exp(), x)
    assert (clean.graph_count, clean.graph_break_count, clean.op_count) == (1, 0, 2)
    assert any("shape [2]" in g for g in clean.guards)
    broken = fastgrad.compiler.explain(reads_host, x)
    assert broken.graph_break_count == 1 and HERE in broken.break_reasons[0][1]
    assert "Break Reasons" in str(broken)

    def f(t):
        return t

    assert fastgrad.compile(f, disable=True) is f
    monkeypatch.setenv(fastgrad.compiler.DISABLE_ENV, "1")
    assert fastgrad.compile(f) is f


def test_set_stance_as_torch(monkeypatch):
    monkeypatch.setattr(fastgrad._compile, "_stance", "default")  # restored after the test, even on a failure
    runs = types.SimpleNamespace(count=0)  # a plain object: a key by identity, so counting changes no key

    @fastgrad.compile
    def f(x):
        runs.count += 1
        return x * 2

    x, y = fastgrad.ones(2), fastgrad.ones(3)
    with fastgrad.compiler.set_stance("force_eager"):
        np.testing.assert_array_equal(values(f(x)), [2.0, 2.0])
    assert not f._cache and runs.count == 1  # ran eagerly, captured nothing
    with fastgrad.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(RuntimeError, match="Detected recompile when torch.compile stance is 'fail_on_recompile'"):
            f(x)  # as PyTorch, a first capture is a "recompile" too
    f(x)  # captures
    with fastgrad.compiler.set_stance("fail_on_recompile"):
        f(x)  # replays
        with pytest.raises(RuntimeError, match="function name: 'f'"):
            f(y)
    with fastgrad.compiler.set_stance("eager_on_recompile"):
        np.testing.assert_array_equal(values(f(y)), [2.0, 2.0, 2.0])
        assert len(f._cache) == 1
    assert runs.count == 3

    @fastgrad.compiler.set_stance("eager_then_compile")
    def twice(t):
        return [f(t), len(f._cache)], [f(t), len(f._cache)]

    assert fastgrad.compiler.set_stance("default").stance == "default"  # a decorator sets it only in calls
    first, second = twice(fastgrad.ones(4))
    assert (first[1], second[1]) == (1, 2)  # the first call of a signature runs eagerly, the next captures
    stance = fastgrad.compiler.set_stance("force_eager")  # as a function: until set again
    assert f(x) is not None and runs.count == 6
    fastgrad.compiler.set_stance("default")
    with pytest.raises(RuntimeError, match="non-default stance cannot have force_backend set"):
        fastgrad.compiler.set_stance("force_eager", force_backend="eager")
    with pytest.raises(RuntimeError, match="invalid torch.compile stance 'sometimes'"):
        fastgrad.compiler.set_stance("sometimes")
    with pytest.raises(RuntimeError, match="attempted to set_stance in a torch.compile region"):
        fastgrad.compile(lambda t: (fastgrad.compiler.set_stance("force_eager"), t * 2))(x)
    assert stance.prev == "default" and fastgrad.compiler.set_stance().prev == "default"


def test_disabled_functions_run_on_every_call():
    logged = []

    @fastgrad.compiler.disable
    def log(step, **info):
        logged.append((step, info))

    @fastgrad.compile
    def f(x, step):
        log(step, phase="train")  # no tensors, returns None: a host call that replays call again
        return x * 2

    x = fastgrad.ones(2)
    for _ in range(3):
        np.testing.assert_array_equal(values(f(x, 7)), [2.0, 2.0])
    assert logged == [(7, {"phase": "train"})] * 3 and f.eager_reason is None and f._replays == 2

    @fastgrad.compiler.disable(reason="reads the host")
    def norm(ts):
        return float(ts[0].sum())

    def g(x):
        return x * norm([x])  # a tensor argument (inside a list): a graph break

    compiled = fastgrad.compile(g)
    with pytest.warns(UserWarning, match=r"norm, marked with compiler.disable \(reads the host\), with tensor"):
        compiled(x)
    np.testing.assert_array_equal(values(compiled(x * 3)), [18.0, 18.0])
    with pytest.raises(fastgrad.compiler.Unsupported, match="fullgraph=True"):
        fastgrad.compile(g, fullgraph=True)(x)
    returns = fastgrad.compile(lambda t: t * fastgrad.compiler.disable(lambda: 3)())
    with pytest.warns(UserWarning, match="returned a value"):
        returns(x)
    assert returns.eager_reason is not None
    plain = fastgrad.compiler.disable(g)
    assert fastgrad.compile(plain) is plain and plain.__name__ == "g"
    assert fastgrad.compiler.allow_in_graph(g) is g and fastgrad.compiler.assume_constant_result(g) is g
    assert fastgrad.compiler.cudagraph_mark_step_begin() is None and not fastgrad.compiler.is_exporting()
    seen = []
    fastgrad.compile(lambda t: (seen.append(fastgrad.compiler.is_dynamo_compiling()), t + 1)[1])(x)
    assert seen == [True] and not fastgrad.compiler.is_dynamo_compiling()


def test_argument_checks_as_torch():
    f = lambda x: x  # noqa: E731
    with pytest.raises(RuntimeError, match="Either mode or options"):
        fastgrad.compile(f, mode="default", options={})
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        fastgrad.compile(f, mode="fast")
    with pytest.raises(RuntimeError, match="Invalid backend"):
        fastgrad.compile(f, backend="tvm")
    with pytest.raises(RuntimeError, match="Unexpected optimization option"):
        fastgrad.compile(f, options={"trace.enabled": True})
    decorated = fastgrad.compile(mode="reduce-overhead")(f)
    x = fastgrad.ones(2)
    assert decorated(x) is x and decorated(x) is x  # an input returned: itself, on replay too


def test_data_updates_and_zeroed_gradients_replay():
    """A hand-written update through .data, gradients zeroed in place (set_to_none=False) and a
    parameter's data swapped for a recorded result, as eagerly."""
    runs = []
    for compiled in (False, True):
        fastgrad.manual_seed(0)
        model = nn.Linear(3, 2)
        x = fastgrad.randn(4, 3)

        def step():
            model.zero_grad(set_to_none=False)
            loss = model(x).pow(2).mean()
            loss.backward()
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            model.bias.data = model.bias.detach() * 0.5
            return loss

        run = fastgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = [values(run()) for _ in range(4)]
        runs.append(losses + [values(p) for p in model.parameters()])
        if compiled:
            assert run.eager_reason is None and len(run._cache) == 2
    for got, want in zip(*runs):
        np.testing.assert_array_equal(got, want)


def test_check_every_catches_hidden_python_state():
    config = types.SimpleNamespace(scale=2.0)  # a plain object: its attributes are not guarded

    def scaled_by_config(x):
        return x * config.scale

    x = fastgrad.tensor([1.0, 2.0])
    unchecked = fastgrad.compile(scaled_by_config)
    checked = fastgrad.compile(scaled_by_config, options={"check_every": 2})
    for f in (unchecked, checked):
        f(x)
        f(x)  # a replay (checked: its first replay is not a check)
    config.scale = 3.0
    # the documented limit: a replay does not see the change...
    np.testing.assert_array_equal(values(unchecked(x)), [2.0, 4.0])
    # ...which check_every finds on its next check (that call ran eagerly: the state moved on)
    with pytest.raises(RuntimeError, match="no longer does what its captured program replays"):
        checked(x)
    np.testing.assert_array_equal(values(checked(x)), [3.0, 6.0])  # captured again
    with pytest.raises(ValueError, match="check_every"):
        fastgrad.compile(scaled_by_config, options={"check_every": 0})


@pytest.mark.parametrize("first, second", [("abs", "sign"), ("__lt__", "__gt__"), ("atan2", "hypot")])
def test_check_every_tells_ops_of_one_binding_shape_apart(first, second):
    """Ops bound the same way (a function pointer of one signature, a lambda keeping an enum) are
    different steps: switching between them by hidden state is caught."""
    config = types.SimpleNamespace(op=first)
    x, y = fastgrad.tensor([0.5, -2.0]), fastgrad.tensor([1.0, -3.0])

    def f(x, y):
        return getattr(x, config.op)(y) if config.op not in ("abs", "sign") else getattr(x, config.op)()

    checked = fastgrad.compile(f, options={"check_every": 2})
    checked(x, y), checked(x, y)
    config.op = second
    with pytest.raises(RuntimeError, match="no longer does what its captured program replays"):
        checked(x, y)
    np.testing.assert_array_equal(values(checked(x, y)), values(f(x, y)))


# The soak test's steps: a short run here; FASTGRAD_COMPILE_SOAK=1 runs the 20,000.
SOAK_STEPS = 20_000 if os.environ.get("FASTGRAD_COMPILE_SOAK") else 300


def test_soak_replays_keep_memory_flat():
    """Replays of a training step leave no graph node behind, do not grow the node arena or the
    process, and keep replaying one program (no recapture)."""
    import gc
    import resource

    from fastgrad._C import graph_stats

    model, opt = mlp_setup("adam")
    xs, ys = mlp_data(1, batch=8)
    step = fastgrad.compile(cross_entropy_step(model, opt))

    def run(n):
        left = 0
        for _ in range(n):
            loss = step(xs[0], ys[0])
            del loss
            left = max(left, graph_stats()["live_nodes"])
        return left

    run(50)
    gc.collect()
    warm, rss_warm = graph_stats(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert run(SOAK_STEPS) == warm["live_nodes"]
    gc.collect()
    end, rss_end = graph_stats(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert end["live_nodes"] == warm["live_nodes"] and end["arena_bytes"] <= warm["arena_bytes"]
    assert step.eager_reason is None and step._replays >= SOAK_STEPS and len(step._cache) <= 2
    if SOAK_STEPS >= 20_000 and "libasan" not in os.environ.get("LD_PRELOAD", ""):
        assert rss_end - rss_warm < 2048  # kB; in a short run, other tests' memory makes RSS say nothing


def python_calls_during(fn):
    """The names of the Python functions that run during fn()."""
    import sys

    names = []
    sys.setprofile(lambda frame, event, arg: names.append(frame.f_code.co_name) if event == "call" else None)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


FUSED_OPTIMIZERS = {
    "adam amsgrad l2": lambda ps: fastgrad.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adamw maximize": lambda ps: fastgrad.optim.AdamW(ps, lr=0.01, maximize=True),
    "sgd nesterov l2": lambda ps: fastgrad.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "sgd dampening, two groups": lambda ps: fastgrad.optim.SGD(
        [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}], lr=0.1, momentum=0.5, dampening=0.25
    ),
}


@pytest.mark.parametrize("make", FUSED_OPTIMIZERS.values(), ids=FUSED_OPTIMIZERS.keys())
def test_optimizer_steps_replay_in_cpp_as_eager(make):
    """A replay runs Adam/AdamW/SGD's step and zero_grad as their fused C++ update, reading the
    optimizer's groups and state then (no Python method runs), with eager's bits."""
    xs, ys = mlp_data(8, batch=4)
    runs = []
    for compiled in (False, True):
        fastgrad.manual_seed(0)
        model = nn.Linear(64, 10)
        opt = make(list(model.parameters()))
        step = cross_entropy_step(model, opt)
        run = fastgrad.compile(step) if compiled else step
        losses = train(run, xs[:4], ys[:4])
        if compiled:
            calls = python_calls_during(lambda: losses.extend(train(run, xs[4:], ys[4:])))
            assert not {"zero_grad", "step", "hooked_step", "_update_group"} & set(calls)
        else:
            losses += train(run, xs[4:], ys[4:])
        runs.append((losses, [values(p) for p in model.parameters()], optimizer_state(opt)))
    for got, want in zip(*(losses + params + state for losses, params, state in runs)):
        np.testing.assert_array_equal(got, want)


def test_optimizer_steps_fall_back_to_python_where_cpp_would_differ():
    """What the C++ update does not mirror makes the replay call the Python method: a step hook
    added after the capture, a method of the optimizer's class patched after it, a gradient
    missing, zero_grad(set_to_none=False)."""
    xs, ys = mlp_data(6, batch=4)

    class PatchedAdam(fastgrad.optim.Adam):
        pass

    runs = []
    for compiled in (False, True):
        fastgrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 8), nn.Linear(8, 10))
        opt = PatchedAdam(model.parameters(), lr=0.01)
        seen = []

        def step(x, y, set_to_none=True):
            opt.zero_grad(set_to_none)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run = fastgrad.compile(step) if compiled else step
        losses = train(run, xs[:2], ys[:2])  # captured (without and with gradients), then replayed
        handle = opt.register_step_pre_hook(lambda *args: seen.append("hook"))
        losses += train(run, xs[2:3], ys[2:3])
        handle.remove()
        original = PatchedAdam._update_group
        PatchedAdam._update_group = lambda self, params, group: (seen.append("patched"), original(self, params, group))
        losses += train(run, xs[3:4], ys[3:4])
        del PatchedAdam._update_group
        model[1].weight.requires_grad_(False)  # requires_grad is guarded: a new capture, then a replay
        losses += train(run, xs[4:5], ys[4:5])
        losses.append(values(run(xs[5], ys[5], False)))
        runs.append((losses, [values(p) for p in model.parameters()], optimizer_state(opt), seen))
    (eager_losses, eager_params, eager_state, eager_seen), (losses, params, state, seen) = runs
    assert seen == eager_seen == ["hook", "patched"]
    for got, want in zip(losses + params + state, eager_losses + eager_params + eager_state):
        np.testing.assert_array_equal(got, want)


def test_replay_releases_the_gil():
    """A replay runs its steps without the GIL, though none of them would give it away by itself (short
    ops): with forced switches off, another Python thread runs only when the GIL is given away."""
    import sys
    import threading
    import time

    x = fastgrad.ones(80_000)  # below the ops' long-work bar (100,000 elements)

    @fastgrad.compile
    def chain(x):  # 10-30 ms: long enough for the other thread to wake up on a loaded machine
        for _ in range(800):
            x = x * 1.0
        return x

    chain(x)
    count, stop = [0], threading.Event()

    def other():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # gives the GIL back to the replaying thread

    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)  # the other thread runs only where the main thread releases the GIL
    thread = threading.Thread(target=other)
    thread.start()
    try:
        ran = []
        for _ in range(8):
            before = count[0]
            chain(x)
            ran.append(count[0] - before)
            if ran[-1]:
                break
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        thread.join()
    assert ran[-1] > 0 and chain._replays >= 1
