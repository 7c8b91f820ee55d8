"""NAdam (Adam with Nesterov momentum; momentum decay, L2 or decoupled weight decay, maximize):
torch.optim.NAdam's single-tensor update, operation by operation."""

from .optimizer import Optimizer, _addcdiv_, _addcmul_, _check_betas, _gradient, _lerp_, _new_step, _require
from .._factories import tensor, zeros_like

__all__ = ["NAdam"]


class NAdam(Optimizer):
    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
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
        _require(0.0 <= momentum_decay, f"Invalid momentum_decay value: {momentum_decay}")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["mu_product"] = tensor(1.0)  # the product of the momentum coefficients so far
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
        state["step"] += 1
        step = state["step"].item()
        grad = _gradient(param, group)
        lr, (beta1, beta2), momentum_decay = group["lr"], group["betas"], group["momentum_decay"]

        # the momentum coefficient of this step and of the next one
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        state["mu_product"] *= mu  # in the tensor's dtype, as PyTorch's
        mu_product = state["mu_product"].item()

        exp_avg = _lerp_(state["exp_avg"], grad, 1 - beta1)
        exp_avg_sq = _addcmul_(state["exp_avg_sq"].mul_(beta2), grad, grad, 1 - beta2)
        denom = exp_avg_sq.div(1 - beta2**step).sqrt().add_(group["eps"])
        _addcdiv_(param, grad, denom, -lr * (1.0 - mu) / (1.0 - mu_product))
        _addcdiv_(param, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product * mu_next))
