"""Random streams bit for bit PyTorch's (issue 19): after the same seed and the same calls, every
random function gives PyTorch 2.13's CPU values exactly (same bits, same dtype) and leaves the
generator in PyTorch's state (torch.get_rng_state()'s bytes), on both backends.

The table runs sizes around PyTorch's thresholds (the 16-value Box-Muller blocks, its redrawn tail)
and a few seeds; FASTGRAD_RNG_EXHAUSTIVE=1 runs every size 0..300, sizes up to 10**5 and seeds 0..50
(minutes). The reference backend runs the same table (with fewer seeds in the long run).
"""

import os

import numpy as np
import pytest

import fastgrad
import fastgrad.reference

EXHAUSTIVE = os.environ.get("FASTGRAD_RNG_EXHAUSTIVE") == "1"
SIZES = list(range(301)) + [1000, 4095, 4096, 4097, 10**5] if EXHAUSTIVE else [0, 1, 7, 8, 15, 16, 17, 33, 1000]
SEEDS = range(51) if EXHAUSTIVE else [0, 2**40 + 7]

# One call per function, as `lib` spells it (torch and both backends): lib, size n, generator g.
DRAWS = {
    "rand": lambda m, n, g: m.rand(n, generator=g),
    "rand_float64": lambda m, n, g: m.rand(n, generator=g, dtype=m.float64),
    "rand_like": lambda m, n, g: m.rand_like(m.zeros(n, 1)),
    "randn": lambda m, n, g: m.randn(n, generator=g),
    "randn_float64": lambda m, n, g: m.randn(1, n, generator=g, dtype=m.float64),
    "randn_like": lambda m, n, g: m.randn_like(m.zeros(n, dtype=m.float64)),
    "normal_": lambda m, n, g: m.empty(n).normal_(-1.5, 0.25, generator=g),
    "normal_float64_": lambda m, n, g: m.empty(n, dtype=m.float64).normal_(3.0, 7.0, generator=g),
    "normal_numbers": lambda m, n, g: m.normal(2.0, 0.5, (n,), generator=g),
    "normal_tensor_mean": lambda m, n, g: m.normal(m.arange(n, dtype=m.float32), 2.0, generator=g),
    "normal_tensor_std": lambda m, n, g: m.normal(-1.0, m.arange(n, dtype=m.float64), generator=g),
    "normal_tensors": lambda m, n, g: m.normal(m.ones(n), m.full((n,), 0.5), generator=g),
    "uniform_": lambda m, n, g: m.empty(n).uniform_(-3.7, 11.3, generator=g),
    "uniform_float64_": lambda m, n, g: m.empty(n, dtype=m.float64).uniform_(0.25, 0.75, generator=g),
    "randint": lambda m, n, g: m.randint(-5, 1000, (n,), generator=g),
    "randint_wide": lambda m, n, g: m.randint(-(2**40), 2**40, (n,), generator=g),
    "randint_like": lambda m, n, g: m.randint_like(m.zeros(n, dtype=m.int64), 3, 9),
    "random_int64": lambda m, n, g: m.empty(n, dtype=m.int64).random_(generator=g),
    "random_float32": lambda m, n, g: m.empty(n).random_(generator=g),
    "random_float64": lambda m, n, g: m.empty(n, dtype=m.float64).random_(generator=g),
    "random_bool": lambda m, n, g: m.empty(n, dtype=m.bool).random_(generator=g),
    "random_to": lambda m, n, g: m.empty(n, dtype=m.int64).random_(17, generator=g),
    "random_from_to_float32": lambda m, n, g: m.empty(n).random_(-4, 9, generator=g),
    "randperm": lambda m, n, g: m.randperm(n, generator=g),
    "bernoulli_scalar": lambda m, n, g: m.empty(n).bernoulli_(0.3, generator=g),
    "bernoulli_bool": lambda m, n, g: m.empty(n, dtype=m.bool).bernoulli_(0.7, generator=g),
    "bernoulli_tensor": lambda m, n, g: m.bernoulli(m.arange(n, dtype=m.float32) / max(n, 1), generator=g),
    "bernoulli_tensor_float64": lambda m, n, g: m.bernoulli(m.full((n,), 0.4, dtype=m.float64), generator=g),
    "bernoulli_into_int64": lambda m, n, g: m.empty(n, dtype=m.int64).bernoulli_(m.full((n,), 0.5), generator=g),
    "exponential_": lambda m, n, g: m.empty(n).exponential_(2.5, generator=g),
    "exponential_float64_": lambda m, n, g: m.empty(n, dtype=m.float64).exponential_(generator=g),
    "geometric_": lambda m, n, g: m.empty(n).geometric_(0.2, generator=g),
    "geometric_int64": lambda m, n, g: m.empty(n, dtype=m.int64).geometric_(0.6, generator=g),
    "log_normal_": lambda m, n, g: m.empty(n, dtype=m.float64).log_normal_(0.5, 0.75, generator=g),
    "cauchy_": lambda m, n, g: m.empty(n).cauchy_(1.0, 2.0, generator=g),
    "poisson": lambda m, n, g: m.poisson(m.arange(n, dtype=m.float32) % 37 * 0.75, generator=g),  # below 10 and above
    "multinomial": lambda m, n, g: m.multinomial(m.arange(1.0, n + 2), min(n + 1, 5), generator=g),
    "multinomial_rows": lambda m, n, g: m.multinomial(m.ones(3, n + 1), 1, generator=g),
    # one sample per row (the core's multinomial_one): float64 rows, and keys p / noise tied at 0
    "multinomial_rows_float64": lambda m, n, g: m.multinomial(
        m.arange(1.0, 3 * n + 4, dtype=m.float64).reshape(3, -1) % 4, 1, generator=g
    ),
    "multinomial_one_zeros": lambda m, n, g: m.multinomial((m.arange(n + 4.0) % 3 == 0).float(), 1, generator=g),
    # equal keys: the zero-probability categories once the others are drawn, in the order of ATen's topk
    "multinomial_ties": lambda m, n, g: m.multinomial((m.arange(n + 4.0) % 3 == 0).float(), n // 3 + 3, generator=g),
    "multinomial_replacement": lambda m, n, g: m.multinomial(m.arange(4.0), n + 1, True, generator=g),
    "multinomial_replacement_rows": lambda m, n, g: m.multinomial(
        (m.arange(3.0 * n + 3, dtype=m.float64).reshape(3, -1) + 1) % 5 * 0.3, 7, True, generator=g
    ),
    "uniform_onto_to": lambda m, n, g: m.empty(n).uniform_(2.0, 2.0000005, generator=g),  # rounds to `to`: `from`
}


def values(t):
    """A result as numpy (dtype and bits are compared; bfloat16, which numpy lacks, widened exactly)."""
    if not hasattr(t, "detach"):
        return np.asarray(t)
    return (t.detach().float() if str(t.dtype).endswith("bfloat16") else t.detach()).numpy()


def state_bytes(lib, generator=None):
    state = lib.get_rng_state() if generator is None else generator.get_state()
    return bytes(state.tolist())


def assert_same_stream(lib, torch, program, seed):
    """program(lib) after lib.manual_seed(seed): PyTorch's values, bit for bit, and its final state."""
    torch.manual_seed(seed)
    expected = [values(r) for r in program(torch)]
    expected_state = state_bytes(torch)
    lib.manual_seed(seed)
    got = [values(r) for r in program(lib)]
    for e, g in zip(expected, got, strict=True):
        assert e.dtype == g.dtype and e.shape == g.shape
        assert e.tobytes() == g.tobytes(), f"max difference {np.max(np.abs(e.astype(float) - g.astype(float)))}"
    assert state_bytes(lib) == expected_state


@pytest.mark.parametrize("backend", ["fastgrad", "reference"])
@pytest.mark.parametrize("name", DRAWS)
def test_draws_are_pytorchs(torch, name, backend):
    draw = DRAWS[name]
    lib = fastgrad if backend == "fastgrad" else fastgrad.reference
    # The same table on both backends; the pure-Python reference takes fewer seeds in the long run.
    for seed in SEEDS if lib is fastgrad else list(SEEDS)[:3]:
        # an explicit generator (seeded from the default one, as a sampler seeds its own) and the default
        assert_same_stream(
            lib,
            torch,
            lambda m: [r for n in SIZES for r in (draw(m, n, m.Generator().manual_seed(n)), draw(m, n, None))],
            seed,
        )


# float16 and bfloat16 as ATen's kernels draw them: float computations rounded to 16 bits, with their
# own normal blocks (a partial last block is new draws), uniform's bound (a value rounding to `to`
# becomes `from`), random_'s range (0..2**digits) and randint's bounds moved to representable ones.
SIXTEEN_BIT_DRAWS = {
    "rand": lambda m, n, g, d: m.rand(n, generator=g, dtype=d),
    "randn": lambda m, n, g, d: m.randn(n, generator=g, dtype=d),
    "normal_": lambda m, n, g, d: m.empty(n, dtype=d).normal_(0.1, 0.3, generator=g),
    "normal_tensor_std": lambda m, n, g, d: m.normal(-1.0, m.arange(n, dtype=d), generator=g),
    "normal_strided": lambda m, n, g, d: m.empty(n, 2, dtype=d).t().normal_(generator=g),
    "uniform_": lambda m, n, g, d: m.empty(n, dtype=d).uniform_(2.0, 2.01, generator=g),  # often rounds to `to`
    "randint": lambda m, n, g, d: m.randint(-5, 250, (n,), generator=g, dtype=d),
    "random_to": lambda m, n, g, d: m.empty(n, dtype=d).random_(-3000, 3000, generator=g),
    "random_": lambda m, n, g, d: m.empty(n, dtype=d).random_(generator=g),
    "bernoulli": lambda m, n, g, d: m.bernoulli((m.arange(n) / max(n, 1)).to(d), generator=g),
    "exponential_": lambda m, n, g, d: m.empty(n, dtype=d).exponential_(2.5, generator=g),
    "log_normal_": lambda m, n, g, d: m.empty(n, dtype=d).log_normal_(0.5, 0.75, generator=g),
    "poisson": lambda m, n, g, d: m.poisson((m.arange(n, dtype=m.float32) % 37 * 0.75).to(d), generator=g),
    "multinomial": lambda m, n, g, d: m.multinomial((m.arange(n + 1) % 7 + 1).to(d), min(n + 1, 3), generator=g),
    "multinomial_replacement": lambda m, n, g, d: m.multinomial((m.arange(n + 1) % 5).to(d), n + 2, True, generator=g),
    "xavier_normal_": lambda m, n, g, d: m.nn.init.xavier_normal_(m.empty(n + 1, 3, dtype=d)),
    "trunc_normal_": lambda m, n, g, d: m.nn.init.trunc_normal_(m.empty(n, dtype=d)),
}


@pytest.mark.filterwarnings("ignore:.* is out of bounds")  # random_to's bounds, outside +-2**digits on purpose
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", SIXTEEN_BIT_DRAWS)
def test_sixteen_bit_draws_are_pytorchs(fg, torch, name, dtype):
    draw = SIXTEEN_BIT_DRAWS[name]
    # sizes from 1: multinomial's rows must not be empty
    assert_same_stream(
        fg,
        torch,
        lambda m: [
            r
            for n in SIZES
            if n
            for r in (draw(m, n, m.Generator().manual_seed(n), getattr(m, dtype)), draw(m, n, None, getattr(m, dtype)))
        ],
        1,
    )


def test_reference_poisson_counts_are_the_cores():
    """Poisson counts by rejection (rates from 10) compare logarithms with lgamma(k + 1): the reference
    calls the C library's lgamma, as the core's std::lgamma does (CPython's math.lgamma differs from
    glibc's in the last bit for about half the integers), so both accept the same counts."""
    rates = np.arange(3000, dtype=np.float64) % 600 * 0.77
    counts = []
    for lib in (fastgrad, fastgrad.reference):
        out = np.empty_like(rates)
        lib.Generator().manual_seed(5)._engine.poisson_(out, rates)
        counts.append(out)
    assert counts[0].tobytes() == counts[1].tobytes()


def interleaved(m):
    """Calls of every kind one after another, on the default generator and an explicit one: each
    call must leave the stream where PyTorch's leaves it (a kept Box-Muller value included)."""
    g = m.Generator().manual_seed(11)
    return [
        m.randn(3),  # scalar Box-Muller: the fourth value is kept for the next normal draw
        m.rand(5, generator=g),
        m.randn(1, dtype=m.float64),  # the kept value
        m.randn(20, generator=g),
        m.randint(0, 7, (9,)),
        m.normal(0.0, 2.0, (5,), generator=g),
        m.empty(17).normal_(),
        m.randperm(12, generator=g),
        m.bernoulli(m.full((4, 4), 0.5)),
        m.multinomial(m.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 1.0]]), 2, generator=g),
        m.empty(3, dtype=m.float64).normal_(),
        m.randn(2, generator=g),
        m.empty(4, 5).t().uniform_(generator=g),  # in-place fills walk memory order
        m.empty(3, 4, 5).permute(2, 0, 1).normal_(),  # non-contiguous: the scalar normal path
        m.empty(6, 8)[:, ::2].exponential_(),
    ]


@pytest.mark.parametrize("seed", [0, 5, 2**63 + 1])
def test_interleaved_calls_match(fg, torch, seed):
    assert_same_stream(fg, torch, interleaved, seed)


def layers(m):
    """Default initialisation of layers, nn.init, dropout masks and data shuffling."""
    init = m.nn.init
    return [
        *m.nn.Linear(7, 5).parameters(),
        *m.nn.Conv2d(3, 4, 3).parameters(),
        *m.nn.Conv1d(2, 2, 5, bias=False).parameters(),
        *m.nn.Embedding(10, 4).parameters(),
        *m.nn.LSTM(4, 3).parameters(),
        *m.nn.GRU(3, 2).parameters(),
        *m.nn.MultiheadAttention(8, 2).parameters(),
        init.xavier_uniform_(m.empty(5, 6)),
        init.xavier_normal_(m.empty(5, 6), gain=2.0),
        init.kaiming_uniform_(m.empty(5, 6), a=0.1),
        init.kaiming_normal_(m.empty(4, 3, 2, 2), mode="fan_out"),
        init.trunc_normal_(m.empty(50)),  # more than 0.3 of the mass: normal draws, outliers redrawn
        init.trunc_normal_(m.empty(40, dtype=m.float64), 0.0, 1.0, 1.5, 3.0),  # a tail: uniform candidates tested
        init.sparse_(m.empty(6, 4), 0.5),
        m.nn.functional.dropout(m.ones(40), 0.3),
        m.nn.functional.dropout2d(m.ones(2, 6, 3, 3), 0.5),
        m.nn.functional.alpha_dropout(m.ones(30), 0.2, True),
        m.nn.Dropout(0.1)(m.ones(3, 8)),
        m.nn.functional.rrelu(m.arange(-6.0, 5.0), training=True),  # a slope for each value <= 0
        m.nn.functional.rrelu(m.arange(-3.0, 3.0, dtype=m.float64), 0.2, 0.9, training=True),
        m.tensor(m.utils.data.random_split(range(10), [3, 7])[0].indices),
        m.cat(list(m.utils.data.DataLoader(m.arange(10), batch_size=3, shuffle=True))),
    ]


def test_layers_init_dropout_and_shuffles_match(fg, torch):
    assert_same_stream(fg, torch, layers, 0)


def test_orthogonal_draws_the_same_stream(fg, torch):
    """orthogonal_ draws PyTorch's normals, then a QR factorisation: numpy's LAPACK and PyTorch's
    round differently (README: within 1e-6 here), but the generator ends where PyTorch's does."""
    torch.manual_seed(1)
    expected = torch.nn.init.orthogonal_(torch.empty(6, 10)).numpy()
    fg.manual_seed(1)
    got = fg.nn.init.orthogonal_(fg.empty(6, 10)).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert state_bytes(fg) == state_bytes(torch)


def test_states_load_across_libraries(fg, torch):
    """A state saved by torch loads in fastgrad and the other way round (the bytes are ATen's)."""
    torch.manual_seed(4)
    torch.randn(3)  # the kept second normal is part of the state
    fg.set_rng_state(fg.tensor(torch.get_rng_state().tolist(), dtype=fg.uint8))
    assert values(fg.randn(7, dtype=fg.float64)).tobytes() == torch.randn(7, dtype=torch.float64).numpy().tobytes()
    g = fg.Generator().manual_seed(9)
    fg.rand(700, generator=g)  # past a twist of the 624 words
    torch_generator = torch.Generator()
    torch_generator.set_state(torch.tensor(g.get_state().tolist(), dtype=torch.uint8))
    assert torch_generator.initial_seed() == g.initial_seed() == 9
    assert values(fg.rand(5, generator=g)).tobytes() == torch.rand(5, generator=torch_generator).numpy().tobytes()
