"""torch.optim.swa_utils: stochastic weight averaging and exponential moving averages of a model's
parameters (AveragedModel and its averaging functions), SWALR, and update_bn.

The averages are computed as PyTorch computes them on the CPU: the default SWA average parameter by
parameter (get_swa_avg_fn), the multi-tensor functions with lerp (rounded as PyTorch's kernel).
Shared by both backends (see fastgrad._shared).
"""

import math
from copy import deepcopy
from itertools import chain

from .._factories import tensor
from .._grad_mode import no_grad
from .._prims import Tensor
from ..nn import Module
from .lr_scheduler import LRScheduler, _format_param, _state_dict, _warn_get_lr_called_within_step
from .optimizer import _lerp_
from fastgrad._types import int64

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """In place, for lists of tensors: ema = decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].dtype.is_floating_point:
            for ema, current in zip(ema_param_list, current_param_list):
                _lerp_(ema, current, 1 - decay)
        else:
            for ema, current in zip(ema_param_list, current_param_list):
                ema.copy_(ema * decay + current * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In place, for lists of tensors: the running mean of num_averaged + 1 values."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if averaged_param_list[0].dtype.is_floating_point:
            weight = 1 / (num_averaged + 1)  # PyTorch's lerp takes a tensor weight's (float32) value
            weight = weight.item() if isinstance(weight, Tensor) else weight
            for averaged, current in zip(averaged_param_list, current_param_list):
                _lerp_(averaged, current, weight)
            return
        for averaged, current in zip(averaged_param_list, current_param_list):
            if isinstance(num_averaged, Tensor):
                averaged.addcdiv_(current - averaged, num_averaged + 1)
            else:
                averaged.add_(current - averaged, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """For one tensor: decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """For one tensor: the running mean of num_averaged + 1 values."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _by_dtype(pairs):
    """(averaged, current) lists per dtype, in order, as PyTorch hands them to a multi_avg_fn."""
    groups = {}
    for averaged, current in pairs:
        averaged_list, current_list = groups.setdefault(averaged.dtype, ([], []))
        averaged_list.append(averaged)
        current_list.append(current)
    return groups.values()


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers) update_parameters() averages
    with the model's: equally weighted (SWA) by default, or by avg_fn / multi_avg_fn. The first update
    copies the model's values; n_averaged (a buffer) counts the updates."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged_tensors(self, model):
        return chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()

    def update_parameters(self, model):
        pairs = [
            (averaged.detach(), current.detach().to(averaged.device))
            for averaged, current in zip(self._averaged_tensors(self.module), self._averaged_tensors(model))
        ]
        if self.n_averaged == 0:
            for averaged, current in pairs:
                averaged.copy_(current)
        elif self.multi_avg_fn is not None:
            for averaged, current in _by_dtype(pairs):
                self.multi_avg_fn(averaged, current, self.n_averaged)
        else:
            avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
            for averaged, current in pairs:
                averaged.copy_(avg_fn(averaged, current, self.n_averaged))
        if not self.use_buffers:  # the buffers are not averaged: they follow the model's
            for own, current in zip(self.module.buffers(), model.buffers()):
                own.detach().copy_(current.detach().to(own.device))
        self.n_averaged += 1


def _is_batch_norm(module):
    """PyTorch's test, isinstance(module, nn.modules.batchnorm._BatchNorm), made by the base class's
    name: BatchNorm1d/2d/3d derive from a _BatchNorm (InstanceNorm, which may keep running stats too,
    does not), and fastgrad's BatchNorm layers are to follow that layout."""
    return any(cls.__name__ == "_BatchNorm" for cls in type(module).__mro__)


@no_grad()
def update_bn(loader, model, device=None):
    """Recomputes the BatchNorm layers' running statistics in one pass over `loader` (batches: tensors,
    or lists/tuples whose first element is the input), as cumulative averages (momentum None)."""
    momenta = {}
    for module in model.modules():
        if _is_batch_norm(module):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return

    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to its swa_lr in anneal_epochs epochs ("cos" or "linear"), then keeps it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for lr, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        """The lr the annealing started from, given that `lr` is alpha of the way to swa_lr."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        _warn_get_lr_called_within_step(self, stacklevel=3)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # From the current lr (alpha of the way), back to the start, then forward to this step's alpha.
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        start_lrs = [
            self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in self.optimizer.param_groups
        ]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, start_lrs)]

    def state_dict(self):
        """Every attribute but the optimizer and anneal_func (restored from _anneal_strategy)."""
        return _state_dict(self, drop=("anneal_func",))

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
