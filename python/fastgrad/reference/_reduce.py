"""Reductions. The input is read as [kept dims..., reduced dims...] in row-major order, so each
result element sees its reduced block as one run, in the same order as the C++ core. Float sums
accumulate in double and are rounded once when stored. Backward formulas broadcast the output
gradient back over the reduced dims.
"""

import functools
import math
import operator

from .._types import SCALAR_TYPE_NAME, bool as bool_, compute_type, int64
from ._autograd import Function, is_grad_enabled, no_grad
from ._elementwise import ieee_div, logical_and, logical_or, sign, to_dtype, where, zeros_like
from ._storage import to_array
from ._tensor import contiguous_strides, element_offsets, full, new_tensor, wrap_dim
from ._shape import expand, permute, reshape, view


def reduction_mask(dims, ndim):
    """Which dims a reduction removes; no dims means all of them."""
    mask, seen = [not dims] * ndim, set()  # a 0-d tensor has one dim to name: 0 (or -1)
    for dim in dims:
        d = wrap_dim(dim, ndim)
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
        if ndim:
            mask[d] = True
    return mask


def reduced_shape(shape, mask, keepdim):
    return tuple(1 if m else n for n, m in zip(shape, mask) if keepdim or not m)


def _count(shape, mask):
    """How many input elements feed each result element."""
    return math.prod(n for n, reduced in zip(shape, mask) if reduced)


def _blocked_order(x, mask):
    """x's dims with the reduced ones last, and how many elements each result element reduces."""
    order = [d for d in range(x.dim()) if not mask[d]] + [d for d in range(x.dim()) if mask[d]]
    return order, _count(x._shape, mask)


def blocks(x, mask):
    """One list of values per result element: the reduced block it is computed from."""
    order, block = _blocked_order(x, mask)
    data = x._storage.data
    values = [data[i] for i in element_offsets([x._shape[d] for d in order], [x._strides[d] for d in order], x._offset)]
    results = math.prod(n for n, reduced in zip(x._shape, mask) if not reduced)
    return [values[i * block : (i + 1) * block] for i in range(results)]


def _require_nonempty(x, mask, op, all_dims):
    """`all_dims`: reducing over every dim because none was given."""
    if all_dims and x.numel() == 0:
        raise RuntimeError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    for d, reduced in enumerate(mask):
        if reduced and x._shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _require_floating(x, op):
    if not x._dtype.is_floating_point:
        raise RuntimeError(
            f"{op}(): input dtype should be either floating point or complex. Got {SCALAR_TYPE_NAME[x._dtype]} instead."
        )


class Reduction(Function):
    """A reduction node knows its input's shape and which dims it reduced (self.mask)."""

    def expand_back(self, t):
        """A reduction's result (or its gradient) broadcast back to the input's shape."""
        shape = self.inputs[0][0]
        return expand(reshape(t, reduced_shape(shape, self.mask, True)), shape)

    def dims(self):
        return [d for d, reduced in enumerate(self.mask) if reduced]

    def count(self):
        return _count(self.inputs[0][0], self.mask)


# ---- sum and mean


class SumBackward0(Reduction):
    """sum of all elements"""

    def forward(self, x, mask, keepdim):
        self.mask = mask
        zero = 0.0 if x._dtype.is_floating_point else 0
        totals = [functools.reduce(operator.add, block, zero) for block in blocks(x, mask)]
        return new_tensor(totals, reduced_shape(x._shape, mask, keepdim), x._dtype)

    def backward(self, g):
        return self.expand_back(g)


class SumBackward1(SumBackward0):
    """sum over the given dims"""


def sum(x, dims, keepdim, dtype=None):
    mask = reduction_mask(dims, x.dim())
    source = to_dtype(x, dtype or (x._dtype if x._dtype.is_floating_point else int64))
    return (SumBackward1 if dims else SumBackward0).run(source, mask=mask, keepdim=keepdim)


class MeanBackward0(Reduction):
    """mean of all elements"""

    def forward(self, x, dims, keepdim):
        if not x._dtype.is_floating_point:
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or "
                f"complex dtype. Got: {SCALAR_TYPE_NAME[x._dtype]}"
            )
        self.mask = reduction_mask(dims, x.dim())
        with no_grad():  # float16 and bfloat16 sum and divide in float32 (their sum alone may overflow)
            total = sum(x, dims, keepdim, compute_type(x._dtype))
            return to_dtype(total / _count(x._shape, self.mask), x._dtype)

    def backward(self, g):
        return self.expand_back(g) / self.count()


class MeanBackward1(MeanBackward0):
    """mean over the given dims"""


def mean(x, dims, keepdim):
    return (MeanBackward1 if dims else MeanBackward0).run(x, dims=dims, keepdim=keepdim)


# ---- prod. Its gradient is, for each element, the product of the other elements of its block.


class ProductOfOthersBackward0(Reduction):
    """The product of the other elements of each element's block: prod's gradient, an op of its own
    (a loop, so zeros in the input are handled exactly) whose node defines its derivative."""

    def forward(self, x, mask):
        self.mask = mask
        self.save(x)
        order, block = _blocked_order(x, self.mask)
        shape = [x._shape[d] for d in order]
        values = [x._storage.data[i] for i in element_offsets(shape, [x._strides[d] for d in order], x._offset)]
        out_strides = contiguous_strides(x._shape)
        positions = element_offsets(shape, [out_strides[d] for d in order], 0)
        # Products are taken in x's own type, as the core's kernel does: array cells round each step.
        out, before, after = (
            to_array([0.0] * len(values), x._dtype),
            to_array([1.0], x._dtype),
            to_array([1.0], x._dtype),
        )
        for start in range(0, len(values), block or 1):
            run = values[start : start + block]
            before[0] = 1.0
            for k, v in enumerate(run):  # the product of the values before k ...
                out[positions[start + k]] = before[0]
                before[0] *= v
            after[0] = 1.0
            for k in range(len(run) - 1, -1, -1):  # ... times the product of those after it
                out[positions[start + k]] *= after[0]
                after[0] *= run[k]
        return new_tensor(out, x._shape, x._dtype)

    def backward(self, gg):
        """d others_i / d x_j (i != j, one block) is the product of the elements other than i and j,
        so x's gradient is, at j, the sum over i != j of gg_i times that. With x's blocks as rows
        (kept, 1, block): row j of with_one (kept, block, block) is the block with x_j set to 1,
        whose product of others is, at i != j, that product (differentiable again, to any order)."""
        x = self.unpack(0)
        order, block = _blocked_order(x, self.mask)
        grouped = permute(x, order)
        kept = math.prod(n for n, reduced in zip(x._shape, self.mask) if not reduced)
        diagonal = new_tensor([i == j for i in range(block) for j in range(block)], (block, block), bool_)
        with_one = where(diagonal, full((), 1, x._dtype), reshape(grouped, (kept, 1, block)))
        others = ProductOfOthersBackward0.run(with_one, mask=[False, False, True])
        terms = where(diagonal, full((), 0, x._dtype), reshape(permute(gg, order), (kept, 1, block)) * others)
        return permute(reshape(sum(terms, [2], False), grouped._shape), [order.index(d) for d in range(x.dim())])


class ProdBackward0(Reduction):
    """prod of all elements. PyTorch's prod_backward, case by case, so that NaN and inf spread the
    same way: without zeros in the input, the gradient is result / x; with zeros, the product of
    the other elements of the block; and over all elements with two or more zeros, zeros outright
    (even for an infinite or NaN incoming gradient), except in grad mode, whose second derivatives
    are not all zero. Over all elements, PyTorch takes the product of the others of the flattened
    input and views it back (ViewBackward0 in a create_graph gradient)."""

    all_elements = True

    def forward(self, x, dim, keepdim):
        self.mask = reduction_mask([] if dim is None else [dim], x.dim())
        dtype = x._dtype if x._dtype.is_floating_point else int64
        one = 1.0 if x._dtype.is_floating_point else 1
        products = [functools.reduce(operator.mul, block, one) for block in blocks(to_dtype(x, dtype), self.mask)]
        out = new_tensor(products, reduced_shape(x._shape, self.mask, dim is not None and keepdim), dtype)
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, result = self.unpack(0), self.unpack(1)
        if not x.dim():
            return g
        zeros = sum(x == 0, [], False).item()
        if not zeros:
            return self.expand_back(g) * (self.expand_back(result) / x)
        if not self.all_elements:
            return self.expand_back(g) * ProductOfOthersBackward0.run(x, mask=self.mask)
        if zeros > 1 and not is_grad_enabled():
            return zeros_like(x)
        return view(g * ProductOfOthersBackward0.run(reshape(x, (-1,)), mask=[True]), x._shape)


class ProdBackward1(ProdBackward0):
    """prod over one dim"""

    all_elements = False


def prod(x, dim, keepdim):
    return (ProdBackward0 if dim is None else ProdBackward1).run(x, dim=dim, keepdim=keepdim)


# ---- var and std (with Bessel's correction by default, as PyTorch)


def _deviations(x, dims):
    return x - mean(x, dims, True)


class VarBackward0(Reduction):
    def forward(self, x, dims, correction, keepdim):
        _require_floating(x, "var")
        self.mask, self.correction, self.all = reduction_mask(dims, x.dim()), correction, not dims or not x.dim()
        self.save(x)
        with no_grad():
            d = _deviations(x, dims)
            # Degrees of freedom: what the sum of squares is divided by; PyTorch's forward clamps them at 0.
            return sum(d * d, dims, keepdim) / max(0.0, float(_count(x._shape, self.mask)) - correction)

    def dof(self):
        return float(self.count()) - self.correction

    def var_grad(self, grad_var):
        """PyTorch's var_backward, given the gradient of the variance."""
        x = self.unpack(0)
        d = _deviations(x, self.dims())
        if self.all and self.dof() <= 0:
            # 2 / dof is infinite: NaN where x equals the mean (infinity * 0), infinity elsewhere.
            return self.expand_back(grad_var) * where(
                d == 0, full((), math.nan, x._dtype), full((), math.inf, x._dtype)
            )
        return self.expand_back(grad_var) * (d * ieee_div(2.0, self.dof()))

    def backward(self, g):
        return self.var_grad(g)


def var(x, dims, correction, keepdim):
    return VarBackward0.run(x, dims=dims, correction=correction, keepdim=keepdim)


class StdBackward0(VarBackward0):
    def forward(self, x, dims, correction, keepdim):
        _require_floating(x, "std")
        self.mask, self.correction, self.all = reduction_mask(dims, x.dim()), correction, not dims or not x.dim()
        with no_grad():
            out = var(x, dims, correction, keepdim).sqrt()
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        """d std = d var / (2 std), taken as 0 where std == 0 (as PyTorch)."""
        result = self.unpack(1)
        grad_var = g / (result * 2)
        return self.var_grad(where(result == 0, zeros_like(grad_var), grad_var))


def std(x, dims, correction, keepdim):
    return StdBackward0.run(x, dims=dims, correction=correction, keepdim=keepdim)


# ---- max / min. The value reductions spread the gradient evenly over tied extremes; the dim forms
# return (values, indices) and send the gradient to the index they report.


def extreme(x, mask, keepdim, want_max):
    """Values and, per result element, the first position in its block that holds the extreme
    (the first NaN, if any: NaN wins, as in PyTorch)."""
    best_of = max if want_max else min
    values, positions = [], []
    for block in blocks(x, mask):
        if x._dtype.is_floating_point and any(map(math.isnan, block)):
            at = next(i for i, v in enumerate(block) if v != v)
        else:
            at = block.index(best_of(block))
        values.append(block[at])
        positions.append(at)
    shape = reduced_shape(x._shape, mask, keepdim)
    return new_tensor(values, shape, x._dtype), new_tensor(positions, shape, int64)


class AmaxBackward0(Reduction):
    # all_elements: max() and min() (PyTorch's evenly_distribute_backward) count the NaN elements as
    # the ties of a NaN result, and the other elements get exactly 0. amax and amin (PyTorch's
    # scale_grad_by_count) multiply by the mask instead, so a NaN gradient or a NaN result spreads.
    all_elements = False

    def forward(self, x, dims, keepdim, want_max=True, op="amax"):
        for dim in dims:  # each dim's size first, then repeated dims: PyTorch's order of checks
            _require_nonempty(x, reduction_mask([dim], x.dim()), op, False)
        self.mask = reduction_mask(dims, x.dim())
        _require_nonempty(x, self.mask, op, not dims)
        out = extreme(x, self.mask, keepdim, want_max)[0]
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, out = self.unpack(0), self.expand_back(self.unpack(1))
        hit = x == out
        if self.all_elements:
            hit = logical_or(hit, logical_and(x != x, out != out))
        is_extreme = hit.to(g._dtype)
        share = self.expand_back(g) / is_extreme.sum(self.dims(), keepdim=True).expand(x._shape)
        return where(hit, share, zeros_like(share)) if self.all_elements else share * is_extreme


class AminBackward0(AmaxBackward0):
    """amin: the same formula, over the smallest values"""


class MaxBackward1(AmaxBackward0):
    """max() of all elements"""

    all_elements = True


class MinBackward1(AmaxBackward0):
    """min() of all elements"""

    all_elements = True


def amax(x, dims, keepdim):
    return AmaxBackward0.run(x, dims=dims, keepdim=keepdim)


def amin(x, dims, keepdim):
    return AminBackward0.run(x, dims=dims, keepdim=keepdim, want_max=False, op="amin")


def max_all(x):
    return MaxBackward1.run(x, dims=[], keepdim=False, op="max")


def min_all(x):
    return MinBackward1.run(x, dims=[], keepdim=False, want_max=False, op="min")


class MaxBackward0(Reduction):
    """max(dim): (values, indices); the gradient goes to the reported index only."""

    def forward(self, x, dim, keepdim, want_max=True, op="max"):
        self.mask = reduction_mask([dim], x.dim())
        _require_nonempty(x, self.mask, op, False)
        values, indices = extreme(x, self.mask, keepdim, want_max)
        self.save(indices, is_output=True)
        return values, indices

    def backward(self, g):
        in_shape = self.inputs[0][0]
        if not in_shape:
            return g  # a 0-d input has no dim to scatter along: it is its own extreme
        dim = self.mask.index(True)
        along = [1] * len(in_shape)
        along[dim] = in_shape[dim]
        positions = new_tensor(list(range(in_shape[dim])), along, int64)
        spread = self.expand_back(g)
        return where(positions == self.expand_back(self.unpack(0)), spread, zeros_like(spread))


class MinBackward0(MaxBackward0):
    """min(dim): (values, indices)"""


def max_dim(x, dim, keepdim):
    return MaxBackward0.run(x, dim=dim, keepdim=keepdim)


def min_dim(x, dim, keepdim):
    return MinBackward0.run(x, dim=dim, keepdim=keepdim, want_max=False, op="min")


def arg_extreme(x, dim, keepdim, want_max, op):
    if x._dtype is bool_:
        raise RuntimeError(f"{op}(): does not support bool input")
    if dim is None:
        if x.numel() == 0:  # IndexError here, where max() says RuntimeError: as PyTorch
            raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        flat = reshape(x.detach(), (-1,))  # positions have no gradient: no node for the reshape
        positions = extreme(flat, [True], False, want_max)[1]
        return reshape(positions, (1,) * x.dim()) if keepdim else positions
    mask = reduction_mask([dim], x.dim())
    _require_nonempty(x, mask, op, False)
    return extreme(x, mask, keepdim, want_max)[1]


# ---- vector p-norm: d||x||/dx = x * |x|^(p-2) / ||x||^(p-1), 0 where the norm is 0


class LinalgVectorNormBackward0(Reduction):
    """The cases of PyTorch's norm_backward, with its limits at zeros: p = 0 has no gradient; for
    p < 1 a zero element gets none; for p > 1 a zero norm gives none; +-inf splits among the
    elements of largest (smallest) magnitude, NaNs included."""

    def forward(self, x, p, dims, keepdim):
        _require_floating(x, "linalg.vector_norm")
        self.mask, self.p = reduction_mask(dims, x.dim()), p
        if p < 0 or math.isinf(p):  # no identity: every reduced block must have an element
            what = ("inf" if p > 0 else "-inf") if math.isinf(p) else f"{p:g}"
            if not dims and not x.numel():
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {what} norm on an empty tensor because "
                    "the operation does not have an identity"
                )
            for d, reduced in enumerate(self.mask):
                if reduced and x._shape[d] == 0:
                    raise RuntimeError(
                        f"linalg.vector_norm cannot compute the {what} norm on the dimension {d}"
                        "because this dimension is empty and the operation does not have an identity"
                    )
        with no_grad():
            if math.isinf(p):
                out = (amax if p > 0 else amin)(x.abs(), dims, keepdim)
            elif p == 0:
                out = sum((x != 0).to(x._dtype), dims, keepdim)
            elif p == 2:
                out = sum(x * x, dims, keepdim).sqrt()
            else:
                out = sum(x.abs() ** p, dims, keepdim) ** ieee_div(1.0, p)
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, n, g, p = self.unpack(0), self.expand_back(self.unpack(1)), self.expand_back(g), self.p
        if p == 0:
            return None
        # g enters where PyTorch's formula takes it, so that an infinite or NaN gradient meets the
        # zero masks (and 0 * inf) exactly as there.
        if math.isinf(p):
            ax = x.abs()
            hit = logical_or(ax == n, ax != ax).to(x._dtype)
            return sign(x) * (g / hit.sum(self.dims(), keepdim=True).expand(x._shape) * hit)
        if p == 1:
            return sign(x) * g
        if p == 2:  # PyTorch's own case: masked before the product, so there 0 * inf is NaN
            return g * _zero_where(n == 0, x / n)
        if p < 1:
            return sign(x) * _zero_where(x == 0, x.abs() ** (p - 1)) * g * n ** (1 - p)
        part = sign(x) * x.abs() ** (p - 1) if p < 2 else x * x.abs() ** (p - 2)
        return part * _zero_where(n == 0, g / n ** (p - 1))


def _zero_where(condition, t):
    return where(condition, zeros_like(t), t)


def norm(x, p, dims, keepdim):
    return LinalgVectorNormBackward0.run(x, p=p, dims=dims, keepdim=keepdim)
