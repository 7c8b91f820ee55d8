"""Adagrad (learning-rate decay, initial accumulator, weight decay, maximize): torch.optim.Adagrad's
single-tensor update. float32 and float64 parameters take one fused pass each (_prims.adagrad_,
rounded as PyTorch's op chain); other dtypes run the op chain itself."""

from .. import _prims
from .optimizer import Optimizer, _addcdiv_, _addcmul_, _gradient, _new_step, _require
from .._factories import full_like

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        fused=None,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= lr_decay, f"Invalid lr_decay value: {lr_decay}")
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        _require(
            0.0 <= initial_accumulator_value, f"Invalid initial_accumulator_value value: {initial_accumulator_value}"
        )
        _require(0.0 <= eps, f"Invalid epsilon value: {eps}")
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        # Unlike the other optimizers, Adagrad's state exists from the start.
        for group in self.param_groups:
            for param in group["params"]:
                self._init_state(param)

    def _init_state(self, param):
        # The constructor's initial_accumulator_value, whatever the group says (as PyTorch).
        state = self.state[param]
        state["step"] = _new_step()
        state["sum"] = full_like(param, self.defaults["initial_accumulator_value"])

    def _next_step(self, param, group):
        """Counts the step in param's state; returns it and the state."""
        state = self.state[param]
        if not state:  # a parameter of a group added later
            self._init_state(param)
        state["step"] += 1
        step = state["step"].item()
        return group["lr"] / (1 + (step - 1) * group["lr_decay"]), state

    def _update_group(self, params, group):
        fused = self._fused_params(params, group)
        if not fused:
            return
        decayed_lrs, states = zip(*(self._next_step(p, group) for p in fused))
        _prims.adagrad_(
            fused,
            [p.grad for p in fused],
            [s["sum"] for s in states],
            list(decayed_lrs),
            group["eps"],
            group["weight_decay"],
            group["maximize"],
        )

    def _update(self, param, group):
        """The op chain, for parameters of other dtypes (float16, bfloat16)."""
        decayed_lr, state = self._next_step(param, group)
        grad = _gradient(param, group)
        std = _addcmul_(state["sum"], grad, grad, 1).sqrt().add_(group["eps"])
        _addcdiv_(param, grad, std, -decayed_lr)
