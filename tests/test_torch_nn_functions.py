"""PyTorch's top-level forms of nn.functional ops (fastgrad._nn_functions) against PyTorch's: ATen's
signatures (positional order, defaults, int reductions), values, node names and float64 gradients."""

import pytest

from oracle_helpers import same_error, same_on_both


def _data(m, *shape, seed=0):
    """Fixed float64 values (no generator: the same on both libraries)."""
    n = 1
    for size in shape:
        n *= size
    values = [((seed + 7 * i) % 11 - 5) / 4 for i in range(n)]
    return m.tensor(values, dtype=m.float64).reshape(shape).requires_grad_()


def _rounded(t):
    return [round(v, 10) for v in t.detach().reshape(-1).tolist()]


# Each call gets (m, x) with x a (2, 4, 6) float64 leaf, and returns a float64 tensor (or a pair).
CALLS = {
    "conv1d": lambda m, x: m.conv1d(x, _data(m, 3, 4, 3, seed=1), _data(m, 3, seed=2), 2, 1),
    "conv2d": lambda m, x: m.conv2d(x.unsqueeze(0), _data(m, 2, 2, 2, 3, seed=1), None, 1, 0, 1),
    "conv_transpose1d": lambda m, x: m.conv_transpose1d(x, _data(m, 4, 2, 3, seed=1), None, 2, 1, 1),
    "conv_transpose2d": lambda m, x: m.conv_transpose2d(x.unsqueeze(0), _data(m, 2, 1, 2, 2, seed=1), None, 2),
    "max_pool1d": lambda m, x: m.max_pool1d(x, 2),
    "max_pool2d": lambda m, x: m.max_pool2d(x, (2, 3), (1, 2), 1),
    "max_pool1d_with_indices": lambda m, x: m.max_pool1d_with_indices(x, 3, 2)[0],
    "avg_pool1d": lambda m, x: m.avg_pool1d(x, 3, 2, 1, True, False),
    "adaptive_avg_pool1d": lambda m, x: m.adaptive_avg_pool1d(x, 4),
    "adaptive_max_pool1d": lambda m, x: m.adaptive_max_pool1d(x, 4)[0],
    "layer_norm": lambda m, x: m.layer_norm(x, [6], _data(m, 6, seed=1), None, 1e-3, False),
    "group_norm": lambda m, x: m.group_norm(x, 2, _data(m, 4, seed=1), _data(m, 4, seed=2)),
    "instance_norm": lambda m, x: m.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False),
    "batch_norm": lambda m, x: m.batch_norm(
        x, _data(m, 4, seed=1), None, m.zeros(4, dtype=m.float64), m.ones(4, dtype=m.float64), True, 0.3, 1e-5, True
    ),
    "rms_norm": lambda m, x: m.rms_norm(x, [4, 6]),
    "embedding": lambda m, x: m.embedding(x[0], m.tensor([[1, 3], [3, 0]]), 3),
    "bilinear": lambda m, x: m.bilinear(x[0], x[1, :, :5], _data(m, 2, 6, 5, seed=1)),
    "celu": lambda m, x: m.celu(x, 0.5),
    "selu": lambda m, x: m.selu(x),
    "threshold": lambda m, x: m.threshold(x, 0.25, -2.0),
    "prelu": lambda m, x: m.prelu(x, _data(m, 4, seed=1)),
    "hardshrink": lambda m, x: m.hardshrink(x, 0.75),
    "binary_cross_entropy_with_logits": lambda m, x: m.binary_cross_entropy_with_logits(
        x, (x.detach() > 0).double(), None, _data(m, 6, seed=1).detach(), 2
    ),
    "cosine_embedding_loss": lambda m, x: m.cosine_embedding_loss(x[0], x[1], m.tensor([1, -1, 1, -1]), 0.1, 0),
    "hinge_embedding_loss": lambda m, x: m.hinge_embedding_loss(x, x.detach().sign(), 0.5, 1),
    "kl_div": lambda m, x: m.kl_div(x, x.detach().exp(), 1),
    "kl_div (log_target)": lambda m, x: m.kl_div(x, x.detach() * 2, 2, log_target=True),
    "margin_ranking_loss": lambda m, x: m.margin_ranking_loss(x[0], x[1], x[0].detach().sign(), 0.5, 7),
    "triplet_margin_loss": lambda m, x: m.triplet_margin_loss(x[0], x[1], x[0] * x[1], 1.0, 3.0, 1e-6, True, 1),
    "poisson_nll_loss": lambda m, x: m.poisson_nll_loss(x, x.detach().abs(), True, True, 1e-8, 2),
    "pixel_shuffle": lambda m, x: m.pixel_shuffle(x.reshape(1, 8, 3, 2), 2),
    "pixel_unshuffle": lambda m, x: m.pixel_unshuffle(x, 2),
    "channel_shuffle": lambda m, x: m.channel_shuffle(x, 2),
    "pdist": lambda m, x: m.pdist(x[0], 2),
    "pdist (p=1.5)": lambda m, x: m.pdist(x[1], 1.5),
    # rows whose largest differences are single: at ties PyTorch's pdist gives each the whole gradient,
    # the norm it is composed of shares it out
    "pdist (p=inf)": lambda m, x: m.pdist(x[1, :3] * m.tensor([1.0, 1.1, 1.3, 1.7, 1.9, 2.3], dtype=m.float64), 1e400),
    "constant_pad_nd": lambda m, x: m.constant_pad_nd(x, [1, 2, 0, 1], 0.5),
}


# nn.functional's ops composed of others, whose last node is not PyTorch's single one (PixelShuffleBackward0,
# ChannelShuffleBackward0, PdistBackward0, ConstantPadNdBackward0, BinaryCrossEntropyWithLogitsBackward0)
COMPOSED = {"pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "pdist", "pdist (p=1.5)", "pdist (p=inf)"}
COMPOSED |= {"constant_pad_nd", "binary_cross_entropy_with_logits"}


@pytest.mark.parametrize("name", CALLS)
def test_values_nodes_and_gradients(fg, torch, name):
    def program(m):
        x = _data(m, 2, 4, 6)
        y = CALLS[name](m, x)
        weights = m.arange(float(y.numel()), dtype=m.float64).reshape(y.shape).cos()
        (y * weights).sum().backward()
        return list(y.shape), name in COMPOSED or y.grad_fn.name(), _rounded(y), _rounded(x.grad)

    same_on_both(fg, torch, program)


def test_in_place_forms(fg, torch):
    def program(m):
        results = []
        for call in (
            lambda x: m.celu_(x, 2.0),
            lambda x: m.selu_(x),
            lambda x: m.threshold_(x, 0.0, 5.0),
            lambda x: m.dropout_(x, 0.0, True),
            lambda x: m.alpha_dropout_(x, 0.5, False),
            lambda x: m.feature_dropout_(x, 0.5, False),
            lambda x: m.feature_alpha_dropout_(x, 1.0, False),
        ):
            x = _data(m, 2, 3) * 1
            results.append((call(x) is x, _rounded(x)))
        return results

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", ["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"])
def test_dropout_draws_as_pytorch(fg, torch, name):
    def program(m):
        m.manual_seed(3)
        x = _data(m, 4, 5, 2)
        y = getattr(m, name)(x, 0.4, True)
        y.sum().backward()
        return _rounded(y), _rounded(x.grad), _rounded(getattr(m, name)(x, 0.4, False))

    same_on_both(fg, torch, program)


def test_rrelu_draws_from_the_generator_given(fg, torch):
    def program(m):
        m.manual_seed(1)
        generator = m.Generator().manual_seed(5)
        x = _data(m, 3, 4)
        y = m.rrelu(x, 0.1, 0.6, True, generator)
        y.sum().backward()
        z = x.detach() * 1
        m.rrelu_(z, 0.2, 0.3, True, generator=generator)
        evaluation = m.rrelu(x)
        return _rounded(y), _rounded(x.grad), _rounded(z), _rounded(evaluation), y.grad_fn.name(), _rounded(m.rand(2))

    same_on_both(fg, torch, program)


def test_max_pool1d_with_indices_and_adaptive_max_pool1d_return_indices(fg, torch):
    def program(m):
        x = _data(m, 1, 2, 7)
        return [r.tolist() for r in m.max_pool1d_with_indices(x, 3) + m.adaptive_max_pool1d(x, 3)]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.dropout(m.ones(2), 1.5, True),
        lambda m: m.feature_dropout(m.ones(3), 0.5, True),
        lambda m: m.channel_shuffle(m.ones(2, 6, 3), 4),
        lambda m: m.channel_shuffle(m.ones(2, 6, 3), 0),
        lambda m: m.channel_shuffle(m.ones(3), 1),
        lambda m: m.pdist(m.ones(3)),
        lambda m: m.pdist(m.ones(3, 2), -1.0),
        lambda m: m.pdist(m.ones(3, 2, dtype=m.int64)),
        lambda m: m.kl_div(m.ones(2, dtype=m.int64), m.ones(2)),
    ],
)
def test_errors(fg, torch, call):
    same_error(fg, torch, call)


def test_pdist_of_fewer_than_two_rows_and_the_functional_names(fg, torch):
    def program(m):
        return (
            list(m.pdist(m.ones(1, 3)).shape),
            m.nn.functional.pdist is m.pdist,
            m.channel_shuffle(m.arange(12).reshape(1, 6, 2), 3).tolist(),
        )

    same_on_both(fg, torch, program)


def test_losses_called_without_a_reduction_reduce_nothing(fg, torch):
    """As PyTorch's binding reads ATen's default."""

    def program(m):
        x, sign = _data(m, 4, 6), _data(m, 4, 6, seed=3).detach().sign()
        losses = [
            m.hinge_embedding_loss(x, sign),
            m.cosine_embedding_loss(x, x * 2, m.tensor([1, -1, 1, 1])),
            m.margin_ranking_loss(x, x * 2, sign),
            m.triplet_margin_loss(x, x * 2, x * 3),
            m.binary_cross_entropy_with_logits(x, (x.detach() > 0).double()),
            m.kl_div(x, x.detach().exp()),
        ]
        return [_rounded(loss) for loss in losses]

    same_on_both(fg, torch, program)
