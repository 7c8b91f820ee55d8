"""SparseAdam: Adam for sparse gradients, updating only the moments and parameters the gradient
touches. fastgrad has no sparse tensors, so its step refuses the (dense) gradients it meets, with
PyTorch's error for a dense gradient; the constructor checks the options as PyTorch's."""

from .optimizer import Optimizer, _check_betas, _require
from .._grad_mode import enable_grad

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _require(0.0 < lr, f"Invalid learning rate: {lr}")
        _require(0.0 < eps, f"Invalid epsilon value: {eps}")
        _check_betas(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if any(p.grad is not None for group in self.param_groups for p in group["params"]):
            raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
        return loss
