"""The packed SIMD GEMM behind mm / bmm / matmul / mv / dot (csrc/kernels/gemm_impl.h), on the C++
backend: values against numpy in float64 over shapes around the micro-tile and cache-block edges,
every operand layout (transposed and strided views are packed in place), and its numerical
contract: each element of C is one chain over k in increasing order, so the bits do not depend on
how C is cut into tiles and blocks (which is what keeps results identical for any thread count) --
except in products with one output row or column (m == 1 or n == 1: dot, mv, a row vector times a
matrix; csrc/kernels/gemv_impl.h), where each element is 32 interleaved chains over k combined in a
fixed tree, so the bits depend on neither the layout nor the thread count, but differ in the last
places from the same element computed inside a larger product.

Tolerance: a chain of k multiply-adds in precision u (2^-24 float32, 2^-53 float64) is within
gamma_k * sum_p |a_ip| |b_pj| of the exact value, gamma_k = k u / (1 - k u) (Higham, Accuracy and
Stability of Numerical Algorithms, 3.1); numpy's float64 reference is within the same bound in
float64, which is added for the float64 comparisons.
"""

import fractions
import hashlib

import numpy as np
import pytest

import fastgrad
from semantics_helpers import run_python

U = {np.float32: 2.0**-24, np.float64: 2.0**-53}
ISA = fastgrad.config()["isa"]

# Around the micro-tiles (6 rows, 12 in tiles one or two vectors wide; 8, 16, 32 or 64 columns per
# ISA and dtype), the small path's limit
# (256 columns) and KC (512 floats / 256 doubles): m, n, k.
SHAPES = [
    (1, 1, 1),
    (1, 7, 3),
    (7, 1, 3),
    (2, 3, 1),
    (5, 6, 7),
    (6, 16, 16),
    (7, 17, 9),
    (13, 31, 33),
    (25, 9, 40),
    (12, 32, 64),
    (18, 33, 65),
    (31, 63, 127),
    (64, 64, 64),
    (65, 65, 129),
    (100, 129, 255),
    (127, 255, 256),
    (129, 257, 257),
    (7, 65, 512),
    (8, 66, 513),
    (300, 300, 300),
    (37, 300, 1),
    (300, 5, 300),
    (3, 300, 600),
    (0, 5, 3),
    (5, 0, 3),
    (4, 5, 0),
    (0, 0, 0),
]


def tolerance(a, b, dtype):
    k = a.shape[-1]
    u = U[dtype] * (2 if dtype == np.float64 else 1)
    gamma = k * u / (1 - k * u)
    return gamma * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + np.finfo(dtype).tiny


def assert_close(got, a, b):
    """got (a fastgrad result) against a @ b in float64, within the bound of the module docstring."""
    dtype = a.dtype.type
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = got.numpy()
    assert got.dtype == dtype and got.shape == want.shape
    assert np.all(np.abs(got - want) <= tolerance(a, b, dtype))


def layouts(x, rng):
    """x (a numpy matrix or stack of them) as fastgrad tensors of the same values: contiguous,
    transposed (column-major), and a strided view (every other row and column of a larger tensor)."""
    big = rng.standard_normal(x.shape[:-2] + (2 * x.shape[-2] + 1, 2 * x.shape[-1] + 1)).astype(x.dtype)
    big[..., 1::2, 1::2] = x
    yield "contiguous", fastgrad.tensor(x)
    yield "transposed", fastgrad.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).transpose(-1, -2)
    yield "strided", fastgrad.tensor(big)[..., 1::2, 1::2]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_mm_matches_float64_in_every_layout(m, n, k, dtype):
    rng = np.random.default_rng(m * 10000 + n * 100 + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    for a_layout, ta in layouts(a, rng):
        for b_layout, tb in layouts(b, rng):
            assert np.array_equal(ta.numpy(), a) and np.array_equal(tb.numpy(), b), (a_layout, b_layout)
            assert_close(fastgrad.mm(ta, tb), a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 19, 70)).astype(dtype)
    b = rng.standard_normal((4, 70, 33)).astype(dtype)
    for _, ta in layouts(a, rng):
        for _, tb in layouts(b, rng):
            assert_close(fastgrad.bmm(ta, tb), a, b)
    # matmul broadcasts batch dims (a stride-0 expanded operand) and folds (..., n, k) @ (k, m)
    c = rng.standard_normal((2, 1, 19, 70)).astype(dtype)
    assert_close(fastgrad.matmul(fastgrad.tensor(c), fastgrad.tensor(b)), c, b)
    assert_close(fastgrad.matmul(fastgrad.tensor(a), fastgrad.tensor(b[0])), a, b[0])
    empty = fastgrad.bmm(fastgrad.tensor(a[:0]), fastgrad.tensor(b[:0]))
    assert tuple(empty.shape) == (0, 19, 33)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k", [(1, 1), (5, 300), (300, 5), (257, 129), (1000, 1000)])
def test_mv_and_dot(n, k, dtype):
    rng = np.random.default_rng(n + k)
    a = rng.standard_normal((n, k)).astype(dtype)
    x = rng.standard_normal(k).astype(dtype)
    for _, ta in layouts(a, rng):
        got = fastgrad.mv(ta, fastgrad.tensor(x)).numpy()
        want = a.astype(np.float64) @ x.astype(np.float64)
        assert np.all(np.abs(got - want) <= tolerance(a, x[:, None], dtype)[:, 0])
    y = rng.standard_normal(k).astype(dtype)
    spread = np.zeros(2 * k, dtype)
    spread[::2] = y
    got = fastgrad.dot(fastgrad.tensor(x), fastgrad.tensor(spread)[::2]).item()  # a strided operand
    assert abs(got - x.astype(np.float64) @ y) <= tolerance(x[None, :], y[:, None], dtype)[0, 0]


def test_zero_depth_gives_zeros_and_empty_gives_empty():
    for dtype in (np.float32, np.float64):
        out = fastgrad.mm(fastgrad.tensor(np.ones((3, 0), dtype)), fastgrad.tensor(np.ones((0, 4), dtype)))
        assert out.numpy().dtype == dtype and np.array_equal(out.numpy(), np.zeros((3, 4)))
        assert tuple(fastgrad.mm(fastgrad.zeros(0, 5), fastgrad.zeros(5, 7)).shape) == (0, 7)


def test_int64_products_are_exact():
    rng = np.random.default_rng(2)
    a = rng.integers(-1000, 1000, (9, 17))
    b = rng.integers(-1000, 1000, (17, 5))
    assert np.array_equal(fastgrad.mm(fastgrad.tensor(a), fastgrad.tensor(b)).numpy(), a @ b)
    assert np.array_equal(fastgrad.mm(fastgrad.tensor(a.T.copy()).t(), fastgrad.tensor(b)).numpy(), a @ b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bits_do_not_depend_on_tiling(dtype):
    """Every way of cutting the same product into products of two or more rows and columns -- row
    or column slices (other tiles, the small path instead of the packed one), the transposed
    problem, other operand layouts, bmm -- gives the same bits, because each element is the same
    chain over k whatever the blocking."""
    rng = np.random.default_rng(3)
    m, n, k = 150, 300, 1100  # packed path, k crosses KC 2 (float) or 4 (double) times
    a = fastgrad.tensor(rng.standard_normal((m, k)).astype(dtype))
    b = fastgrad.tensor(rng.standard_normal((k, n)).astype(dtype))
    c = fastgrad.mm(a, b).numpy()

    def same(x, want):
        assert np.array_equal(x.numpy(), want)

    same(fastgrad.mm(a[7:20], b), c[7:20])
    same(fastgrad.mm(a, b[:, 5:40]), c[:, 5:40])
    same(fastgrad.mm(a, b[:, :65]), c[:, :65])  # a full tile's columns; the last one as a row of C^T
    same(fastgrad.mm(a, b[:, :67]), c[:, :67])  # three columns past the tile: rows of C^T on AVX-512
    same(fastgrad.mm(a.t().contiguous().t(), b[:, :66]), c[:, :66])  # C^T's B = A^T packed from columns
    same(fastgrad.mm(a, b[:, :80]), c[:, :80])  # a narrow tile for the last 16
    b_columns = b.t().contiguous().t()  # B column-major: its panels packed by register transposes
    same(fastgrad.mm(a, b_columns[:, :10]), c[:, :10])  # a partial block of B's columns, zero-padded
    same(fastgrad.mm(a, b_columns[:, 5:40]), c[:, 5:40])
    a_columns = a.t().contiguous().t()
    same(fastgrad.mm(a_columns[:32], b_columns[:, :100]), c[:32, :100])  # both column-major: as C^T = B^T A^T
    same(fastgrad.mm(a[:32], b_columns), c[:32])  # x @ W.t() at a small batch: as C^T (A^T packed, B^T in place)
    same(fastgrad.mm(a[:16], b_columns[:, 3:]), c[:16, 3:])
    same(fastgrad.mm(a_columns[:125], b), c[:125])  # A column-major, packed: masked steps, a partial last panel
    same(fastgrad.mm(a[:8], b), c[:8])  # 2 rows past a whole tile: run as 4 + 4 (A copied row by row)
    same(fastgrad.mm(a[:9], b), c[:9])  # 5 + 4
    same(fastgrad.mm(a[3:17], b[:, :128]), c[3:17, :128])  # 6 + 4 + 4, A read in place
    same(fastgrad.mm(a[1:3], b[:, 250:]), c[1:3, 250:])
    same(fastgrad.mm(a[1:3], b[:, 250:252]), c[1:3, 250:252])
    same(fastgrad.mm(b.t(), a.t()).t(), c)
    same(fastgrad.mm(a.t().contiguous().t(), b.t().contiguous().t()), c)
    same(fastgrad.bmm(fastgrad.stack([a[:40], a[40:80]]), fastgrad.stack([b, b])), np.stack([c[:40], c[40:80]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_row_or_column_products_agree_in_every_form(dtype):
    """dot, mv, a row vector times a matrix, one-row / one-column mm and bmm, in every operand layout:
    the same bits for the same element (each is the same fixed set of chains, gemv_impl.h)."""
    rng = np.random.default_rng(5)
    m, k = 75, 1100  # 75 rows: whole groups of rows and of output vectors, and single ones
    a_np = rng.standard_normal((m, k)).astype(dtype)
    x_np = rng.standard_normal(k).astype(dtype)
    want = fastgrad.mv(fastgrad.tensor(a_np), fastgrad.tensor(x_np)).numpy()
    for a_layout, a in layouts(a_np, rng):
        for x_layout, x in layouts(x_np[:, None], rng):
            name = (a_layout, x_layout)
            assert np.array_equal(fastgrad.mv(a, x[:, 0]).numpy(), want), name
            assert np.array_equal(fastgrad.mm(a, x).numpy()[:, 0], want), name
            assert np.array_equal(fastgrad.mm(x.t(), a.t()).numpy()[0], want), name  # the outputs in the lanes
            assert np.array_equal(fastgrad.matmul(x[:, 0], a.t()).numpy(), want), name
            assert fastgrad.dot(a[37], x[:, 0]).item() == want[37], name
    stacked = fastgrad.bmm(
        fastgrad.tensor(np.stack([a_np[:1], a_np[1:2]])), fastgrad.tensor(np.stack([x_np[:, None]] * 2))
    )
    assert np.array_equal(stacked.numpy()[:, 0, 0], want[:2])


def test_cache_blocks_are_derived_from_the_detected_caches():
    """The blocks keep their budgets (gemm_impl.h): the kRows x KC sliver of A in a quarter of L1d
    (half with AVX-512), the MC x KC block of A in half of L2, whole micro-tiles per block."""
    config = fastgrad.config()
    caches = config["caches"]
    sources = ("cpuid leaf 4", "cpuid leaf 0x8000001D", "sysconf", "fallback", "FASTGRAD_CACHE_SIZES")
    assert caches["source"] in sources
    assert 0 < caches["l1d"] < caches["l2"] and caches["l3"] >= 0
    for dtype, size in (("float32", 4), ("float64", 8)):
        b = config["gemm_blocks"][dtype]
        sliver = caches["l1d"] // (2 if config["isa"] == "avx512" else 4)
        assert b["mr"] * b["kc"] * size <= max(sliver, 64 * b["mr"] * size)
        assert b["mc"] * b["kc"] * size <= max(caches["l2"] // 2, b["mr"] * b["kc"] * size)
        assert b["mc"] % b["mr"] == 0 and b["nc"] % b["nr"] == 0 and b["kc"] % 8 == 0
    assert config["gemm_blocks"]["float32"]["kc"] == 2 * config["gemm_blocks"]["float64"]["kc"]


def products_digest():
    """sha256 of the bits of mm over float32 and float64, contiguous and transposed operands."""
    rng = np.random.default_rng(5)
    digest = hashlib.sha256()
    for dtype in (np.float32, np.float64):
        a, b = rng.standard_normal((150, 700)).astype(dtype), rng.standard_normal((700, 500)).astype(dtype)
        for x, y in ((a, b), (a.T.copy().T, b.T.copy().T)):
            digest.update(fastgrad.mm(fastgrad.tensor(x), fastgrad.tensor(y)).numpy().tobytes())
    return digest.hexdigest()


def test_bits_do_not_depend_on_the_cache_blocks():
    """A machine with small caches (FASTGRAD_CACHE_SIZES, read at import) has blocks small enough that
    k = 700, m = 150 and n = 500 cross block edges they do not cross here; it computes the same bits."""
    code = (
        "import os; os.environ['FASTGRAD_CACHE_SIZES'] = '16384,131072,0'; import fastgrad, test_gemm\n"
        "config = fastgrad.config()\n"
        "assert config['caches'] == {'l1d': 16384, 'l2': 131072, 'l3': 0, 'source': 'FASTGRAD_CACHE_SIZES'}\n"
        "b = config['gemm_blocks']['float32']\n"
        "assert b['kc'] < 350 and b['mc'] < 150 and b['nc'] < 500, b\n"
        "print(test_gemm.products_digest())"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [products_digest()]


@pytest.mark.not_rerun_per_isa
def test_malformed_cache_sizes_fail_the_import_with_the_reason():
    result = run_python("import os; os.environ['FASTGRAD_CACHE_SIZES'] = '32k,1M'; import fastgrad")
    assert result.returncode != 0 and "FASTGRAD_CACHE_SIZES=32k,1M is not three byte counts" in result.stderr


def rounded(q, cast):
    """The rational q rounded to nearest (ties to even) in the type `cast`."""
    x = cast(float(q))  # within one ulp of the answer (float(q) is itself rounded once)
    candidates = [x, np.nextafter(x, cast(-np.inf)), np.nextafter(x, cast(np.inf))]
    return min(
        candidates,
        key=lambda y: (
            abs(fractions.Fraction(float(y)) - q),
            int(y.view(np.uint64 if cast is np.float64 else np.uint32)) & 1,
        ),
    )


def chain(a_row, b_col, fused):
    """The k-ordered chain c = a_p * b_p + c from c = 0, in the operands' precision: rounded once per
    step when fused, else product and sum rounded separately."""
    cast = a_row.dtype.type
    c = cast(0)
    for x, y in zip(a_row, b_col):
        if fused:
            c = rounded(
                fractions.Fraction(float(x)) * fractions.Fraction(float(y)) + fractions.Fraction(float(c)), cast
            )
        else:
            c = x * y + c
    return c


def interleaved_chains(a_row, b_col, fused, chains=32):
    """Chain r takes the products p = r, r + chains, ... (`chain`); then chain j += chain j + w for
    w = chains / 2, ..., 1, each sum rounded to the operands' type."""
    partial = [chain(a_row[r::chains], b_col[r::chains], fused) for r in range(chains)]
    w = chains // 2
    while w:
        for j in range(w):
            partial[j] = partial[j] + partial[j + w]
        w //= 2
    return partial[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_row_or_column_products_are_interleaved_chains(dtype):
    """The documented contract for m == 1 or n == 1, checked exactly (fused as in the test below),
    for k below, at and past whole blocks of 32 and for each way gemv_impl.h reads the operands."""
    rng = np.random.default_rng(6)
    fused = ISA != "scalar"
    for k in (1, 5, 32, 33, 100, 1100):
        a = rng.standard_normal((70, k)).astype(dtype)
        x = rng.standard_normal(k).astype(dtype)
        ta, tx = fastgrad.tensor(a), fastgrad.tensor(x)
        by_rows = fastgrad.mv(ta, tx).numpy()
        by_columns = fastgrad.matmul(tx, fastgrad.tensor(np.ascontiguousarray(a.T))).numpy()
        strided = dict(layouts(a, rng))["strided"]  # neither stride 1: rows gathered
        gathered = fastgrad.mv(strided, fastgrad.tensor(np.repeat(x, 2))[::2]).numpy()
        for i in (0, 3, 69):
            want = interleaved_chains(a[i], x, fused)
            assert by_rows[i] == want and by_columns[i] == want and gathered[i] == want, (k, i)
        assert fastgrad.dot(ta[5], tx).item() == interleaved_chains(a[5], x, fused)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_element_is_one_k_ordered_chain(dtype):
    """The documented contract, checked exactly: fused multiply-adds on AVX2 / AVX-512 / NEON, a
    multiply then an add on the scalar ISA (baseline x86-64 has no fused multiply-add)."""
    rng = np.random.default_rng(4)
    m, n, k = 20, 300, 1100
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = fastgrad.mm(fastgrad.tensor(a), fastgrad.tensor(b)).numpy()
    fused = ISA != "scalar"
    for i, j in [(0, 0), (5, 63), (6, 64), (19, 299), (13, 170)]:
        assert c[i, j] == chain(a[i], b[:, j], fused), (i, j)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_addmm_adds_after_the_chain_with_the_bits_of_a_separate_add(dtype, threads):
    """addmm (F.linear's op) adds its input to each element of C once its k-chain is complete, in the
    product's epilogue: the bits of mm followed by +, for every input layout (a bias row, a column, a
    full matrix, a transposed one, a scalar), the small and packed paths, a weight used as W.t(), and
    C split between threads. beta and alpha scale as the separate ops do."""
    rng = np.random.default_rng(5)
    saved = fastgrad.get_num_threads()
    fastgrad.set_num_threads(threads)
    try:
        for m, n, k in [(5, 6, 7), (64, 10, 256), (64, 256, 784), (300, 300, 300), (4, 5, 0), (0, 5, 3)]:
            a = fastgrad.tensor(rng.standard_normal((m, k)).astype(dtype))
            weight = fastgrad.tensor(rng.standard_normal((n, k)).astype(dtype))
            product = fastgrad.mm(a, weight.t())
            for shape in [(n,), (m, 1), (m, n), (1, n), ()]:
                bias = fastgrad.tensor(rng.standard_normal(shape).astype(dtype))
                assert np.array_equal(fastgrad.addmm(bias, a, weight.t()).numpy(), (product + bias).numpy()), shape
            column_major = fastgrad.tensor(rng.standard_normal((n, m)).astype(dtype)).t()
            assert np.array_equal(fastgrad.addmm(column_major, a, weight.t()).numpy(), (product + column_major).numpy())
            scaled = fastgrad.addmm(column_major, a, weight.t(), beta=0.5, alpha=-3)
            assert np.array_equal(scaled.numpy(), (product * -3 + column_major * 0.5).numpy())
    finally:
        fastgrad.set_num_threads(saved)
