"""Fused ops of neural networks: softmax and log_softmax over one dim, the negative log likelihood
loss, GELU and scaled dot-product attention's fused (flash) cases. As in the core (csrc/ops/nn.cpp),
each forward and backward is one loop over the values, not a composition of ops, and computes in
double (Python floats) in the core's order, rounding once when the result is stored: both backends
give the same bits, except in float32 softmax and log_softmax, which the core computes with its
vector exp (within a few ulps), and gelu and its gradient, which the core computes in float32 vector
code with its own approximations of the normal distribution and exp (approximate='none', within 1
ulp of these) or in double lanes ('tanh', within 1 ulp; float64 gelu is the same libm erfc / tanh
arithmetic here and there: the same bits). Each backward is an op with a node of its own (as
PyTorch's), recorded in a create_graph backward: its derivative is defined once, there. Attention
is the exception: the core sums its products in T (fma chains) and its backward formulas are ops
here, so the two agree to rounding, and both are compared with PyTorch with a tolerance.
"""

import math

from .._types import int64
from ._autograd import Function, is_grad_enabled
from ._elementwise import ieee_div, zeros_like
from ._storage import SCALAR_TYPE_NAME
from ._tensor import new_tensor, read, shape_str, wrap_dim


def _not_implemented_for(kernel, dtype):
    """PyTorch's error for a dtype its kernel is not compiled for."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")


# ---- softmax and log_softmax


def _rows(shape, dim):
    """The rows along `dim` of row-major values of `shape`: each row's positions (a range). Empty
    rows are left out (their log-sum-exp would be log(0))."""
    outer, n, inner = math.prod(shape[:dim]), (shape[dim] if shape else 1), math.prod(shape[dim + 1 :])
    if n == 0:
        return []
    return [range(o * n * inner + i, (o * n + n) * inner + i, inner) for o in range(outer) for i in range(inner)]


class SoftmaxBackward0(Function):
    """softmax(x) = exp(x - m) / s along a dim, with m the row's maximum and s = sum exp(x - m); its
    log_softmax twin is (x - m) - log(s). A row holding +inf or only -inf gives NaN, as PyTorch."""

    log = False

    def forward(self, x, dim):
        d = wrap_dim(dim, x.dim())
        self.dim = d if x.dim() else 0
        if x.numel() and not x._dtype.is_floating_point:
            last = x.dim() == 0 or d == x.dim() - 1  # PyTorch's kernel for the last dim has its own name
            raise _not_implemented_for(
                f"{'log_' if self.log else ''}softmax{'_lastdim' if last else ''}_kernel_impl", x._dtype
            )
        xs = read(x)
        ys = [0.0] * len(xs)
        for row in _rows(x._shape, self.dim):
            m = -math.inf
            for k in row:
                m = xs[k] if xs[k] > m else m
            e = [math.exp(xs[k] - m) for k in row]
            s = 0.0
            for v in e:
                s += v
            if self.log:
                log_s = math.log(s)
                for k in row:
                    ys[k] = (xs[k] - m) - log_s
            else:
                for k, v in zip(row, e):
                    ys[k] = v / s
        out = new_tensor(ys, x._shape, x._dtype)
        self.save(out, is_output=True)
        return out

    def backward(self, grad):
        return (LogSoftmaxBackwardDataBackward0 if self.log else SoftmaxBackwardDataBackward0).run(
            grad, self.unpack(0), dim=self.dim
        )


class LogSoftmaxBackward0(SoftmaxBackward0):
    log = True


class SoftmaxBackwardDataBackward0(Function):
    """softmax's gradient as an op of its own, as PyTorch's _softmax_backward_data: a loop, and,
    when recorded (in a create_graph backward), a node whose formulas are its derivative."""

    log = False

    def forward(self, grad, y, dim):
        """softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g), per row."""
        self.dim = dim
        self.save(grad)
        self.save(y)
        ys, gs = read(y), read(grad)
        gx = [0.0] * len(ys)
        for row in _rows(y._shape, dim):
            s = 0.0
            for k in row:
                s += gs[k] if self.log else gs[k] * ys[k]
            for k in row:
                gx[k] = gs[k] - math.exp(ys[k]) * s if self.log else ys[k] * (gs[k] - s)
        return new_tensor(gx, y._shape, y._dtype)

    def backward(self, gg):
        """PyTorch's formulas. softmax: along g, the same op (it is symmetric in g); along y,
        gg * g - sum(y * g) * gg - g * sum(y * gg). log_softmax: along g, gg - sum(gg * exp(y));
        along y, -sum(g) * exp(y) * gg."""
        g, y = self.unpack(0), self.unpack(1)
        dims = [self.dim] if y.dim() else []  # the rows' dim; none for a 0-d tensor
        along_g, along_y = self.needs_input_grad(0), self.needs_input_grad(1)
        if self.log:
            return (
                gg - (gg * y.exp()).sum(dims, keepdim=True) if along_g else None,
                -g.sum(dims, keepdim=True) * y.exp() * gg if along_y else None,
            )
        return (
            SoftmaxBackwardDataBackward0.run(gg, y, dim=self.dim) if along_g else None,
            g * gg - (y * g).sum(dims, keepdim=True) * gg - g * (y * gg).sum(dims, keepdim=True) if along_y else None,
        )


class LogSoftmaxBackwardDataBackward0(SoftmaxBackwardDataBackward0):
    log = True


# ---- scaled dot-product attention, fused (the core's ops/attention.cpp)


def flash_attention_case(query, key, value):
    """The inputs PyTorch sends to its CPU flash kernel (given no mask but is_causal, no dropout): 4-D
    float32 / float64 query, key and value of one dtype, the same batch and head sizes, value as wide
    as query and key, last dims contiguous, nothing empty."""
    tensors = (query, key, value)
    if any(t.dim() != 4 for t in tensors) or key._dtype is not query._dtype or value._dtype is not query._dtype:
        return False
    if not query._dtype.is_floating_point or query._dtype.itemsize not in (4, 8):
        return False
    (b, h, _, e), (bk, hk, s, ek), (bv, hv, sv, ev) = query._shape, key._shape, value._shape
    if (bk, hk) != (b, h) or (bv, hv) != (b, h) or sv != s or ek != e or ev != e:
        return False
    return all(t.numel() and (t._strides[3] == 1 or t._shape[3] == 1) for t in tensors)


class ScaledDotProductFlashAttentionForCpuBackward0(Function):
    """softmax(query key^T * scale) value per (batch, head), causal: query i sees keys j <= i. The
    forward is a loop over query rows as the core's kernel; the backward is its formulas as ops,
    the weights recomputed, so that a create_graph backward differentiates them."""

    def forward(self, query, key, value, scale, causal):
        self.scale, self.causal = scale, causal
        for t in (query, key, value):
            self.save(t)
        (batch, heads, rows, width), keys = query._shape, key._shape[2]
        qs, ks, vs = read(query), read(key), read(value)
        out = [0.0] * (batch * heads * rows * width)
        for plane in range(batch * heads):
            q0, k0 = plane * rows * width, plane * keys * width
            for i in range(rows):
                q = qs[q0 + i * width : q0 + (i + 1) * width]
                visible = min(i + 1, keys) if causal else keys
                scores = [
                    sum(a * b for a, b in zip(q, ks[k0 + j * width : k0 + (j + 1) * width])) * scale
                    for j in range(visible)
                ]
                m = max(scores)
                e = [math.exp(x - m) for x in scores]
                total = sum(e)
                for j, ej in enumerate(e):
                    p = ej / total
                    for c in range(width):
                        out[q0 + i * width + c] += p * vs[k0 + j * width + c]
        return new_tensor(out, query._shape, query._dtype)

    def backward(self, grad):
        """dV = P^T g, dp = g V^T, ds = P * (dp - rowsum(P * dp)) * scale, dQ = ds K, dK = ds^T Q."""
        from ._prims import attention_scores  # _prims imports this module

        q, k, v = self.unpack(0), self.unpack(1), self.unpack(2)
        p = attention_scores(q, k, self.scale, None, self.causal).softmax(-1)
        dp = grad @ v.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum([3], keepdim=True)) * self.scale
        return (
            ds @ k if self.needs_input_grad(0) else None,
            ds.transpose(-2, -1) @ q if self.needs_input_grad(1) else None,
            p.transpose(-2, -1) @ grad if self.needs_input_grad(2) else None,
        )


# ---- nll_loss: minus the (weighted) log-probability of each sample's target class, per sample or
# reduced. The weighted mean divides by the total weight of the targets that count.


def reduction_from_name(name):
    if name not in ("none", "mean", "sum"):
        raise ValueError(f"{name} is not a valid value for reduction")
    return name


def _check_nll_loss(input, target, weight):
    """The checks of PyTorch's nll_loss_nd (what F.nll_loss calls: ValueErrors), then of its
    nll_loss_forward (RuntimeErrors), in PyTorch's order."""
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    target_batch = target._shape[0] if target.dim() else 0  # PyTorch reads a 0-d target's batch size as 0
    if input.dim() != 1 and input._shape[0] != target_batch:
        raise ValueError(f"Expected input batch_size ({input._shape[0]}) to match target batch_size ({target_batch}).")
    if weight is not None and is_grad_enabled() and weight.requires_grad:
        raise RuntimeError(
            "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
            "This input cannot have requires_grad True."
        )
    if input.dim() > 2:
        raise RuntimeError("input tensor should be 1D or 2D")
    if target.dim() > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target._dtype is not int64:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {SCALAR_TYPE_NAME[target._dtype]}")
    if input.dim() == 1 and target.dim() == 1 and target._shape[0] != 1:
        raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target._shape[0]}")
    if input.dim() == 2 and target.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    classes = input._shape[-1]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got "
            f"weight tensor of shape: {shape_str(weight._shape)}"
        )
    if not input._dtype.is_floating_point:
        raise _not_implemented_for("nll_loss_out_frame", input._dtype)
    if weight is not None and weight._dtype is not input._dtype:
        raise RuntimeError(
            f"expected scalar type {SCALAR_TYPE_NAME[input._dtype]} but found {SCALAR_TYPE_NAME[weight._dtype]}"
        )


def _targets(input, target, weight, ignore_index):
    """(sample, target class, class weight) for every sample whose target is not ignore_index;
    IndexError for a target that is not a class. A 1-D input is one sample."""
    classes = input._shape[-1]
    weights = read(weight) if weight is not None else None
    found = []
    for b, c in enumerate(read(target)):
        if c == ignore_index:
            continue
        if not 0 <= c < classes:
            raise IndexError(f"Target {c} is out of bounds.")
        found.append((b, c, weights[c] if weights is not None else 1.0))
    return found


class NllLossBackward0(Function):
    def forward(self, input, target, weight, reduction, ignore_index):
        _check_nll_loss(input, target, weight)
        self.reduction, self.ignore_index = reduction, ignore_index
        self.per_sample = reduction == "none" and input.dim() == 2  # else one number (also for a 1-D input)
        classes, xs = input._shape[-1], read(input)
        losses = [0.0] * (input._shape[0] if self.per_sample else 0)
        loss = total_weight = 0.0
        for b, c, w in _targets(input, target, weight, ignore_index):
            term = -xs[b * classes + c] * w
            if self.per_sample:
                losses[b] = term
            loss += term
            total_weight += w
        self.total_weight = total_weight  # what the mean divided by
        for t in (input, target, weight):
            self.save(t)
        if self.per_sample:
            return new_tensor(losses, (input._shape[0],), input._dtype)
        # A mean over no targets (an empty batch, all ignored, zero weights) is 0 / 0: NaN, as PyTorch.
        return new_tensor([ieee_div(loss, total_weight) if reduction == "mean" else loss], (), input._dtype)

    def backward(self, grad):
        input, target, weight = self.unpack(0), self.unpack(1), self.unpack(2)
        # PyTorch's nll_loss_backward checks the sizes as if the target's size were the batch size, so a
        # 1-D input with a 1-D target (of size 1) that its forward accepts fails here unless C == 1.
        if input.dim() == 1 and target.dim() == 1 and input._shape[0] != target._shape[0]:
            raise RuntimeError(
                f"size mismatch (got input: {shape_str(input._shape)}, target: {shape_str(target._shape)})"
            )
        return NllLossBackwardBackward0.run(
            grad,
            input,
            target=target,
            weight=weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            total_weight=self.total_weight,
        )


class NllLossBackwardBackward0(Function):
    """nll_loss's gradient, as PyTorch's nll_loss_backward: linear in the incoming gradient, constant
    in the input (whose gradient is zeros). Recorded with the input as an input, so a gradient taken
    with create_graph has a graph wherever the input has one, as PyTorch's."""

    def forward(self, grad, input, target, weight, reduction, ignore_index, total_weight):
        self.reduction, self.ignore_index = reduction, ignore_index
        self.save(target)
        self.save(weight)
        per_sample = reduction == "none" and input.dim() == 2
        gs, classes = read(grad), input._shape[-1]
        scale = None if per_sample else ieee_div(gs[0], total_weight) if reduction == "mean" else gs[0]
        gx = [0.0] * input.numel()
        for b, c, w in _targets(input, target, weight, ignore_index):
            gx[b * classes + c] = -w * (gs[b] if per_sample else scale)
        return new_tensor(gx, input._shape, input._dtype)

    def backward(self, gg):
        grad = (
            NllLossBackward0.run(
                gg,
                target=self.unpack(0),
                weight=self.unpack(1),
                reduction=self.reduction,
                ignore_index=self.ignore_index,
            )
            if self.needs_input_grad(0)
            else None
        )
        return grad, zeros_like(gg) if self.needs_input_grad(1) else None


def nll_loss(input, target, weight, reduction, ignore_index):
    return NllLossBackward0.run(
        input, target=target, weight=weight, reduction=reduction_from_name(reduction), ignore_index=ignore_index
    )


# ---- gelu(x) = x * P(X <= x) for a standard normal X; approximate='tanh' is PyTorch's tanh formula.
# PyTorch's constants, spelled as its kernels spell them (the core uses the same literals).
_SQRT1_2 = 0.70710678118654752440  # M_SQRT1_2
_ALPHA = 1.12837916709551257390 * _SQRT1_2 * 0.5  # M_2_SQRTPI * M_SQRT1_2 * 0.5 = 1/sqrt(2 pi)
_BETA = 1.41421356237309504880 * 1.12837916709551257390 * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5 = sqrt(2/pi)
_KAPPA = 0.044715


def gelu_approximation_from_name(name):
    if name not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return name


def _normal_cdf(x):
    """P(X <= x) = erfc(-x / sqrt(2)) / 2: PyTorch's (1 + erf(x / sqrt(2))) / 2 without its
    cancellation below x = -3 (1 + erf is 0 from x = -8.3 on; gelu(-10) = -7.6e-23, not 0)."""
    return 0.5 * math.erfc(-x * _SQRT1_2)


def _gelu_tanh_logistic(x):
    """With approximate='tanh': 0.5 x (1 + tanh(u)) = x s, u = sqrt(2/pi) (x + 0.044715 x^3), s =
    1 / (1 + e) the logistic function of 2u, e = exp(-2u): PyTorch's value without its cancellation in
    1 + tanh(u) below x = -3 (0 from x = -7.2 on). Returns s and e."""
    try:
        e = math.exp(-(x * (2 * _BETA * _KAPPA * (x * x) + 2 * _BETA)))
    except OverflowError:  # the C library's exp (the core's) gives inf
        e = math.inf
    return 1 / (1 + e), e


def _gelu(x, approximate):
    if approximate == "tanh":
        return x * _gelu_tanh_logistic(x)[0]
    return x * _normal_cdf(x)


def _gelu_derivative(x, approximate):
    """d gelu / dx: with 'none', P(X <= x) + x p(x), p the normal density (as PyTorch's
    GeluBackwardKernel); with 'tanh', 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) u' = s (1 + 2 x u'
    (1 - s)), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2), 1 - s = e s below s = 1/2 (e at most 1) and
    1 - s above it."""
    if approximate == "tanh":
        s, e = _gelu_tanh_logistic(x)
        du = 3 * _BETA * _KAPPA * (x * x) + _BETA
        return s * (1 + 2 * x * du * (1 - s if s < 0.5 else e * s))
    return _normal_cdf(x) + x * (_ALPHA * math.exp(-0.5 * x * x))


def _gelu_second_derivative(x, approximate):
    """d^2 gelu / dx^2 from recorded ops (for the gradient of gelu's gradient), as the core writes
    it. With the normal density p: gelu'' = p (2 - x^2). With t = tanh(u), u = b (x + k x^3):
    gelu'' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), u' = b (1 + 3 k x^2), u'' = 6 b k x."""
    x_sq = x * x
    if approximate == "none":
        return (x_sq * -0.5).exp() * _ALPHA * (2 - x_sq)
    t = ((x + x_sq * x * _KAPPA) * _BETA).tanh()
    du = (x_sq * (3 * _KAPPA) + 1) * _BETA
    d2u = x * (6 * _BETA * _KAPPA)
    inner = d2u - t * (du * du) * 2
    return (1 - t * t) * (du + x * inner * 0.5)


class GeluBackwardBackward0(Function):
    """gelu's gradient g * gelu'(x) as an op of its own, as PyTorch's gelu_backward: a loop, and,
    when recorded (in a create_graph backward), a node whose formulas are its derivative."""

    def forward(self, g, x, approximate):
        self.approximate = approximate
        self.save(g)
        self.save(x)
        values = [gv * _gelu_derivative(xv, approximate) for gv, xv in zip(read(g), read(x))]
        return new_tensor(values, x._shape, x._dtype)

    def backward(self, gg):
        g, x = self.unpack(0), self.unpack(1)
        grad_g = GeluBackwardBackward0.run(gg, x, approximate=self.approximate) if self.needs_input_grad(0) else None
        grad_x = gg * g * _gelu_second_derivative(x, self.approximate) if self.needs_input_grad(1) else None
        return grad_g, grad_x


class GeluBackward0(Function):
    def forward(self, x, approximate):
        if not x._dtype.is_floating_point:
            raise _not_implemented_for("GeluKernelImpl", x._dtype)
        self.approximate = approximate
        self.save(x)
        return new_tensor([_gelu(v, approximate) for v in read(x)], x._shape, x._dtype)

    def backward(self, grad):
        return GeluBackwardBackward0.run(grad, self.unpack(0), approximate=self.approximate)


def gelu(x, approximate):
    return GeluBackward0.run(x, approximate=gelu_approximation_from_name(approximate))


def softmax(x, dim):
    return SoftmaxBackward0.run(x, dim=dim)


def log_softmax(x, dim):
    return LogSoftmaxBackward0.run(x, dim=dim)
