"""The optimizers' fused updates (the core's kernels/optim_impl.h) in pure Python: the same steps per
element, each rounded to the tensor's dtype as PyTorch's op chain rounds it. A float32 sum, product,
quotient or square root computed in float64 and rounded to float32 is the correctly rounded float32
result (float64 carries more than twice float32's digits), so only the fused multiply-adds need exact
arithmetic."""

from .._types import float64
from ._elementwise import _sqrt, fused_multiply_add, ieee_div
from ._storage import cast, cast_scalar


def _rounding(dtype):
    """(values rounded to dtype, a Python number as dtype's scalar argument, fused multiply-add of lists)."""

    def rounded(values):
        return cast(values, float64, dtype)

    def scalar(value):
        return cast_scalar(float(value), dtype)

    def fused(a, b, c):
        return [fused_multiply_add(x, y, z, dtype) for x, y, z in zip(a, b, c)]

    return rounded, scalar, fused


def _gradient(param, grad, weight_decay, maximize, scalar, fused):
    """-grad when maximizing, then grad.add(param, alpha=weight_decay) (0: none)."""
    if maximize:
        grad = [-g for g in grad]
    if weight_decay != 0:
        grad = fused(param, [scalar(weight_decay)] * len(param), grad)
    return grad


def adam(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, dtype, step_size, bias_correction2_sqrt, options):
    """torch.optim.Adam's single-tensor step over lists of values of `dtype`: the new (param, exp_avg,
    exp_avg_sq, max_exp_avg_sq); max_exp_avg_sq None without amsgrad. options: (lerp_weight, beta2,
    one_minus_beta2, eps, weight_decay, decay, maximize), see _prims.adam_."""
    lerp_weight, beta2, one_minus_beta2, eps, weight_decay, decay, maximize = options
    rounded, scalar, fused = _rounding(dtype)
    if decay != 1:  # AdamW: param.mul_(1 - lr * weight_decay)
        param = rounded([p * scalar(decay) for p in param])
    grad = _gradient(param, grad, weight_decay, maximize, scalar, fused)
    # exp_avg.lerp_(grad, 1 - beta1), from the end nearer to the weight
    weight = scalar(lerp_weight)
    small = abs(weight) < 0.5
    coefficient = weight if small else rounded([weight - 1])[0]
    difference = rounded([g - m for g, m in zip(grad, exp_avg)])
    exp_avg = fused([coefficient] * len(param), difference, exp_avg if small else grad)
    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    exp_avg_sq = rounded([v * scalar(beta2) for v in exp_avg_sq])
    exp_avg_sq = fused(rounded([scalar(one_minus_beta2) * g for g in grad]), grad, exp_avg_sq)
    second_moment = exp_avg_sq
    if max_exp_avg_sq is not None:  # torch.maximum: NaN wins
        max_exp_avg_sq = [m if m != m or m > v else v for m, v in zip(max_exp_avg_sq, exp_avg_sq)]
        second_moment = max_exp_avg_sq
    # denom = (second_moment.sqrt() / bias_correction2_sqrt).add_(eps)
    root = rounded([_sqrt(v) for v in second_moment])
    denom = rounded([d + scalar(eps) for d in rounded([r / scalar(bias_correction2_sqrt) for r in root])])
    # param.addcdiv_(exp_avg, denom, value=-step_size)
    scaled = rounded([scalar(-step_size) * m for m in exp_avg])
    param = rounded([p + q for p, q in zip(param, rounded([ieee_div(s, d) for s, d in zip(scaled, denom)]))])
    return param, exp_avg, exp_avg_sq, max_exp_avg_sq


def sgd(param, grad, momentum_buffer, dtype, first_step, options):
    """torch.optim.SGD's single-tensor step: the new (param, momentum_buffer); momentum_buffer None
    without momentum. options: (lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize)."""
    lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize = options
    rounded, scalar, fused = _rounding(dtype)
    n = len(param)
    grad = _gradient(param, grad, weight_decay, maximize, scalar, fused)
    if momentum_buffer is not None:
        if first_step:  # buf = grad.clone()
            momentum_buffer = grad
        else:  # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            decayed = rounded([b * scalar(momentum) for b in momentum_buffer])
            momentum_buffer = fused(grad, [scalar(one_minus_dampening)] * n, decayed)
        # nesterov: grad.add(buf, alpha=momentum); else the buffer
        grad = fused(momentum_buffer, [scalar(momentum)] * n, grad) if nesterov else momentum_buffer
    return fused(grad, [scalar(-lr)] * n, param), momentum_buffer  # param.add_(grad, alpha=-lr)


def adagrad(param, grad, state_sum, dtype, lr, options):
    """torch.optim.Adagrad's single-tensor step with the decayed learning rate lr: the new (param, sum).
    options: (eps, weight_decay, maximize)."""
    eps, weight_decay, maximize = options
    rounded, scalar, fused = _rounding(dtype)
    grad = _gradient(param, grad, weight_decay, maximize, scalar, fused)
    state_sum = fused(grad, grad, state_sum)  # sum.addcmul_(grad, grad, value=1)
    root = rounded([r + scalar(eps) for r in rounded([_sqrt(v) for v in state_sum])])  # sum.sqrt().add_(eps)
    scaled = rounded([scalar(-lr) * g for g in grad])  # param.addcdiv_(grad, std, value=-lr)
    param = rounded([p + q for p, q in zip(param, rounded([ieee_div(s, d) for s, d in zip(scaled, root)]))])
    return param, state_sum
