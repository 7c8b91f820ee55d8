"""2-D convolution, and 1-D as its height-1 case (3-D input and weight), the twin of
csrc/ops/conv.cpp: input (N, C, H, W), weight (O, C / groups, kh, kw), bias (O) or None. Written as
the definition, one output element at a time; sums are taken in Python floats (double) and rounded
once when stored. PyTorch's argument checks are the caller's (nn/functional.py); the checks here
only keep direct calls well-defined. The transposed convolution is the input gradient of the
convolution by the same weight whose output has its input's size; under create_graph the backward
formulas are recorded ops (convolution, conv_transpose, the weight gradient as an op of its own)."""

from .._types import float32, float64
from ._autograd import Function, is_grad_enabled, no_grad
from ._nn import _not_implemented_for
from . import _reduce, _shape
from ._tensor import full, new_tensor, read


class _Geometry:
    """The sizes of one convolution and, for each output position, the input positions it reads."""

    def __init__(self, input_shape, weight_shape, stride, padding, dilation, groups):
        self.dims = len(input_shape)
        if self.dims not in (3, 4) or len(weight_shape) != self.dims:
            raise RuntimeError("convolution: expected 3-D or 4-D input and weight of the same rank")
        if self.dims == 3 and (stride[0], padding[0], dilation[0]) != (1, 0, 1):
            raise RuntimeError("convolution: a 1-D convolution's height stride, padding and dilation must be 1, 0, 1")
        # A 1-D convolution is the 2-D one of a height-1 image and kernel.
        self.n, self.c, self.h, self.w = input_shape if self.dims == 4 else (*input_shape[:2], 1, input_shape[2])
        self.o, self.cg, self.kh, self.kw = weight_shape if self.dims == 4 else (*weight_shape[:2], 1, weight_shape[2])
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        if min(stride) < 1 or min(padding) < 0 or min(dilation) < 1 or max(*stride, *padding, *dilation) > 2**31:
            raise RuntimeError("convolution: invalid stride, padding or dilation")
        if groups < 1 or self.o % groups or self.c % groups or self.cg != self.c // groups:
            raise RuntimeError("convolution: weight and input channels do not match groups")
        self.og = self.o // groups
        self.oh = (self.h + 2 * padding[0] - dilation[0] * (self.kh - 1) - 1) // stride[0] + 1
        self.ow = (self.w + 2 * padding[1] - dilation[1] * (self.kw - 1) - 1) // stride[1] + 1
        min_extent = 0 if self.n == 0 else 1  # an empty batch's output may be empty (a transposed empty image)
        if self.oh < min_extent or self.ow < min_extent or self.kh < 1 or self.kw < 1:
            raise RuntimeError("convolution: output size is too small")

    def taps(self, b, oc, oy, ox):
        """(input offset, weight offset) of every in-bounds product that output[b, oc, oy, ox] sums,
        in the order (channel, ky, kx)."""
        group = oc // self.og
        for ch in range(self.cg):
            plane = (b * self.c + group * self.cg + ch) * self.h
            for ky in range(self.kh):
                y = oy * self.stride[0] - self.padding[0] + ky * self.dilation[0]
                if not 0 <= y < self.h:
                    continue
                for kx in range(self.kw):
                    x = ox * self.stride[1] - self.padding[1] + kx * self.dilation[1]
                    if 0 <= x < self.w:
                        yield (plane + y) * self.w + x, ((oc * self.cg + ch) * self.kh + ky) * self.kw + kx

    def output_shape(self):
        return (self.n, self.o, self.oh, self.ow) if self.dims == 4 else (self.n, self.o, self.ow)

    def outputs(self):
        """(flat output index, b, oc, oy, ox) for every output element, row-major."""
        index = 0
        for b in range(self.n):
            for oc in range(self.o):
                for oy in range(self.oh):
                    for ox in range(self.ow):
                        yield index, b, oc, oy, ox
                        index += 1


class ConvolutionBackward0(Function):
    def forward(self, input, weight, bias, stride, padding, dilation, groups):
        if input._dtype not in (float32, float64):
            raise _not_implemented_for("slow_conv2d_cpu", input._dtype)
        if weight._dtype is not input._dtype or (bias is not None and bias._dtype is not input._dtype):
            raise RuntimeError("convolution: input, weight and bias must have the same dtype")
        self.geometry = g = _Geometry(input._shape, weight._shape, stride, padding, dilation, groups)
        if bias is not None and (bias.dim() != 1 or bias._shape[0] != g.o):
            raise RuntimeError("convolution: bias size mismatch")
        xs, ws = read(input), read(weight)
        bs = read(bias) if bias is not None else [0.0] * g.o
        out = [0.0] * (g.n * g.o * g.oh * g.ow)
        for index, b, oc, oy, ox in g.outputs():
            out[index] = sum(xs[i] * ws[k] for i, k in g.taps(b, oc, oy, ox)) + bs[oc]
        self.save(input)
        self.save(weight)
        return new_tensor(out, (g.n, g.o, g.oh, g.ow) if g.dims == 4 else (g.n, g.o, g.ow), input._dtype)

    def backward(self, grad):
        g, input, weight = self.geometry, self.unpack(0), self.unpack(1)
        if is_grad_enabled():  # create_graph: recorded ops, so that the gradients can be differentiated again
            return (
                conv_transpose(
                    grad,
                    weight,
                    None,
                    g.stride,
                    g.padding,
                    _output_padding_to(input, grad, weight, g),
                    g.dilation,
                    g.groups,
                )
                if self.needs_input_grad(0)
                else None,
                _ConvolutionWeightGrad.run(
                    grad,
                    input,
                    weight,
                    stride=g.stride,
                    padding=g.padding,
                    dilation=g.dilation,
                    groups=g.groups,
                )
                if self.needs_input_grad(1)
                else None,
                _ConvolutionBiasGrad.run(grad, input, weight) if self.needs_input_grad(2) else None,
            )
        xs, ws, gs = read(input), read(weight), read(grad)
        grad_input, grad_weight, grad_bias = [0.0] * len(xs), [0.0] * len(ws), [0.0] * g.o
        for index, b, oc, oy, ox in g.outputs():
            go = gs[index]
            grad_bias[oc] += go
            for i, k in g.taps(b, oc, oy, ox):
                grad_input[i] += ws[k] * go
                grad_weight[k] += xs[i] * go
        return (
            new_tensor(grad_input, input._shape, input._dtype) if self.needs_input_grad(0) else None,
            new_tensor(grad_weight, weight._shape, weight._dtype) if self.needs_input_grad(1) else None,
            new_tensor(grad_bias, (g.o,), input._dtype) if self.needs_input_grad(2) else None,
        )


def convolution(input, weight, bias, stride, padding, dilation, groups):
    """stride, padding and dilation: (height, width) pairs."""
    return ConvolutionBackward0.run(
        input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups
    )


# ---- transposed convolution, and the weight gradient as an op (for double backward)


def _transposed_extent(size, k, stride, padding, dilation):
    """A transposed convolution's output size along one dim, without output_padding."""
    return (size - 1) * stride - 2 * padding + dilation * (k - 1) + 1


def _fit_spatial(t, shape):
    """t (n, c, [h,] w) cropped, or extended with zeros, at the bottom and right to the spatial sizes
    of `shape` (recorded ops: slice, cat)."""
    for dim in range(2, t.dim()):
        have, want = t._shape[dim], shape[dim]
        if have > want:
            t = _shape.slice(t, dim, 0, want, 1)
        elif have < want:
            t = _shape.cat([t, full((*t._shape[:dim], want - have, *t._shape[dim + 1 :]), 0, t._dtype)], dim)
    return t


def _output_padding_to(input, grad, weight, g):
    """The output_padding that makes the transposed convolution of `grad` (the gradient of a
    convolution's output) as large as that convolution's `input`: the rows and columns its stride skipped."""
    planar = [(1, 1, 1, 0, 1, 1)] if grad.dim() == 3 else []  # a 1-D convolution's height: one row
    planar += zip(
        input._shape[2:],
        grad._shape[2:],
        weight._shape[2:],
        g.padding[-(grad.dim() - 2) :],
        g.stride[-(grad.dim() - 2) :],
        g.dilation[-(grad.dim() - 2) :],
    )
    return tuple(size - _transposed_extent(out, k, s, p, d) for size, out, k, p, s, d in planar)


class _ConvTransposeBackward(Function):
    """PyTorch shows a transposed convolution's node as ConvolutionBackward0 too."""

    def name(self):
        return "ConvolutionBackward0"

    def forward(self, input, weight, bias, stride, padding, output_padding, dilation, groups):
        if input._dtype not in (float32, float64):
            raise _not_implemented_for("slow_conv2d_cpu", input._dtype)
        if weight._dtype is not input._dtype or (bias is not None and bias._dtype is not input._dtype):
            raise RuntimeError("convolution: input, weight and bias must have the same dtype")
        dims = input.dim()
        if dims not in (3, 4) or weight.dim() != dims:
            raise RuntimeError("conv_transpose: expected 3-D or 4-D input and weight of the same rank")
        if not 1 <= groups <= max(weight._shape[0], 1) or input._shape[1] != weight._shape[0]:
            raise RuntimeError("conv_transpose: weight and input channels do not match groups")
        if dims == 3 and output_padding[0] != 0:
            raise RuntimeError("conv_transpose: a 1-D convolution's height output_padding must be 0")
        shape = [input._shape[0], weight._shape[1] * groups]
        for dim in range(2, dims):
            d = dim + 4 - dims - 2
            size, k = input._shape[dim], weight._shape[dim]
            min_size = 0 if input._shape[0] == 0 else 1
            if (
                not 0 <= output_padding[d] <= 2**31
                or size < min_size
                or k < 1
                or size * stride[d] + k * dilation[d] > 2**50
            ):
                raise RuntimeError("conv_transpose: invalid output_padding or sizes")
            shape.append(_transposed_extent(size, k, stride[d], padding[d], dilation[d]) + output_padding[d])
            if shape[-1] < 1:
                raise RuntimeError("conv_transpose: output size is too small")
        if bias is not None and (bias.dim() != 1 or bias._shape[0] != shape[1]):
            raise RuntimeError("conv_transpose: bias size mismatch")
        # The convolution whose input gradient this is, with its output cut to input's size (output
        # padding past the stride gives that convolution more rows or columns than input has).
        g = _Geometry(shape, weight._shape, stride, padding, dilation, groups)
        g.oh, g.ow = (input._shape[2], input._shape[3]) if dims == 4 else (1, input._shape[2])
        xs, ws = read(input), read(weight)
        bs = read(bias) if bias is not None else [0.0] * g.c
        plane = g.h * g.w
        out = [bs[(i // plane) % g.c] for i in range(g.n * g.c * plane)]
        for index, b, oc, oy, ox in g.outputs():
            for i, k in g.taps(b, oc, oy, ox):
                out[i] += ws[k] * xs[index]
        self.params = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        self.save(input)
        self.save(weight)
        return new_tensor(out, shape, input._dtype)

    def backward(self, grad):
        input, weight = self.unpack(0), self.unpack(1)
        # The convolution of grad has input's rows and columns, and any that output_padding added past
        # the stride: the input gradient crops them, the weight gradient reads them as zero inputs.
        grad_conv = (
            convolution(grad, weight, None, *self.params.values())
            if self.needs_input_grad(0) or self.needs_input_grad(1)
            else None
        )
        return (
            _fit_spatial(grad_conv, input._shape) if self.needs_input_grad(0) else None,
            _ConvolutionWeightGrad.run(_fit_spatial(input, grad_conv._shape), grad, weight, **self.params)
            if self.needs_input_grad(1)
            else None,
            _ConvolutionBiasGrad.run(grad, input, weight) if self.needs_input_grad(2) else None,
        )


class _ConvolutionBiasGrad(Function):
    """The bias gradient of convolution(input, weight, bias) given `grad`, the gradient of its output:
    grad summed over every dim but the channels. Recorded with edges to grad, input and weight, as
    PyTorch records its one ConvolutionBackwardBackward0 node for the three gradients."""

    def name(self):
        return "ConvolutionBackwardBackward0"

    def forward(self, grad, input, weight):
        self.grad_shape = grad._shape
        with no_grad():
            return _reduce.sum(grad, [0, *range(2, grad.dim())], False)

    def backward(self, grad_grad_bias):
        channels = [1] * len(self.grad_shape)
        channels[1] = self.grad_shape[1]
        return _shape.expand(_shape.reshape(grad_grad_bias, channels), self.grad_shape), None, None


class _ConvolutionWeightGrad(Function):
    """The weight gradient of convolution(input, weight) given `grad`, the gradient of its output.
    PyTorch shows it, in a convolution's double backward, as ConvolutionBackwardBackward0; weight
    has an edge and no gradient, as there."""

    def name(self):
        return "ConvolutionBackwardBackward0"

    def forward(self, grad, input, weight, stride, padding, dilation, groups):
        if input.dim() not in (3, 4) or grad.dim() != input.dim() or weight.dim() != input.dim() or groups < 1:
            raise RuntimeError("convolution_weight_grad: expected 3-D or 4-D grad, input and weight")
        shape = weight._shape
        g = _Geometry(input._shape, shape, stride, padding, dilation, groups)
        if grad._shape != g.output_shape() or grad._dtype is not input._dtype:
            raise RuntimeError("convolution_weight_grad: grad is not the convolution's output gradient")
        xs, gs = read(input), read(grad)
        grad_weight = [0.0] * (g.o * g.cg * g.kh * g.kw)
        for index, b, oc, oy, ox in g.outputs():
            for i, k in g.taps(b, oc, oy, ox):
                grad_weight[k] += xs[i] * gs[index]
        self.geometry = g
        self.save(grad)
        self.save(input)
        return new_tensor(grad_weight, shape, input._dtype)

    def backward(self, grad_grad_weight):
        """grad_weight is bilinear in (grad, input): along grad, the convolution of input by the
        incoming weight-shaped gradient; along input, the transposed convolution of grad by it."""
        g, grad, input = self.geometry, self.unpack(0), self.unpack(1)
        params = (g.stride, g.padding, g.dilation, g.groups)
        return (
            convolution(input, grad_grad_weight, None, *params) if self.needs_input_grad(0) else None,
            conv_transpose(
                grad,
                grad_grad_weight,
                None,
                g.stride,
                g.padding,
                _output_padding_to(input, grad, grad_grad_weight, g),
                g.dilation,
                g.groups,
            )
            if self.needs_input_grad(1)
            else None,
            None,
        )


def conv_transpose(input, weight, bias, stride, padding, output_padding, dilation, groups):
    return _ConvTransposeBackward.run(
        input,
        weight,
        bias,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
    )


# ---- F.unfold and F.fold: the column matrices of a convolution with one output channel, per image


def _block_geometry(images_shape, kernel, stride, padding, dilation):
    """Kernel-sized blocks sliding over images (N, C, H, W): a one-output-channel convolution's
    geometry, whose taps(b, 0, oy, ox) are (input offset, column row) pairs."""
    if min(kernel) < 1 or max(kernel) > 2**31:
        raise RuntimeError("im2col: kernel size should be greater than zero")
    return _Geometry(images_shape, (1, images_shape[1], *kernel), stride, padding, dilation, 1)


class Im2ColBackward0(Function):
    def forward(self, input, kernel, stride, padding, dilation):
        if input.dim() not in (3, 4):
            raise RuntimeError("im2col: expected a 3-D or 4-D input")
        if input._dtype not in (float32, float64):
            raise _not_implemented_for("slow_conv2d_cpu", input._dtype)
        images_shape = input._shape if input.dim() == 4 else (1, *input._shape)
        g = _block_geometry(images_shape, kernel, stride, padding, dilation)
        rows, columns = g.cg * g.kh * g.kw, g.oh * g.ow
        xs, out = read(input), [0.0] * (g.n * rows * columns)
        for b in range(g.n):
            for oy in range(g.oh):
                for ox in range(g.ow):
                    for i, row in g.taps(b, 0, oy, ox):
                        out[(b * rows + row) * columns + oy * g.ow + ox] = xs[i]
        self.params = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
        self.image_size = (g.h, g.w)
        shape = (g.n, rows, columns) if input.dim() == 4 else (rows, columns)
        return new_tensor(out, shape, input._dtype)

    def backward(self, grad):
        return Col2ImBackward0.run(grad, output_size=self.image_size, **self.params)


class Col2ImBackward0(Function):
    def forward(self, input, output_size, kernel, stride, padding, dilation):
        if input.dim() not in (2, 3):
            raise RuntimeError("col2im: expected a 2-D or 3-D input")
        if input._dtype not in (float32, float64):
            raise _not_implemented_for("slow_conv2d_cpu", input._dtype)
        n, rows, columns = input._shape if input.dim() == 3 else (1, *input._shape)
        if min(kernel) < 1 or max(kernel) > 2**31 or rows % (kernel[0] * kernel[1]):
            raise RuntimeError("col2im: the input's rows are not a multiple of the kernel's size")
        if min(output_size) < 1 or max(output_size) > 2**31:
            raise RuntimeError("col2im: invalid output size")
        channels = rows // (kernel[0] * kernel[1])
        g = _block_geometry((n, channels, *output_size), kernel, stride, padding, dilation)
        if columns != g.oh * g.ow:
            raise RuntimeError("col2im: the input's columns are not the number of blocks")
        cols, out = read(input), [0.0] * (n * channels * g.h * g.w)
        for b in range(g.n):
            for oy in range(g.oh):
                for ox in range(g.ow):
                    for i, row in g.taps(b, 0, oy, ox):
                        out[i] += cols[(b * rows + row) * columns + oy * g.ow + ox]
        self.params = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
        shape = (n, channels, *output_size) if input.dim() == 3 else (channels, *output_size)
        return new_tensor(out, shape, input._dtype)

    def backward(self, grad):
        return Im2ColBackward0.run(grad, **self.params)


def im2col(input, kernel, dilation, padding, stride):
    return Im2ColBackward0.run(input, kernel=kernel, stride=stride, padding=padding, dilation=dilation)


def col2im(input, output_size, kernel, dilation, padding, stride):
    return Col2ImBackward0.run(
        input, output_size=output_size, kernel=kernel, stride=stride, padding=padding, dilation=dilation
    )
