"""RMSprop (centered, with momentum, weight decay, maximize): torch.optim.RMSprop's single-tensor
update, operation by operation."""

from .optimizer import Optimizer, _addcdiv_, _addcmul_, _fma, _gradient, _lerp_, _new_step, _require
from .._factories import zeros_like

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= eps, f"Invalid epsilon value: {eps}")
        _require(0.0 <= momentum, f"Invalid momentum value: {momentum}")
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        _require(0.0 <= alpha, f"Invalid alpha value: {alpha}")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["square_avg"] = zeros_like(param)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = zeros_like(param)
        state["step"] += 1
        grad = _gradient(param, group)
        alpha = group["alpha"]
        square_avg = _addcmul_(state["square_avg"].mul_(alpha), grad, grad, 1 - alpha)
        if group["centered"]:  # the variance: the second moment less the square of the mean
            grad_avg = _lerp_(state["grad_avg"], grad, 1 - alpha)
            avg = _fma(-grad_avg, grad_avg, square_avg).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg.add_(group["eps"])
        if group["momentum"] > 0:
            buf = _addcdiv_(state["momentum_buffer"].mul_(group["momentum"]), grad, avg)
            param.copy_(_fma(-group["lr"], buf, param))
        else:
            _addcdiv_(param, grad, avg, -group["lr"])
