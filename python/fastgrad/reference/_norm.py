"""Batch, group and layer normalization, the twin of csrc/ops/normalization.cpp. Batch and group
norm: input (N, C, *) seen as (N, C, S), weight, bias and running stats (C) or None. Written as the
definitions, one statistics unit at a time (a channel for batch norm, an (n, group) block for group
norm), in Python floats (double) rounded once when stored: the mean, the biased variance
sum((x - mean)^2) / count, then (x - mean) / sqrt(var + eps) * weight + bias. The backward is
PyTorch's formula with the saved mean and 1 / std; in a backward with create_graph it is composed of
tensor ops instead, so gradients of any order follow. Layer norm (at the end): the same per row of
the trailing dims, with a weight and bias per element of the row; float16 and bfloat16 as the core
computes them (in float32: the statistics saved in it); its gradients are an op of their own with
one node for the three (NativeLayerNormBackwardBackward0), whose backward is composed of tensor ops.
PyTorch's argument checks are the caller's (nn/functional.py); the checks here only keep direct
calls well-defined."""

import math

from .._types import compute_type, float32, float64
from ._autograd import Function, check_differentiable_output, is_grad_enabled, should_record
from ._nn import _not_implemented_for
from ._tensor import new_tensor, read, write


def _planes(shape):
    """(n, c, s): the input seen as (N, C, S)."""
    return shape[0], shape[1] if len(shape) > 1 else 1, math.prod(shape[2:])


def _check(name, input, vectors):
    if input.dim() < 2:
        raise RuntimeError(f"{name}: expected an input of at least 2 dims (N, C, *)")
    if input._dtype not in (float32, float64):
        raise _not_implemented_for("batch_norm" if name == "batch_norm" else "GroupNormKernelImpl", input._dtype)
    channels = _planes(input._shape)[1]
    for t in vectors:
        if t is not None and (t._dtype is not input._dtype or t.numel() != channels):
            raise RuntimeError(
                f"{name}: weight, bias and running stats must have the input's dtype and one value per channel"
                if name == "batch_norm"
                else f"{name}: weight and bias must have the input's dtype and one value per channel"
            )


def _moments(values):
    """The mean and the biased variance of a non-empty list."""
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


def _normalize(xs, units, weight, bias, mean, invstd, c, s):
    """(x - mean[u]) * invstd[u] * weight[ch] + bias[ch] for every element, u its statistics unit."""
    ws = read(weight) if weight is not None else [1.0] * c
    bs = read(bias) if bias is not None else [0.0] * c
    out = []
    for index, x in enumerate(xs):
        plane = index // s
        ch, u = plane % c, units(plane)
        out.append((x - mean[u]) * invstd[u] * ws[ch] + bs[ch])
    return out


def _normalized_composed(x, dims, eps):
    """xhat and 1 / std of x over `dims`, as tensor ops."""
    centred = x - x.mean(dims, keepdim=True)
    rstd = ((centred * centred).mean(dims, keepdim=True) + eps).rsqrt()
    return centred * rstd, rstd


def _projected_gradient(g, xhat, rstd, dims):
    """rstd * (g - mean(g) - xhat * mean(g * xhat)) over `dims`."""
    return rstd * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))


class _Normalization(Function):
    """Saves the input, the weight, and the mean and 1 / std of each unit (in the input's dtype)."""

    def _save(self, input, weight, mean, invstd, eps):
        self.eps = eps
        self.save(input)
        self.save(weight)
        self.save(new_tensor(mean, (len(mean),), input._dtype))
        self.save(new_tensor(invstd, (len(invstd),), input._dtype))

    def _affine_gradients_composed(self, g, xhat):
        return (
            (g * xhat).sum([0, 2]) if self.needs_input_grad(1) else None,
            g.sum([0, 2]) if self.needs_input_grad(2) else None,
        )

    def _gradients(self, grad, units, unit_count, unit_size, training):
        """Per unit u, grad_input = (w dy - (x - mean) * invstd^2 * sum(w dy (x - mean)) / D -
        sum(w dy) / D) * invstd over its D elements (training; otherwise w dy invstd); grad_weight and
        grad_bias per channel: sum(dy (x - mean)) * invstd and sum(dy)."""
        input, weight = self.unpack(0), self.unpack(1)
        mean, invstd = read(self.unpack(2)), read(self.unpack(3))
        n, c, s = _planes(input._shape)
        xs, gs = read(input), read(grad)
        ws = read(weight) if weight is not None else [1.0] * c
        weighted_dy, weighted_dy_xmu = [0.0] * unit_count, [0.0] * unit_count
        grad_weight, grad_bias = [0.0] * c, [0.0] * c
        for index, (x, dy) in enumerate(zip(xs, gs)):
            plane = index // s
            ch, u = plane % c, units(plane)
            weighted_dy[u] += ws[ch] * dy
            weighted_dy_xmu[u] += ws[ch] * dy * (x - mean[u])
            grad_weight[ch] += dy * (x - mean[u]) * invstd[u]
            grad_bias[ch] += dy
        grad_input = []
        for index, (x, dy) in enumerate(zip(xs, gs)):
            plane = index // s
            ch, u = plane % c, units(plane)
            projection = weighted_dy_xmu[u] / unit_size * invstd[u] ** 2 if training else 0.0
            grad_mean = weighted_dy[u] / unit_size if training else 0.0
            grad_input.append((ws[ch] * dy - (x - mean[u]) * projection - grad_mean) * invstd[u])
        dtype = input._dtype
        return (
            new_tensor(grad_input, input._shape, dtype) if self.needs_input_grad(0) else None,
            new_tensor(grad_weight, (c,), dtype) if self.needs_input_grad(1) else None,
            new_tensor(grad_bias, (c,), dtype) if self.needs_input_grad(2) else None,
        )


class NativeBatchNormBackward0(_Normalization):
    def forward(self, input, weight, bias, running_mean, running_var, training, momentum, eps):
        _check("batch_norm", input, (weight, bias, running_mean, running_var))
        if not training and (running_mean is None or running_var is None):
            raise RuntimeError("batch_norm: evaluation needs running_mean and running_var")
        n, c, s = _planes(input._shape)
        xs, count = read(input), n * s
        self.training = training
        if training:
            channels = [[xs[(i * c + ch) * s + j] for i in range(n) for j in range(s)] for ch in range(c)]
            moments = [_moments(values) if count else (0.0, 0.0) for values in channels]
            mean = [m for m, _ in moments]
            invstd = [1 / math.sqrt(v + eps) for _, v in moments]
            if count:  # an empty batch leaves the running stats as they are, as PyTorch's
                unbiased = [v * count / (count - 1) if count > 1 else math.nan for _, v in moments]  # 0 / 0
                for running, batch in ((running_mean, mean), (running_var, unbiased)):
                    if running is not None:
                        write(running, [(1 - momentum) * r + momentum * b for r, b in zip(read(running), batch)])
                        running._storage.version += 1
        else:
            mean = read(running_mean)
            invstd = [1 / math.sqrt(v + eps) for v in read(running_var)]
        out = _normalize(xs, lambda plane: plane % c, weight, bias, mean, invstd, c, s)
        self._save(input, weight, mean, invstd, eps)
        return new_tensor(out, input._shape, input._dtype)

    def backward(self, grad):
        input = self.unpack(0)
        n, c, s = _planes(input._shape)
        if is_grad_enabled():  # create_graph: the same formulas as tensor ops
            weight = self.unpack(1)
            x, g = input.reshape(n, c, s), grad.reshape(n, c, s)
            if self.training:
                xhat, rstd = _normalized_composed(x, [0, 2], self.eps)
            else:
                rstd = self.unpack(3).reshape(1, c, 1)
                xhat = (x - self.unpack(2).reshape(1, c, 1)) * rstd
            scaled = g if weight is None else g * weight.reshape(1, c, 1)
            grad_input = None
            if self.needs_input_grad(0):
                grad_input = _projected_gradient(scaled, xhat, rstd, [0, 2]) if self.training else scaled * rstd
                grad_input = grad_input.reshape(input._shape)
            return grad_input, *self._affine_gradients_composed(g, xhat)
        return self._gradients(grad, lambda plane: plane % c, c, n * s, self.training)


class NativeGroupNormBackward0(_Normalization):
    def forward(self, input, weight, bias, groups, eps):
        _check("group_norm", input, (weight, bias))
        n, c, s = _planes(input._shape)
        if groups < 1 or c % groups:
            raise RuntimeError("group_norm: the channels must split into groups")
        self.groups = groups
        xs, size = read(input), c // groups * s
        units = n * groups if c else 0  # without channels there are no groups (and `groups` may be any size)
        moments = [_moments(xs[u * size : (u + 1) * size]) if size else (0.0, 0.0) for u in range(units)]
        mean = [m for m, _ in moments]
        invstd = [1 / math.sqrt(v + eps) for _, v in moments]
        per_group = c // groups
        out = _normalize(xs, lambda plane: plane // per_group, weight, bias, mean, invstd, c, s)
        self._save(input, weight, mean, invstd, eps)
        return new_tensor(out, input._shape, input._dtype)

    def backward(self, grad):
        input = self.unpack(0)
        n, c, s = _planes(input._shape)
        groups, per_group = self.groups, c // self.groups
        if is_grad_enabled():  # create_graph: the same formulas as tensor ops
            weight = self.unpack(1)
            xhat, rstd = _normalized_composed(input.reshape(n, groups, per_group * s), [2], self.eps)
            g = grad.reshape(n, c, s)
            scaled = g if weight is None else g * weight.reshape(1, c, 1)
            grad_input = None
            if self.needs_input_grad(0):
                grouped = scaled.reshape(n, groups, per_group * s)
                grad_input = _projected_gradient(grouped, xhat, rstd, [2]).reshape(input._shape)
            return grad_input, *self._affine_gradients_composed(g, xhat.reshape(n, c, s))
        return self._gradients(grad, lambda plane: plane // per_group, n * groups if c else 0, per_group * s, True)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return NativeBatchNormBackward0.run(
        input,
        weight,
        bias,
        running_mean=running_mean,
        running_var=running_var,
        training=training,
        momentum=momentum,
        eps=eps,
    )


def group_norm(input, weight, bias, groups, eps):
    return NativeGroupNormBackward0.run(input, weight, bias, groups=groups, eps=eps)


def _layer_norm_rows(shape, normalized_dims):
    """(rows, D): the number of rows and their length over the trailing `normalized_dims` dims."""
    leading = len(shape) - normalized_dims
    return math.prod(shape[:leading]), math.prod(shape[leading:])


def _layer_norm_type(input):
    computed = compute_type(input._dtype)
    if computed not in (float32, float64):
        raise _not_implemented_for("LayerNormKernelImpl", input._dtype)
    return computed


def _sum_over_rows(t, normalized_dims):
    """t summed over its dims before the trailing `normalized_dims` (a weight's or bias's gradient)."""
    leading = list(range(t.dim() - normalized_dims))
    return t.sum(leading) if leading else t


class NativeLayerNormBackward0(Function):
    """Saves the input, the weight, and each row's mean and 1 / std (in the compute type, shaped as
    PyTorch's: the leading dims, then ones)."""

    def forward(self, input, weight, bias, normalized_dims, eps):
        if not 0 <= normalized_dims <= input.dim():
            raise RuntimeError("layer_norm: normalized_dims must be between 0 and the input's number of dims")
        computed = _layer_norm_type(input)
        rows, size = _layer_norm_rows(input._shape, normalized_dims)
        for t in (weight, bias):
            if t is not None and (t._dtype is not input._dtype or t.numel() != size):
                raise RuntimeError(
                    "layer_norm: weight and bias must have the input's dtype and one value per normalized element"
                )
        xs = read(input)
        ws = read(weight) if weight is not None else [1.0] * size
        bs = read(bias) if bias is not None else [0.0] * size
        mean, invstd, out = [], [], []
        for r in range(rows):
            row = xs[r * size : (r + 1) * size]
            m, v = _moments(row) if size else (0.0, 0.0)
            mean.append(m)
            invstd.append(1 / math.sqrt(v + eps))
            out.extend((x - m) * invstd[-1] * w + b for x, w, b in zip(row, ws, bs))
        statistics_shape = input._shape[: input.dim() - normalized_dims] + (1,) * normalized_dims
        self.eps, self.normalized_dims = eps, normalized_dims
        self.save(input)
        self.save(weight)
        self.save(new_tensor(mean, statistics_shape, computed))
        self.save(new_tensor(invstd, statistics_shape, computed))
        return new_tensor(out, input._shape, input._dtype)

    def backward(self, grad):
        wanted = tuple(self.needs_input_grad(i) for i in range(3))
        saved = [self.unpack(i) for i in range(4)]
        return _layer_norm_backward(grad, *saved, self.normalized_dims, self.eps, wanted)


class NativeLayerNormBackwardBackward0(Function):
    """The three gradients of layer_norm as one node: saves grad, input and weight; edges to the three.
    Its backward is composed of tensor ops, with xhat and rstd recomputed from the input."""

    num_outputs = 3

    def forward(self, grad, input, weight, mean, rstd, normalized_dims, eps, wanted):
        """Per row, rstd * (w dy - mean(w dy) - (x - mean) * rstd^2 * mean(w dy (x - mean))); per
        element of the row, the sums over the rows of dy * (x - mean) * rstd and of dy."""
        rows, size = _layer_norm_rows(input._shape, normalized_dims)
        count = max(size, 1)  # empty rows have no elements to divide among
        xs, gs, means, rstds = read(input), read(grad), read(mean), read(rstd)
        ws = read(weight) if weight is not None else [1.0] * size
        grad_input, grad_weight, grad_bias = [], [0.0] * size, [0.0] * size
        for r in range(rows):
            row, dys, m, inv = xs[r * size : (r + 1) * size], gs[r * size : (r + 1) * size], means[r], rstds[r]
            weighted = [w * dy for w, dy in zip(ws, dys)]
            projection = sum(g * (x - m) for g, x in zip(weighted, row)) / count * inv * inv
            grad_mean = sum(weighted) / count
            grad_input.extend((g - (x - m) * projection - grad_mean) * inv for g, x in zip(weighted, row))
            for j, (x, dy) in enumerate(zip(row, dys)):
                grad_weight[j] += dy * (x - m) * inv
                grad_bias[j] += dy
        self.eps, self.normalized_dims = eps, normalized_dims
        self.save(grad)
        self.save(input)
        self.save(weight)
        normalized = input._shape[input.dim() - normalized_dims :]
        dtype = input._dtype
        return (
            new_tensor(grad_input, input._shape, dtype) if wanted[0] else None,
            new_tensor(grad_weight, normalized, dtype) if wanted[1] else None,
            new_tensor(grad_bias, normalized, dtype) if wanted[2] else None,
        )

    def backward(self, gg_input, gg_weight, gg_bias):
        grad, input, weight = self.unpack(0), self.unpack(1), self.unpack(2)
        dims = list(range(-self.normalized_dims, 0))
        xhat, rstd = _normalized_composed(input, dims, self.eps)
        scaled = grad if weight is None else grad * weight

        def mean(t):
            return t.mean(dims, keepdim=True)

        def plus(a, b):
            return b if a is None else a + b

        d_grad = d_input = d_weight = None
        if gg_input is not None:
            # gg_input . grad_input = rstd * <gg_input, P(scaled)>, P projecting off the row's mean and
            # off xhat (symmetric): linear in scaled; in the input through rstd and xhat.
            projected = _projected_gradient(gg_input, xhat, rstd, dims)
            d_grad = projected if weight is None else projected * weight
            if weight is not None:
                d_weight = _sum_over_rows(grad * projected, self.normalized_dims)
            m, p = mean(scaled * xhat), mean(gg_input * xhat)
            through_xhat = -rstd * (scaled * p + m * gg_input)
            through_rstd = mean(gg_input * scaled) - mean(gg_input) * mean(scaled) - m * p
            d_input = _projected_gradient(through_xhat, xhat, rstd, dims) - rstd * rstd * xhat * through_rstd
        # gg_weight . grad_weight = the sum of gg_weight * grad * xhat; gg_bias . grad_bias = the sum of gg_bias * grad
        if gg_weight is not None:
            d_grad = plus(d_grad, gg_weight * xhat)
            d_input = plus(d_input, _projected_gradient(gg_weight * grad, xhat, rstd, dims))
        if gg_bias is not None:
            d_grad = gg_bias.expand(grad._shape) if d_grad is None else d_grad + gg_bias
        return d_grad, d_input, d_weight


def _layer_norm_backward(grad, input, weight, mean, rstd, normalized_dims, eps, wanted):
    """The gradients of layer_norm (None where not `wanted`): one node for the three when any of
    grad, input and weight requires grad in grad mode."""
    node = NativeLayerNormBackwardBackward0()
    result = node.forward(grad, input, weight, mean, rstd, normalized_dims, eps, wanted)
    if should_record((grad, input, weight)):
        node.connect((grad, input, weight))
        for i, out in enumerate(result):
            if out is not None:
                check_differentiable_output(out)
                out._grad_fn, out._output_nr = node, i
    return result


def layer_norm(input, weight, bias, normalized_dims, eps):
    return NativeLayerNormBackward0.run(input, weight, bias, normalized_dims=normalized_dims, eps=eps)
