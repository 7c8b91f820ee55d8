"""Reductions and set ops of issue 13 against PyTorch: the values, dtypes, node names and errors the
op cases (tests/op_cases.py) do not reach: infinities, integer inputs, empty inputs, options."""

import pytest

from oracle_helpers import same_error, same_on_both

INF = float("inf")


def test_logsumexp_is_stable_and_takes_infinities(fg, torch):
    def program(m):
        x = m.tensor([[-INF, -INF, -INF], [1e30, 1e30, 0.0], [INF, 1.0, 2.0], [100.0, 101.0, 99.0]])
        return m.logsumexp(x, 1), x.logsumexp(-1, keepdim=True)

    same_on_both(fg, torch, program)


def test_logsumexp_of_integers_empty_and_0d(fg, torch):
    def program(m):
        empty = m.zeros(0, 3)
        return [m.logsumexp(m.arange(3), 0), m.logsumexp(empty, 0), m.logsumexp(empty, 1), m.tensor(2.0).logsumexp(0)]

    same_on_both(fg, torch, program)


def test_logsumexp_gradient_and_out(fg, torch):
    def program(m):
        x = m.tensor([[0.5, -1.0, 2.0], [3.0, 3.0, -INF]], requires_grad=True)
        y = m.logsumexp(x, 1)
        y.backward(m.tensor([1.0, 2.0]))
        out = m.zeros(2)
        m.logsumexp(x.detach(), 1, out=out)
        return y, y.grad_fn.name(), x.grad, out

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [lambda m: m.logsumexp(m.ones(2, 3), (0, 0)), lambda m: m.logsumexp(m.ones(2, 3), 2)],
    ids=["repeated dim", "dim out of range"],
)
def test_logsumexp_errors(fg, torch, program):
    same_error(fg, torch, program)


NAN = float("nan")


def nan_marked(t):
    """t with its NaNs as -7 (assert_same compares plain floats, and NaN != NaN)."""
    return t.detach().masked_fill(t != t, -7.0)


def test_nansum_nanmean_skip_nans(fg, torch):
    def program(m):
        x = m.tensor([[1.0, NAN, 2.0], [NAN, NAN, NAN]], requires_grad=True)
        total, mean = m.nansum(x, 1), x.nanmean(1, keepdim=True)
        (total.sum() + mean[0].sum()).backward()
        return (
            total,
            nan_marked(mean),
            nan_marked(x.grad),
            total.grad_fn.name(),
            mean.grad_fn.name(),
            m.nanmean(x.detach()),
        )

    same_on_both(fg, torch, program)


def test_nansum_dtypes_and_empty(fg, torch):
    def program(m):
        ints, empty = m.tensor([1, 2, 3]), m.zeros(0, 3)
        return [
            m.nansum(ints),
            m.nansum(ints > 1),
            m.nansum(ints, dtype=m.float32),
            m.nansum(m.tensor([1.0, NAN]), 0, True, dtype=m.float64),
            m.nansum(empty, 1),
            nan_marked(m.nanmean(empty, 0)),
            m.nanmean(m.tensor([[1.0, NAN]]), 1, dtype=m.float64),
        ]

    same_on_both(fg, torch, program)


def test_count_nonzero(fg, torch):
    def program(m):
        x = m.tensor([[0.0, 1.0], [2.0, 0.0], [NAN, 0.0]])
        return [m.count_nonzero(x), x.count_nonzero(0), m.count_nonzero(x, dim=(0, 1)), m.count_nonzero(x > 0, -1)]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.nanmean(m.tensor([1, 2])),
        lambda m: m.nanmean(m.tensor([1, 2]), dtype=m.float32),
        lambda m: m.count_nonzero(m.ones(2), 1),
        lambda m: m.nansum(m.ones(2), 2),
    ],
    ids=["nanmean of int64", "nanmean of int64 to float32", "count_nonzero dim", "nansum dim"],
)
def test_nan_reduction_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_aminmax_values_ties_and_gradient(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
        low, high = m.aminmax(x, dim=1)
        (low.sum() + 2 * high.sum()).backward()
        whole = x.aminmax(keepdim=True)
        ints = m.aminmax(m.tensor([1, 5, 2]))
        empty = tuple(m.aminmax(m.zeros(0, 3), dim=1))
        return low, high, x.grad, type(whole).__name__, whole.min, whole.max, tuple(ints), empty

    same_on_both(fg, torch, program)


def test_std_mean_var_mean_forms_and_gradients(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 3.0, 4.0], [2.0, 2.0, 2.0]], requires_grad=True)
        std, mean = m.std_mean(x, 1)
        (3 * std.sum() + mean.sum()).backward()  # the row of equal values: std 0, no gradient through it
        return [
            type(m.var_mean(x)).__name__,
            std,
            mean,
            x.grad,
            m.std_mean(x, False),
            m.var_mean(x, 1, True, True),
            m.var_mean(x, dim=(0, 1), correction=0, keepdim=True),
            m.std_mean(x, unbiased=False),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_var_mean_result_written_in_place(fg, torch, name):
    """var_mean's node saves no result (writing the variance in place is fine); std_mean's saves the std."""

    def program(m):
        x = m.tensor([[1.0, 3.0], [2.0, 5.0]], requires_grad=True)
        spread, mean = getattr(m, name)(x, 1)
        spread.mul_(2)
        (spread.sum() + mean.sum()).backward()
        return x.grad

    (same_on_both if name == "var_mean" else same_error)(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.aminmax(m.zeros(0, 3)),
        lambda m: m.aminmax(m.zeros(0, 3), dim=0),
        lambda m: m.aminmax(m.ones(2, 3), dim=(0, 1)),
        lambda m: m.aminmax(m.ones(2, 3), dim=2),
        lambda m: m.std_mean(m.tensor([1, 2])),
        lambda m: m.var_mean(m.tensor([1, 2]), 0),
    ],
    ids=["aminmax empty", "aminmax empty dim", "aminmax dim tuple", "aminmax dim", "std_mean int", "var_mean int"],
)
def test_aminmax_std_mean_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_numpy_names_for_dim_and_keepdim(fg, torch):
    """PyTorch's native ops take axis= for dim= and keepdims= for keepdim= (x.sum(axis=0, keepdims=True))."""

    def program(m):
        x = m.tensor([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0]])
        return [
            x.sum(axis=0, keepdims=True),
            m.mean(x, axis=1),
            x.amax(axis=(0, 1), keepdims=True),
            tuple(x.max(axis=1, keepdims=True)),
            m.var(x, axis=1, keepdims=True),
            x.argmax(axis=0),
            m.cumsum(x, axis=1),
            m.cat([x, x], axis=1),
            x.softmax(axis=0),
            m.logsumexp(x, axis=1, keepdims=True),
            tuple(m.var_mean(x, axis=0, keepdims=True)),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.ones(2, 3).sum(dim=0, axis=0),
        lambda m: m.norm(m.ones(2, 3), axis=0),
        lambda m: m.ones(2, 3).softmax(keepdims=True, dim=0),
        lambda m: m.split(m.ones(2, 3), 1, axis=0),
    ],
    ids=["both names", "norm (Python in PyTorch)", "keepdims of an op without keepdim", "split"],
)
def test_numpy_names_errors(fg, torch, program):
    error = same_error(fg, torch, program)
    assert isinstance(error, TypeError)


def test_cosine_similarity_broadcasts_clamps_and_promotes(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], requires_grad=True)
        c = m.nn.functional.cosine_similarity(x, m.tensor([1.0, -1.0, 2.0]), dim=1, eps=0.5)
        c.sum().backward()
        mixed = m.cosine_similarity(m.tensor([1, 2]), m.tensor([1.0, 2.5]), dim=0)
        return c, c.grad_fn.name(), x.grad, mixed, m.cosine_similarity(m.ones(2, 3), m.ones(3), dim=-1, eps=1e-3)

    same_on_both(fg, torch, program)


def test_dist_and_pairwise_distance_values_and_gradients(fg, torch):
    def program(m):
        results = []
        for p in [2, 0, 1, 1.5, 3, 0.5, INF, -INF]:
            x = m.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 2.0]], requires_grad=True)
            d = m.dist(x, m.tensor([1.0, -2.0, 0.5]), p)
            d.backward()
            results += [d, x.grad]
        x = m.zeros(3, requires_grad=True)  # the gradient at distance 0
        m.dist(x, m.zeros(3)).backward()
        results += [x.grad, m.pairwise_distance(m.tensor(1.0), m.tensor(3.0))]
        results += [
            m.pairwise_distance(m.tensor([1, 2]), m.tensor([1, 3])),
            m.pairwise_distance(m.ones(2, 3), m.ones(3), 0.0),
        ]
        return results

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.cosine_similarity(m.tensor([1, 2]), m.tensor([1, 2]), dim=0),
        lambda m: m.cosine_similarity(m.ones(3, 4), m.ones(2, 4)),
        lambda m: m.cosine_similarity(m.ones(3), m.ones(3)),
        lambda m: m.dist(m.tensor([1, 2]), m.tensor([1, 2])),
        lambda m: m.dist(m.ones(3), 2.0),
        lambda m: m.dist(m.ones(3), m.ones(2)),
    ],
    ids=["cosine of int64", "cosine shapes", "cosine dim", "dist of int64", "dist of a number", "dist shapes"],
)
def test_distance_errors(fg, torch, program):
    same_error(fg, torch, program)


@pytest.mark.parametrize("p", [2, "fro", None, 1, 3, 0.5, 0, -1, INF, -INF])
def test_norm_values_and_gradients_at_zeros(fg, torch, p):
    """torch.norm's vector norms, with PyTorch's gradients where elements or whole rows are 0."""

    def program(m):
        x = m.tensor([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, -1.0]], requires_grad=True)
        rows = x.norm(p, dim=1)
        rows.sum().backward()
        whole = m.norm(x.detach(), p, keepdim=True)
        return rows, x.grad, whole, rows.grad_fn.name()

    same_on_both(fg, torch, program)


def test_norm_fro_over_two_dims_and_dtype(fg, torch):
    def program(m):
        x = m.tensor([[3.0, 4.0], [0.0, 12.0]])
        return x.norm("fro", dim=(0, 1), keepdim=True), x.norm(dtype=m.float64), m.norm(x, 1, [0, 1])

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.ones(3).norm("nuc"),
        lambda m: m.ones(2, 2).norm("abc"),
        lambda m: m.ones(2, 2, dtype=m.int64).norm("nuc"),
        lambda m: m.ones(2, 2, dtype=m.int64).norm("fro"),
        lambda m: m.ones(2, 2).norm("nuc", dim=0),
        lambda m: m.ones(2, 2).norm("nuc", dim=(0, 0)),
        lambda m: m.ones(2, 2, 2).norm("nuc"),
        lambda m: m.ones(2).norm(dtype=m.int64),
        lambda m: m.tensor([1, 2]).norm(dtype=m.float64),
    ],
    ids=["nuc of 1-D", "unknown order", "nuc of int64", "fro of int64", "nuc dim", "nuc same dims", "nuc 3 dims"]
    + ["int64 dtype", "int64 input to float64"],
)
def test_norm_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_searchsorted_and_bucketize(fg, torch):
    def program(m):
        seq, values = m.tensor([1.0, 2.0, 2.0, 3.0, 5.0]), m.tensor([[0.0, 2.0, 4.0], [5.0, 6.0, NAN]])
        rows = m.tensor([[1, 3, 5], [2, 4, 6]])
        return [
            m.searchsorted(seq, values),
            m.searchsorted(seq, values, right=True),
            m.searchsorted(seq, values, side="right"),
            m.searchsorted(seq, values, side="right", right=False),
            m.searchsorted(seq, 2.0),
            m.searchsorted(rows, m.tensor([[3, 4], [3, 4]])),
            m.searchsorted(m.tensor([3.0, 1.0, 2.0]), m.tensor([2.5]), sorter=m.tensor([1, 2, 0])),
            m.searchsorted(m.tensor([1, 2, 3]), m.tensor([2.5])),
            m.searchsorted(m.tensor([1.0, NAN]), m.tensor([2.0, NAN])),
            m.searchsorted(m.zeros(0), m.tensor([2.0])),
            m.searchsorted(seq, values, out=m.zeros(2, 3, dtype=m.int64)),
            m.bucketize(values, seq),
            m.bucketize(3.0, seq, right=True),
            m.bucketize(m.tensor(3), seq),
        ]

    same_on_both(fg, torch, program)


def test_bincount_and_histc(fg, torch):
    def program(m):
        x = m.tensor([1, 3, 3, 0, 5])
        return [
            m.bincount(x),
            x.bincount(minlength=8),
            m.bincount(x, m.tensor([0.5, 1.0, 1.0, 2.0, 3.0])),
            m.bincount(x, m.tensor([1, 1, 1, 2, 3])),
            m.bincount(m.zeros(0, dtype=m.int64), minlength=2),
            *(m.bincount(x.to(dtype), m.tensor([0.5, 1.0, 1.0, 2.0, 3.0])) for dtype in (m.uint8, m.int8, m.int16)),
            m.bincount(x.int(), minlength=7),
            m.histc(m.tensor([1.0, 2.0, 1.0, 4.0]), bins=4),
            m.histc(m.tensor([1.0, 2.0, 1.0, 4.0, INF, NAN]), bins=4, min=0, max=3),
            m.histc(m.tensor([2.0, 2.0]), 3),
            m.tensor([1.0, 2.0]).histc(3, 2, 2),
            m.histc(m.zeros(0), 3),
            m.histc(m.tensor([0.1, 0.2, 0.3]), 3, 0.1, 0.3),
            m.histc(m.arange(100.0, dtype=m.float64) / 7, 13, 0.3, 9.1),
        ]

    same_on_both(fg, torch, program)


def test_histogram(fg, torch):
    def program(m):
        x = m.tensor([1.0, 2.0, 1.0, 4.0])
        results = [
            m.histogram(x, 4),
            x.histogram(m.tensor([0.0, 1.0, 2.5, 5.0])),
            m.histogram(x, 3, range=(0.0, 3.0)),
            m.histogram(x, 2, weight=m.tensor([1.0, 2.0, 3.0, 4.0]), density=True),
            m.histogram(m.tensor([2.0, 2.0]), 2),
            m.histogram(m.zeros(0), 2),
            m.histogram(x.double(), 2),
        ]
        return [type(results[0]).__name__] + [tuple(r) for r in results]

    same_on_both(fg, torch, program)


def test_unique_and_unique_consecutive(fg, torch):
    def program(m):
        x = m.tensor([3.0, 1.0, 3.0, NAN, NAN, 1.0, 2.0])
        rows = m.tensor([[1, 2], [0, 5], [1, 2], [0, 1]])
        return [
            nan_marked(m.unique(x)),
            tuple(nan_marked(t) for t in m.unique(x, return_inverse=True, return_counts=True)),
            m.unique(rows, dim=0, return_inverse=True, return_counts=True),
            rows.unique(dim=1),
            m.unique(m.tensor(3.0), return_inverse=True),
            m.unique(m.zeros(0, 3), dim=0, return_counts=True),
            m.unique(m.tensor([[2, 1], [1, 2]]), return_inverse=True),
            m.unique_consecutive(m.tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True, return_counts=True),
            rows.unique_consecutive(dim=0),
        ]

    same_on_both(fg, torch, program)


def test_counts_and_unique_have_no_derivative(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 2.0], [1.0, 2.0]], requires_grad=True)
        results = [m.unique(x), m.unique(x, dim=0), m.unique_consecutive(x), m.bincount(m.tensor([0, 1]), x[0])]
        results += [*m.histogram(x, 3), *m.histogram(x.detach(), m.tensor([0.0, 1.5, 2.0]), weight=x)]
        return [(t.requires_grad, t.grad_fn.name(), m.histc(x, 3).requires_grad) for t in results]

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.unique(m.ones(2, requires_grad=True)).sum().backward())
    same_error(fg, torch, lambda m: m.bincount(m.tensor([0, 1]), m.ones(2, requires_grad=True)).sum().backward())
    same_error(fg, torch, lambda m: m.histogram(m.ones(2, requires_grad=True), 2).hist.sum().backward())


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.searchsorted(m.ones(3), m.ones(2), side="left", right=True),
        lambda m: m.searchsorted(m.ones(3), m.ones(2), side="middle"),
        lambda m: m.searchsorted(m.ones(2, 3), m.ones(3)),
        lambda m: m.searchsorted(m.tensor(1.0), m.ones(2)),
        lambda m: m.searchsorted(m.ones(3), m.ones(2), sorter=m.tensor([0, 1])),
        lambda m: m.searchsorted(m.ones(3), m.ones(2), sorter=m.ones(3)),
        lambda m: m.searchsorted(m.ones(3), m.ones(2), sorter=m.tensor([0, 1, 9])),
        lambda m: m.bucketize(m.ones(2), m.ones(2, 3)),
        lambda m: m.bucketize(m.tensor([True]), m.tensor([True, False])),
        lambda m: m.bincount(m.tensor([-1, 2])),
        lambda m: m.bincount(m.tensor([[1]])),
        lambda m: m.bincount(m.tensor([1.0])),
        lambda m: m.bincount(m.tensor([1, 2]), m.ones(3)),
        lambda m: m.bincount(m.tensor([1, 2]), minlength=-1),
        lambda m: m.histc(m.tensor([1, 2]), 3),
        lambda m: m.histc(m.ones(2), 0),
        lambda m: m.histc(m.ones(2), 3, 3, 1),
        lambda m: m.histc(m.ones(2), 3, 0, INF),
        lambda m: m.histc(m.tensor([NAN]), 2),
        lambda m: m.histc(m.ones(2), 2.5),
        lambda m: m.histogram(m.tensor([1, 2]), 2),
        lambda m: m.histogram(m.ones(2), 2, range=(3.0, 1.0)),
        lambda m: m.histogram(m.ones(2), m.ones(1, 2)),
        lambda m: m.histogram(m.ones(2), 2, weight=m.ones(3)),
        lambda m: m.histogram(m.ones(2), m.ones(2, dtype=m.float64)),
        lambda m: m.histogram(m.tensor([INF]), 2),
        lambda m: m.unique(m.ones(2, 2), dim=2),
        lambda m: m.unique(m.tensor(3.0), dim=0),
        lambda m: m.unique(m.zeros(3, 0), dim=0),
    ],
    ids=["side and right", "side", "rows", "0-d boundaries", "sorter size", "sorter dtype", "sorter range"]
    + ["bucketize 2-D", "bucketize bool", "bincount negative", "bincount 2-D", "bincount float", "bincount weights"]
    + ["bincount minlength", "histc int64", "histc 0 bins", "histc min > max", "histc inf", "histc nan"]
    + ["histc float bins", "histogram int64", "histogram range", "histogram 2-D bins", "histogram weight"]
    + ["histogram bins dtype", "histogram inf", "unique dim", "unique 0-d dim", "unique 0-size"],
)
def test_search_count_unique_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_out_int32_needs_int32(fg):
    with pytest.raises(TypeError, match="int32"):
        fg.searchsorted(fg.ones(3), fg.ones(2), out_int32=True)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolations_and_gradients(fg, torch, interpolation):
    def program(m):
        x = m.tensor([[1.0, 5.0, 2.0, 8.0], [3.0, 7.0, 0.0, 4.0]], requires_grad=True)
        q = m.tensor([0.1, 0.5, 0.7, 0.25, 0.75, 1 / 6])
        result = x.quantile(q, dim=1, interpolation=interpolation)
        result.sum().backward()
        return result, x.grad

    same_on_both(fg, torch, program)


def test_quantile_and_nanquantile_with_nans_and_shapes(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 5.0, 2.0, 8.0], [3.0, NAN, 0.0, 4.0], [7.0, 6.0, 5.0, 4.0]], requires_grad=True)
        q = m.tensor([0.25, 0.5, 1.0])
        nan_rows = nan_marked(x.quantile(q, dim=1))
        values = m.nanquantile(x, q, dim=0, keepdim=True)
        (values * m.arange(values.numel()).reshape(values.shape)).sum().backward()
        return [
            nan_rows,
            values,
            x.grad,
            m.nanquantile(x, 0.3),
            x.nanquantile(m.tensor(0.7), keepdim=True),
            m.quantile(m.tensor(2.0), 0.5, dim=0, keepdim=True),
            m.quantile(m.arange(10.0, dtype=m.float64), 0.33),
            nan_marked(m.tensor([NAN, NAN]).nanquantile(0.5)),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.quantile(m.zeros(0, 3), 0.5, dim=0),
        lambda m: m.quantile(m.tensor([1, 2]), 0.5),
        lambda m: m.quantile(m.ones(2, 3), 1.5),
        lambda m: m.quantile(m.ones(2, 3), m.tensor([0.5, 2.0])),
        lambda m: m.quantile(m.ones(2, 3), m.tensor([[0.5]])),
        lambda m: m.quantile(m.ones(2, 3), m.tensor([0.5], dtype=m.float64)),
        lambda m: m.quantile(m.ones(2, 3), 0.5, interpolation="cubic"),
        lambda m: m.quantile(m.ones(2, 3), 0.5, dim=2),
        lambda m: m.nanquantile(m.ones(2, 3), -0.1),
    ],
    ids=["empty", "int64", "q > 1", "q tensor > 1", "2-D q", "q dtype", "interpolation", "dim", "nanquantile q < 0"],
)
def test_quantile_errors(fg, torch, program):
    same_error(fg, torch, program)
