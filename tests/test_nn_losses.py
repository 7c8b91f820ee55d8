"""The losses of torch.nn beyond the regression and cross-entropy ones (tests/test_functional.py),
against PyTorch: values, gradients and warnings of every reduction and the main options, through
the functions and the modules; legacy size_average/reduce flags; reprs and buffers; errors.

A case is a function of (t, *inputs) run on both libraries with the same numpy data; inputs made
by `grad` require grad, and the output is backpropagated with the same upstream gradient.
Kinks are hit exactly (hinges at 0, inputs of 0 and 1 for BCE), where the gradients must agree too.
"""

import inspect
import warnings

import numpy as np
import pytest

from op_helpers import rng_for, to_numpy
from oracle_helpers import same_error
from semantics_helpers import strip_module

REDUCTIONS = ("none", "mean", "sum")


def grad(make):
    return ("grad", make)


def const(make):
    return ("const", make)


def index(values):
    return ("index", lambda rng: np.array(values))


def uniform(shape, low=-2.0, high=2.0):
    return lambda rng: rng.uniform(low, high, size=shape)


def signs(shape):
    return lambda rng: rng.choice([-1.0, 1.0], size=shape)


def fixed(values):
    return lambda rng: np.array(values, dtype=float)


PROBABILITIES = uniform((3, 4), 0.05, 0.95)
# BCE at the ends of [0, 1] and below exp(-100), where PyTorch clamps the logs
BCE_EDGES = fixed([0.0, 1.0, 0.0, 1.0, 0.5, 1e-50])
# integers: differences of 1 put the margin losses' hinges exactly at 0
LEVELS = fixed([[0.0, 1.0, 2.0, 1.0, 3.0], [2.0, 2.0, 0.5, 1.0, 0.0], [1.0, 0.0, 0.0, 2.0, 1.0]])
LABELS = index([[3, 0, -1, 1, 2], [1, 1, 4, -1, 0], [0, 1, 2, 3, 4]])  # stop at -1; a repeated label
DISTANCE = [lambda t, a, b: (a - b).abs().sum(-1)]  # a custom distance for TripletMarginWithDistanceLoss


def _by_reduction(name, fn, specs):
    return {f"{name} {r}": (lambda t, *xs, r=r: fn(t, *xs, reduction=r), specs) for r in REDUCTIONS}


def F(t):
    return t.nn.functional


CASES = {  # id: (fn(t, *inputs), input specs)
    # binary cross entropy (the target's gradient too)
    **_by_reduction(
        "bce",
        lambda t, x, y, **kw: F(t).binary_cross_entropy(x, y, **kw),
        [grad(PROBABILITIES), grad(uniform((3, 4), 0, 1))],
    ),
    **_by_reduction(
        "bce weight",
        lambda t, x, y, w, **kw: F(t).binary_cross_entropy(x, y, w, **kw),
        [grad(PROBABILITIES), const(uniform((3, 4), 0, 1)), const(uniform((4,), 0.5, 2))],
    ),
    "bce edges": (
        lambda t, x, y: F(t).binary_cross_entropy(x, y, reduction="none"),
        [grad(BCE_EDGES), grad(fixed([1.0, 0.0, 0.0, 1.0, 1.0, 0.3]))],
    ),
    "BCELoss weight": (
        lambda t, x, y, w: t.nn.BCELoss(w, reduction="sum")(x, y),
        [grad(PROBABILITIES), const(uniform((3, 4), 0, 1)), const(uniform((3, 1), 0.5, 2))],
    ),
    # Kullback-Leibler divergence (a zero target: xlogy's 0 log 0 = 0)
    **{
        f"kl_div {r}": (
            lambda t, x, y, r=r: F(t).kl_div(x.log_softmax(1), y, reduction=r),
            [grad(uniform((3, 4))), grad(fixed([[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]))],
        )
        for r in (*REDUCTIONS, "batchmean")
    },
    "kl_div log_target batchmean": (
        lambda t, x, y: F(t).kl_div(x, y.log_softmax(1), reduction="batchmean", log_target=True),
        [grad(uniform((3, 4))), grad(uniform((3, 4)))],
    ),
    "KLDivLoss log_target": (
        lambda t, x, y: t.nn.KLDivLoss(reduction="sum", log_target=True)(x, y),
        [grad(uniform((3, 4))), grad(uniform((3, 4)))],
    ),
    # Poisson negative log likelihood (targets above and below 1 for the Stirling term)
    **_by_reduction(
        "poisson",
        lambda t, x, y, **kw: F(t).poisson_nll_loss(x, y, **kw),
        [grad(uniform((3, 4))), const(uniform((3, 4), 0, 4))],
    ),
    "poisson full rates": (
        lambda t, x, y: F(t).poisson_nll_loss(x, y, log_input=False, full=True, eps=1e-3, reduction="none"),
        [
            grad(uniform((3, 4), 0.1, 3)),
            grad(fixed([[0.0, 0.5, 1.0, 1.5], [2.0, 3.0, 4.0, 7.0], [1.2, 0.9, 5.0, 2.5]])),
        ],
    ),
    "PoissonNLLLoss full": (
        lambda t, x, y: t.nn.PoissonNLLLoss(full=True)(x, y),
        [grad(uniform((3, 4))), const(uniform((3, 4), 0, 4))],
    ),
    # Gaussian negative log likelihood: var per element, one dim short, one dim of 1, a number
    **_by_reduction(
        "gaussian",
        lambda t, x, y, v, **kw: F(t).gaussian_nll_loss(x, y, v, **kw),
        [grad(uniform((3, 4))), grad(uniform((3, 4))), grad(uniform((3, 4), 0.1, 2))],
    ),
    "gaussian var one dim short, full": (
        lambda t, x, y, v: F(t).gaussian_nll_loss(x, y, v, full=True),
        [grad(uniform((3, 4))), grad(uniform((3, 4))), grad(uniform((3,), 0.1, 2))],
    ),
    "gaussian var broadcast, clamped by eps": (
        lambda t, x, y, v: F(t).gaussian_nll_loss(x, y, v, eps=0.05, reduction="none"),
        [grad(uniform((3, 4))), grad(uniform((3, 4))), grad(fixed([[0.01], [0.5], [0.0]]))],
    ),
    "GaussianNLLLoss float var": (
        lambda t, x, y: t.nn.GaussianNLLLoss(full=True, reduction="sum")(x, y, 0.7),
        [grad(uniform((3, 4))), grad(uniform((3, 4)))],
    ),
    # margin ranking: differences equal to the margin hit the hinge at 0
    **_by_reduction(
        "margin_ranking",
        lambda t, a, b, y, **kw: F(t).margin_ranking_loss(a, b, y, margin=0.5, **kw),
        [grad(fixed([1.0, 2.0, 0.5, -1.0, 3.0])), grad(fixed([0.5, 2.5, 0.5, 0.0, 1.0])), const(signs((5,)))],
    ),
    "MarginRankingLoss": (
        lambda t, a, b, y: t.nn.MarginRankingLoss()(a, b, y),
        [grad(uniform((6,))), grad(uniform((6,))), const(signs((6,)))],
    ),
    # hinge embedding: inputs equal to the margin where the target is -1
    **_by_reduction(
        "hinge_embedding",
        lambda t, x, y, **kw: F(t).hinge_embedding_loss(x, y, **kw),
        [grad(fixed([[1.0, 0.5, -0.2], [1.0, 2.0, 0.3]])), const(fixed([[-1.0, -1.0, -1.0], [1.0, -1.0, 1.0]]))],
    ),
    "HingeEmbeddingLoss margin": (
        lambda t, x, y: t.nn.HingeEmbeddingLoss(margin=0.3)(x, y),
        [grad(uniform((3, 4), 0, 1)), const(signs((3, 4)))],
    ),
    # multi-label margin
    **_by_reduction(
        "multilabel_margin", lambda t, x, y, **kw: F(t).multilabel_margin_loss(x, y, **kw), [grad(LEVELS), LABELS]
    ),
    "multilabel_margin vector": (
        lambda t, x, y: F(t).multilabel_margin_loss(x, y, reduction="none"),
        [grad(uniform((4,))), index([2, 0, -1, 3])],
    ),
    "MultiLabelMarginLoss": (lambda t, x, y: t.nn.MultiLabelMarginLoss()(x, y), [grad(uniform((3, 5))), LABELS]),
    # soft margin
    **_by_reduction(
        "soft_margin",
        lambda t, x, y, **kw: F(t).soft_margin_loss(x, y, **kw),
        [grad(uniform((3, 4))), const(signs((3, 4)))],
    ),
    "SoftMarginLoss": (lambda t, x, y: t.nn.SoftMarginLoss()(x, y), [grad(uniform((5,))), const(signs((5,)))]),
    # multi-label soft margin (log-sigmoid at exactly 0)
    **_by_reduction(
        "multilabel_soft_margin",
        lambda t, x, y, w, **kw: F(t).multilabel_soft_margin_loss(x, y, w, **kw),
        [
            grad(fixed([[0.0, 1.5, -2.0, 30.0], [-40.0, 0.5, 0.0, -1.0], [1.0, -0.5, 2.0, 0.25]])),
            grad(fixed([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])),
            const(uniform((4,), 0.5, 2)),
        ],
    ),
    "MultiLabelSoftMarginLoss": (
        lambda t, x, y: t.nn.MultiLabelSoftMarginLoss()(x, y),
        [grad(uniform((2, 3))), const(fixed([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))],
    ),
    # cosine embedding (a margin the similarities cross)
    **_by_reduction(
        "cosine_embedding",
        lambda t, a, b, y, **kw: F(t).cosine_embedding_loss(a, b, y, margin=-0.2, **kw),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), const(fixed([1.0, -1.0, -1.0, 1.0]))],
    ),
    "cosine_embedding vector": (
        lambda t, a, b, y: F(t).cosine_embedding_loss(a, b, y),
        [grad(uniform((3,))), grad(uniform((3,))), const(fixed(-1.0))],
    ),
    "CosineEmbeddingLoss margin": (
        lambda t, a, b, y: t.nn.CosineEmbeddingLoss(margin=0.1, reduction="sum")(a, b, y),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), const(fixed([1.0, -1.0, -1.0, -1.0]))],
    ),
    # multi-class margin: p, margin, class weights
    **_by_reduction(
        "multi_margin",
        lambda t, x, y, **kw: F(t).multi_margin_loss(x, y, **kw),
        [grad(LEVELS), index([4, 0, 3])],
    ),
    "multi_margin p2 weight": (
        lambda t, x, y, w: F(t).multi_margin_loss(x, y, p=2, margin=0.5, weight=w, reduction="none"),
        [grad(uniform((3, 5))), index([4, 0, 3]), const(uniform((5,), 0.5, 2))],
    ),
    "multi_margin vector": (
        lambda t, x, y: F(t).multi_margin_loss(x, y, reduction="none"),
        [grad(uniform((4,))), index(2)],
    ),
    "MultiMarginLoss": (
        lambda t, x, y, w: t.nn.MultiMarginLoss(p=2, weight=w, reduction="sum")(x, y),
        [grad(LEVELS), index([1, 2, 3]), const(uniform((5,), 0.5, 2))],
    ),
    # triplet margin
    **_by_reduction(
        "triplet_margin",
        lambda t, a, p, n, **kw: F(t).triplet_margin_loss(a, p, n, **kw),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
    "triplet_margin p1 swap": (
        lambda t, a, p, n: F(t).triplet_margin_loss(a, p, n, margin=2.0, p=1, eps=1e-3, swap=True, reduction="none"),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
    "TripletMarginLoss swap": (
        lambda t, a, p, n: t.nn.TripletMarginLoss(margin=1.5, p=3, swap=True)(a, p, n),
        [grad(uniform((5, 2))), grad(uniform((5, 2))), grad(uniform((5, 2)))],
    ),
    **_by_reduction(
        "triplet_distance",
        lambda t, a, p, n, **kw: F(t).triplet_margin_with_distance_loss(a, p, n, **kw),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
    "triplet_distance custom swap": (
        lambda t, a, p, n: F(t).triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda x1, x2: DISTANCE[0](t, x1, x2), margin=3.0, swap=True
        ),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
    "TripletMarginWithDistanceLoss": (
        lambda t, a, p, n: t.nn.TripletMarginWithDistanceLoss(swap=True, reduction="none")(a, p, n),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
    # the legacy size_average / reduce flags (with their warning)
    "bce legacy": (
        lambda t, x, y: F(t).binary_cross_entropy(x, y, size_average=False),
        [grad(PROBABILITIES), const(uniform((3, 4), 0, 1))],
    ),
    "kl_div legacy batchmean": (
        lambda t, x, y: F(t).kl_div(x, y, reduce=True, reduction="batchmean"),
        [grad(uniform((3, 4))), const(uniform((3, 4), 0, 1))],
    ),
    "poisson legacy": (
        lambda t, x, y: F(t).poisson_nll_loss(x, y, reduce=False),
        [grad(uniform((3, 4))), const(uniform((3, 4), 0, 4))],
    ),
    "margin_ranking legacy": (
        lambda t, a, b, y: t.nn.MarginRankingLoss(size_average=False, reduce=True)(a, b, y),
        [grad(uniform((5,))), grad(uniform((5,))), const(signs((5,)))],
    ),
    "multi_margin legacy": (
        lambda t, x, y: F(t).multi_margin_loss(x, y, size_average=True, reduce=False),
        [grad(uniform((3, 5))), index([0, 4, 2])],
    ),
    "multilabel_soft_margin legacy": (
        lambda t, x, y: t.nn.MultiLabelSoftMarginLoss(reduce=False)(x, y),
        [grad(uniform((2, 3))), const(fixed([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))],
    ),
    "NLLLoss2d (deprecated)": (
        lambda t, x, y: t.nn.NLLLoss2d(ignore_index=1, reduction="sum")(x.log_softmax(1), y),
        [grad(uniform((2, 3, 2, 2))), index([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])],
    ),
    "margin_ranking integers": (
        lambda t, a, b, y: F(t).margin_ranking_loss(a.long(), b.long(), y.long()),
        [const(fixed([1.0, 2.0, -1.0])), const(fixed([1.0, -1.0, 3.0])), const(fixed([1.0, -1.0, -1.0]))],
    ),
    "soft_margin double target": (
        lambda t, x, y: F(t).soft_margin_loss(x, y.double(), reduction="none"),
        [grad(uniform((3, 4))), const(signs((3, 4)))],
    ),
    "hinge_embedding legacy": (
        lambda t, x, y: F(t).hinge_embedding_loss(x, y, size_average=False, reduce=False),
        [grad(uniform((3, 4))), const(signs((3, 4)))],
    ),
    "multilabel_margin legacy": (
        lambda t, x, y: F(t).multilabel_margin_loss(x, y, reduce=False),
        [grad(LEVELS), LABELS],
    ),
    "soft_margin legacy": (
        lambda t, x, y: F(t).soft_margin_loss(x, y, size_average=False),
        [grad(uniform((3, 4))), const(signs((3, 4)))],
    ),
    "multilabel_soft_margin function legacy": (
        lambda t, x, y: F(t).multilabel_soft_margin_loss(x, y, size_average=False),
        [grad(uniform((2, 3))), const(fixed([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))],
    ),
    "cosine_embedding legacy": (
        lambda t, a, b, y: F(t).cosine_embedding_loss(a, b, y, reduce=False),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), const(fixed([1.0, -1.0, -1.0, 1.0]))],
    ),
    "triplet legacy": (
        lambda t, a, p, n: F(t).triplet_margin_loss(a, p, n, size_average=False),
        [grad(uniform((4, 3))), grad(uniform((4, 3))), grad(uniform((4, 3)))],
    ),
}


def _run(t, case, dtype_name):
    """The case's output, its inputs' gradients and the warnings raised on the way."""
    fn, specs = CASES[case]
    rng = rng_for("losses", case)
    dtype = getattr(t, dtype_name)
    inputs = [
        t.tensor(make(rng), dtype=t.int64)
        if kind == "index"
        else t.tensor(make(rng), dtype=dtype, requires_grad=kind == "grad")
        for kind, make in specs
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(t, *inputs)
    if out.requires_grad:
        upstream = rng_for("upstream", case).uniform(0.5, 1.5, size=tuple(out.shape))
        out.backward(t.tensor(upstream, dtype=out.dtype))
    messages = [(w.category.__name__, strip_module(w.message)) for w in caught]
    return out, [x.grad for x in inputs if x.requires_grad], messages


TOLERANCES = {"float32": dict(rtol=4e-6, atol=5e-7), "float64": dict(rtol=1e-12, atol=1e-14)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(fg, torch, case, dtype):
    out, grads, messages = _run(fg, case, dtype)
    expected_out, expected_grads, expected_messages = _run(torch, case, dtype)
    assert messages == expected_messages
    assert strip_module(out.dtype) == strip_module(expected_out.dtype) and out.shape == expected_out.shape
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected_out), **TOLERANCES[dtype], err_msg="values")
    assert len(grads) == len(expected_grads)
    for got, expected in zip(grads, expected_grads):
        assert (got is None) == (expected is None)
        if got is not None:
            np.testing.assert_allclose(to_numpy(got), to_numpy(expected), **TOLERANCES[dtype], err_msg="gradient")


@pytest.mark.parametrize(
    "case", ["multilabel_soft_margin sum", "bce weight mean", "bce edges", "soft_margin sum", "kl_div sum"]
)
def test_second_derivatives_match_torch(fg, torch, case):
    """Gradients of the input's gradient w.r.t. every differentiable input and the upstream gradient
    (the custom backwards are differentiable, kinks and edges included)."""

    def second(t):
        fn, specs = CASES[case]
        rng = rng_for("losses", case)
        inputs = [
            t.tensor(make(rng), dtype=t.int64 if kind == "index" else t.float64, requires_grad=kind == "grad")
            for kind, make in specs
        ]
        out = fn(t, *inputs)
        upstream = t.tensor(rng_for("upstream", case).uniform(0.5, 1.5, size=tuple(out.shape)), requires_grad=True)
        (g,) = t.autograd.grad(out, inputs[0], upstream, create_graph=True)
        wrt = [upstream] + [x for x in inputs if x.requires_grad]
        return [to_numpy(d) for d in t.autograd.grad((g * g).sum(), wrt)]

    for got, expected in zip(second(fg), second(torch), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


# ---- modules: reprs, buffers, the legacy flags' reductions


def _modules(t):
    nn = t.nn
    return [
        nn.BCELoss(),
        nn.BCELoss(t.ones(3), reduction="sum"),
        nn.KLDivLoss(reduction="batchmean", log_target=True),
        nn.PoissonNLLLoss(log_input=False, full=True, eps=1e-4),
        nn.GaussianNLLLoss(full=True, eps=1e-3, reduction="none"),
        nn.MarginRankingLoss(0.5),
        nn.HingeEmbeddingLoss(2.0),
        nn.MultiLabelMarginLoss(),
        nn.SoftMarginLoss(reduction="none"),
        nn.MultiLabelSoftMarginLoss(t.ones(2)),
        nn.CosineEmbeddingLoss(-0.5),
        nn.MultiMarginLoss(2, 0.5, t.ones(4)),
        nn.TripletMarginLoss(0.5, 1.0, 1e-3, True),
        nn.TripletMarginWithDistanceLoss(),
        nn.TripletMarginWithDistanceLoss(distance_function=nn.L1Loss(), margin=2.0, swap=True),
        nn.BCEWithLogitsLoss(pos_weight=t.ones(3)),
    ]


def _module_attributes(t):
    return [
        (repr(m), list(m.state_dict()), {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "training"})
        for m in _modules(t)
    ]


def test_modules_match_torch(fg, torch):
    ours, theirs = _module_attributes(fg), _module_attributes(torch)
    for (repr_, keys, attributes), (expected_repr, expected_keys, expected_attributes) in zip(ours, theirs):
        assert repr_ == expected_repr and keys == expected_keys
        assert {k: v for k, v in attributes.items() if k != "distance_function"} == {
            k: v for k, v in expected_attributes.items() if k != "distance_function"
        }


LEGACY = ["BCELoss", "KLDivLoss", "PoissonNLLLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss"]
LEGACY += ["SoftMarginLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MultiMarginLoss", "TripletMarginLoss"]


@pytest.mark.parametrize("flags", [dict(size_average=False), dict(reduce=False), dict(size_average=True, reduce=True)])
def test_legacy_flags_of_the_modules(fg, torch, flags):
    def reductions(t):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = [getattr(t.nn, name)(**flags).reduction for name in LEGACY]
        return result, [str(w.message) for w in caught]

    assert reductions(fg) == reductions(torch)


FUNCTIONS = ["binary_cross_entropy", "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss"]
FUNCTIONS += ["hinge_embedding_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss"]
FUNCTIONS += ["cosine_embedding_loss", "multi_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]
CLASSES = LEGACY + ["GaussianNLLLoss", "TripletMarginWithDistanceLoss", "NLLLoss2d"]


def test_signatures_match_torch(fg, torch):
    """Parameter names, kinds and defaults of the functions and of the modules' __init__ and forward."""

    def signature(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    for name in FUNCTIONS:
        assert signature(getattr(fg.nn.functional, name)) == signature(getattr(torch.nn.functional, name)), name
    for name in CLASSES:
        for method in ("__init__", "forward"):
            ours, theirs = (getattr(getattr(t.nn, name), method) for t in (fg, torch))
            assert signature(ours) == signature(theirs), f"{name}.{method}"


# ---- errors

ERRORS = {
    "bce target size": lambda F, t: F.binary_cross_entropy(t.full((2, 3), 0.5), t.zeros(3)),
    "bce input range": lambda F, t: F.binary_cross_entropy(t.tensor([0.5, 1.5]), t.zeros(2)),
    "bce target range": lambda F, t: F.binary_cross_entropy(t.tensor([0.5, 0.5]), t.tensor([0.0, -1.0])),
    "bce integers": lambda F, t: F.binary_cross_entropy(t.zeros(2, dtype=t.int64), t.zeros(2, dtype=t.int64)),
    "bce target dtype": lambda F, t: F.binary_cross_entropy(t.zeros(2), t.zeros(2, dtype=t.float64)),
    "bce weight grad": lambda F, t: F.binary_cross_entropy(t.zeros(2), t.zeros(2), t.ones(2, requires_grad=True)),
    "bce nan": lambda F, t: F.binary_cross_entropy(t.tensor([float("nan")]), t.zeros(1)),
    "bce reduction": lambda F, t: F.binary_cross_entropy(t.zeros(2), t.zeros(2), reduction="avg"),
    "bce module reduction": lambda F, t: t.nn.BCELoss(reduction="avg")(t.zeros(2), t.zeros(2)),
    "kl_div reduction": lambda F, t: F.kl_div(t.zeros(2), t.zeros(2), reduction="avg"),
    "kl_div integers": lambda F, t: F.kl_div(t.zeros(2), t.zeros(2, dtype=t.int64), reduction="sum"),
    "poisson reduction": lambda F, t: F.poisson_nll_loss(t.zeros(2), t.zeros(2), reduction="avg"),
    "gaussian negative var": lambda F, t: F.gaussian_nll_loss(t.zeros(2), t.zeros(2), t.tensor([1.0, -1.0])),
    "gaussian negative float var": lambda F, t: F.gaussian_nll_loss(t.zeros(2), t.zeros(2), -1.0),
    "gaussian var size": lambda F, t: F.gaussian_nll_loss(t.zeros(2, 3), t.zeros(2, 3), t.ones(3, 2)),
    "gaussian var two dims of 1": lambda F, t: F.gaussian_nll_loss(t.zeros(2, 3), t.zeros(2, 3), t.ones(1, 1)),
    "gaussian reduction": lambda F, t: F.gaussian_nll_loss(t.zeros(2), t.zeros(2), t.ones(2), reduction="avg"),
    "margin_ranking dims": lambda F, t: F.margin_ranking_loss(t.zeros(2), t.zeros(2), t.ones(1, 2)),
    "hinge reduction": lambda F, t: F.hinge_embedding_loss(t.zeros(2), t.ones(2), reduction="avg"),
    "multilabel_margin target size": lambda F, t: F.multilabel_margin_loss(t.zeros(2, 3), t.zeros(2, 2, dtype=t.int64)),
    "multilabel_margin vector target": lambda F, t: F.multilabel_margin_loss(t.zeros(3), t.zeros(2, dtype=t.int64)),
    "multilabel_margin empty": lambda F, t: F.multilabel_margin_loss(t.zeros(2, 0), t.zeros(2, 0, dtype=t.int64)),
    "multilabel_margin 3d": lambda F, t: F.multilabel_margin_loss(t.zeros(2, 3, 4), t.zeros(2, 3, 4, dtype=t.int64)),
    "multilabel_margin target range": lambda F, t: F.multilabel_margin_loss(t.zeros(2, 3), t.full((2, 3), 3)),
    "multilabel_margin target below -1": lambda F, t: F.multilabel_margin_loss(t.zeros(3), t.tensor([0, -2, 1])),
    "multilabel_margin float target": lambda F, t: F.multilabel_margin_loss(t.zeros(2, 3), t.zeros(2, 3)),
    "soft_margin target shape": lambda F, t: F.soft_margin_loss(t.zeros(3), t.zeros(2, 3)),
    "soft_margin integers": lambda F, t: F.soft_margin_loss(t.tensor([1, 2]), t.tensor([1, -1])),
    "soft_margin target grad": lambda F, t: F.soft_margin_loss(t.zeros(3), t.ones(3, requires_grad=True)),
    "multilabel_soft_margin reduction": lambda F, t: F.multilabel_soft_margin_loss(
        t.zeros(2, 3), t.zeros(2, 3), reduction="avg"
    ),
    "cosine_embedding 2d target": lambda F, t: F.cosine_embedding_loss(t.zeros(2, 3), t.zeros(2, 3), t.ones(2, 1)),
    "cosine_embedding 1d target": lambda F, t: F.cosine_embedding_loss(t.zeros(3), t.zeros(3), t.ones(3)),
    "cosine_embedding 0d target": lambda F, t: F.cosine_embedding_loss(t.zeros(2, 3), t.zeros(3), t.tensor(1.0)),
    "multi_margin p": lambda F, t: F.multi_margin_loss(t.zeros(2, 3), t.zeros(2, dtype=t.int64), p=3),
    "multi_margin weight dims": lambda F, t: F.multi_margin_loss(
        t.zeros(2, 3), t.zeros(2, dtype=t.int64), weight=t.ones(1, 3)
    ),
    "multi_margin target size": lambda F, t: F.multi_margin_loss(t.zeros(2, 3), t.zeros(3, dtype=t.int64)),
    "multi_margin target range": lambda F, t: F.multi_margin_loss(t.zeros(2, 3), t.tensor([0, 3])),
    "multi_margin float target": lambda F, t: F.multi_margin_loss(t.zeros(2, 3), t.zeros(2)),
    "multi_margin integers": lambda F, t: F.multi_margin_loss(t.zeros(2, 3, dtype=t.int64), t.zeros(2, dtype=t.int64)),
    "multi_margin weight size": lambda F, t: F.multi_margin_loss(
        t.zeros(2, 3), t.zeros(2, dtype=t.int64), weight=t.ones(2)
    ),
    "multi_margin weight dtype": lambda F, t: F.multi_margin_loss(
        t.zeros(2, 3), t.zeros(2, dtype=t.int64), weight=t.ones(3, dtype=t.float64)
    ),
    "multi_margin weight grad": lambda F, t: F.multi_margin_loss(
        t.zeros(2, 3), t.zeros(2, dtype=t.int64), weight=t.ones(3, requires_grad=True)
    ),
    "multi_margin empty": lambda F, t: F.multi_margin_loss(t.zeros(0), t.zeros(1, dtype=t.int64)),
    "MultiMarginLoss p": lambda F, t: t.nn.MultiMarginLoss(p=3),
    "MultiMarginLoss weight": lambda F, t: t.nn.MultiMarginLoss(weight=t.ones(2, 2)),
    "triplet margin": lambda F, t: F.triplet_margin_loss(t.zeros(2), t.zeros(2), t.zeros(2), margin=0),
    "triplet dims": lambda F, t: F.triplet_margin_loss(t.zeros(2, 3), t.zeros(3), t.zeros(2, 3)),
    "triplet reduction": lambda F, t: F.triplet_margin_loss(t.zeros(2), t.zeros(2), t.zeros(2), reduction="avg"),
    "TripletMarginLoss margin": lambda F, t: t.nn.TripletMarginLoss(margin=-1.0),
    "triplet_distance reduction": lambda F, t: F.triplet_margin_with_distance_loss(
        t.zeros(2), t.zeros(2), t.zeros(2), reduction="avg"
    ),
    "triplet_distance margin": lambda F, t: F.triplet_margin_with_distance_loss(
        t.zeros(2), t.zeros(2), t.zeros(2), margin=0.0
    ),
    "triplet_distance dims": lambda F, t: F.triplet_margin_with_distance_loss(t.zeros(2), t.zeros(1, 2), t.zeros(2)),
    "TripletMarginWithDistanceLoss margin": lambda F, t: t.nn.TripletMarginWithDistanceLoss(margin=0),
    "HuberLoss delta": lambda F, t: t.nn.HuberLoss(delta="1"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_match_torch(fg, torch, case):
    same_error(fg, torch, lambda t: ERRORS[case](t.nn.functional, t))


def test_multi_margin_loss_skips_nan_margins(fg, torch):
    """PyTorch's kernel adds a class's margin only when it tests > 0, so a NaN one adds nothing (nor a gradient)."""
    results = []
    for t in (fg, torch):
        x = t.tensor([[0.1, 0.2, float("nan")], [0.3, -1.0, 2.0]], requires_grad=True)
        loss = t.nn.functional.multi_margin_loss(x, t.tensor([2, 0]), p=2, reduction="none")
        loss.sum().backward()
        results.append((to_numpy(loss.detach()), to_numpy(x.grad)))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
