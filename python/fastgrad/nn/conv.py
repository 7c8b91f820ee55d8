"""torch.nn's convolution layers: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d and their lazy
forms, with PyTorch's constructor arguments and checks, parameters (weight (out, in / groups, *kernel),
transposed (in, out / groups, *kernel); bias), default initialization, padding modes (a non-zero mode
pads with F.pad, then convolves without padding; transposed ones have only zeros) and repr."""

import math

from . import functional as F, init
from .._factories import empty
from .._grad_mode import no_grad
from .lazy import LazyModuleMixin
from .module import Module
from .parameter import Parameter, UninitializedParameter

_PADDING_STRINGS = {"same", "valid"}
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _tuple(value, dims):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


class _ConvNd(Module):
    dims = 0  # spatial dims
    transposed = False

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
        output_padding=0,
    ):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size, stride, dilation = (_tuple(v, self.dims) for v in (kernel_size, stride, dilation))
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _tuple(padding, self.dims)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.output_padding = _tuple(output_padding, self.dims)
        self.groups, self.padding_mode = groups, padding_mode
        # F.pad's argument for the padding modes: last dim first, (left, right) per dim; 'same' puts
        # the odd one on the right, as F.conv*d does.
        if padding == "same":
            totals = [d * (k - 1) for d, k in zip(dilation, kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        elif padding == "valid":
            pairs = [(0, 0)] * self.dims
        else:
            pairs = [(p, p) for p in padding]
        self._reversed_padding_repeated_twice = [side for pair in reversed(pairs) for side in pair]
        self.weight = Parameter(empty(self._weight_shape(), dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _weight_shape(self):
        if self.transposed:
            return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    def reset_parameters(self):
        # a=sqrt(5) makes the weight uniform in +-1/sqrt(fan_in), like the bias
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, input, weight, bias):
        conv = F.conv1d if self.dims == 1 else F.conv2d
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self.dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    dims = 1


class Conv2d(_ConvNd):
    dims = 2


class _LazyConvNd(LazyModuleMixin):
    """The in_channels of the first input (dim 1, or dim 0 of an unbatched input)."""

    def __init__(
        self,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        # in_channels 0: nothing to draw yet (and divisible by any groups)
        super().__init__(
            0,
            0,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=1,
            bias=False,
            padding_mode=padding_mode,
            device=device,
            dtype=dtype,
        )
        self.out_channels, self.groups = out_channels, groups
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_channels = input.shape[0 if input.dim() == self.dims + 1 else 1]
                if self.in_channels % self.groups != 0:
                    raise ValueError("in_channels must be divisible by groups")
                self.weight.materialize(self._weight_shape())
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


class LazyConv1d(_LazyConvNd, Conv1d):
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    cls_to_become = Conv2d


class _ConvTransposeNd(_ConvNd):
    """The input gradient of the convolution by the same weight: weight (in, out / groups, *kernel)."""

    transposed = True

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            bias=bias,
            padding_mode=padding_mode,
            device=device,
            dtype=dtype,
            output_padding=output_padding,
        )

    def _output_padding(self, input, output_size):
        """PyTorch's: the output_padding that gives `output_size` (its spatial dims, or all of them),
        which must lie within the stride above the smallest output."""
        if output_size is None:
            return self.output_padding
        dims = self.dims
        non_spatial = 2 if input.dim() == dims + 2 else 1
        if len(output_size) == non_spatial + dims:
            output_size = output_size[non_spatial:]
        if len(output_size) != dims:
            raise ValueError(
                f"ConvTranspose{dims}D: for {input.dim()}D input, output_size must have {dims} "
                f"or {non_spatial + dims} elements (got {len(output_size)})"
            )
        min_sizes = [
            (input.size(d + non_spatial) - 1) * self.stride[d]
            - 2 * self.padding[d]
            + self.dilation[d] * (self.kernel_size[d] - 1)
            + 1
            for d in range(dims)
        ]
        max_sizes = [size + s - 1 for size, s in zip(min_sizes, self.stride)]
        for size, low, high in zip(output_size, min_sizes, max_sizes):
            if size < low or size > high:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range "
                    f"from {min_sizes} to {max_sizes} (for an input of {input.size()[2:]})"
                )
        return [size - low for size, low in zip(output_size, min_sizes)]

    def forward(self, input, output_size=None):
        conv = F.conv_transpose1d if self.dims == 1 else F.conv_transpose2d
        output_padding = self._output_padding(input, output_size)
        return conv(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class ConvTranspose1d(_ConvTransposeNd):
    dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    dims = 2


class _LazyConvTransposeNd(_LazyConvNd):
    def __init__(
        self,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__(
            out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, device, dtype
        )
        self.output_padding = _tuple(output_padding, self.dims)


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    cls_to_become = ConvTranspose2d
