"""RAdam (Adam with a rectified adaptive step; L2 or decoupled weight decay, maximize):
torch.optim.RAdam's single-tensor update, operation by operation."""

from .optimizer import Optimizer, _addcmul_, _check_betas, _gradient, _lerp_, _new_step, _require
from .._factories import zeros_like

__all__ = ["RAdam"]


class RAdam(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
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
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
        state["step"] += 1
        step = state["step"].item()
        grad = _gradient(param, group)
        beta1, beta2 = group["betas"]
        exp_avg = _lerp_(state["exp_avg"], grad, 1 - beta1)
        exp_avg_sq = _addcmul_(state["exp_avg_sq"].mul_(beta2), grad, grad, 1 - beta2)

        bias_correction2 = 1 - beta2**step
        update = exp_avg / (1 - beta1**step) * group["lr"]
        # The length of the simple moving average the second moment approximates, at most rho_inf:
        # past 5 the variance of the adaptive step is tractable and the step is rectified adaptive,
        # before that plain momentum.
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            adaptive_lr = (bias_correction2**0.5) / exp_avg_sq.sqrt().add_(group["eps"])
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            update = update * adaptive_lr * rect
        param.sub_(update)
