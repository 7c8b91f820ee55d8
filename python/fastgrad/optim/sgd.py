"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize: torch.optim.SGD's
single-tensor update. float32 and float64 parameters take one fused pass each (_prims.sgd_, rounded
as PyTorch's op chain); other dtypes run the op chain itself."""

from .. import _prims
from .optimizer import Optimizer, _fma, _gradient
from .._factories import zeros_like

__all__ = ["SGD"]


class SGD(Optimizer):
    _fused_update = "sgd"  # a compiled program replays step() in C++ (Optimizer._fused_replay)

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
        fused = self._fused_params(params, group)
        if not fused:
            return
        momentum = group["momentum"]
        buffers, first_steps = [], []
        if momentum != 0:
            for param in fused:
                state = self.state[param]
                first_steps.append(state.get("momentum_buffer") is None)
                if first_steps[-1]:  # the kernel starts it as the gradient
                    state["momentum_buffer"] = zeros_like(param)
                buffers.append(state["momentum_buffer"])
        _prims.sgd_(
            fused,
            [p.grad for p in fused],
            buffers,
            first_steps,
            group["lr"],
            momentum,
            1 - group["dampening"],
            group["weight_decay"],
            group["nesterov"],
            group["maximize"],
        )

    def _update(self, param, group):
        """The op chain, for parameters of other dtypes (float16, bfloat16)."""
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
