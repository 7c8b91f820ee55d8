"""sort, argsort, topk, kthvalue, median, mode against PyTorch: named tuples, NaN and tie order,
gradients, errors.

Ties: fastgrad orders every row with ties in index order. That is PyTorch's order for stable=True, and
for its CPU sort of rows of up to 16 elements (an insertion sort) with or without it; for longer
rows without stable=True, and for topk, kthvalue and median(dim), PyTorch leaves which of tied
positions it reports unspecified, so those tests compare values only (or use distinct values).
"""

import pickle

import pytest

from oracle_helpers import same_error, same_on_both

NAN = float("nan")
ROW = [1.0, 3.0, 1.0, 3.0, NAN, 2.0, 1.0, NAN, 3.0]


def no_nan(m, t):
    """t with its NaNs as 1e9, so that results compare with ==."""
    return m.where(t != t, m.full_like(t, 1e9), t)


def test_named_tuples_print_unpack_and_index_as_pytorch(fg, torch):
    def program(m):
        r = m.topk(m.tensor([[1.0, 3.0, 2.0]]), 2)
        values, indices = r
        again = pickle.loads(pickle.dumps(r))
        text = repr(m.sort(m.tensor([2, 1]))).replace("fastgrad.", "torch.")
        return [r.values, r[1], values, indices, again.values, len(r), type(r).__name__, text]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("stable", [None, True])
def test_sort_puts_nan_last_and_keeps_ties_in_order(fg, torch, descending, stable):
    def program(m):
        x = m.tensor(ROW, requires_grad=True)
        options = {} if stable is None else {"stable": stable}
        values, indices = m.sort(x, descending=descending, **options)
        (values * m.arange(9.0)).sum().backward()
        order = m.argsort(x, descending=descending, **options)
        return [no_nan(m, values), indices, values.grad_fn.name(), x.grad, order]

    same_on_both(fg, torch, program)


def test_stable_sort_of_long_rows(fg, torch):
    same_on_both(fg, torch, lambda m: list(m.sort(m.arange(40) % 3, stable=True, descending=True)))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_and_gradient(fg, torch, largest):
    def program(m):
        x = m.tensor([[0.5, -1.0, 4.0, 2.0], [3.0, NAN, -2.0, 0.0]], requires_grad=True)
        r = x.topk(2, dim=1, largest=largest)
        r.values.sum().backward()
        return [no_nan(m, r.values), r.indices, x.grad, r.values.grad_fn.name()]

    same_on_both(fg, torch, program)


def test_topk_of_ties_gives_pytorchs_values(fg, torch):
    """Which tied position topk reports is unspecified in PyTorch: the values agree."""
    same_on_both(fg, torch, lambda m: [no_nan(m, m.topk(m.tensor(ROW), k).values) for k in range(10)])
    same_on_both(fg, torch, lambda m: no_nan(m, m.topk(m.tensor(ROW), 4, sorted=False).values.sort().values))


def test_sort_backward_of_backward(fg, torch):
    def program(m):
        x = m.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad((x.sort(0).values ** 2).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad((g * m.arange(6.0, dtype=m.float64).reshape(2, 3)).sum(), x)
        return [g, gg]

    same_on_both(fg, torch, program)


def test_zero_d_and_empty(fg, torch):
    def program(m):
        z = m.tensor(5.0, requires_grad=True)
        empty = m.zeros(0, 3)
        r = [m.sort(z), m.topk(z, 0), m.topk(z, 1, -1), m.sort(empty, 0), m.topk(empty, 1, 1), m.topk(empty, 0, 0)]
        m.topk(z, 1).values.backward()
        return [list(pair) for pair in r] + [m.argsort(z), z.grad]

    same_on_both(fg, torch, program)


def test_dtypes(fg, torch):
    same_on_both(fg, torch, lambda m: [*m.sort(m.tensor([True, False, True])), *m.topk(m.tensor([3, 1, 2]), 2)])


def test_kthvalue_median_mode_with_nan(fg, torch):
    def program(m):
        x = m.tensor([[3.0, NAN, 1.0, 2.0], [4.0, 2.0, 3.0, 1.0]], requires_grad=True)
        results = [m.median(x), *m.median(x, 1), *x.kthvalue(2, 1), *m.kthvalue(x, 4, 1, True), *x.mode(1)]
        sum(v.sum() for v in results if v.requires_grad).backward()
        return [no_nan(m, r) for r in results] + [x.grad, [r.grad_fn.name() for r in results if r.requires_grad]]

    same_on_both(fg, torch, program)


def test_median_of_all_splits_the_gradient_among_ties(fg, torch):
    def program(m):
        x = m.tensor([2.0, 1.0, 2.0, 1.0, 3.0], requires_grad=True)
        m.median(x).backward()
        return [m.median(x), x.grad, m.median(m.tensor([1, 2, 3, 4])), no_nan(m, m.median(m.tensor([])))]

    same_on_both(fg, torch, program)


def test_mode_takes_the_smallest_most_frequent_value_at_its_last_position(fg, torch):
    same_on_both(fg, torch, lambda m: [list(m.mode(m.tensor(row))) for row in ([1, 2, 2, 3, 3, 1, 5], [3, 1, 1, 3])])


def test_selections_of_0d_and_empty(fg, torch):
    def program(m):
        z, empty = m.tensor(5.0, requires_grad=True), m.zeros(0, 3)
        pairs = [m.kthvalue(z, 1), m.median(z, 0, True), m.mode(z), m.kthvalue(empty, 1, 1), m.median(empty, 1)]
        return [list(pair) for pair in pairs] + [m.median(z), m.mode(empty, 1).values]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.topk(m.ones(3), 4),
        lambda m: m.topk(m.ones(3), -1),
        lambda m: m.topk(m.tensor(1.0), 2),
        lambda m: m.topk(m.zeros(0, 3), 1, 0),
        lambda m: m.topk(m.ones(3), 2, dim=1),
        lambda m: m.topk(m.ones(3), 2.0),
        lambda m: m.topk(m.tensor([True]), 1),
        lambda m: m.sort(m.ones(3), 1),
        lambda m: m.sort(m.tensor(1.0), -2),
        lambda m: m.argsort(m.ones(2, 3), -3),
        lambda m: m.kthvalue(m.ones(3), 0),
        lambda m: m.kthvalue(m.ones(2, 3), 4, 1),
        lambda m: m.kthvalue(m.tensor(1.0), 2),
        lambda m: m.kthvalue(m.zeros(0, 3), 5, 0),
        lambda m: m.kthvalue(m.ones(3), 1.0),
        lambda m: m.kthvalue(m.tensor([True]), 1),
        lambda m: m.median(m.tensor([True])),
        lambda m: m.median(m.tensor([True]), 0),
        lambda m: m.median(m.zeros(0, 3), 0),
        lambda m: m.median(m.ones(3), 1),
        lambda m: m.mode(m.zeros(0, 3), 0),
        lambda m: m.mode(m.ones(3), -2),
    ],
    ids=["k>n", "k<0", "0-d k=2", "empty dim", "dim", "float k", "bool", "sort dim", "0-d dim", "argsort dim"]
    + ["kth 0", "kth k>n", "kth 0-d", "kth empty", "kth float k", "kth bool", "median bool", "median(dim) bool"]
    + ["median empty dim", "median dim", "mode empty dim", "mode dim"],
)
def test_errors(fg, torch, program):
    same_error(fg, torch, program)
