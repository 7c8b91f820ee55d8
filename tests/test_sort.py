"""sort, argsort, topk, kthvalue, median, mode against PyTorch: named tuples, NaN and tie order,
gradients, errors.

Ties: PyTorch's documentation leaves which of tied positions an unstable sort, topk, kthvalue or mode
reports unspecified, but on the CPU it is fixed by the steps of its algorithms (std::sort, partial_sort,
nth_element, its own quickselect), and fastgrad follows them: the tie tables below compare indices.
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


@pytest.mark.parametrize("sequence", [(1,), (1, 2, 3), 5])
def test_named_tuples_are_made_from_one_sequence_of_their_length(fg, torch, sequence):
    assert list(fg.return_types.topk([1, 2])) == [1, 2]
    same_error(fg, torch, lambda m: m.return_types.topk(sequence))


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
    same_on_both(fg, torch, lambda m: [no_nan(m, m.topk(m.tensor(ROW), k).values) for k in range(10)])
    same_on_both(fg, torch, lambda m: no_nan(m, m.topk(m.tensor(ROW), 4, sorted=False).values.sort().values))


def tie_table(m):
    """Rows of many ties, along dim 1 and (transposed) dim 0: all equal, two values, NaNs, -0.0 and 0.0;
    of 9 elements (insertion sorts), 40 (std::sort's partitions, nth_element) and 130 (topk's partial_sort
    when k * 64 <= n), from a fixed pattern."""
    rows = []
    for n in (9, 40, 130):
        pattern = [(i * 7 + n) % 5 for i in range(n)]
        rows += [
            [1.0] * n,
            [float(p % 2) for p in pattern],
            [NAN if p == 0 else float(p % 2) for p in pattern],
            [[0.0, -0.0, 1.0, -1.0, -0.0][p] for p in pattern],
        ]
    return [m.tensor(r) for r in rows]


SELECTIONS = {
    "sort": lambda m, x, d: m.sort(x, d).indices,
    "sort descending": lambda m, x, d: x.sort(d, descending=True).indices,
    "sort stable=False": lambda m, x, d: x.sort(dim=d, stable=False).indices,
    "sort stable": lambda m, x, d: x.sort(dim=d, descending=True, stable=True).indices,
    "argsort": lambda m, x, d: m.argsort(x, d, descending=True),
    "topk": lambda m, x, d: [x.topk(k, d).indices for k in (1, 2, 5)],
    "topk smallest": lambda m, x, d: [x.topk(k, d, largest=False).indices for k in (1, 3)],
    "topk unsorted": lambda m, x, d: [x.topk(k, d, sorted=False).indices for k in (2, 7)],
    "kthvalue": lambda m, x, d: [x.kthvalue(k, d).indices for k in (1, 2, 5, 9)],
    "median": lambda m, x, d: x.median(d).indices,
    "mode": lambda m, x, d: list(x.mode(d)),
}


@pytest.mark.parametrize("op", SELECTIONS)
def test_tied_positions_are_pytorchs(fg, torch, op):
    def program(m):
        found = []
        for row in tie_table(m):
            found.append(SELECTIONS[op](m, row.unsqueeze(0), 1))
            found.append(SELECTIONS[op](m, row.unsqueeze(1).expand(-1, 2), 0))
        return found

    same_on_both(fg, torch, lambda m: [no_nan(m, r) if r.is_floating_point() else r for r in _flat(program(m))])


def _flat(results):
    return [t for r in results for t in (r if isinstance(r, list) else [r])]


def test_long_integer_sort_is_stable_as_pytorchs_radix_sort(fg, torch):
    """PyTorch sorts 1-D integer tensors of 32768 elements or more (ascending) with a stable radix sort
    (shorter ones, as the tie tables, with std::sort)."""

    def program(m):
        order = (m.arange(32768) % 3).sort().indices
        return [order[:40], (order * m.arange(32768)).sum()]  # the whole order, weighed by position

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # its parallel radix sort took 0.3-0.4 s on 2 busy cores, 1 ms on one
    try:
        same_on_both(fg, torch, program)
    finally:
        torch.set_num_threads(threads)


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
