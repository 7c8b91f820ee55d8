"""2-D convolution, and 1-D as its height-1 case (3-D input and weight), the twin of
csrc/ops/conv.cpp: input (N, C, H, W), weight (O, C / groups, kh, kw), bias (O) or None. Written as
the definition, one output element at a time; sums are taken in Python floats (double) and rounded
once when stored. PyTorch's argument checks are the caller's (nn/functional.py); the checks here
only keep direct calls well-defined."""

from .._types import float32, float64
from ._autograd import Function, is_grad_enabled
from ._nn import _not_implemented_for
from ._tensor import new_tensor, read


class _Geometry:
    """The sizes of one convolution and, for each output position, the input positions it reads."""

    def __init__(self, input, weight, stride, padding, dilation, groups):
        self.dims = input.dim()
        if self.dims not in (3, 4) or weight.dim() != self.dims:
            raise RuntimeError("convolution: expected 3-D or 4-D input and weight of the same rank")
        if self.dims == 3 and (stride[0], padding[0], dilation[0]) != (1, 0, 1):
            raise RuntimeError("convolution: a 1-D convolution's height stride, padding and dilation must be 1, 0, 1")
        # A 1-D convolution is the 2-D one of a height-1 image and kernel.
        self.n, self.c, self.h, self.w = input._shape if self.dims == 4 else (*input._shape[:2], 1, input._shape[2])
        self.o, self.cg, self.kh, self.kw = (
            weight._shape if self.dims == 4 else (*weight._shape[:2], 1, weight._shape[2])
        )
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        if min(stride) < 1 or min(padding) < 0 or min(dilation) < 1 or max(*stride, *padding, *dilation) > 2**31:
            raise RuntimeError("convolution: invalid stride, padding or dilation")
        if groups < 1 or self.o % groups or self.c % groups or self.cg != self.c // groups:
            raise RuntimeError("convolution: weight and input channels do not match groups")
        self.og = self.o // groups
        self.oh = (self.h + 2 * padding[0] - dilation[0] * (self.kh - 1) - 1) // stride[0] + 1
        self.ow = (self.w + 2 * padding[1] - dilation[1] * (self.kw - 1) - 1) // stride[1] + 1
        if self.oh < 1 or self.ow < 1 or self.kh < 1 or self.kw < 1:
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
        self.geometry = g = _Geometry(input, weight, stride, padding, dilation, groups)
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
        if is_grad_enabled():
            raise NotImplementedError("convolution: double backward (create_graph=True) is not supported yet")
        g, input, weight = self.geometry, self.unpack(0), self.unpack(1)
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


def convolution(input, weight, bias, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups):
    return ConvolutionBackward0.run(
        input,
        weight,
        bias,
        stride=(stride_h, stride_w),
        padding=(pad_h, pad_w),
        dilation=(dilation_h, dilation_w),
        groups=groups,
    )
