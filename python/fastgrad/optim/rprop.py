"""Rprop (resilient backpropagation: a step size per element, grown while the gradient keeps its sign
and shrunk when it flips; maximize): torch.optim.Rprop's single-tensor update, operation by
operation."""

from .optimizer import Optimizer, _new_step, _require
from .._factories import full_like, zeros_like

__all__ = ["Rprop"]


class Rprop(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-2,
        etas=(0.5, 1.2),
        step_sizes=(1e-6, 50),
        *,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 < etas[0] < 1.0 < etas[1], f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _update(self, param, group):
        grad = -param.grad if group["maximize"] else param.grad
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["prev"] = zeros_like(param)
            state["step_size"] = full_like(grad, group["lr"])
        state["step"] += 1
        prev, step_size = state["prev"], state["step_size"]
        etaminus, etaplus = group["etas"]

        # the factor of each step size: etaplus where the gradient kept its sign, etaminus where it
        # flipped, 1 where either is 0
        factor = grad.mul(prev).sign()
        factor.masked_fill_(factor.gt(0), etaplus)
        factor.masked_fill_(factor.lt(0), etaminus)
        factor.masked_fill_(factor.eq(0), 1)
        step_size.mul_(factor).clamp_(*group["step_sizes"])

        # where the sign flipped the step is skipped, and the next step counts as after a 0 gradient
        grad = grad.masked_fill(factor.eq(etaminus), 0)
        param.sub_(grad.sign() * step_size)
        prev.copy_(grad)
