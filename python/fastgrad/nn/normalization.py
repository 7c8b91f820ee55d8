"""torch.nn's normalization layers over channels: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d (and
their lazy forms), GroupNorm and LocalResponseNorm, with PyTorch's class layout (a _NormBase, a
_BatchNorm, an _InstanceNorm: code that tests isinstance against them, as swa_utils.update_bn
does, finds them), constructor arguments, buffers, state_dict keys and repr."""

import warnings

from . import functional as F, init
from .._factories import empty, ones, tensor, zeros
from fastgrad._types import int64
from .lazy import LazyModuleMixin
from .module import Module
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter


class _NormBase(Module):
    """The parameters (weight, bias: one per channel) and running stats (running_mean, running_var,
    num_batches_tracked) of the batch and instance norms."""

    _version = 2  # version 2 added num_batches_tracked

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors):
        # a checkpoint from before version 2 has no num_batches_tracked: it loads as the current count
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None else tensor(0)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative average: batch n weighs 1/n
                momentum = 1.0 / self.num_batches_tracked.item()
        # batch statistics in training, and in evaluation when there are no running stats
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # the running stats are updated when tracked, and read when used
        tracked = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if tracked else None,
            self.running_var if tracked else None,
            self.weight,
            self.bias,
            use_batch_stats,
            momentum,
            self.eps,
        )


def _check_rank(input, ranks):
    if input.dim() not in ranks:
        expected = " or ".join(f"{rank}D" for rank in ranks)
        raise ValueError(f"expected {expected} input (got {input.dim()}D input)")


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        _check_rank(input, (2, 3))


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        _check_rank(input, (4,))


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        _check_rank(input, (5,))


class _InstanceNorm(_NormBase):
    """Normalizes each sample's channels on their own; the input may lack its batch dim. `spatial`:
    the number of spatial dims (1 to 3)."""

    spatial = None

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        _check_rank(input, (self.spatial + 1, self.spatial + 2))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors):
        # checkpoints from before PyTorch 0.4 kept running stats that these layers no longer track
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            stale = [prefix + name for name in ("running_mean", "running_var") if prefix + name in state_dict]
            if stale:
                klass = self.__class__.__name__
                names = " and ".join(f'"{key}"' for key in stale)
                errors.append(
                    f"Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If "
                    "state_dict is a checkpoint saved before 0.4.0, this may be expected because "
                    f"{klass} does not track running stats by default since 0.4.0. Please remove these keys from "
                    "state_dict. If the running stats are actually needed, instead set track_running_stats=True in "
                    f"{klass} to enable them. See the documentation of {klass} for details."
                )
                for key in stale:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors)

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.dim() == self.spatial + 1
        feature_dim = 0 if unbatched else 1
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features ({self.num_features}), "
                    f"but got: {input.size(feature_dim)}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this warning by "
                "not passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        output = F.instance_norm(
            input.unsqueeze(0) if unbatched else input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            0.0 if self.momentum is None else self.momentum,
            self.eps,
        )
        return output.squeeze(0) if unbatched else output


class InstanceNorm1d(_InstanceNorm):
    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    spatial = 3


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """num_features from the first input's dim 1; until then weight, bias and the running stats are
    uninitialized."""

    def __init__(
        self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True
    ):
        # made without parameters or buffers, which would be replaced at once
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=int64, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            for member in (self.weight, self.bias, self.running_mean, self.running_var):
                if member is not None:
                    member.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm1d
    _check_input_dim = BatchNorm1d._check_input_dim


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm2d
    _check_input_dim = BatchNorm2d._check_input_dim


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm3d
    _check_input_dim = BatchNorm3d._check_input_dim


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    cls_to_become = InstanceNorm1d
    spatial = 1


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    cls_to_become = InstanceNorm2d
    spatial = 2


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    cls_to_become = InstanceNorm3d
    spatial = 3


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(empty(num_channels, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_channels, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
