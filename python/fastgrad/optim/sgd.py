"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize: torch.optim.SGD's
single-tensor update, operation by operation."""

from .. import _prims
from .optimizer import Optimizer, _fma, _gradient

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
        fused=None,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        # foreach only chooses how PyTorch batches the same update; fastgrad always runs it per tensor.
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _update_group(self, params, group):
        if group["momentum"] == 0 and group["weight_decay"] == 0 and not group["maximize"]:
            # plain SGD, param.add_(grad, alpha=-lr) for every parameter in one call
            _prims.foreach_add_(params, [p.grad for p in params], -group["lr"])
        else:
            super()._update_group(params, group)

    def _update(self, param, group):
        grad = _gradient(param, group)
        momentum = group["momentum"]
        if momentum != 0:
            state = self.state[param]
            buf = state.get("momentum_buffer")
            if buf is None:  # the first step: the buffer starts as the gradient itself
                buf = state["momentum_buffer"] = grad.detach().clone()
            else:
                buf.mul_(momentum).copy_(_fma(1 - group["dampening"], grad, buf))
            grad = _fma(momentum, buf, grad) if group["nesterov"] else buf
        param.copy_(_fma(-group["lr"], grad, param))
