"""ASGD (averaged SGD: decaying learning rate eta, the average of the iterates in 'ax'; weight decay,
maximize): torch.optim.ASGD's single-tensor update, operation by operation."""

from .optimizer import Optimizer, _fma, _gradient, _new_step, _require
from .._factories import tensor, zeros_like

__all__ = ["ASGD"]


class ASGD(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-2,
        lambd=1e-4,
        alpha=0.75,
        t0=1e6,
        weight_decay=0,
        foreach=None,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
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
            # 0-dim tensors of the default dtype, as PyTorch keeps them
            state["step"] = _new_step()
            state["eta"] = tensor(float(group["lr"]))
            state["mu"] = tensor(1.0)
            state["ax"] = zeros_like(param)
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        state["step"] += 1
        grad = _gradient(param, group)
        lr, lambd = group["lr"], group["lambd"]

        eta_value = eta.item()
        param.mul_(1 - lambd * eta_value)
        param.copy_(_fma(-eta_value, grad, param))
        if mu.item() != 1:  # averaging has begun (after t0 steps)
            ax.add_(param.sub(ax).mul_(mu))
        else:
            ax.copy_(param)

        step = state["step"].item()
        # through a tensor of the default dtype, as PyTorch's (rounding there even for a float64 eta)
        eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** group["alpha"])))
        mu.copy_(tensor(1 / max(1, step - group["t0"])))
