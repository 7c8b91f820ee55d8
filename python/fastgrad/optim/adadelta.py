"""Adadelta (weight decay, maximize): torch.optim.Adadelta's single-tensor update, operation by
operation."""

from .optimizer import Optimizer, _addcmul_, _fma, _gradient, _new_step, _require
from .._factories import zeros_like

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= rho <= 1.0, f"Invalid rho value: {rho}")
        _require(0.0 <= eps, f"Invalid epsilon value: {eps}")
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["square_avg"] = zeros_like(param)
            state["acc_delta"] = zeros_like(param)
        state["step"] += 1
        grad = _gradient(param, group)
        rho, eps = group["rho"], group["eps"]
        std = _addcmul_(state["square_avg"].mul_(rho), grad, grad, 1 - rho).add(eps).sqrt_()
        acc_delta = state["acc_delta"]
        # the step: grad scaled by the RMS of the past steps over the RMS of the gradients
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        _addcmul_(acc_delta.mul_(rho), delta, delta, 1 - rho)
        param.copy_(_fma(-group["lr"], delta, param))
