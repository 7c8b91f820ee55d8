"""One test per bug the differential fuzzer (tests/test_fuzz_programs.py) found, each the shrunk
program (or a smaller one) with the values PyTorch gives, written out as facts.

They run on every backend of the suite (the `fg` fixture); FASTGRAD_TEST_BACKENDS=torch runs them
against PyTorch itself, which is how the expected values were checked.
"""

import math

import numpy as np
import pytest

nan, inf = math.nan, math.inf


def values(t):
    return np.asarray(t.detach().numpy()).tolist()


def assert_values(t, expected):
    np.testing.assert_allclose(
        np.asarray(t.detach().numpy(), dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=1e-6,
        atol=1e-7,
        equal_nan=True,
    )


def grad_of(fg, x, fn):
    """x's gradient of fn(x).sum(), for a fresh leaf x."""
    x = fg.tensor(x, requires_grad=True)
    fn(x).sum().backward()
    return x.grad


# ---- reductions ------------------------------------------------------------------------------


def test_min_dim_of_0d_tensor_backward(fg):
    # crashed (segfault): the backward looked for the reduced dim of a 0-d input
    x = fg.tensor(-2.0, requires_grad=True)
    v = x.min(dim=0).values.min(dim=0).values
    v.backward()
    assert x.grad.item() == 1.0


def test_var_and_std_divide_by_at_least_zero(fg):
    # N - correction <= 0 divided by a negative number (-0.) instead of 0 (nan or inf)
    assert math.isnan(fg.zeros(0).var().item())
    assert math.isnan(fg.tensor([1.0]).var(correction=2).item())
    assert fg.tensor([1.0, 2.0]).var(correction=3).item() == inf
    assert math.isnan(fg.zeros((1, 3, 0), dtype=fg.float64).std(dim=(-2, 2)).item())


@pytest.mark.parametrize(
    "op,correction,dim,expected",
    [
        ("var", 2, None, [inf, inf]),
        ("std", 2, None, [nan, nan]),
        ("var", 2, 0, [-inf, inf]),
        ("var", 3, None, [inf, inf]),
        ("var", 3, 0, [1.0, -1.0]),
        ("std", 3, 0, [0.0, -0.0]),
    ],
)
def test_var_std_gradient_without_degrees_of_freedom(fg, op, correction, dim, expected):
    # PyTorch's conventions when N - correction <= 0: over all elements the gradient is NaN/inf,
    # over a dim the plain formula 2 / (N - correction) is used
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    args = () if dim is None else (dim,)
    getattr(x, op)(*args, correction=correction).backward()
    assert_values(x.grad, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mean_of_std_mean_and_var_mean_is_nan_after_an_infinite_element(fg, dtype):
    # the mean was the plain one (inf for [inf, inf], from lgamma of zeros); PyTorch's comes from its
    # running (Welford) mean, which inf - inf or finite - inf makes nan unless the infinity is last
    dtype = getattr(fg, dtype)
    spread, mean = fg.std_mean(fg.tensor([0.0, 0.0], dtype=dtype).lgamma())
    assert_values(spread, nan)
    assert_values(mean, nan)
    x = fg.tensor([[1.0, inf, 2.0], [1.0, 2.0, -inf], [inf, -inf, 1.0], [nan, 1.0, 1.0]], dtype=dtype)
    assert_values(fg.var_mean(x, 1)[1], [nan, -inf, nan, nan])
    assert_values(fg.std_mean(x, 0, keepdim=True, correction=0)[1], [[nan, nan, nan]])
    assert_values(fg.var_mean(x[:2, :2])[1], nan)
    assert_values(fg.var_mean(x[1:3, :2].t(), dim=(0, 1))[1], nan)
    last_inf = fg.tensor([[1.0, 2.0], [3.0, -inf]], dtype=dtype).t()
    assert_values(fg.var_mean(last_inf, dim=(1, 0))[1], -inf)  # the infinity is last in every dim
    assert_values(fg.var_mean(last_inf, 1)[1], [2.0, -inf])
    assert_values(fg.var_mean(last_inf, 1)[0], [2.0, nan])
    assert_values(fg.var_mean(fg.tensor([inf], dtype=dtype))[1], inf)


def test_std_gradient_is_zero_where_std_is_zero(fg):
    # was NaN (0 / 0); PyTorch masks it to 0
    assert values(grad_of(fg, [3.0, 3.0], lambda x: x.std())) == [0.0, 0.0]
    assert values(grad_of(fg, [1.25], lambda x: x.std(-1, unbiased=False))) == [0.0]


@pytest.mark.parametrize(
    "expr,error",
    [
        ("fg.zeros(0).max()", RuntimeError),
        ("fg.zeros(2, 0).amax()", RuntimeError),
        ("fg.zeros(2, 0).amin(())", RuntimeError),
        ("fg.zeros(0).argmax()", IndexError),
        ("fg.zeros(2, 0).amax(1)", IndexError),
        ("fg.zeros(2, 0).max(1)", IndexError),
    ],
)
def test_reduction_of_empty_tensor_without_dim(fg, expr, error):
    # all-element reductions of an empty tensor raised IndexError naming a dim; PyTorch raises
    # RuntimeError "Expected reduction dim to be specified" (argmax: IndexError)
    with pytest.raises(error, match="reduction dim"):
        eval(expr)


def test_reduction_repeated_dim_of_0d_tensor(fg):
    # a 0-d tensor accepted dim=(0, 0) (and squeeze((0, 0)) any tensor)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        fg.tensor(1.0).sum((0, 0))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        fg.zeros(2).squeeze((0, -1))


def test_max_of_all_elements_with_nan(fg):
    # the NaN result found no tie, so every element got NaN; PyTorch splits among the NaNs
    x = [1.0, nan, 3.0, nan]
    assert_values(grad_of(fg, x, lambda x: x.max()), [0.0, 0.5, 0.0, 0.5])
    assert_values(grad_of(fg, x, lambda x: x.amax()), [nan, nan, nan, nan])


def test_max_of_all_elements_with_nan_gradient(fg):
    # a NaN incoming gradient reached the elements that are not the max (NaN * 0)
    x = fg.tensor([0.126, -0.132], requires_grad=True)
    x.max().var().backward()  # var of one element: NaN, and a NaN gradient
    assert_values(x.grad, [nan, 0.0])


def test_prod_gradient_with_two_zeros_is_zero(fg):
    # with two zeros every product of the others is 0; PyTorch returns zeros even for a NaN gradient
    x = fg.zeros(2, 2, requires_grad=True)
    x.prod().var().backward()
    assert values(x.grad) == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(
    "p,x,norm,grad",
    [
        (0, [1.0, -2.0, 0.0], 2.0, None),
        (0.5, [1.0, -2.0, 0.0], 5.828427124746, [2.414213562373, -1.707106781187, 0.0]),
        (-1, [1.0, -2.0, 0.0], 0.0, [0.0, -0.0, 0.0]),
        (inf, [1.0, nan, 3.0, nan], nan, [0.0, 0.0, 0.0, 0.0]),
    ],
)
def test_norm_orders(fg, p, x, norm, grad):
    # p=0 gave inf (not the count of nonzeros), p<1 NaN gradients at zeros, inf-norm NaN
    # gradients for NaN inputs
    t = fg.tensor(x, dtype=fg.float64, requires_grad=True)
    n = t.norm(p)
    n.backward()
    assert_values(n, norm)
    if grad is None:
        assert t.grad is None
    else:
        assert_values(t.grad, grad)


@pytest.mark.parametrize("p", [-1, inf])
def test_norm_without_identity_of_empty_tensor(fg, p):
    with pytest.raises(RuntimeError, match="cannot compute the .* norm on an empty tensor"):
        fg.zeros(0).norm(p)
    assert tuple(fg.zeros(0, 3).norm(p, dim=1).shape) == (0,)


def test_norm_fro_over_three_dims(fg):
    with pytest.raises(RuntimeError, match="dim must be a 2-tuple"):
        fg.zeros(2, 2, 2, 2).norm(dim=(0, 1, 3))


# ---- elementwise ---------------------------------------------------------------------------


def test_sign_is_differentiable_with_zero_gradient(fg):
    # sign's result did not require grad
    x = fg.tensor([0.0, 1.0, -1.0], requires_grad=True)
    s = x.sign()
    assert s.requires_grad and s.grad_fn.name() == "SignBackward0"
    s.sum().backward()
    assert values(x.grad) == [0.0, 0.0, 0.0]


def test_relu_of_nan(fg):
    # relu(nan) was 0; its gradient was cut at NaN (PyTorch's passes it: it cuts where result <= 0)
    x = fg.tensor([-1.0, nan, 2.0], requires_grad=True)
    y = x.relu()
    assert_values(y, [0.0, nan, 2.0])
    y.sum().backward()
    assert values(x.grad) == [0.0, 1.0, 1.0]


def test_clamp_gradient_outside_range_with_infinite_gradient(fg):
    # clamp's gradient was a product with the mask: inf * 0 = NaN outside the range
    x = fg.tensor([-2.0, 0.5], requires_grad=True)
    (x.clamp(-1, 1) * fg.tensor([inf, 1.0])).sum().backward()
    assert values(x.grad) == [0.0, 1.0]


def test_maximum_minimum_gradient_with_nan(fg):
    # an input got no gradient where a NaN was compared; PyTorch gives it to both
    a = fg.tensor([nan, 1.0, 2.0], requires_grad=True)
    b = fg.tensor([1.0, 1.0, 3.0], requires_grad=True)
    (fg.minimum(a, b) + fg.maximum(a, b)).sum().backward()
    assert values(a.grad) == [2.0, 1.0, 1.0]
    assert values(b.grad) == [2.0, 1.0, 1.0]


def test_pow_gradients_at_zero(fg):
    # d(x**y)/dx = y * x**(y-1) is 0 where y == 0 (was 0 * inf = NaN); d(0**x)/dx is 0 for x >= 0
    x = fg.tensor([0.0, 0.0, 2.0], requires_grad=True)
    y = fg.tensor([0.0, 1.0, 0.0], requires_grad=True)
    (x**y).sum().backward()
    assert_values(x.grad, [0.0, 1.0, 0.0])
    assert_values(y.grad, [0.0, 0.0, math.log(2.0)])
    assert values(grad_of(fg, [0.0, 1.0, -1.0], lambda t: 0**t)) == [0.0, 0.0, -inf]


def test_pow_gradient_of_mixed_precision(fg):
    # d(x**y)/dy took log(x) in float32 for a float32 base and a float64 exponent
    x = fg.tensor([0.346, 0.822], requires_grad=True)
    y = fg.tensor([0.126, -0.132], dtype=fg.float64, requires_grad=True)
    (x**y).sum().backward()
    base = np.float32([0.346, 0.822]).astype(np.float64)
    np.testing.assert_allclose(values(y.grad), base ** np.array([0.126, -0.132]) * np.log(base), rtol=1e-12)


@pytest.mark.parametrize(
    "exponent,expected",
    [
        (0.5, [nan, -0.0, 2.0]),
        (-0.5, [nan, -inf, 0.5]),
        (3, [-inf, -0.0, 64.0]),
        (-2, [0.0, inf, 0.0625]),
    ],
)
def test_pow_with_special_scalar_exponents(fg, exponent, expected):
    # PyTorch computes x**0.5 as sqrt(x) (sqrt(-inf) is NaN, pow(-inf, 0.5) is inf), etc.
    x = fg.tensor([-inf, -0.0, 4.0])
    assert_values(x**exponent, expected)


def test_integer_pow(fg):
    # 0 ** -1 for int64 tensors was a cast of inf (INT64_MIN); bool ** bool raised RuntimeError
    assert values(fg.tensor([0, 1, -1, 2]) ** fg.tensor([-1, -2, -3, -1])) == [0, 1, -1, 0]
    assert values(0 ** fg.tensor([-1, 0, 1])) == [0, 1, 0]
    with pytest.raises(NotImplementedError):
        fg.tensor([True]) ** fg.tensor([True])


def test_clamp_with_float_bounds_promotes_integers(fg):
    # an int64 tensor clamped to 0.5 stayed int64 (the bound was a double, its kind lost)
    assert fg.tensor([1, 2]).clamp(max=0.5).dtype == fg.float32
    assert values(fg.tensor([1, 2]).clamp(max=0.5)) == [0.5, 0.5]
    assert fg.tensor([1, 2]).clamp(0, 1).dtype == fg.int64


def test_clamp_with_tensor_bounds(fg):
    # was maximum/minimum: ties split the gradient in halves; PyTorch's ClampBackward0 gives x all
    # of it on [min, max] and a bound only where it clamps
    x = fg.tensor([1.0, 1.0, 3.0], requires_grad=True)
    lo = fg.tensor([1.0, 1.0, 3.0], requires_grad=True)
    hi = fg.tensor([1.0, 1.0, 3.0], dtype=fg.float64, requires_grad=True)
    y = fg.clamp(x, lo, hi)
    assert y.grad_fn.name() == "ClampBackward0" and y.dtype == fg.float64
    (y * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert values(x.grad) == [1.0, 2.0, 3.0]
    assert values(lo.grad) == [0.0, 0.0, 0.0]
    assert values(hi.grad) == [0.0, 0.0, 0.0]


def test_where_with_a_python_number(fg):
    # the number took the tensor's dtype: where(c, int64, 0.5) was int64 (0)
    c = fg.tensor([False])
    assert fg.where(c, fg.tensor([0]), 0.5).dtype == fg.float32
    assert values(fg.where(c, fg.tensor([0]), 0.5)) == [0.5]


@pytest.mark.parametrize(
    "expr,error",
    [
        ("abs(fg.tensor([True]))", NotImplementedError),
        ("fg.tensor([True]).relu()", RuntimeError),
        ("fg.tensor([True]).argmax()", RuntimeError),
    ],
)
def test_unsupported_bool_ops(fg, expr, error):
    with pytest.raises(error):
        eval(expr)


@pytest.mark.parametrize(
    "expr,kernel",
    [
        ("fg.mm(b2, b2)", "addmm_impl_cpu_"),
        ("b3.bmm(b3)", "bmm"),
        ("fg.mv(b2, b1)", "addmv_impl_cpu"),
        ("fg.dot(b1, b1)", "dot"),
    ],
)
def test_bool_matrix_products(fg, expr, kernel):
    b1, b2, b3 = fg.ones(2, dtype=fg.bool), fg.ones(2, 2, dtype=fg.bool), fg.ones(2, 2, 2, dtype=fg.bool)  # noqa: F841 -- used by eval(expr)
    with pytest.raises(NotImplementedError, match=kernel):
        eval(expr)


# ---- shapes, views and indexing --------------------------------------------------------------


def test_getitem_ellipsis_is_a_differentiable_view(fg):
    # x[...] returned a detached alias
    x = fg.ones(2, requires_grad=True) * 1
    y = x[...]
    assert y.requires_grad and y.grad_fn.name() == "AliasBackward0" and y is not x


def test_expand_to_own_shape_is_a_new_view(fg):
    # x.expand_as(x) returned x itself
    x = fg.tensor([0.0, 0.0], requires_grad=True)
    v = x.expand(2)
    assert v is not x and not v.is_leaf and v.grad_fn.name() == "ExpandBackward0"


def test_T_of_a_vector_is_a_view(fg):
    x = fg.tensor([0.25, 0.0], requires_grad=True)
    assert x.T is not x and x.T.grad_fn.name() == "PermuteBackward0"


def test_permute_without_dims(fg):
    with pytest.raises(TypeError):
        fg.tensor(0.5).permute()


def test_stack_checks_dim_before_sizes(fg):
    with pytest.raises(IndexError, match="Dimension out of range"):
        fg.stack([fg.zeros(2), fg.zeros(3)], 2)


def test_empty_tensors_are_contiguous(fg):
    # the transposed empty tensor was "not contiguous", and an in-place op through a view of an
    # empty result was refused
    assert fg.zeros(0, 3).t().is_contiguous()
    x = fg.zeros(2, 3, 0, requires_grad=True)
    v = (0.5 ** x[-1, fg.tensor([False, False, False])]).view(0)
    v.div_(fg.tensor([1.0], dtype=fg.float64, requires_grad=True))


def test_batched_matmul_with_zero_inner_dim(fg):
    # reshape(-1, 0) of the folded batch failed
    assert tuple((fg.zeros(0, 0, 0) @ fg.zeros(0)).shape) == (0, 0)


def test_index_with_empty_list(fg):
    # numpy made [] a float64 array: "tensors used as indices must be long..."
    assert tuple(fg.zeros(2, 3)[[]].shape) == (0, 3)
    assert tuple(fg.zeros(2, 3)[:, []].shape) == (2, 0)


def test_index_with_0d_bool(fg):
    # a 0-d mask counted as indexing one dim: "too many indices"
    x = fg.tensor(2.0, requires_grad=True)
    assert tuple(x[fg.tensor(True)].shape) == (1,) and tuple(x[fg.tensor(False)].shape) == (0,)
    y = fg.ones(2, 3, requires_grad=True)
    assert tuple(y[:, fg.tensor(True), [0, 1]].shape) == (2, 2)
    y[:, fg.tensor(True)].sum().backward()
    assert values(y.grad) == [[1.0] * 3] * 2
    z = fg.ones(3) * 1
    z[fg.tensor(True)] = 5
    assert values(z) == [5.0, 5.0, 5.0]


def test_out_of_range_index_when_nothing_is_read(fg):
    # PyTorch checks index values only for elements it reads
    assert tuple(fg.zeros(2, 3, 2)[..., :0, [0, 2]].shape) == (2, 0, 2)
    assert tuple(fg.zeros(0, 2)[:, [5]].shape) == (0, 1)
    with pytest.raises(IndexError):
        fg.zeros(2, 0)[:, [0]]


# ---- in place, views and version counters -------------------------------------------------------


def test_views_follow_in_place_changes_of_their_base(fg):
    # a view kept its old grad_fn after its base (or another view) was changed in place: wrong
    # gradients. PyTorch remakes it (AsStridedBackward0).
    x = fg.ones(3, requires_grad=True)
    a = x * 1
    v, w = a[0], a[1:]
    a.mul_(2)
    assert v.grad_fn.name() == "AsStridedBackward0"
    (v * 3 + w.sum()).backward()
    assert values(x.grad) == [6.0, 2.0, 2.0]


def test_view_of_base_that_starts_requiring_grad(fg):
    z = fg.zeros(3)
    u = z[:2]
    x = fg.ones(3, requires_grad=True)
    z.add_(x)
    assert u.requires_grad and not u.is_leaf
    u.sum().backward()
    assert values(x.grad) == [1.0, 1.0, 0.0]


def test_view_through_another_view(fg):
    x = fg.ones(2, 3, requires_grad=True)
    a = x * 1
    r, c = a[0], a[:, 1]
    c.mul_(5)
    (r * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert values(x.grad) == [[1.0, 10.0, 3.0], [0.0, 0.0, 0.0]]


def test_expanded_view_gradient_after_base_change(fg):
    # the remade view history wrote (not added) the gradients of elements sharing memory
    x = fg.tensor([0.0], requires_grad=True)
    v = x + 0
    e = v.expand(2)
    v.mul_(2)
    (e * fg.tensor([1.0, 2.0])).sum().backward()
    assert values(x.grad) == [6.0]


def test_matmul_result_is_not_a_view(fg):
    # the result of a batched matmul was a view of a hidden tensor: writing into it through a view
    # lost the gradient of the value written
    x0 = fg.tensor(0.0, requires_grad=True)
    v3 = fg.zeros(2, 2, 3, requires_grad=True) @ fg.zeros(3, requires_grad=True)
    v4 = v3.transpose(0, 0)
    v4[...] = x0
    (v3.sum() + 10 * v4.sum()).backward()
    assert x0.grad.item() == 44.0


def test_assigning_a_view_to_itself_keeps_the_gradient(fg):
    # v2[None] = v2: the value's history was taken after the write, and its node came later on the
    # tape than the write's, so it never got its gradient
    x2 = fg.tensor([[0.0, 0.0]], requires_grad=True)
    x0 = fg.tensor([0.126, -0.132], requires_grad=True)
    x3 = fg.tensor([0.0, 0.0], dtype=fg.float64, requires_grad=True)
    v1 = fg.mv(x2, x0) + x3
    v2 = v1.transpose(0, 0)
    v2[None] = v2
    (v1.sum() * 10 + v2.sum()).backward()
    assert_values(x2.grad, [[2.772, -2.904]])
    assert values(x3.grad) == [11.0, 11.0]


def test_integer_tensor_written_from_float_that_requires_grad(fg):
    # the int64 tensor joined the graph (requires_grad=True)
    x = fg.tensor([0, 0])
    x[:0, None] = fg.zeros(0, 1, requires_grad=True)
    assert not x.requires_grad and x.is_leaf


@pytest.mark.parametrize(
    "program",
    [
        "v = x.prod(0); v.add_(v)",  # PyTorch saves prod's result
        "v = x ** x; v.add_(x)",  # and pow's (tensor ** tensor), even when unused
        "v = x ** fg.tensor([1.0, 1.0]); v.add_(1)",
        "a = x + 2; v = 2 ** a; a.add_(1)",  # and the exponent of number ** tensor
        "a = x + 0; v = a ** 0; a.add_(1)",  # x ** 0 still checks x
        "c = x > 0; v = fg.where(c, x, 0.0); c.fill_(True)",  # where's condition
        "i = fg.tensor([0, 1]); v = x[i]; i.add_(0)",  # index tensors
        "m = x.max(0); v = m.values; m.indices.add_(0)",  # max(dim)'s indices
        "i = fg.tensor([0]); v = x * 1; v[i] = 1.0; i.add_(0)",  # index_put_'s indices
    ],
)
def test_backward_checks_what_pytorch_saves(fg, program):
    # fastgrad did not save (or did not check) these, so its backward ran where PyTorch's fails
    x = fg.tensor([1.5, 2.0], requires_grad=True)
    namespace = {"fg": fg, "x": x}
    exec(program, namespace)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        namespace["v"].sum().backward()


@pytest.mark.parametrize(
    "statement",
    [
        "e.add_(1)",
        "e.mul_(y)",
        "e.copy_(y)",
        "e.clamp_(0, 1)",
        "e[:, 0] = y[:, 0]",
        "e[...] = 3",
    ],
)
def test_in_place_write_into_expanded_tensor(fg, statement):
    # writing twice into one memory location was allowed
    e, y = fg.zeros(1, 2).expand(3, 2), fg.ones(3, 2)  # noqa: F841 -- used by the statement
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        exec(statement)


@pytest.mark.parametrize("statement", ["e.fill_(2)", "e.zero_()", "e[0] = 5", "e[[0]] = 5"])
def test_in_place_fill_of_expanded_tensor_is_allowed(fg, statement):
    base = fg.zeros(1, 2)
    e = base.expand(3, 2)  # noqa: F841 -- used by the statement
    exec(statement)


@pytest.mark.parametrize(
    "statement,ok",
    [
        ("x[1:] = x[:-1]", False),
        ("x[1:].add_(x[:-1])", False),
        ("x[:2].copy_(x[1:3])", False),
        ("x[[0, 1]] = x[2:]", False),
        ("x[[1, 2]] = x[::2]", True),
        ("x.add_(x)", True),
        ("x[...] = x", True),
        ("x[None] = x", True),
        ("x[None].copy_(x)", False),
        ("x[:2] = x[2:]", True),
    ],
)
def test_reading_memory_being_written(fg, statement, ok):
    # fastgrad copied the source first; PyTorch refuses a partial overlap (and index_put_ any),
    # unless a layout is too irregular to judge
    x = fg.arange(4.0)  # noqa: F841 -- used by the statement
    if ok:
        exec(statement)
    else:
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            exec(statement)


def test_mask_assignment_of_one_element(fg):
    # x[mask] = v with one element of v is PyTorch's masked_fill_: no overlap check, any dtype
    x = fg.tensor([0.0]) > 1
    x[x] = x
    y = fg.zeros(3)
    y[fg.tensor([True, False, False])] = fg.tensor([2])
    assert values(y) == [2.0, 0.0, 0.0]


def test_index_put_checks_dtype(fg):
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        fg.zeros(3)[[0]] = fg.tensor([1])
    fg.zeros(3)[[0, 1]] = 2


def test_index_put_reads_no_index_it_writes(fg):
    m = fg.tensor([False, False])
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        m[m] = fg.zeros(0, dtype=fg.bool)


def test_in_place_fill_of_expanded_view_fails_backward(fg):
    # PyTorch's CopySlices cannot give an expanded view's base its gradient
    x = fg.tensor([0.0, 0.0], requires_grad=True)
    v = x.max(0).values
    v.expand_as(x).zero_()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        v.backward()


def test_bool_matrix_products_with_nothing_to_multiply(fg):
    # PyTorch returns early (zeros) before it looks at the dtype, except for dot
    b = fg.zeros(0, dtype=fg.bool)
    assert values(b @ fg.zeros(0, 2, dtype=fg.bool)) == [False, False]
    assert tuple(fg.mm(fg.zeros(0, 2, dtype=fg.bool), fg.zeros(2, 2, dtype=fg.bool)).shape) == (0, 2)
    with pytest.raises(NotImplementedError):
        fg.dot(b, b)


def test_prod_gradient_with_nan_and_no_zero(fg):
    # the product of the other elements kept the gradient finite where PyTorch's result / x
    # spreads the NaN; with a zero in the tensor both take the product of the others
    y = fg.tensor([2.0, nan, 3.0], requires_grad=True)
    y.prod().backward()
    assert_values(y.grad, [nan, nan, nan])
    x = fg.tensor([[2.0, nan], [3.0, 0.0]], requires_grad=True)
    x.prod(1).sum().backward()
    assert_values(x.grad, [[nan, 2.0], [0.0, 3.0]])


def test_amax_checks_empty_dims_before_repeated_dims(fg):
    with pytest.raises(IndexError, match="non-zero size"):
        fg.amin(fg.zeros(0, 2), (0, 0))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        fg.amin(fg.zeros(1, 2), (0, 0))


def test_pow_gradient_where_exponent_is_zero_with_nan_gradient(fg):
    # d(x**y)/dx multiplied the mask for y == 0 with a NaN incoming gradient; PyTorch's gives 0
    x = fg.tensor([0.126, -0.132], requires_grad=True)
    y = fg.tensor([0.0, 0.25])
    fg.amin(x**y, 0).backward()  # amin of [1, nan]: NaN, and a NaN gradient for both
    assert_values(x.grad, [0.0, nan])


def test_norm_gradient_at_zero_norm_with_infinite_gradient(fg):
    # the zero-norm mask was applied before the product with an infinite gradient (0 * inf = NaN)
    x = fg.tensor([0.0, 0.0], requires_grad=True)
    (x.norm(dim=(0,), p=3) / 0).backward()
    assert values(x.grad) == [0.0, 0.0]


def test_backward_checks_saved_masks(fg):
    # masks were saved as coordinates, so changing the mask in place went unnoticed
    x = fg.tensor([-0.75, -1.25], requires_grad=True) * 1
    m = x > 0
    x[m] = fg.tensor([0.126], requires_grad=True)
    m[fg.tensor([False, False])] = fg.zeros(0, dtype=fg.bool)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        x.sum().backward()
    y = fg.tensor([1.0, 2.0], requires_grad=True)
    m = y > 1
    z = y[m]
    m.fill_(False)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_clamp_of_bool_tensor_with_bool_bounds(fg):
    b = fg.tensor([True, False])
    with pytest.raises(NotImplementedError):
        fg.clamp(b, b, b)
    assert values(fg.clamp(b, fg.tensor(0))) == [1, 0]
    assert values(fg.clamp(b, min=b)) == [True, False]  # one bound is fine


def test_setitem_checks_the_key_before_the_leaf(fg):
    x = fg.tensor([1.8], requires_grad=True)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x.transpose(0, 0)[-2:2:-1, None] = 1.5


def test_add_alpha_takes_no_part_in_promotion(fg):
    # other * alpha promoted bool to int64 before the addition
    b = fg.tensor([True, False])
    assert fg.add(b, b, alpha=2).dtype == fg.bool
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        fg.add(fg.tensor([1, 2]), fg.tensor([1, 2]), alpha=0.5)
    assert values(fg.add(fg.tensor([1, 2]), 2.5, alpha=2)) == [6.0, 7.0]


def test_setitem_writes_into_the_region_of_the_key(fg):
    # x[key] = v was recorded as a write into all of x: the backward of an empty write into an
    # expanded view failed ("more than one element of the written-to tensor ...")
    x0 = fg.tensor([[-0.25, 0.0]], requires_grad=True)
    v3 = fg.stack([x0, x0], dim=2).expand(3, 2, 1, 2, 2)
    v3[None, -1, 0:0, ...] = -2.5
    v3.sum().backward()
    assert values(x0.grad) == [[12.0, 12.0]]  # as PyTorch
    # the leaf errors PyTorch gives: the region of x[0] is a view of x, that of x[[0]] x itself
    x = fg.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable"):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="^a leaf Variable"):
        x[[0]] = 1.0


# ---- the Python/C++ boundary ----------------------------------------------------------------------


def test_from_numpy_refuses_a_non_native_byte_order(fg):
    # the core read byte-swapped elements as native ones (garbage values); PyTorch refuses them
    for dtype in ("f8", "f4", "i8"):
        swapped = np.arange(3, dtype=np.dtype(dtype).newbyteorder("S"))
        with pytest.raises(ValueError, match="byte order different from the native byte order"):
            fg.from_numpy(swapped)
    assert values(fg.from_numpy(np.arange(3, dtype=np.dtype("f8").newbyteorder("=")))) == [0.0, 1.0, 2.0]


def test_named_arithmetic_with_a_non_number_raises_type_error(fg):
    # fastgrad.add(x, 'a'), x.mul_('a'), ... returned NotImplemented instead of raising
    x = fg.tensor([1.0, 2.0])
    for call in (
        lambda: fg.add(x, "a"),
        lambda: x.add("a"),
        lambda: x.sub(None),
        lambda: fg.mul(x, None),
        lambda: x.div("a"),
        lambda: x.add_("a"),
        lambda: x.sub_(None),
        lambda: x.mul_("a"),
        lambda: x.div_([1.0, 2.0]),
    ):
        with pytest.raises(TypeError, match="must be Tensor, not (str|NoneType|list)"):
            call()
    with pytest.raises(TypeError):
        fg.pow(x, "a")
    with pytest.raises(TypeError):
        fg.add(x, "a", alpha=2)
    # the operators go through Python's protocol, and their message names the type as PyTorch's does
    with pytest.raises(TypeError, match="unsupported operand type\\(s\\) for \\+: 'Tensor' and 'str'"):
        x + "a"
    with pytest.raises(TypeError):
        x * None
    with pytest.raises(TypeError):
        x -= "a"
    assert (x == "a") is False


def test_arguments_of_the_wrong_type_raise_type_error(fg):
    # pybind11's RuntimeError "Unable to cast Python instance of type <class 'int'> to C++ type '?'"
    # and TypeError "incompatible function arguments ... Invoked with: ..." leaked out
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="^assigned grad expected to be a Tensor or None but got grad of type int$"):
        x.grad = 3
    y = (x * 2).sum()
    with pytest.raises(TypeError):
        y.backward(3)
    with pytest.raises(TypeError, match="^gradients can be either Tensors or None, but got str$"):
        y.backward("a")
    with pytest.raises(TypeError, match="^prod\\(\\) received an invalid combination of arguments"):
        x.prod(dim=(0,))
    for name, call in [
        ("maximum", lambda: fg.maximum(x, 1)),
        ("mm", lambda: fg.mm(x.view(1, 2), 3)),
        ("neg", lambda: fg.neg("a")),
        ("sum", lambda: fg.sum("a")),
    ]:
        with pytest.raises(TypeError, match=f"^{name}\\(\\)") as info:
            call()
        assert "Unable to cast" not in str(info.value) and "incompatible function arguments" not in str(info.value)
    y.backward()  # nothing was broken on the way
    assert values(x.grad) == [2.0, 2.0]


def test_indices_that_int64_cannot_hold(fg):
    x = fg.zeros(3)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        x[2**70]
    assert x[2**70 :].shape == (0,)  # slice bounds are clamped, as Python's
    with pytest.raises(TypeError, match="slice indices must be integers or None or have an __index__ method"):
        x["a":]
    with pytest.raises(OverflowError, match="int too big to convert"):
        x + 2**70


INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def test_float_to_int64_conversion_of_nan_inf_and_out_of_range(fg):
    # undefined behaviour in C++ (a static_cast); PyTorch on x86 gives INT64_MIN for each of them
    x = fg.tensor([nan, inf, -inf, 1e30, -1e30, 9.3e18, 2.5, -2.5])
    assert values(x.long()) == [INT64_MIN] * 6 + [2, -2]
    assert values(x.double().long()) == [INT64_MIN] * 6 + [2, -2]
    assert fg.tensor([nan, 2.5]).sum(dtype=fg.int64).item() == INT64_MIN + 2
    assert values(fg.tensor([nan, 1.0]).bool()) == [True, True]


def test_int64_arithmetic_wraps_on_overflow(fg):
    # signed overflow is undefined behaviour in C++; PyTorch's int64 arithmetic wraps
    big, low = fg.tensor([INT64_MAX]), fg.tensor([INT64_MIN])
    assert values(big + 1) == [INT64_MIN]
    assert values(big * 3) == [INT64_MAX - 2]
    assert values(big + big) == [-2]
    assert values(low - fg.tensor([1])) == [INT64_MAX]
    assert values(low * fg.tensor([-1])) == [INT64_MIN]
    assert values(5 - low) == [INT64_MIN + 5]
    assert values(-low) == [INT64_MIN]
    assert values(abs(low)) == [INT64_MIN]
    assert fg.tensor([2**62] * 3).sum().item() == -(2**62)
    assert fg.tensor([2**32, 2**32]).prod().item() == 0
    assert values(fg.tensor([[2**62]]) @ fg.tensor([[4]])) == [[0]]
    assert values(fg.tensor([1, -1, 2]) ** fg.tensor([INT64_MIN] * 3)) == [1, 1, 0]


def test_integer_numbers_are_exact(fg):
    # Python ints were carried as doubles: 2**63 - 1 became 2**63 (then INT64_MIN, or an error)
    assert fg.tensor([INT64_MAX]).item() == INT64_MAX
    assert values(fg.tensor([INT64_MAX]) + INT64_MAX) == [-2]
    assert values(fg.tensor([3]) < INT64_MAX) == [True]
    assert values(fg.tensor([3]).clamp(min=INT64_MAX)) == [INT64_MAX]
    assert values(fg.tensor([3]).clamp(min=2**62 + 1, max=2**62)) == [2**62]  # max wins, as PyTorch
    assert values(fg.full((2,), INT64_MAX)) == [INT64_MAX, INT64_MAX]
    z = fg.zeros(2, dtype=fg.int64)
    z[0] = INT64_MAX
    assert values(z) == [INT64_MAX, 0]
    assert values(z.fill_(INT64_MIN)) == [INT64_MIN, INT64_MIN]


def test_requires_grad_must_be_a_bool(fg):
    # pybind11's bool conversion took 1, None (as False) and anything with __bool__
    x = fg.tensor([1.0])
    for flag in (1, None, "a"):
        with pytest.raises(RuntimeError, match="^requires_grad must be a bool$"):
            x.requires_grad = flag
    assert x.requires_grad is False


def test_two_norm_gradient_at_zero_norm_follows_pytorch(fg):
    # PyTorch's p == 2 case masks x / norm before the product with the gradient: an infinite
    # gradient at a zero norm gives NaN there (other p give 0, see the test above)
    x = fg.tensor([0.0, 0.0], requires_grad=True)
    (x.norm(dim=(0,), p=2) * float("inf")).backward()
    assert all(math.isnan(v) for v in values(x.grad))
    x = fg.tensor([3.0, 4.0], requires_grad=True)
    x.norm(dim=(0,), p=2).backward()
    assert_values(x.grad, [0.6, 0.8])


def test_clamp_with_number_bounds_follows_pytorch(fg):
    # bool bounds on a bool tensor were clamped; a NaN bound was ignored; with min > max the
    # reference gave min where PyTorch gives max
    b = fg.tensor([True, False])
    for call, kernel in [
        (lambda: b.clamp(min=True), "clamp_min_scalar_cpu"),
        (lambda: b.clamp(max=True), "clamp_max_scalar_cpu"),
        (lambda: b.clamp(True, False), "clamp_scalar_cpu"),
        (lambda: b.clamp_(min=True), "clamp_min"),
    ]:
        with pytest.raises(NotImplementedError, match=f'^"{kernel}'):
            call()
    assert values(b.clamp(0, 1)) == [1, 0] and b.clamp(0, 1).dtype == fg.int64  # int bounds promote
    x = fg.tensor([1.0, nan, 3.0], requires_grad=True)
    for y in (x.clamp(min=nan), x.clamp(max=nan), x.clamp(0.0, nan)):
        assert all(math.isnan(v) for v in values(y))
    y = x.clamp(2.0, 1.0)
    assert values(y)[::2] == [1.0, 1.0] and math.isnan(values(y)[1])
    y.sum().backward()
    assert values(x.grad) == [0.0, 0.0, 0.0]  # x >= min and x <= max holds nowhere


def test_wrong_operands_of_named_functions_raise_type_error(fg):
    x = fg.tensor([1.0, 2.0])
    for call in (lambda: fg.lt(x, "a"), lambda: x.ge(None), lambda: x.eq("a"), lambda: fg.ne(x, [1.0])):
        with pytest.raises(TypeError, match="^(lt|ge|eq|ne)\\(\\)"):
            call()
    assert values(fg.lt(x, other=fg.tensor([2.0, 2.0]))) == [True, False]
    # alpha took the operand to result_type() first, which named itself in the error
    for name, call in [
        ("add", lambda: fg.add(x, "a", alpha=2)),
        ("sub", lambda: x.sub(None, alpha=2)),
        ("add_", lambda: x.add_("a", alpha=2)),
    ]:
        with pytest.raises(TypeError, match=f"^{name}\\(\\): argument 'other' .*must be Tensor, not"):
            call()
    # dims and sizes that are not ints: AttributeError '... has no attribute __index__'
    for call in (
        lambda: x.size("a"),
        lambda: x.unsqueeze(1.5),
        lambda: x.transpose("a", 0),
        lambda: x.sum(dim="a"),
        lambda: x.view("a"),
    ):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError, match="^requires_grad_\\(\\): argument 'requires_grad' .*must be bool, not int"):
        x.requires_grad_(1)


def test_tensor_refuses_a_non_native_byte_order(fg):
    # numpy swapped the bytes where PyTorch refuses the array (as from_numpy does)
    swapped = np.arange(3, dtype=np.dtype("f8").newbyteorder("S"))
    for call in (
        lambda: fg.tensor(swapped),
        lambda: fg.as_tensor(swapped),
        lambda: fg.tensor(swapped, dtype=fg.float32),
        lambda: fg.zeros(3)[swapped.astype(np.dtype("i8").newbyteorder("S"))],
    ):
        with pytest.raises(ValueError, match="byte order different from the native byte order"):
            call()


def test_int64_to_float32_rounds_once(fg):
    # the reference rounded int64 to float32 through a double: twice, 2**60 + 2**36 + 1 became 2**60
    v = 2**60 + 2**36 + 1
    for t in (fg.tensor([v]).float(), fg.full((1,), v, dtype=fg.float32), fg.zeros(1) + v):
        assert t.item() == 2**60 + 2**37
    assert fg.tensor([v], dtype=fg.float32).item() == 2**60  # a Python list goes through double, as PyTorch
    with pytest.raises(OverflowError, match="int too big to convert"):
        fg.full((2,), 2**70)


def test_tensor_of_a_numpy_scalar_keeps_its_dtype(fg):
    # np.float64(0.5) was read as a Python float, giving float32
    assert fg.tensor(np.float64(0.5)).dtype == fg.float64
    assert fg.tensor(np.float32(0.5)).dtype == fg.float32
    assert fg.tensor(np.bool_(True)).dtype == fg.bool
    assert fg.tensor(np.int64(3)).item() == 3 and fg.tensor(np.float64(0.5), dtype=fg.float32).dtype == fg.float32


def test_logcumsumexp_of_a_0d_tensor_checks_its_saved_result(fg):
    # its backward passes a 0-d gradient through, after checking what it saved as PyTorch's does
    x = fg.tensor(0.0, requires_grad=True)
    y = x.logcumsumexp(0)
    y.log10_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_tensordot_sums_a_dim_contracted_with_a_size_1_dim_before_saving(fg):
    """Both contracted dims of size 1: PyTorch sums the first operand over it, so its mm saves that
    sum, and an in-place change of the operand afterwards does not fail the backward."""
    x = fg.tensor([[1.0], [2.0]], requires_grad=True)
    y = fg.tensor([[3.0, 4.0, 5.0]], requires_grad=True)
    a = (x * 2).fliplr()
    product = fg.tensordot(a, y, dims=1)
    a.mul_(3)
    product.sum().backward()
    assert values(x.grad) == [[24.0], [24.0]]
    assert values(y.grad) == [[6.0, 6.0, 6.0]]


def test_dist_checks_its_saved_inputs(fg):
    """DistBackward0 saves both inputs, as PyTorch's: one changed in place before backward is an
    error (it saved their difference, so backward ran with values no longer there)."""
    a, b = fg.tensor([1.0, 2.0, 4.0], requires_grad=True), fg.tensor([0.5, 1.0, 1.0], requires_grad=True)
    x = a * 1
    distance = fg.dist(x, b, 3)
    x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        distance.backward()


# ---- in-place comparisons with an operand that requires grad ------------------------------------


@pytest.mark.parametrize("op", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"])
@pytest.mark.parametrize("dtype", ["int64", "bool", "float32"])
def test_in_place_comparison_records_its_node_whatever_the_dtype(fg, op, dtype):
    # as PyTorch's: the comparison's node (its gradient is zeros) even into an integer or bool tensor
    v = fg.tensor([1, 2], dtype=getattr(fg, dtype))
    other = fg.tensor([1.5, 2.0], requires_grad=True)
    assert getattr(v, op)(other) is v
    assert (v.requires_grad, v.is_leaf, v.grad_fn.name()) == (True, False, f"{op[:2].title()}Backward1")


@pytest.mark.parametrize(
    "expr",
    ["v + 1", "-v", "v.clone()", "v.sum()", "v.view(-1)", "v[0]", "v.unbind()", "v.clamp(0, 1)", "v.cumsum(0)",
     "fg.where(v > 0, v, v)", "fg.cat([v, v])", "v.max()", "v.unsqueeze_(0)"],
)  # fmt: skip
def test_ops_giving_an_integer_tensor_with_history_a_node_raise(fg, expr):
    # an integer tensor requires grad after eq_ with an operand that does; an op that would record
    # a node for an integer result raised nothing (and recorded it)
    v = fg.tensor([1, 2])
    v.eq_(fg.tensor([1.5, 2.0], requires_grad=True))
    with pytest.raises(RuntimeError, match="^Autograd not support dtype: Long$"):
        eval(expr)


def test_integer_tensor_with_history_in_ops_without_a_node(fg):
    # ops without a derivative give it no node, and in-place ops write through it keeping a history
    v = fg.tensor([1, 2])
    v.eq_(fg.tensor([1.5, 2.0], requires_grad=True))
    assert [t.requires_grad for t in (v == 1, v & v, ~v, v // 2, v.argmax(), v.to(fg.int32))] == [False] * 6
    assert fg.where(v > 0, v, fg.tensor([0.5, 0.5], requires_grad=True)).grad_fn.name() == "WhereBackward0"
    v &= v
    v //= 1
    assert v.grad_fn.name() == "EqBackward1"
    v.add_(1)
    assert v.grad_fn.name() == "AddBackward0"
    v.masked_fill_(v > 1, 5)
    assert (v.tolist(), v.requires_grad) == ([1, 5], True)


def test_in_place_comparison_into_a_float_tensor_passes_zero_gradients(fg):
    x = fg.zeros(2)
    other = fg.tensor([1.5, 0.0], requires_grad=True)
    x.eq_(other)
    fg.where(x > 0, x, 2 * x).sum().backward()
    assert values(x) == [0.0, 1.0]
    assert values(other.grad) == [0.0, 0.0]
