"""Random tensors and generators: shapes, dtypes, flags, errors, and the properties every draw must
have; against each other the two backends give the same numbers for a seed. That the numbers are
PyTorch's own, bit for bit, is test_random_streams.py's job."""

import numpy as np
import pytest

import fastgrad
import fastgrad.reference
from fastgrad import _meta, _optable
from oracle_helpers import same_error, same_on_both

SAMPLERS = {
    "rand": lambda m, g: m.rand(2, 3, generator=g),
    "randn": lambda m, g: m.randn((4,), generator=g, dtype=m.float64),
    "randint": lambda m, g: m.randint(-3, 7, (5,), generator=g),
    "randperm": lambda m, g: m.randperm(6, generator=g),
    "normal": lambda m, g: m.normal(m.zeros(3), 2.0, generator=g),
    "multinomial": lambda m, g: m.multinomial(m.tensor([[0.1, 0.5, 0.4], [1.0, 0.0, 2.0]]), 2, generator=g),
    "multinomial_replacement": lambda m, g: m.tensor([0.3, 0.7]).multinomial(5, True, generator=g),
    "multinomial_one_strided": lambda m, g: m.multinomial(m.arange(1.0, 41).reshape(8, 5).t(), 1, generator=g),
    "bernoulli": lambda m, g: m.bernoulli(m.tensor([0.2, 0.9, 0.5]), generator=g),
    "bernoulli_p": lambda m, g: m.bernoulli(m.zeros(4), 0.3, generator=g),
    "poisson": lambda m, g: m.poisson(m.tensor([1.0, 4.0, 0.0]), generator=g),
    "uniform_": lambda m, g: m.empty(3).uniform_(-1, 1, generator=g),
    "normal_": lambda m, g: m.empty(3, dtype=m.float64).normal_(1, 2, generator=g),
    "bernoulli_": lambda m, g: m.empty(12, dtype=m.int64).bernoulli_(m.full((12,), 0.5), generator=g),
    "exponential_": lambda m, g: m.empty(4).exponential_(2.0, generator=g),
    "geometric_": lambda m, g: m.empty(4, dtype=m.int64).geometric_(0.3, generator=g),
    "log_normal_": lambda m, g: m.empty(4).log_normal_(generator=g),
    "cauchy_": lambda m, g: m.empty(4).cauchy_(generator=g),
    "random_": lambda m, g: m.empty(4).random_(generator=g),
    "random_to": lambda m, g: m.empty(4, dtype=m.int64).random_(10, generator=g),
    "random_from_to": lambda m, g: m.empty(4, dtype=m.int64).random_(-5, 5, generator=g),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_a_seed_gives_both_backends_the_same_numbers(name):
    draws = []
    for m in (fastgrad, fastgrad.reference):
        m.manual_seed(7)
        g = m.Generator().manual_seed(11)
        draws.append((SAMPLERS[name](m, None).tolist(), SAMPLERS[name](m, g).tolist()))
    assert draws[0] == draws[1]
    assert draws[0][0] != draws[0][1]  # the generator argument is used, not the default generator


@pytest.mark.parametrize("name", SAMPLERS)
def test_results_have_pytorchs_shape_and_dtype(fg, torch, name):
    def program(lib):
        t = SAMPLERS[name](lib, lib.Generator().manual_seed(0))
        return list(t.shape), str(t.dtype).split(".")[-1], t.requires_grad, t.is_leaf

    same_on_both(fg, torch, program)


def test_generators_are_independent_streams(fg):
    g1, g2 = fg.Generator().manual_seed(3), fg.Generator().manual_seed(3)
    fg.manual_seed(0)
    first = fg.rand(4).tolist()
    assert fg.rand(3, generator=g1).tolist() == fg.rand(3, generator=g2).tolist()
    fg.manual_seed(0)
    fg.rand(3, generator=g1)
    assert fg.rand(4).tolist() == first  # drawing from g1 did not move the default generator


def test_state_round_trips_and_fork_rng_restores(fg):
    g = fg.Generator().manual_seed(5)
    fg.randn(1, generator=g)  # the kept second normal of a Box-Muller pair is part of the state
    fg.randint(0, 3, (1,), generator=g)
    state = g.get_state()
    ahead = fg.randn(5, generator=g).tolist()
    assert g.set_state(state) is g and fg.randn(5, generator=g).tolist() == ahead
    fg.manual_seed(1)
    expected = fg.rand(3).tolist()
    fg.manual_seed(1)
    with fg.random.fork_rng():
        fg.rand(10)
    assert fg.rand(3).tolist() == expected
    fg.set_rng_state(fg.get_rng_state())


@pytest.mark.parametrize(
    "state",
    [
        lambda m: 3,
        lambda m: m.zeros(5056, dtype=m.int64),
        lambda m: m.zeros(10, dtype=m.uint8),
        lambda m: m.zeros(5056, dtype=m.uint8),  # not seeded, twister position 0: invalid
    ],
)
def test_bad_states_raise_pytorchs_errors(fg, torch, state):
    same_error(fg, torch, lambda m: m.Generator().set_state(state(m)))


def test_seeds_as_pytorch_takes_them(fg, torch):
    def program(lib):
        g = lib.Generator()
        return [
            g.initial_seed(),
            g.manual_seed(-1).initial_seed(),
            g.manual_seed(2**64 - 1).initial_seed(),
            lib.manual_seed(12).initial_seed(),
            lib.initial_seed(),
            lib.manual_seed(3.7).initial_seed(),
            str(g.device),
        ]

    same_on_both(fg, torch, program)
    assert fg.seed() == fg.initial_seed()


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.Generator().manual_seed(1.5),
        lambda m: m.Generator().manual_seed(True),
        lambda m: m.Generator().manual_seed(2**64),
        lambda m: m.Generator(device="cuda"),
        lambda m: m.multinomial(m.tensor([0.2, 0.8]), 3),
        lambda m: m.multinomial(m.tensor([0.2, 0.8]), 0),
        lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
        lambda m: m.multinomial(m.tensor([-1.0, 2.0]), 1),
        lambda m: m.multinomial(m.tensor([float("inf"), 2.0]), 1, True),
        lambda m: m.multinomial(m.tensor([[1.0, 2.0], [0.0, 0.0]]), 1),  # the second row's sum is 0
        lambda m: m.multinomial(m.tensor([[0.5, 0.5], [float("nan"), 1.0]]), 1),
        lambda m: m.multinomial(m.ones(2, 0), 1, True),  # rows of no categories
        lambda m: m.multinomial(m.tensor([1, 2]), 1),
        lambda m: m.multinomial(m.tensor(1.0), 1),
        lambda m: m.multinomial(m.ones(2, 2, 2), 1),
        lambda m: m.bernoulli(m.tensor([0.5, 2.0])),
        lambda m: m.bernoulli(m.tensor([1, 0])),
        lambda m: m.ones(2).bernoulli_(1.5),
        lambda m: m.poisson(m.tensor([1.0, -1.0])),
        lambda m: m.poisson(m.tensor([1, 2])),
        lambda m: m.randperm(-1),
        lambda m: m.randperm(3, requires_grad=True),
        lambda m: m.randint_like(m.ones(2), 5, 1),
        lambda m: m.ones(2).exponential_(0),
        lambda m: m.ones(2, dtype=m.int64).exponential_(),
        lambda m: m.ones(2).geometric_(1.5),
        lambda m: m.ones(2).log_normal_(1, 0),
        lambda m: m.ones(2).cauchy_(0, -1),
        lambda m: m.ones(2).random_(3, 1),
        lambda m: m.ones(2).uniform_(2, 1),
        lambda m: m.rand(2, device="cuda"),
    ],
)
def test_bad_arguments_fail_as_in_pytorch(fg, torch, program):
    same_error(fg, torch, program)


def test_empty_and_degenerate_draws(fg, torch):
    def program(lib):
        g = lib.Generator().manual_seed(0)
        return [
            list(lib.multinomial(lib.ones(0, 3), 1, generator=g).shape),
            lib.multinomial(lib.tensor([1.0, 0.0, 0.0]), 3, generator=g).tolist()[0],
            lib.randperm(0).tolist(),
            lib.bernoulli(lib.tensor([0.0, 1.0]), generator=g).tolist(),
            lib.ones(3, dtype=lib.bool).random_(generator=g).dtype == lib.bool,
            lib.randint_like(lib.ones(2), 1, 2).tolist(),
        ]

    same_on_both(fg, torch, program)


def test_draws_have_their_distributions_properties(fg):
    """Fixed seeds: each property is checked on the same numbers every run."""
    g = fg.Generator().manual_seed(2024)
    p = fg.tensor([[0.0, 3.0, 1.0, 0.0, 6.0]] * 200)
    without = fg.multinomial(p, 3, generator=g).numpy()
    assert all(len(set(row)) == 3 for row in without)  # distinct categories per row
    assert set(without[:, :2].ravel()) <= {1, 2, 4}  # the 3 positive categories come first
    with_replacement = fg.multinomial(p[0], 20000, True, generator=g).numpy()
    frequencies = np.bincount(with_replacement, minlength=5) / 20000
    assert frequencies[[0, 3]].tolist() == [0, 0] and np.allclose(frequencies, [0, 0.3, 0.1, 0, 0.6], atol=0.02)
    assert sorted(fg.randperm(50, generator=g).tolist()) == list(range(50))
    assert abs(fg.bernoulli(fg.full((20000,), 0.25), generator=g).mean().item() - 0.25) < 0.02
    assert abs(fg.empty(20000).exponential_(4.0, generator=g).mean().item() - 0.25) < 0.01
    geometric = fg.empty(20000, dtype=fg.int64).geometric_(0.5, generator=g)
    assert geometric.min().item() == 1 and abs(geometric.double().mean().item() - 2.0) < 0.05
    drawn = fg.empty(1000, dtype=fg.int64).random_(-3, 4, generator=g)
    assert set(drawn.tolist()) == set(range(-3, 4))
    assert 0 <= fg.empty(1000).random_(generator=g).min().item() and fg.empty(1000).random_(generator=g).max() <= 2**24


def test_shape_rules_of_the_random_ops(fg):
    """Their op-table rows name shape/dtype rules (fastgrad._meta), checked here on real draws."""
    rows = {row.name: row for row in _optable.OPS}
    p = fg.tensor([[0.1, 0.9], [0.5, 0.5], [1.0, 0.0]])
    calls = [("multinomial", (p, 3, True)), ("multinomial", (p[0], 1)), ("bernoulli", (p,)), ("poisson", (p,))]
    calls += [(name, (fg.empty(2, 3),)) for name in ["uniform_", "normal_", "bernoulli_", "exponential_", "random_"]]
    for name, args in calls:
        result = getattr(fg, name)(*args) if hasattr(fg, name) else getattr(args[0], name)(*args[1:])
        assert getattr(_meta, rows[name].meta)(*args) == (tuple(result.shape), result.dtype), name
