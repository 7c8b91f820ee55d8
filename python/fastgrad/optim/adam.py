"""Adam (with amsgrad, L2 or decoupled weight decay, maximize) and AdamW: torch.optim.Adam's
single-tensor update. float32 and float64 parameters take one fused pass each (_prims.adam_, rounded
as PyTorch's op chain); other dtypes run the op chain itself."""

from .. import _prims
from .optimizer import Optimizer, _addcdiv_, _addcmul_, _check_betas, _gradient, _lerp_, _new_step, _require
from .._factories import zeros_like

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    _fused_update = "adam"  # a compiled program replays step() in C++ (Optimizer._fused_replay)

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=None,
        decoupled_weight_decay=False,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        _require(0.0 <= eps, f"Invalid epsilon value: {eps}")
        _check_betas(betas)
        _require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
            # PyTorch also takes a pair of tensors (for capturable/compiled steps); fastgrad does not.
            raise ValueError("betas must be either both floats or both Tensors")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)

    def _state(self, param, group):
        state = self.state[param]
        if not state:
            state["step"] = _new_step()
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(param)
        return state

    def _update_group(self, params, group):
        fused = self._fused_params(params, group)
        if not fused:
            return
        lr, weight_decay, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
        states = [self._state(p, group) for p in fused]
        step_sizes, bias_correction2_sqrts = [], []
        for state in states:
            state["step"] += 1
            step = state["step"].item()
            step_sizes.append(lr / (1 - beta1**step))
            bias_correction2_sqrts.append((1 - beta2**step) ** 0.5)
        decoupled = group["decoupled_weight_decay"] and weight_decay != 0
        _prims.adam_(
            fused,
            [p.grad for p in fused],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [s["max_exp_avg_sq"] for s in states] if group["amsgrad"] else [],
            step_sizes,
            bias_correction2_sqrts,
            1 - beta1,
            beta2,
            1 - beta2,
            group["eps"],
            0.0 if group["decoupled_weight_decay"] else weight_decay,
            1 - lr * weight_decay if decoupled else 1.0,
            group["maximize"],
        )

    def _update(self, param, group):
        """The op chain, for parameters of other dtypes (float16, bfloat16)."""
        state = self._state(param, group)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        beta1, beta2 = group["betas"]
        state["step"] += 1
        grad = _gradient(param, group)
        _lerp_(exp_avg, grad, 1 - beta1)
        _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)

        step = state["step"].item()
        step_size = group["lr"] / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        if group["amsgrad"]:  # normalize by the largest second moment so far
            max_exp_avg_sq = state["max_exp_avg_sq"]
            max_exp_avg_sq.copy_(max_exp_avg_sq.maximum(exp_avg_sq))
            exp_avg_sq = max_exp_avg_sq
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(group["eps"])
        _addcdiv_(param, exp_avg, denom, -step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: the parameters shrink by lr * weight_decay before the update,
    instead of the decay entering the gradient (and so the moments)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
        differentiable=False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
