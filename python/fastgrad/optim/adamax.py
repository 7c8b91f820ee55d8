"""Adamax (Adam with the infinity norm; weight decay, maximize): torch.optim.Adamax's single-tensor
update, operation by operation."""

from .optimizer import Optimizer, _addcdiv_, _check_betas, _gradient, _lerp_, _new_step, _require
from .._factories import zeros_like

__all__ = ["Adamax"]


class Adamax(Optimizer):
    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= eps, f"Invalid epsilon value: {eps}")
        _check_betas(betas)
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["exp_avg"] = zeros_like(param)
            state["exp_inf"] = zeros_like(param)
        state["step"] += 1
        grad = _gradient(param, group)
        beta1, beta2 = group["betas"]
        exp_avg, exp_inf = _lerp_(state["exp_avg"], grad, 1 - beta1), state["exp_inf"]
        exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(group["eps"])))
        bias_correction = 1 - beta1 ** state["step"].item()
        _addcdiv_(param, exp_avg, exp_inf, -group["lr"] / bias_correction)
