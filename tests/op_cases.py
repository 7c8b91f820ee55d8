"""The op table: one entry per differentiable op form, driving tests/test_ops.py.

Each case is a lambda over the tensor module `m` (fastgrad or torch) and input tensors, the input
shapes, the input domain (see op_helpers.DOMAINS) and the `grad_fn` name PyTorch 2.13 gives the
result. Some of those names are PyTorch implementation details (matmul of a vector and a matrix
ends in SqueezeBackward4, batched matmul in UnsafeViewBackward0); the spec asks for PyTorch's names,
so they are recorded as PyTorch prints them. Where fastgrad composes matmul differently, the entry is
a tuple: PyTorch's name, then the name of fastgrad's last step.
"""

from dataclasses import dataclass

from fastgrad import _optable
from op_helpers import LAYOUTS


@dataclass(frozen=True)
class Case:
    name: str
    fn: object  # fn(m, *tensors) -> tensor
    shapes: tuple  # one shape per input tensor
    grad_fn: object  # PyTorch's result.grad_fn.name(); None when the result is an input
    domain: object = "real"  # a DOMAINS name, or one per input
    layouts: tuple = LAYOUTS  # memory layouts the inputs are tried in

    def __repr__(self):
        return self.name


CASES = []


def case(name, fn, shapes, grad_fn, domain="real", layouts=LAYOUTS):
    CASES.append(Case(name, fn, tuple(tuple(s) for s in shapes), grad_fn, domain, layouts))


def _shape_id(shape):
    return "x".join(map(str, shape)) if shape else "0d"


# --- binary arithmetic, with broadcasting: the operators (the `binary` family below has the functions)
BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), ()), ((), (2, 3))]
for _name, _fn, _grad_fn, _domain in [
    ("a+b", lambda m, a, b: a + b, "AddBackward0", "real"),
    ("a-b", lambda m, a, b: a - b, "SubBackward0", "real"),
    ("a*b", lambda m, a, b: a * b, "MulBackward0", "real"),
    ("a/b", lambda m, a, b: a / b, "DivBackward0", ("real", "nonzero")),
    ("a**b", lambda m, a, b: a**b, "PowBackward1", ("pos", "real")),
    ("a%b", lambda m, a, b: a % b, "RemainderBackward1", ("real", "nonzero")),
]:
    for _sa, _sb in BROADCASTS:
        case(f"{_name}({_shape_id(_sa)},{_shape_id(_sb)})", _fn, [_sa, _sb], _grad_fn, _domain)
case("torch.max(a,b)", lambda m, a, b: m.max(a, b), [(3, 4), (4,)], "MaximumBackward0")
case("torch.min(a,b)", lambda m, a, b: m.min(a, b), [(3, 4), (4,)], "MinimumBackward0")

# --- tensor with a Python scalar, on either side ------------------------------------------------
for _name, _fn, _grad_fn, _domain in [
    ("x+2", lambda m, x: x + 2, "AddBackward0", "real"),
    ("2+x", lambda m, x: 2 + x, "AddBackward0", "real"),
    ("x+2.5", lambda m, x: x + 2.5, "AddBackward0", "real"),
    ("x-1.5", lambda m, x: x - 1.5, "SubBackward0", "real"),
    ("1.5-x", lambda m, x: 1.5 - x, "RsubBackward1", "real"),
    ("x*3", lambda m, x: x * 3, "MulBackward0", "real"),
    ("0.5*x", lambda m, x: 0.5 * x, "MulBackward0", "real"),
    ("x/4", lambda m, x: x / 4, "DivBackward0", "real"),
    ("2/x", lambda m, x: 2 / x, "MulBackward0", "nonzero"),
    ("x**2", lambda m, x: x**2, "PowBackward0", "real"),
    ("x**3", lambda m, x: x**3, "PowBackward0", "real"),
    ("x**0.5", lambda m, x: x**0.5, "PowBackward0", "pos"),
    ("x**-1.5", lambda m, x: x**-1.5, "PowBackward0", "pos"),
    ("2**x", lambda m, x: 2**x, "PowBackward2", "real"),
    ("1.5**x", lambda m, x: 1.5**x, "PowBackward2", "real"),
    ("torch.pow(x,2)", lambda m, x: m.pow(x, 2), "PowBackward0", "real"),
    ("torch.pow(2.0,x)", lambda m, x: m.pow(2.0, x), "PowBackward2", "real"),
    ("Tensor.pow(3)", lambda m, x: x.pow(3), "PowBackward0", "real"),
    ("torch.add(x,2.5)", lambda m, x: m.add(x, 2.5), "AddBackward0", "real"),
    ("torch.mul(x,2)", lambda m, x: m.mul(x, 2), "MulBackward0", "real"),
    ("x%0.75", lambda m, x: x % 0.75, "RemainderBackward0", "real"),
    ("Tensor.remainder(-2)", lambda m, x: x.remainder(-2), "RemainderBackward0", "real"),
    ("torch.fmod(x,0.75)", lambda m, x: m.fmod(x, 0.75), "FmodBackward0", "real"),
]:
    case(_name, _fn, [(3, 4)], _grad_fn, _domain)
case("0d*2.5", lambda m, x: x * 2.5, [()], "MulBackward0")
case("1-0d", lambda m, x: 1 - x, [()], "RsubBackward1")

# --- families: the cases of each op-table row that names one (fastgrad._optable: `cases`, e.g.
# "unary(pos)": the family, then the inputs' domain, or one domain per input)

# PyTorch's node names that are not <Name>Backward0: the overloads taking a tensor exponent or
# divisor, and an alias's node (its op's).
BACKWARD_NAMES = {
    "pow": "PowBackward1",
    "remainder": "RemainderBackward1",
    "fmod": "FmodBackward1",
    "negative": "NegBackward0",
    "absolute": "AbsBackward0",
    "log1p": "Log1PBackward0",
}


def _backward_name(op):
    return BACKWARD_NAMES.get(op, "".join(word.capitalize() for word in op.split("_")) + "Backward0")


def binary_family(row, domain="real"):
    """fastgrad.<op>(a, b) for every broadcast pair, Tensor.<op>(b) for one."""
    op, grad_fn = row.name, _backward_name(row.name)
    if "function" in row.variants:
        for sa, sb in BROADCASTS:
            name = f"torch.{op}({_shape_id(sa)},{_shape_id(sb)})"
            case(name, lambda m, a, b: getattr(m, op)(a, b), [sa, sb], grad_fn, domain)
    if "method" in row.variants:
        case(f"Tensor.{op}", lambda m, a, b: getattr(a, op)(b), [(3, 4), (4,)], grad_fn, domain)


def unary_family(row, domain="real"):
    """fastgrad.<op> of a matrix, Tensor.<op> of a vector."""
    op, grad_fn = row.name, _backward_name(row.name)
    if "function" in row.variants:
        case(f"torch.{op}", lambda m, x: getattr(m, op)(x), [(3, 4)], grad_fn, domain)
    if "method" in row.variants:
        case(f"Tensor.{op}", lambda m, x: getattr(x, op)(), [(5,)], grad_fn, domain)


FAMILIES = {"binary": binary_family, "unary": unary_family}
for _row in _optable.OPS:
    if _row.cases:
        _family, _, _domains = _row.cases.partition("(")
        _domains = _domains.rstrip(")").split(",") if _domains else ["real"]
        FAMILIES[_family](_row, _domains[0] if len(_domains) == 1 else tuple(_domains))


# --- elementwise math (issue 13): float functions over the unary loop that expm1's cases try in
# every layout, so one layout each; the aliases by their method, the rest by their function.
for _op, _grad_fn, _domain in [
    ("log10", "Log10Backward0", "pos"),
    ("log2", "Log2Backward0", "pos"),
    ("exp2", "Exp2Backward0", "real"),
    ("sinh", "SinhBackward0", "real"),
    ("cosh", "CoshBackward0", "real"),
    ("asinh", "AsinhBackward0", "real"),
    ("acosh", "AcoshBackward0", "above_one"),
    ("atanh", "AtanhBackward0", "unit"),
    ("asin", "AsinBackward0", "unit"),
    ("acos", "AcosBackward0", "unit"),
    ("atan", "AtanBackward0", "real"),
    ("erf", "ErfBackward0", "real"),
    ("erfc", "ErfcBackward0", "real"),
    ("erfinv", "ErfinvBackward0", "unit"),
    ("lgamma", "LgammaBackward0", "pos"),
    ("digamma", "DigammaBackward0", "pos"),
    ("rsqrt", "RsqrtBackward0", "pos"),
    ("reciprocal", "ReciprocalBackward0", "nonzero"),
    ("deg2rad", "Deg2RadBackward0", "real"),
    ("rad2deg", "Rad2DegBackward0", "real"),
]:
    case(f"torch.{_op}", lambda m, x, op=_op: getattr(m, op)(x), [(3, 4)], _grad_fn, _domain, LAYOUTS[:1])
for _op, _grad_fn, _domain in [
    ("arcsin", "AsinBackward0", "unit"),
    ("arccos", "AcosBackward0", "unit"),
    ("arctan", "AtanBackward0", "real"),
    ("arcsinh", "AsinhBackward0", "real"),
    ("arccosh", "AcoshBackward0", "above_one"),
    ("arctanh", "AtanhBackward0", "unit"),
]:
    case(f"Tensor.{_op}", lambda m, x, op=_op: getattr(x, op)(), [(5,)], _grad_fn, _domain, LAYOUTS[:1])
case("torch.square", lambda m, x: m.square(x), [(3, 4)], "PowBackward0", layouts=LAYOUTS[:1])
# rounding and sign (issue 13): over the unary loop, one layout each; the ops with a zero gradient
# are exempted below (as sign).
for _name, _fn, _grad_fn in [
    ("torch.frac", lambda m, x: m.frac(x), "FracBackward0"),
    ("torch.nan_to_num", lambda m, x: m.nan_to_num(x, nan=1.0), "NanToNumBackward0"),
]:
    case(_name, _fn, [(3, 4)], _grad_fn, layouts=LAYOUTS[:1])
case("Tensor.nan_to_num(0)", lambda m, x: x.nan_to_num(), [(0, 3)], "NanToNumBackward0", layouts=LAYOUTS[:1])

case("-x", lambda m, x: -x, [(2, 3)], "NegBackward0")
case("exp(0d)", lambda m, x: x.exp(), [()], "ExpBackward0")

for _name, _fn in [
    ("clamp(min)", lambda m, x: x.clamp(min=-0.5)),
    ("clamp(max)", lambda m, x: x.clamp(max=0.5)),
    ("clamp(min,max)", lambda m, x: x.clamp(-0.5, 0.5)),
    ("torch.clamp", lambda m, x: m.clamp(x, min=-0.5, max=0.5)),
    ("torch.clamp(max)", lambda m, x: m.clamp(x, max=0.5)),
    ("torch.clip", lambda m, x: m.clip(x, -0.5, 0.5)),
]:
    case(_name, _fn, [(3, 4)], "ClampBackward1", "clamp")

case("where(a>0,a,b)", lambda m, a, b: m.where(a > 0, a, b), [(3, 4), (3, 4)], "WhereBackward0", ("nonzero", "real"))
case(
    "where broadcast",
    lambda m, a, b, c: m.where(c > 0, a, b),
    [(3, 1), (4,), (3, 4)],
    "WhereBackward0",
    ("real", "real", "nonzero"),
)
case("where(a>0,a,0.0)", lambda m, a: m.where(a > 0, a, 0.0), [(3, 4)], "WhereBackward0", "nonzero")

# --- dot and norm ---------------------------------------------------------------------------------
case("torch.dot", lambda m, a, b: m.dot(a, b), [(5,), (5,)], "DotBackward0")
case("Tensor.dot", lambda m, a, b: a.dot(b), [(5,), (5,)], "DotBackward0")
case("norm()", lambda m, x: x.norm(), [(3, 4)], "LinalgVectorNormBackward0")
case("torch.norm", lambda m, x: m.norm(x), [(2, 3, 2)], "LinalgVectorNormBackward0")
case("norm(dim=1)", lambda m, x: x.norm(dim=1), [(3, 4)], "LinalgVectorNormBackward0")
case("norm(dim=-1,keepdim)", lambda m, x: x.norm(dim=-1, keepdim=True), [(3, 4)], "LinalgVectorNormBackward0")
case("norm(p=1)", lambda m, x: x.norm(p=1), [(3, 4)], "LinalgVectorNormBackward0", "nonzero")

# --- reductions -----------------------------------------------------------------------------------
X3 = [(2, 3, 4)]
for _name, _fn, _grad_fn, _domain in [
    ("sum()", lambda m, x: x.sum(), "SumBackward0", "real"),
    ("torch.sum", lambda m, x: m.sum(x), "SumBackward0", "real"),
    ("sum(1)", lambda m, x: x.sum(1), "SumBackward1", "real"),
    ("sum(-1)", lambda m, x: x.sum(-1), "SumBackward1", "real"),
    ("sum((0,2))", lambda m, x: x.sum((0, 2)), "SumBackward1", "real"),
    ("sum(1,keepdim)", lambda m, x: x.sum(dim=1, keepdim=True), "SumBackward1", "real"),
    ("torch.sum(dim,keepdim)", lambda m, x: m.sum(x, dim=(0, 1), keepdim=True), "SumBackward1", "real"),
    ("mean()", lambda m, x: x.mean(), "MeanBackward0", "real"),
    ("torch.mean", lambda m, x: m.mean(x), "MeanBackward0", "real"),
    ("mean(0)", lambda m, x: x.mean(0), "MeanBackward1", "real"),
    ("mean((-1,0),keepdim)", lambda m, x: x.mean((-1, 0), keepdim=True), "MeanBackward1", "real"),
    ("max()", lambda m, x: x.max(), "MaxBackward1", "real"),
    ("torch.max", lambda m, x: m.max(x), "MaxBackward1", "real"),
    ("max(dim).values", lambda m, x: x.max(dim=1).values, "MaxBackward0", "real"),
    ("torch.max(x,-1)[0]", lambda m, x: m.max(x, -1)[0], "MaxBackward0", "real"),
    ("max(0,keepdim)[0]", lambda m, x: x.max(0, keepdim=True)[0], "MaxBackward0", "real"),
    ("min()", lambda m, x: x.min(), "MinBackward1", "real"),
    ("torch.min", lambda m, x: m.min(x), "MinBackward1", "real"),
    ("min(dim).values", lambda m, x: x.min(dim=2).values, "MinBackward0", "real"),
    ("torch.min(x,1,keepdim)[0]", lambda m, x: m.min(x, 1, keepdim=True)[0], "MinBackward0", "real"),
    ("amax()", lambda m, x: x.amax(), "AmaxBackward0", "real"),
    ("amax(1)", lambda m, x: x.amax(1), "AmaxBackward0", "real"),
    ("torch.amax((0,2),keepdim)", lambda m, x: m.amax(x, dim=(0, 2), keepdim=True), "AmaxBackward0", "real"),
    ("amin()", lambda m, x: x.amin(), "AminBackward0", "real"),
    ("amin(-1)", lambda m, x: x.amin(-1), "AminBackward0", "real"),
    ("torch.amin((0,1))", lambda m, x: m.amin(x, (0, 1)), "AminBackward0", "real"),
    ("prod()", lambda m, x: x.prod(), "ProdBackward0", "nonzero"),
    ("prod() with a zero", lambda m, x: x.prod(), "ProdBackward0", "one_zero"),
    ("torch.prod", lambda m, x: m.prod(x), "ProdBackward0", "nonzero"),
    ("prod(1)", lambda m, x: x.prod(1), "ProdBackward1", "nonzero"),
    ("prod(1) with a zero", lambda m, x: x.prod(1), "ProdBackward1", "one_zero"),
    ("torch.prod(x,-1,keepdim)", lambda m, x: m.prod(x, -1, keepdim=True), "ProdBackward1", "nonzero"),
    ("var()", lambda m, x: x.var(), "VarBackward0", "real"),
    ("torch.var", lambda m, x: m.var(x), "VarBackward0", "real"),
    ("var(1)", lambda m, x: x.var(1), "VarBackward0", "real"),
    ("var((0,2),keepdim)", lambda m, x: x.var((0, 2), keepdim=True), "VarBackward0", "real"),
    ("var(unbiased=False)", lambda m, x: x.var(unbiased=False), "VarBackward0", "real"),
    ("var(-1,unbiased=False)", lambda m, x: x.var(-1, unbiased=False), "VarBackward0", "real"),
    ("std()", lambda m, x: x.std(), "StdBackward0", "real"),
    ("torch.std", lambda m, x: m.std(x), "StdBackward0", "real"),
    ("std(1)", lambda m, x: x.std(1), "StdBackward0", "real"),
    ("std((0,1),keepdim)", lambda m, x: m.std(x, dim=(0, 1), keepdim=True), "StdBackward0", "real"),
    ("std(unbiased=False)", lambda m, x: x.std(unbiased=False), "StdBackward0", "real"),
]:
    case(_name, _fn, X3, _grad_fn, _domain)
case("sum(0d)", lambda m, x: x.sum(), [()], "SumBackward0")
case("sum(1-d, dim=0)", lambda m, x: x.sum(0), [(5,)], "SumBackward1")
case("max(1-d)", lambda m, x: x.max(), [(5,)], "MaxBackward1")

# --- reductions and set ops of issue 13 (reduce)
case("torch.logsumexp(x,1)", lambda m, x: m.logsumexp(x, 1), X3, "LogsumexpBackward0")
case(
    "logsumexp((0,2),keepdim)",
    lambda m, x: x.logsumexp((0, 2), keepdim=True),
    X3,
    "LogsumexpBackward0",
    layouts=LAYOUTS[:1],
)
case("torch.nansum(x,1)", lambda m, x: m.nansum(x, 1), X3, "NansumBackward0", layouts=LAYOUTS[:2])
case("nansum()", lambda m, x: x.nansum(), X3, "NansumBackward0", layouts=LAYOUTS[:1])
case("torch.nanmean(x,(0,2),keepdim)", lambda m, x: m.nanmean(x, (0, 2), True), X3, "DivBackward0", layouts=LAYOUTS[:1])
case("torch.aminmax(x,dim=1).max", lambda m, x: m.aminmax(x, dim=1).max, X3, "AminmaxBackward0", layouts=LAYOUTS[:2])
case("aminmax(keepdim)[0]", lambda m, x: x.aminmax(keepdim=True)[0], X3, "AminmaxBackward0", layouts=LAYOUTS[:1])
case("torch.std_mean(x,1)[0]", lambda m, x: m.std_mean(x, 1)[0], X3, "StdMeanBackward0", layouts=LAYOUTS[:1])
case("torch.std_mean(x)[1]", lambda m, x: m.std_mean(x)[1], X3, "StdMeanBackward0", layouts=LAYOUTS[:1])
case(
    "torch.var_mean(x,(0,2),keepdim,correction=0)[0]",
    lambda m, x: m.var_mean(x, (0, 2), keepdim=True, correction=0)[0],
    X3,
    "VarMeanBackward0",
    layouts=LAYOUTS[:1],
)
# --- the activations with parameters: fused elementwise ops, in the layouts of the other unary ops
case("F.leaky_relu(0.2)", lambda m, x: m.nn.functional.leaky_relu(x, 0.2), X3, "LeakyReluBackward0")
case("F.leaky_relu(-0.5)", lambda m, x: m.nn.functional.leaky_relu(x, -0.5), X3, "LeakyReluBackward0")
case("F.hardtanh(-0.5,0.8)", lambda m, x: m.nn.functional.hardtanh(x, -0.5, 0.8), X3, "HardtanhBackward0")
case("F.relu6(3x)", lambda m, x: m.nn.functional.relu6(x * 3), X3, "HardtanhBackward0")
case("torch.cosine_similarity(a,b)", lambda m, a, b: m.cosine_similarity(a, b), [(3, 4), (4,)], "SumBackward1")
case(
    "F.cosine_similarity(dim=0)",
    lambda m, a, b: m.nn.functional.cosine_similarity(a, b, dim=0),
    [(3, 4), (3, 1)],
    "SumBackward1",
    layouts=LAYOUTS[:1],
)
case(
    "F.conv2d(stride,padding,groups)",
    lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2),
    [(2, 4, 4, 3), (2, 2, 2, 2), (2,)],
    "ConvolutionBackward0",
)
case(
    "F.conv1d(dilation,same)",
    lambda m, x, w: m.nn.functional.conv1d(x, w, padding="same", dilation=2),
    [(2, 2, 5), (3, 2, 3)],
    "ConvolutionBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.max_pool2d(3,2,1,ceil)",
    lambda m, x: m.nn.functional.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    [(2, 3, 5, 6)],
    "MaxPool2DWithIndicesBackward0",
)
case("F.max_pool1d(2,dilation)", lambda m, x: m.nn.functional.max_pool1d(x, 2, 1, dilation=2), X3, "SqueezeBackward1")
case(
    "F.avg_pool2d(3,2,1,exclude pad)",
    lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    [(2, 3, 5, 6)],
    "AvgPool2DBackward0",
)
case("F.avg_pool1d(2)", lambda m, x: m.nn.functional.avg_pool1d(x, 2), X3, "SqueezeBackward1", layouts=LAYOUTS[:2])
case(
    "F.adaptive_avg_pool2d((3,2))",
    lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (3, 2)),
    [(2, 3, 5, 4)],
    "AdaptiveAvgPool2DBackward0",
)
case(
    "F.interpolate(bilinear x1.5)",
    lambda m, x: m.nn.functional.interpolate(x, scale_factor=1.5, mode="bilinear"),
    [(2, 3, 3, 4)],
    "UpsampleBilinear2DBackward0",
)
case(
    "F.interpolate(nearest size)", lambda m, x: m.nn.functional.interpolate(x, size=5), X3, "UpsampleNearest1DBackward0"
)
case(
    "F.interpolate(linear corners)",
    lambda m, x: m.nn.functional.interpolate(x, size=2, mode="linear", align_corners=True),
    X3,
    "UpsampleLinear1DBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.interpolate(trilinear)",
    lambda m, x: m.nn.functional.interpolate(x, size=(2, 3, 3), mode="trilinear"),
    [(1, 2, 3, 2, 4)],
    "UpsampleTrilinear3DBackward0",
)
case(
    "F.grid_sample(bilinear)",
    lambda m, x, g: m.nn.functional.grid_sample(x, g, align_corners=False),
    [(2, 3, 4, 5), (2, 3, 2, 2)],
    "GridSampler2DBackward0",
    ("real", "unit"),
)
case(
    "F.grid_sample(bicubic,reflection,corners)",
    lambda m, x, g: m.nn.functional.grid_sample(x, g * 1.3, "bicubic", "reflection", True),
    [(1, 2, 4, 3), (1, 2, 3, 2)],
    "GridSampler2DBackward0",
    ("real", "unit"),
    layouts=LAYOUTS[:2],
)
case(
    "F.grid_sample(3-D,border)",
    lambda m, x, g: m.nn.functional.grid_sample(x, g * 1.3, padding_mode="border", align_corners=False),
    [(1, 2, 3, 2, 4), (1, 2, 1, 2, 3)],
    "GridSampler3DBackward0",
    ("real", "unit"),
    layouts=LAYOUTS[:2],
)
case(
    "F.affine_grid",
    lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 3, 4), align_corners=False),
    [(2, 2, 3)],
    "AffineGridGeneratorBackward0",
)
case(
    "F.interpolate(bicubic corners)",
    lambda m, x: m.nn.functional.interpolate(x, size=(4, 3), mode="bicubic", align_corners=True),
    [(1, 2, 3, 4)],
    "UpsampleBicubic2DBackward0",
)
case(
    "F.interpolate(bilinear antialias)",
    lambda m, x: m.nn.functional.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True),
    [(2, 1, 5, 6)],
    "UpsampleBilinear2DAaBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.interpolate(bicubic antialias)",
    lambda m, x: m.nn.functional.interpolate(x, size=(2, 3), mode="bicubic", antialias=True),
    [(1, 2, 5, 7)],
    "UpsampleBicubic2DAaBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.adaptive_max_pool2d(unbatched)",
    lambda m, x: m.nn.functional.adaptive_max_pool2d(x, 2),
    X3,
    "AdaptiveMaxPool2DBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.conv_transpose2d(stride,output_padding,groups)",
    lambda m, x, w, b: m.nn.functional.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
    [(2, 4, 3, 3), (4, 1, 2, 2), (2,)],
    "ConvolutionBackward0",
)
case(
    "F.conv_transpose1d(dilation,output_padding)",
    lambda m, x, w: m.nn.functional.conv_transpose1d(x, w, stride=2, output_padding=1, dilation=2),
    [(2, 2, 4), (2, 3, 3)],
    "ConvolutionBackward0",
    layouts=LAYOUTS[:2],
)
# (without a bias: PyTorch records the double backward of batch norm as one node, so its bias's
# gradient has a graph under create_graph; fastgrad's, a sum of the incoming gradient, has none)
case(
    "F.batch_norm(training)",
    lambda m, x, w: m.nn.functional.batch_norm(x, None, None, w, training=True),
    [(3, 2, 4), (2,)],
    "NativeBatchNormBackward0",
)
case(
    "F.batch_norm(eval)",
    lambda m, x, w: m.nn.functional.batch_norm(x, m.zeros_like(w) + 0.5, m.ones_like(w) * 2, w),
    [(4, 3), (3,)],
    "NativeBatchNormBackward0",
    layouts=LAYOUTS[:2],
)
case(
    "F.group_norm",
    lambda m, x, w, b: m.nn.functional.group_norm(x, 2, w, b),
    [(2, 4, 3, 2), (4,), (4,)],
    "NativeGroupNormBackward0",
)
case(
    "F.layer_norm",
    lambda m, x, w, b: m.nn.functional.layer_norm(x, (3, 5), w, b),
    [(2, 3, 5), (3, 5), (3, 5)],
    "NativeLayerNormBackward0",
)


def _recurrent_cell(m, kind, x, state, w_ih, w_hh, b_hh):
    """nn.RNNCell/LSTMCell/GRUCell with the given tensors as weights (no bias_ih); LSTM's h * c."""
    cell = getattr(m.nn, kind)(x.shape[-1], w_hh.shape[-1])
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        delattr(cell, name)
    cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh = w_ih, w_hh, None, b_hh
    out = cell(x, state)
    return out[0] * out[1] if isinstance(out, tuple) else out


# The cells run fastgrad's fused recurrent op (RnnLayerBackward0, then a select of the new state).
case(
    "nn.RNNCell(fused)",
    lambda m, x, h, w_ih, w_hh, b: _recurrent_cell(m, "RNNCell", x, h, w_ih, w_hh, b),
    [(2, 4), (2, 3), (3, 4), (3, 3), (3,)],
    ("TanhBackward0", "SelectBackward0"),
)
case(
    "nn.LSTMCell(fused)",
    lambda m, x, h, c, w_ih, w_hh, b: _recurrent_cell(m, "LSTMCell", x, (h, c), w_ih, w_hh, b),
    [(2, 4), (2, 3), (2, 3), (12, 4), (12, 3), (12,)],
    "MulBackward0",
)
case(
    "nn.GRUCell(fused)",
    lambda m, x, h, w_ih, w_hh, b: _recurrent_cell(m, "GRUCell", x, h, w_ih, w_hh, b),
    [(2, 4), (2, 3), (9, 4), (9, 3), (9,)],
    ("AddBackward0", "SelectBackward0"),
)
case(
    "F.unfold(dilation,padding,stride)",
    lambda m, x: m.nn.functional.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
    [(2, 3, 4, 5)],
    "Im2ColBackward0",
)
case("F.fold(overlapping)", lambda m, x: m.nn.functional.fold(x, (4, 5), 2), [(2, 8, 12)], "Col2ImBackward0")
case("torch.dist(a,b)", lambda m, a, b: m.dist(a, b), [(3, 4), (4,)], "DistBackward0", layouts=LAYOUTS[:2])
for _p in [1, 3, 0.5, float("inf")]:
    case(f"dist(p={_p})", lambda m, a, b, p=_p: a.dist(b, p), [(3, 4), (3, 4)], "DistBackward0", layouts=LAYOUTS[:1])
case(
    "F.pairwise_distance(a,b,keepdim)",
    lambda m, a, b: m.nn.functional.pairwise_distance(a, b, keepdim=True),
    [(3, 4), (3, 4)],
    "NormBackward1",
    layouts=LAYOUTS[:2],
)
case(
    "torch.pairwise_distance(p=1)",
    lambda m, a, b: m.pairwise_distance(a, b, 1.0),
    [(2, 3, 4), (4,)],
    "NormBackward1",
    layouts=LAYOUTS[:1],
)
# quantile ends in PyTorch's in-place squeeze_ (SqueezeBackward4), fastgrad's in squeeze(-1)
QUANTILE = ("SqueezeBackward4", "SqueezeBackward1")
case("torch.quantile(x,0.3,dim=1)", lambda m, x: m.quantile(x, 0.3, dim=1), X3, QUANTILE, layouts=LAYOUTS[:2])
case(
    "quantile(q tensor,keepdim)",
    lambda m, x: x.quantile(m.tensor([0.2, 0.9], dtype=x.dtype), keepdim=True),
    X3,
    QUANTILE,
    layouts=LAYOUTS[:1],
)
case(
    "torch.nanquantile(x,q,0,midpoint)",
    lambda m, x: m.nanquantile(x, m.tensor([0.25, 0.5], dtype=x.dtype), 0, interpolation="midpoint"),
    X3,
    QUANTILE,
    layouts=LAYOUTS[:1],
)

# --- sorting and selection: random reals have no ties, so PyTorch's order is fully specified
for _name, _fn, _grad_fn in [
    ("sort().values", lambda m, x: x.sort().values, "SortBackward0"),
    ("torch.sort(x,0,descending)[0]", lambda m, x: m.sort(x, 0, descending=True)[0], "SortBackward0"),
    ("sort(dim=1,stable)", lambda m, x: x.sort(dim=1, stable=True).values, "SortBackward1"),
    ("torch.msort", lambda m, x: m.msort(x), "SortBackward0"),
    ("msort()", lambda m, x: x.msort(), "SortBackward0"),
    ("topk(2).values", lambda m, x: x.topk(2).values, "TopkBackward0"),
    ("torch.topk(x,2,0,largest=False)[0]", lambda m, x: m.topk(x, 2, 0, largest=False)[0], "TopkBackward0"),
    ("topk(3,dim=1)", lambda m, x: x.topk(3, dim=1).values, "TopkBackward0"),
    ("topk(0)", lambda m, x: x.topk(0).values, "TopkBackward0"),
    ("kthvalue(2)", lambda m, x: x.kthvalue(2).values, "KthvalueBackward0"),
    ("torch.kthvalue(x,3,1,keepdim)[0]", lambda m, x: m.kthvalue(x, 3, 1, keepdim=True)[0], "KthvalueBackward0"),
    ("median()", lambda m, x: x.median(), "MedianBackward0"),
    ("median(dim=-1,keepdim)[0]", lambda m, x: x.median(dim=-1, keepdim=True)[0], "MedianBackward1"),
    ("mode(1).values", lambda m, x: x.mode(1).values, "ModeBackward0"),
    ("torch.mode(x,keepdim=True)[0]", lambda m, x: m.mode(x, keepdim=True)[0], "ModeBackward0"),
]:
    case(_name, _fn, X3, _grad_fn)
case("sort of 0-d", lambda m, x: x.sort().values, [()], "SortBackward0")
case("topk(1) of 0-d", lambda m, x: m.topk(x, 1).values, [()], "TopkBackward0")
# PyTorch's median(dim) reads wrong memory when the input is expanded along dim (stride 0)
case("torch.median(x,0).values", lambda m, x: m.median(x, 0).values, X3, "MedianBackward1", layouts=LAYOUTS[:2])
case("kthvalue(1) of 0-d", lambda m, x: x.kthvalue(1).values, [()], "KthvalueBackward0")
case("median() of 0-d", lambda m, x: m.median(x), [()], "MedianBackward0")
case("median(0) of 0-d", lambda m, x: x.median(0).values, [()], "MedianBackward1")

# --- matmul for every rank combination, mm ------------------------------------------------------
for _name, _sa, _sb, _grad_fn in [
    ("1-D@1-D", (4,), (4,), "DotBackward0"),
    ("2-D@1-D", (3, 4), (4,), "MvBackward0"),
    ("1-D@2-D", (3,), (3, 4), "SqueezeBackward4"),
    ("2-D@2-D", (3, 4), (4, 2), "MmBackward0"),
    ("3-D@3-D", (2, 3, 4), (2, 4, 2), "UnsafeViewBackward0"),
    ("3-D@3-D batch broadcast", (1, 3, 4), (2, 4, 2), ("CloneBackward0", "UnsafeViewBackward0")),
    ("4-D@3-D broadcast", (2, 1, 3, 4), (3, 4, 2), "UnsafeViewBackward0"),
    ("1-D@3-D", (4,), (2, 4, 3), "UnsafeViewBackward0"),
    ("3-D@1-D", (2, 3, 4), (4,), "UnsafeViewBackward0"),
    ("3-D@2-D", (2, 3, 4), (4, 2), "UnsafeViewBackward0"),
    ("2-D@3-D", (3, 4), (2, 4, 2), ("CloneBackward0", "UnsafeViewBackward0")),
]:
    case(_name, lambda m, a, b: a @ b, [_sa, _sb], _grad_fn)
case("torch.matmul", lambda m, a, b: m.matmul(a, b), [(3, 4), (4, 2)], "MmBackward0")
case("Tensor.matmul", lambda m, a, b: a.matmul(b), [(2, 3, 4), (4,)], "UnsafeViewBackward0")
case("torch.mm", lambda m, a, b: m.mm(a, b), [(3, 4), (4, 2)], "MmBackward0")
case("Tensor.mm", lambda m, a, b: a.mm(b), [(1, 4), (4, 3)], "MmBackward0")
case("torch.bmm", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 2)], "BmmBackward0")
case("Tensor.mv", lambda m, a, b: a.mv(b), [(3, 4), (4,)], "MvBackward0")

# --- F.linear as PyTorch routes it: one addmm for a 2-D input with a bias (added in the product's
# epilogue), viewed as 2-D around it for other ranks; matmul without a bias
for _name, _shapes, _grad_fn in [
    ("F.linear", [(3, 4), (2, 4), (2,)], "AddmmBackward0"),
    ("F.linear column bias", [(3, 4), (2, 4), (3, 1)], "AddmmBackward0"),
    ("F.linear 3-D", [(2, 3, 4), (2, 4), (2,)], "ViewBackward0"),
    ("F.linear vector", [(4,), (2, 4), (2,)], "ViewBackward0"),
    ("F.linear no bias", [(3, 4), (2, 4)], "MmBackward0"),
    ("F.linear vector no bias", [(4,), (2, 4)], "SqueezeBackward4"),
]:
    case(_name, lambda m, *xs: m.nn.functional.linear(*xs), _shapes, _grad_fn)

# --- shape ops ------------------------------------------------------------------------------------
for _name, _fn, _shapes, _grad_fn in [
    ("reshape(4,3)", lambda m, x: x.reshape(4, 3), [(3, 4)], "ViewBackward0"),
    ("reshape((2,-1))", lambda m, x: x.reshape((2, -1)), [(3, 4)], "ViewBackward0"),
    ("torch.reshape", lambda m, x: m.reshape(x, (-1,)), [(2, 3, 2)], "ViewBackward0"),
    ("flatten()", lambda m, x: x.flatten(), [(2, 3, 2)], "ViewBackward0"),
    ("flatten(1)", lambda m, x: x.flatten(1), [(2, 3, 2)], "ViewBackward0"),
    ("torch.flatten(x,0,1)", lambda m, x: m.flatten(x, 0, 1), [(2, 3, 2)], "ViewBackward0"),
    ("squeeze()", lambda m, x: x.squeeze(), [(3, 1, 4, 1)], "SqueezeBackward0"),
    ("squeeze(1)", lambda m, x: x.squeeze(1), [(3, 1, 4, 1)], "SqueezeBackward1"),
    ("squeeze(-1)", lambda m, x: x.squeeze(-1), [(3, 1, 4, 1)], "SqueezeBackward1"),
    ("squeeze(0) of size 3 (no-op)", lambda m, x: x.squeeze(0), [(3, 1, 4, 1)], "SqueezeBackward1"),
    ("squeeze((1,3))", lambda m, x: x.squeeze((1, 3)), [(3, 1, 4, 1)], "SqueezeBackward2"),
    ("squeeze([1])", lambda m, x: x.squeeze([1]), [(3, 1, 4)], "SqueezeBackward2"),  # a sequence, even of one
    ("torch.squeeze(x,(1,))", lambda m, x: m.squeeze(x, (1,)), [(3, 1, 4)], "SqueezeBackward2"),
    ("torch.squeeze(x,1)", lambda m, x: m.squeeze(x, 1), [(3, 1, 4)], "SqueezeBackward1"),
    ("unsqueeze(0)", lambda m, x: x.unsqueeze(0), [(3, 4)], "UnsqueezeBackward0"),
    ("unsqueeze(-1)", lambda m, x: x.unsqueeze(-1), [(3, 4)], "UnsqueezeBackward0"),
    ("torch.unsqueeze(x,1)", lambda m, x: m.unsqueeze(x, 1), [(3, 4)], "UnsqueezeBackward0"),
    ("unsqueeze(0d)", lambda m, x: x.unsqueeze(0), [()], "UnsqueezeBackward0"),
    ("transpose(0,1)", lambda m, x: x.transpose(0, 1), [(3, 4)], "TransposeBackward0"),
    ("transpose(-1,0)", lambda m, x: x.transpose(-1, 0), [(2, 3, 4)], "TransposeBackward0"),
    ("torch.transpose", lambda m, x: m.transpose(x, 1, 2), [(2, 3, 4)], "TransposeBackward0"),
    ("torch.swapaxes", lambda m, x: m.swapaxes(x, 0, 2), [(2, 3, 4)], "TransposeBackward0"),
    ("permute(2,0,1)", lambda m, x: x.permute(2, 0, 1), [(2, 3, 4)], "PermuteBackward0"),
    ("permute((1,0,2))", lambda m, x: x.permute((1, 0, 2)), [(2, 3, 4)], "PermuteBackward0"),
    ("permute(-1,0,1)", lambda m, x: x.permute(-1, 0, 1), [(2, 3, 4)], "PermuteBackward0"),
    ("torch.permute", lambda m, x: m.permute(x, (2, 1, 0)), [(2, 3, 4)], "PermuteBackward0"),
    ("t()", lambda m, x: x.t(), [(3, 4)], "TBackward0"),
    ("torch.t", lambda m, x: m.t(x), [(3, 4)], "TBackward0"),
    ("t() of 1-D", lambda m, x: x.t(), [(4,)], "TBackward0"),
    (".T", lambda m, x: x.T, [(3, 4)], "PermuteBackward0"),
    ("expand(3,4)", lambda m, x: x.expand(3, 4), [(1, 4)], "ExpandBackward0"),
    ("expand(-1,5)", lambda m, x: x.expand(-1, 5), [(3, 1)], "ExpandBackward0"),
    ("expand new dims", lambda m, x: x.expand(2, 3, 4), [(4,)], "ExpandBackward0"),
    ("expand((2,3,4)) of (3,1)", lambda m, x: x.expand((2, 3, 4)), [(3, 1)], "ExpandBackward0"),
    ("clone()", lambda m, x: x.clone(), [(3, 4)], "CloneBackward0"),
    ("torch.clone", lambda m, x: m.clone(x), [(3, 4)], "CloneBackward0"),
    ("t().contiguous()", lambda m, x: x.t().contiguous(), [(3, 4)], "CloneBackward0"),
    # contiguous() of a contiguous tensor returns the tensor itself (no new node)
    ("contiguous() no-op", lambda m, x: x.contiguous(), [(3, 4)], None),
]:
    case(_name, _fn, _shapes, _grad_fn)
for _name, _fn in [
    ("view(4,3)", lambda m, x: x.view(4, 3)),
    ("view(-1)", lambda m, x: x.view(-1)),
    ("view(2,2,3)", lambda m, x: x.view(2, 2, 3)),
]:
    case(_name, _fn, [(3, 4)], "ViewBackward0", layouts=("contiguous",))
case("view_as", lambda m, x, y: x.view_as(y), [(3, 4), (2, 6)], "ViewBackward0", layouts=("contiguous",))
case("reshape_as", lambda m, x, y: x.reshape_as(y), [(3, 4), (12,)], "ViewBackward0")
case("expand_as", lambda m, x, y: x.expand_as(y), [(1, 4), (3, 4)], "ExpandBackward0")
case("torch.cat dim 0", lambda m, a, b: m.cat([a, b]), [(2, 3), (1, 3)], "CatBackward0")
case("torch.cat dim 1", lambda m, a, b: m.cat((a, b), dim=1), [(2, 3), (2, 2)], "CatBackward0")
case(
    "torch.cat three, dim -1",
    lambda m, a, b, c: m.cat([a, b, c], -1),
    [(2, 1, 2), (2, 1, 3), (2, 1, 1)],
    "CatBackward0",
)
case("torch.cat one", lambda m, a: m.cat([a], 0), [(2, 3)], "CatBackward0")
case("torch.concat", lambda m, a, b: m.concat([a, b], 1), [(2, 3), (2, 2)], "CatBackward0")
case("torch.concatenate", lambda m, a, b: m.concatenate((a, b)), [(2, 3), (1, 3)], "CatBackward0")
case("torch.stack", lambda m, a, b: m.stack([a, b]), [(2, 3), (2, 3)], "StackBackward0")
case("torch.stack dim 1", lambda m, a, b: m.stack((a, b), dim=1), [(2, 3), (2, 3)], "StackBackward0")
case("torch.stack three, dim -1", lambda m, a, b, c: m.stack([a, b, c], dim=-1), [(4,), (4,), (4,)], "StackBackward0")

# --- compositions: fan-out, chains across op families ---------------------------------------------
case("mlp layer", lambda m, x, w, b: ((x @ w + b).relu() * 2).sum(), [(4, 3), (3, 5), (5,)], "SumBackward0")
case("fan-out x*x + exp(x)", lambda m, x: x * x + x.exp(), [(3, 4)], "AddBackward0")
case(
    "softmax by hand",
    lambda m, x: (x - x.amax(1, keepdim=True)).exp() / (x - x.amax(1, keepdim=True)).exp().sum(1, keepdim=True),
    [(3, 4)],
    "DivBackward0",
)
case("mse", lambda m, p, y: ((p - y) ** 2).mean(), [(6,), (6,)], "MeanBackward0")

# --- softmax and log_softmax: fused kernels, along the last dim (contiguous rows) and across others
for _name, _fn, _shapes, _grad_fn in [
    ("torch.softmax(x,-1)", lambda m, x: m.softmax(x, -1), [(3, 4)], "SoftmaxBackward0"),
    ("softmax(0)", lambda m, x: x.softmax(0), [(3, 4)], "SoftmaxBackward0"),
    ("softmax(dim=1) of 3-D", lambda m, x: x.softmax(dim=1), [(2, 3, 4)], "SoftmaxBackward0"),
    ("softmax(0) of 1-D", lambda m, x: x.softmax(0), [(5,)], "SoftmaxBackward0"),
    ("softmax(-1) of 0-d", lambda m, x: x.softmax(-1), [()], "SoftmaxBackward0"),
    ("softmax(1,dtype=float64)", lambda m, x: x.softmax(1, dtype=m.float64), [(3, 4)], "SoftmaxBackward0"),
    ("torch.log_softmax(x,1)", lambda m, x: m.log_softmax(x, 1), [(3, 4)], "LogSoftmaxBackward0"),
    ("log_softmax(-3) of 3-D", lambda m, x: x.log_softmax(-3), [(2, 3, 4)], "LogSoftmaxBackward0"),
    ("log_softmax(dim=-1) of 3-D", lambda m, x: x.log_softmax(dim=-1), [(2, 3, 4)], "LogSoftmaxBackward0"),
    ("log_softmax(0) of 0-d", lambda m, x: x.log_softmax(0), [()], "LogSoftmaxBackward0"),
    (
        "torch.log_softmax(dtype=float64)",
        lambda m, x: m.log_softmax(x, 0, dtype=m.float64),
        [(3, 4)],
        "LogSoftmaxBackward0",
    ),
    ("softmax then log", lambda m, x: x.softmax(1).log(), [(3, 4)], "LogBackward0"),
]:
    case(_name, _fn, _shapes, _grad_fn)


# --- scaled_dot_product_attention's fused op (PyTorch's flash cases): keys in vector blocks and a
# tail, a head width with a tail, causal with L > S, the heads of a split projection read strided
_FLASH = "ScaledDotProductFlashAttentionForCpuBackward0"
case(
    "F.scaled_dot_product_attention 4-D",
    lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v),
    [(2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8)],
    _FLASH,
)
case(
    "F.scaled_dot_product_attention causal L > S",
    lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
    [(1, 2, 6, 19), (1, 2, 4, 19), (1, 2, 4, 19)],
    _FLASH,
)
case(
    "F.scaled_dot_product_attention heads of a qkv projection, causal",
    lambda m, x: m.nn.functional.scaled_dot_product_attention(
        *(x.narrow(2, c, 8).view(1, 37, 2, 4).transpose(1, 2) for c in (0, 8, 16)), is_causal=True
    ),
    [(1, 37, 24)],
    _FLASH,
    layouts=("contiguous",),  # view() needs the slices' own layout
)

# --- scans along one dim: cumsum, cumprod (with zeros: its gradient's own case), logcumsumexp, cummax/cummin
for _name, _fn, _shapes, _grad_fn, _domain in [
    ("torch.cumsum(x,1)", lambda m, x: m.cumsum(x, 1), [(3, 4)], "CumsumBackward0", "real"),
    ("cumsum(0) of 3-D", lambda m, x: x.cumsum(0), [(2, 3, 4)], "CumsumBackward0", "real"),
    ("cumsum(-1) of 0-d", lambda m, x: x.cumsum(-1), [()], "CumsumBackward0", "real"),
    ("cumsum(1) of size 0", lambda m, x: x.cumsum(1), [(0, 3)], "CumsumBackward0", "real"),
    ("cumsum(1,dtype=float64)", lambda m, x: x.cumsum(1, dtype=m.float64), [(3, 4)], "CumsumBackward0", "real"),
    ("torch.cumprod(x,1)", lambda m, x: m.cumprod(x, 1), [(3, 4)], "CumprodBackward0", "nonzero"),
    ("cumprod(0) with a zero", lambda m, x: x.cumprod(0), [(4, 3)], "CumprodBackward0", "one_zero"),
    ("cumprod(-1) of 3-D with a zero", lambda m, x: x.cumprod(-1), [(2, 3, 4)], "CumprodBackward0", "one_zero"),
    ("cumprod(0) of 0-d", lambda m, x: x.cumprod(0), [()], "CumprodBackward0", "nonzero"),
    ("torch.logcumsumexp(x,1)", lambda m, x: m.logcumsumexp(x, 1), [(3, 4)], "LogcumsumexpBackward0", "real"),
    ("logcumsumexp(0) of 3-D", lambda m, x: x.logcumsumexp(0), [(2, 3, 4)], "LogcumsumexpBackward0", "real"),
    ("torch.cummax(x,1).values", lambda m, x: m.cummax(x, 1).values, [(3, 4)], "CummaxBackward0", "real"),
    ("cummax(0)[0] of 0-d", lambda m, x: x.cummax(0)[0], [()], "CummaxBackward0", "real"),
    ("cummin(0).values of 3-D", lambda m, x: x.cummin(0).values, [(2, 3, 4)], "CumminBackward0", "real"),
    ("torch.cummin(x,-1)[0]", lambda m, x: m.cummin(x, -1)[0], [(3, 4)], "CumminBackward0", "real"),
]:
    case(_name, _fn, _shapes, _grad_fn, _domain)


# --- shape family (issue 13): views, copies and joins composed in the shared layer; most in one
# layout (their code paths are the indexing, cat and expand that other cases test in every layout)
_L1, _L2 = LAYOUTS[:1], LAYOUTS[:2]
for _name, _fn, _shapes, _grad_fn, _layouts in [
    ("narrow(1,-3,2)", lambda m, x: x.narrow(1, -3, 2), [(3, 4)], "SliceBackward0", _L2),
    ("torch.select(x,1,-1)", lambda m, x: m.select(x, 1, -1), [(3, 4)], "SelectBackward0", _L2),
    ("select(0,1) of 3-D", lambda m, x: x.select(0, 1), [(2, 3, 4)], "SelectBackward0", _L1),
    ("unfold(1,2,1) overlapping", lambda m, x: x.unfold(1, 2, 1), [(3, 4)], "UnfoldBackward0", _L2),
    ("unfold(0,2,2) of 3-D", lambda m, x: x.unfold(0, 2, 2), [(5, 2, 3)], "UnfoldBackward0", _L1),
    ("unfold(-1,3,1) of 1-D", lambda m, x: x.unfold(-1, 3, 1), [(6,)], "UnfoldBackward0", _L1),
    ("unfold(0,1,1) of 0-d", lambda m, x: x.unfold(0, 1, 1), [()], "UnfoldBackward0", _L1),
    ("torch.ravel", lambda m, x: m.ravel(x), [(3, 4)], "ViewBackward0", _L2),
    ("ravel of 0-d", lambda m, x: x.ravel(), [()], "ViewBackward0", _L1),
    ("torch.positive", lambda m, x: m.positive(x) * 2, [(3, 4)], "MulBackward0", _L1),
    ("positive", lambda m, x: x.positive() * 2, [(3,)], "MulBackward0", _L1),
    ("torch.unbind(x,1)[2]", lambda m, x: m.unbind(x, 1)[2], [(3, 4)], "UnbindBackward0", _L2),
    ("torch.movedim((0,1),(2,0))", lambda m, x: m.movedim(x, (0, 1), (2, 0)), [(2, 3, 4)], "PermuteBackward0", _L1),
    ("moveaxis(0,-1)", lambda m, x: x.moveaxis(0, -1), [(3, 4)], "PermuteBackward0", _L1),
    ("torch.swapdims", lambda m, x: m.swapdims(x, 0, 1), [(3, 4)], "TransposeBackward0", _L1),
    ("broadcast_to((2,3,4))", lambda m, x: x.broadcast_to((2, 3, 4)), [(3, 1)], "ExpandBackward0", _L1),
    (
        "torch.broadcast_tensors[1]",
        lambda m, a, b: m.broadcast_tensors(a, b)[1],
        [(3, 4), (4,)],
        "ExpandBackward0",
        _L1,
    ),
    ("torch.atleast_1d of 0-d", lambda m, x: m.atleast_1d(x), [()], "ViewBackward0", _L1),
    ("torch.atleast_2d of 1-d", lambda m, x: m.atleast_2d(x), [(4,)], "UnsqueezeBackward0", _L1),
    ("torch.atleast_3d list[1]", lambda m, a, b: m.atleast_3d([a, b])[1], [(3, 4), (4,)], "UnsqueezeBackward0", _L1),
    ("unflatten(1,(2,-1))", lambda m, x: x.unflatten(1, (2, -1)), [(3, 4)], "ViewBackward0", _L1),
    ("torch.flip(x,(0,2))", lambda m, x: m.flip(x, (0, 2)), [(2, 3, 4)], "FlipBackward0", _L2),
    ("flip(-1)", lambda m, x: x.flip(-1), [(3, 4)], "FlipBackward0", _L1),
    ("fliplr()", lambda m, x: x.fliplr(), [(3, 4)], "FlipBackward0", _L1),
    ("torch.flipud", lambda m, x: m.flipud(x), [(3, 4)], "FlipBackward0", _L1),
    ("roll(1,0)", lambda m, x: x.roll(1, 0), [(3, 4)], "RollBackward0", _L2),
    ("torch.roll(x,(1,-5),(0,1))", lambda m, x: m.roll(x, (1, -5), (0, 1)), [(3, 4)], "RollBackward0", _L1),
    ("roll(-5) flattened", lambda m, x: x.roll(-5), [(3, 4)], "RollBackward0", _L1),
    ("rot90()", lambda m, x: x.rot90(), [(3, 4)], "Rot90Backward0", _L2),
    ("torch.rot90(x,2,(1,2))", lambda m, x: m.rot90(x, 2, (1, 2)), [(2, 3, 4)], "Rot90Backward0", _L1),
    ("rot90(-1,(1,0))", lambda m, x: x.rot90(-1, (1, 0)), [(3, 4)], "Rot90Backward0", _L1),
    ("repeat(2,1,3)", lambda m, x: x.repeat(2, 1, 3), [(3, 4)], "RepeatBackward0", _L2),
    ("torch.tile(x,(2,))", lambda m, x: m.tile(x, (2,)), [(3, 4)], "RepeatBackward0", _L1),
    ("repeat_interleave(2)", lambda m, x: x.repeat_interleave(2), [(3, 4)], "ViewBackward0", _L1),
    ("repeat_interleave(2,dim=1)", lambda m, x: x.repeat_interleave(2, dim=1), [(3, 4)], "ViewBackward0", _L2),
    (
        "torch.repeat_interleave(x,tensor,0)",
        lambda m, x: m.repeat_interleave(x, m.tensor([1, 0, 3]), 0),
        [(3, 4)],
        "IndexSelectBackward0",
        _L2,
    ),
    ("tril()", lambda m, x: x.tril(), [(3, 4)], "TrilBackward0", _L2),
    ("torch.triu(x,-1) of 3-D", lambda m, x: m.triu(x, -1), [(2, 3, 4)], "TriuBackward0", _L1),
    ("diag() of 1-D", lambda m, x: x.diag(1), [(4,)], "DiagEmbedBackward0", _L2),
    ("torch.diagflat(x,-1) of 2-D", lambda m, x: m.diagflat(x, -1), [(2, 3)], "DiagEmbedBackward0", _L2),
    ("diagflat() of 1-D", lambda m, x: x.diagflat(), [(3,)], "DiagEmbedBackward0", _L1),
    ("torch.trapezoid(y,dim=0)", lambda m, y: m.trapezoid(y, dim=0), [(3, 4)], ("MulBackward1", "MulBackward0"), _L2),
    ("torch.trapz(y,x)", lambda m, y, x: m.trapz(y, x), [(3, 4), (4,)], ("DivBackward1", "DivBackward0"), _L1),
    (
        "torch.cumulative_trapezoid(y,dx=0.5)",
        lambda m, y: m.cumulative_trapezoid(y, dx=0.5),
        [(3, 4)],
        "CumsumBackward0",
        _L1,
    ),  # fmt: skip
    (
        "torch.rsub(a,b,alpha=2)",
        lambda m, a, b: m.rsub(a, b, alpha=2),
        [(3, 4), (4,)],
        ("RsubBackward0", "SubBackward0"),
        _L1,
    ),
    ("torch.rsub(a,2.5)", lambda m, a: m.rsub(a, 2.5), [(3, 4)], "RsubBackward1", _L1),
    ("torch.diag(x,-1) of 2-D", lambda m, x: m.diag(x, -1), [(3, 4)], "DiagonalBackward0_copy", _L2),
    ("diagonal(1)", lambda m, x: x.diagonal(1), [(3, 4)], "DiagonalBackward0", _L2),
    ("torch.diagonal(x,-1,2,0)", lambda m, x: m.diagonal(x, -1, 2, 0), [(2, 3, 4)], "DiagonalBackward0", _L1),
    ("diag_embed(1,0,2)", lambda m, x: x.diag_embed(1, 0, 2), [(3, 4)], "DiagEmbedBackward0", _L1),
    ("trace()", lambda m, x: x.trace(), [(3, 4)], "TraceBackward0", _L2),
    ("torch.outer", lambda m, a, b: m.outer(a, b), [(3,), (4,)], "MulBackward0", _L1),
    ("Tensor.ger", lambda m, a, b: a.ger(b), [(3,), (4,)], "MulBackward0", _L1),
    # PyTorch's kron refuses non-contiguous inputs (a view it cannot make): fastgrad takes them
    ("torch.kron", lambda m, a, b: m.kron(a, b), [(2, 3), (4,)], "UnsafeViewBackward0", _L1),
    ("torch.meshgrid xy[0]", lambda m, a, b: m.meshgrid(a, b, indexing="xy")[0], [(3,), (4,)], "ExpandBackward0", _L1),
    ("torch.cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b), [(3,), (2,)], "StackBackward0", _L1),
    ("torch.block_diag", lambda m, a, b, c: m.block_diag(a, b, c), [(2, 3), (4,), ()], "BlockDiagBackward0", _L2),
    ("tensor_split(3,1)[1]", lambda m, x: x.tensor_split(3, 1)[1], [(3, 4)], "SliceBackward0", _L1),
    ("torch.tensor_split(x,[1,3])[2]", lambda m, x: m.tensor_split(x, [1, 3], 1)[2], [(3, 4)], "SliceBackward0", _L1),
    ("split(3,1)[1]", lambda m, x: x.split(3, 1)[1], [(3, 4)], "SplitBackward0", _L2),
    ("split([1,3],1)[1]", lambda m, x: x.split([1, 3], 1)[1], [(3, 4)], "SplitWithSizesBackward0", _L1),
    ("chunk(2)[1]", lambda m, x: x.chunk(2)[1], [(4, 3)], "SplitBackward0", _L1),
    ("torch.hstack", lambda m, a, b: m.hstack([a, b]), [(3, 4), (3, 2)], "CatBackward0", _L1),
    ("torch.vstack", lambda m, a, b: m.vstack((a, b)), [(3, 4), (4,)], "CatBackward0", _L1),
    ("torch.row_stack", lambda m, a, b: m.row_stack([a, b]), [(4,), (4,)], "CatBackward0", _L1),
    ("torch.dstack", lambda m, a, b: m.dstack([a, b]), [(3, 4), (3, 4)], "CatBackward0", _L1),
    ("torch.column_stack", lambda m, a, b: m.column_stack([a, b]), [(3, 4), (3,)], "CatBackward0", _L1),
    ("diff()", lambda m, x: x.diff(), [(3, 4)], "SubBackward0", _L2),
    (
        "torch.diff(x,2,0,prepend,append)",
        lambda m, a, b: m.diff(a, 2, 0, prepend=b, append=a),
        [(3, 4), (1, 4)],
        "SubBackward0",
        _L1,
    ),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=_layouts)


# --- scatter/gather/index family (issue 13): along-dim kernels, one or two layouts (the index walk is shared)
for _name, _fn, _shapes, _grad_fn in [
    ("gather(1)", lambda m, x: x.gather(1, m.tensor([[3, 0], [1, 1], [0, 2]])), [(3, 4)], "GatherBackward0"),
    ("torch.gather of 0-d", lambda m, x: m.gather(x, 0, m.tensor([0, 0])), [()], "GatherBackward0"),
    (
        "torch.index_select(x,1)",
        lambda m, x: m.index_select(x, 1, m.tensor([3, 0, 3])),
        [(3, 4)],
        "IndexSelectBackward0",
    ),
    (
        "index_select(0) of size 0",
        lambda m, x: x.index_select(0, m.tensor([], dtype=m.int64)),
        [(3, 4)],
        "IndexSelectBackward0",
    ),
    ("scatter(0,src)", lambda m, x, s: x.scatter(0, m.tensor([[2, 0, 1, 0]]), s), [(3, 4), (1, 4)], "ScatterBackward0"),
    (
        "torch.scatter(value)",
        lambda m, x: m.scatter(x, 1, m.tensor([[0], [3], [1]]), 7.5),
        [(3, 4)],
        "ScatterBackward1",
    ),
    (
        "scatter_(1,src)",
        lambda m, x, s: (x * 1).scatter_(1, m.tensor([[1], [0]]), s),
        [(2, 3), (2, 1)],
        "ScatterBackward0",
    ),
    (
        "torch.scatter_add",
        lambda m, x, s: m.scatter_add(x, 1, m.tensor([[0, 0], [3, 3], [1, 2]]), s),
        [(3, 4), (3, 2)],
        "ScatterAddBackward0",
    ),
    (
        "scatter_add_(0)",
        lambda m, x, s: (x * 1).scatter_add_(0, m.tensor([[1, 1, 0]]), s),
        [(2, 3), (1, 3)],
        "ScatterAddBackward0",
    ),
    (
        "index_add(0,alpha)",
        lambda m, x, s: x.index_add(0, m.tensor([2, 0, 2]), s, alpha=-1.5),
        [(3, 4), (3, 4)],
        "IndexAddBackward0",
    ),
    ("index_add_(1)", lambda m, x, s: (x * 1).index_add_(1, m.tensor([1]), s), [(2, 3), (2, 1)], "IndexAddBackward0"),
    (
        "torch.index_copy(x,1)",
        lambda m, x, s: m.index_copy(x, 1, m.tensor([3, 1]), s),
        [(3, 4), (3, 2)],
        "IndexCopyBackward0",
    ),
    (
        "index_copy_(0)",
        lambda m, x, s: (x * 1).index_copy_(0, m.tensor([0]), s),
        [(2, 3), (1, 3)],
        "IndexCopyBackward0",
    ),
    ("index_fill(1,scalar)", lambda m, x: x.index_fill(1, m.tensor([-1, 0]), 2.5), [(3, 4)], "IndexFillBackward0"),
    (
        "index_fill_(0,0-d tensor)",
        lambda m, x, v: (x * 1).index_fill_(0, m.tensor([1]), v),
        [(3, 4), ()],
        "IndexFillBackward1",
    ),
    ("masked_select(x>0)", lambda m, x: x.masked_select(x.detach() > 0), [(3, 4)], "MaskedSelectBackward0"),
    (
        "torch.masked_select broadcast",
        lambda m, x: m.masked_select(x, m.tensor([True, False, True, True])),
        [(3, 4)],
        "MaskedSelectBackward0",
    ),
    ("take(2-d index)", lambda m, x: x.take(m.tensor([[5, -1], [0, 0]])), [(3, 4)], "TakeBackward0"),
    ("torch.take of 0-d index", lambda m, x: m.take(x, m.tensor(7)), [(2, 4)], "TakeBackward0"),
    ("take_along_dim(1)", lambda m, x: x.take_along_dim(m.tensor([[0], [2], [-1]]), 1), [(3, 4)], "GatherBackward0"),
    (
        "torch.take_along_dim broadcast",
        lambda m, x: m.take_along_dim(x, m.tensor([[2, 0, 1]]), dim=0),
        [(3, 1)],
        "GatherBackward0",
    ),
    (
        "torch.index_put(accumulate)",
        lambda m, x, v: m.index_put(x, (m.tensor([0, 0]), m.tensor([1, 2])), v, accumulate=True),
        [(3, 4), (2,)],
        "IndexPutBackward0",
    ),
    ("index_put_", lambda m, x, v: (x * 1).index_put_([m.tensor([2])], v), [(3, 4), (4,)], "IndexPutBackward0"),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=LAYOUTS[:2])
for _name, _fn, _shapes, _grad_fn, _domain in [
    ("torch.lerp(a,b,0.3)", lambda m, a, b: m.lerp(a, b, 0.3), [(3, 4), (4,)], "LerpBackward0", "real"),
    ("Tensor.lerp(b,0.7)", lambda m, a, b: a.lerp(b, 0.7), [(3, 1), (3, 4)], "LerpBackward0", "real"),
    ("torch.lerp(a,b,w)", lambda m, a, b, w: m.lerp(a, b, w), [(3, 4), (4,), (3, 1)], "LerpBackward1", "real"),
    (
        "torch.addcmul",
        lambda m, a, b, c: m.addcmul(a, b, c, value=-2),
        [(3, 4), (4,), (3, 1)],
        "AddcmulBackward0",
        "real",
    ),
    ("Tensor.addcmul", lambda m, a, b, c: a.addcmul(b, c), [(4,), (3, 4), ()], "AddcmulBackward0", "real"),
    (
        "torch.addcdiv",
        lambda m, a, b, c: m.addcdiv(a, b, c, value=0.5),
        [(3, 4), (3, 1), (4,)],
        "AddcdivBackward0",
        ("real", "real", "nonzero"),
    ),
]:
    case(_name, _fn, _shapes, _grad_fn, _domain, layouts=LAYOUTS[:1])
for _op, _grad_fn, _domain in [
    ("atan2", "Atan2Backward0", "nonzero"),
    ("arctan2", "Atan2Backward0", "nonzero"),
    ("logaddexp", "LogaddexpBackward0", "real"),
    ("logaddexp2", "Logaddexp2Backward0", "real"),
    ("hypot", "HypotBackward0", "nonzero"),
    ("true_divide", "DivBackward0", ("real", "nonzero")),
    ("subtract", "SubBackward0", "real"),
    ("multiply", "MulBackward0", "real"),
    ("divide", "DivBackward0", ("real", "nonzero")),
]:
    case(f"torch.{_op}", lambda m, a, b, op=_op: getattr(m, op)(a, b), [(3, 4), (4,)], _grad_fn, _domain, LAYOUTS[:1])
    case(f"Tensor.{_op}", lambda m, a, b, op=_op: getattr(a, op)(b), [(3, 1), ()], _grad_fn, _domain, LAYOUTS[:1])
# elementwise ops of issue 13 (ewise): the Tensor/Scalar forms of xlogy, copysign and float_power
for _name, _fn, _shapes, _grad_fn, _domain in [
    ("torch.xlogy", lambda m, a, b: m.xlogy(a, b), [(3, 4), (4,)], "XlogyBackward0", ("real", "pos")),
    ("Tensor.xlogy(2.5)", lambda m, a: a.xlogy(2.5), [(3, 1)], "XlogyBackward2", "real"),
    ("torch.xlogy(3,b)", lambda m, b: m.xlogy(3, b), [(4,)], "XlogyBackward1", "pos"),
    ("torch.copysign", lambda m, a, b: m.copysign(a, b), [(3, 4), (4,)], "CopysignBackward0", "nonzero"),
    ("Tensor.copysign(-1)", lambda m, a: a.copysign(-1.0), [(3, 1)], "CopysignBackward1", "nonzero"),
    ("torch.logit", lambda m, a: m.logit(a * 0.5 + 0.5), [(3, 4)], "LogitBackward0", "unit"),
    ("Tensor.logit(eps)", lambda m, a: (a * 0.5 + 0.5).logit(eps=0.05), [(4,)], "LogitBackward0", "unit"),
    ("torch.float_power", lambda m, a, b: m.float_power(a, b), [(3, 4), (4,)], "PowBackward1", ("pos", "real")),
    ("Tensor.float_power(2)", lambda m, a: a.float_power(2), [(3, 1)], "PowBackward0", "real"),
    ("torch.float_power(2,b)", lambda m, b: m.float_power(2, b), [(4,)], "PowBackward2", "real"),
    ("torch.tan", lambda m, a: m.tan(a), [(3, 4)], "TanBackward0", "unit"),
    ("Tensor.tan", lambda m, a: a.tan(), [()], "TanBackward0", "unit"),
]:
    case(_name, _fn, _shapes, _grad_fn, _domain, layouts=LAYOUTS[:1])
case(  # PyTorch views input and indices as 1-d here: a strided input is an error
    "take_along_dim(dim=None)",
    lambda m, x: x.take_along_dim(m.tensor([[3], [0]])),
    [(3, 4)],
    "GatherBackward0",
    layouts=("contiguous",),
)

# scatter family (issue 13): scatter_reduce, put, masked_scatter (one layout: the kernels' walk is gather's)
for _name, _fn, _shapes, _grad_fn in [
    (
        "scatter_reduce(0,amax)",
        lambda m, x, s: x.scatter_reduce(0, m.tensor([[0, 2, 0, 1], [2, 2, 0, 1]]), s, "amax"),
        [(3, 4), (2, 4)],
        "ScatterReduceBackward0",
    ),
    (
        "torch.scatter_reduce(1,prod,include_self=False)",
        lambda m, x, s: m.scatter_reduce(x, 1, m.tensor([[1, 1], [0, 3], [2, 2]]), s, "prod", include_self=False),
        [(3, 4), (3, 2)],
        "ScatterReduceBackward0",
    ),
    (
        "scatter_reduce(1,mean)",
        lambda m, x, s: x.scatter_reduce(1, m.tensor([[3, 3, 0]]), s, "mean"),
        [(2, 4), (1, 3)],
        "ScatterReduceBackward0",
    ),
    ("put(accumulate)", lambda m, x, s: x.put(m.tensor([1, -1, 1]), s, True), [(3, 4), (3,)], "PutBackward0"),
    ("torch.put", lambda m, x, s: m.put(x, m.tensor([[0], [7]]), s), [(2, 4), (1, 2)], "PutBackward0"),
    (
        "masked_scatter broadcast",
        lambda m, x, s: x.masked_scatter(m.tensor([[True], [False], [True]]), s),
        [(4,), (3, 4)],
        "MaskedScatterBackward0",
    ),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=LAYOUTS[:1])


# --- non-differentiable results (indices, bool tensors, Python bools) -----------------------------
@dataclass(frozen=True)
class NondiffCase:
    name: str
    fn: object
    shapes: tuple
    domain: object = "int"  # small integers: ties exercise "first index" and ==

    def __repr__(self):
        return self.name


NONDIFF_CASES = []


def nondiff(name, fn, shapes, domain="int"):
    NONDIFF_CASES.append(NondiffCase(name, fn, tuple(tuple(s) for s in shapes), domain))


for _name, _fn in [
    ("argmax()", lambda m, x: x.argmax()),
    ("torch.argmax", lambda m, x: m.argmax(x)),
    ("argmax(1)", lambda m, x: x.argmax(1)),
    ("torch.argmax(dim=-1,keepdim)", lambda m, x: m.argmax(x, dim=-1, keepdim=True)),
    ("argmin()", lambda m, x: x.argmin()),
    ("torch.argmin(x,0)", lambda m, x: m.argmin(x, 0)),
    ("argmin(dim=2,keepdim)", lambda m, x: x.argmin(dim=2, keepdim=True)),
    ("max(dim).indices", lambda m, x: x.max(dim=1).indices),
    ("torch.max(x,0)[1]", lambda m, x: m.max(x, 0)[1]),
    ("min(-1,keepdim).indices", lambda m, x: x.min(-1, keepdim=True).indices),
    ("torch.min(x,1)[1]", lambda m, x: m.min(x, 1)[1]),
]:
    nondiff(_name, _fn, [(2, 3, 4)], "real")
for _name, _fn in [
    ("sort(1).indices", lambda m, x: x.sort(1).indices),
    ("torch.argsort", lambda m, x: m.argsort(x)),
    ("argsort(0,descending)", lambda m, x: x.argsort(0, descending=True)),
    ("topk(2,1).indices", lambda m, x: x.topk(2, 1).indices),
    ("kthvalue(2,0).indices", lambda m, x: x.kthvalue(2, 0).indices),
    ("torch.median(x,1)[1]", lambda m, x: m.median(x, 1)[1]),
    ("mode(-1,keepdim).indices", lambda m, x: x.mode(-1, keepdim=True).indices),
]:
    nondiff(_name, _fn, [(2, 3, 4)], "real")
# ties in PyTorch's CPU order (tests/test_sort.py checks longer rows): on rows of up to 16 elements its
# sorts are insertion sorts, which keep index order
nondiff("argsort(1) with ties", lambda m, x: x.argsort(1), [(4, 6)], "int")
nondiff("argsort(0,descending,stable) with ties", lambda m, x: x.argsort(dim=0, descending=True, stable=True), [(4, 6)])
# mode: the smallest of the most frequent values, at its last position (PyTorch's CPU mode on short rows)
nondiff("torch.mode with ties", lambda m, x: m.mode(x.detach(), 1).values, [(4, 6)], "int")
nondiff("mode(0).indices with ties", lambda m, x: x.mode(0).indices, [(4, 6)], "int")
nondiff("sort(descending) with ties", lambda m, x: m.sort(x, descending=True).indices, [(4, 6)], "int")

# scans of integers (int64 results) and the indices of cummax/cummin, whose ties take the latest index
for _name, _fn in [
    ("cumsum(1) of int64", lambda m, x: x.long().cumsum(1)),
    ("torch.cumprod of bool", lambda m, x: m.cumprod(x > 0, 0)),
    ("cumsum(0,dtype=int64) of a detached tensor", lambda m, x: x.detach().cumsum(0, dtype=m.int64)),
    ("cummax(1).indices with ties", lambda m, x: x.cummax(1).indices),
    ("torch.cummin(x,0)[1] with ties", lambda m, x: m.cummin(x, 0)[1]),
    ("cummax(0) of int64", lambda m, x: x.long().cummax(0)[0]),
]:
    nondiff(_name, _fn, [(4, 6)], "int")
# ties: argmax/argmin return the first extremal index (documented by PyTorch)
nondiff("argmax(1) with ties", lambda m, x: x.argmax(1), [(4, 6)], "int")
nondiff("argmin() with ties", lambda m, x: x.argmin(), [(4, 6)], "int")
# reductions and set ops of issue 13 (reduce)
nondiff("torch.count_nonzero(x,(0,1))", lambda m, x: m.count_nonzero(x, (0, 1)), [(4, 6)], "int")
nondiff("count_nonzero(-1)", lambda m, x: x.count_nonzero(-1), [(4, 6)], "int")
nondiff("torch.searchsorted", lambda m, a, b: m.searchsorted(a.sort().values, b), [(5,), (3, 4)], "int")
nondiff("searchsorted rows, right", lambda m, a, b: m.searchsorted(a.sort()[0], b, right=True), [(3, 5), (3, 4)], "int")
nondiff("torch.bucketize", lambda m, a, b: m.bucketize(b, a.sort().values, right=True), [(5,), (3, 4)], "int")
nondiff("torch.histc", lambda m, a: m.histc(a, 5), [(4, 6)], "real")
nondiff("Tensor.histc(bins,min,max)", lambda m, a: a.histc(4, -1, 1), [(4, 6)], "real")
nondiff("torch.bincount", lambda m, a: m.bincount((a + 2).long().reshape(-1)), [(4, 6)], "int")
nondiff(
    "Tensor.bincount(weights,minlength)",
    lambda m, a, w: (a + 2).long().bincount(w.detach(), minlength=7),
    [(6,), (6,)],
    ("int", "real"),
)
nondiff("torch.unique", lambda m, a: m.unique(a.detach()), [(4, 6)], "int")
nondiff("Tensor.unique(return_inverse)[1]", lambda m, a: a.unique(return_inverse=True)[1], [(4, 6)], "int")
nondiff("torch.unique(dim=1,return_counts)[1]", lambda m, a: m.unique(a, return_counts=True, dim=1)[1], [(2, 6)], "int")
nondiff("torch.unique_consecutive", lambda m, a: m.unique_consecutive(a.detach()), [(4, 6)], "int")
nondiff("Tensor.unique_consecutive(dim=0)", lambda m, a: a.detach().unique_consecutive(dim=0), [(5, 1)], "int")
nondiff(
    "torch.histogram(x,edges).hist",
    lambda m, a: m.histogram(a.detach(), m.tensor([-1.0, 0.0, 0.5, 2.0])).hist,
    [(4, 6)],
    "real",
)

for _name, _fn in [
    ("a<b", lambda m, a, b: a < b),
    ("a<=b", lambda m, a, b: a <= b),
    ("a>b", lambda m, a, b: a > b),
    ("a>=b", lambda m, a, b: a >= b),
    ("a==b", lambda m, a, b: a == b),
    ("a!=b", lambda m, a, b: a != b),
    ("torch.lt", lambda m, a, b: m.lt(a, b)),
    ("torch.le", lambda m, a, b: m.le(a, b)),
    ("torch.gt", lambda m, a, b: m.gt(a, b)),
    ("torch.ge", lambda m, a, b: m.ge(a, b)),
    ("torch.eq", lambda m, a, b: m.eq(a, b)),
    ("torch.ne", lambda m, a, b: m.ne(a, b)),
    ("torch.less", lambda m, a, b: m.less(a, b)),
    ("torch.less_equal", lambda m, a, b: m.less_equal(a, b)),
    ("Tensor.greater", lambda m, a, b: a.greater(b)),
    ("torch.greater_equal", lambda m, a, b: m.greater_equal(a, b)),
    ("Tensor.not_equal", lambda m, a, b: a.not_equal(b)),
    ("Tensor.lt", lambda m, a, b: a.lt(b)),
    ("Tensor.eq", lambda m, a, b: a.eq(b)),
    ("Tensor.ge", lambda m, a, b: a.ge(b)),
    ("Tensor.ne", lambda m, a, b: a.ne(b)),
    ("torch.isclose", lambda m, a, b: m.isclose(a, b)),
    ("torch.logical_and", lambda m, a, b: m.logical_and(a, b)),
    ("Tensor.logical_or", lambda m, a, b: a.logical_or(b)),
    ("torch.logical_xor", lambda m, a, b: m.logical_xor(a, b)),
    ("torch.bitwise_and of bools", lambda m, a, b: m.bitwise_and(a > 0, b > 0)),
    ("Tensor.bitwise_or of bools", lambda m, a, b: (a > 0).bitwise_or(b < 0)),
    ("torch.bitwise_xor of bools", lambda m, a, b: m.bitwise_xor(a >= 0, b > 0)),
]:
    nondiff(_name, _fn, [(3, 4), (4,)])

for _name, _fn in [
    ("a<0.5", lambda m, a: a < 0.5),
    ("0.5<a", lambda m, a: 0.5 < a),
    ("a>=1", lambda m, a: a >= 1),
    ("1>=a", lambda m, a: 1 >= a),
    ("a==1", lambda m, a: a == 1),
    ("1!=a", lambda m, a: 1 != a),
    ("a>0 of 0-d", lambda m, a: a.sum() > 0),
    ("torch.logical_not", lambda m, a: m.logical_not(a)),
    ("torch.bitwise_not of bools", lambda m, a: m.bitwise_not(a > 0)),
    ("torch.all", lambda m, a: m.all(a)),
    ("all(1)", lambda m, a: a.all(1)),
    ("torch.any(dim=0,keepdim)", lambda m, a: m.any(a, dim=0, keepdim=True)),
    ("any()", lambda m, a: a.any()),
]:
    nondiff(_name, _fn, [(3, 4)])

for _name, _fn, _shapes in [
    ("torch.equal same", lambda m, a: m.equal(a, a.clone()), [(3, 4)]),
    ("torch.equal different", lambda m, a: m.equal(a, a + 1), [(3, 4)]),
    ("torch.equal shapes differ", lambda m, a, b: m.equal(a, b), [(3, 4), (4,)]),
    ("Tensor.equal", lambda m, a: a.equal(a * 1), [(3, 4)]),
    ("torch.allclose tiny diff", lambda m, a: m.allclose(a, a + 1e-7), [(3, 4)]),
    ("torch.allclose large diff", lambda m, a: m.allclose(a, a + 1e-3), [(3, 4)]),
    ("allclose(atol=1e-2)", lambda m, a: a.allclose(a + 1e-3, atol=1e-2), [(3, 4)]),
    ("allclose(rtol=0.5,atol=0)", lambda m, a: a.allclose(a * 1.4, rtol=0.5, atol=0.0), [(3, 4)]),
    ("torch.is_floating_point", lambda m, a: m.is_floating_point(a), [(3, 4)]),
    ("Tensor.is_floating_point", lambda m, a: a.long().is_floating_point(), [(3, 4)]),
    ("torch.is_tensor", lambda m, a: m.is_tensor(a), [(3, 4)]),
    ("torch.is_signed", lambda m, a: m.is_signed(a), [(3, 4)]),
    ("Tensor.is_signed", lambda m, a: a.byte().is_signed(), [(3, 4)]),
    ("torch.numel", lambda m, a: m.numel(a) == 12, [(3, 4)]),
    ("torch.is_complex", lambda m, a: m.is_complex(a), [(3, 4)]),
    ("Tensor.is_complex", lambda m, a: a.long().is_complex(), [(3, 4)]),
    ("torch.is_nonzero", lambda m, a: m.is_nonzero(a), [(1, 1)]),
    ("Tensor.is_nonzero", lambda m, a: (a * 0).is_nonzero(), [()]),
]:
    nondiff(_name, _fn, _shapes)
# elementwise math (issue 13): predicates (special values: tests/test_math.py)
for _name in ["signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal"]:
    nondiff(f"torch.{_name}", lambda m, a, name=_name: getattr(m, name)(a), [(3, 4)])


# --- linear algebra (fastgrad.linalg): products, contractions, decompositions; one layout each (their
# kernels are matmul's and numpy.linalg's, tested in every layout above)
ONE = LAYOUTS[:1]


def _spd(m, a):
    """A symmetric positive-definite matrix made from `a` (cholesky's domain)."""
    return a @ a.transpose(-2, -1) + m.eye(a.shape[-1], dtype=a.dtype)


for _name, _fn, _shapes, _grad_fn in [
    ("torch.addmm", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2), [(3, 2), (3, 4), (4, 2)], "AddmmBackward0"),
    ("Tensor.addmm broadcast", lambda m, c, a, b: c.addmm(a, b), [(2,), (3, 4), (4, 2)], "AddmmBackward0"),
    ("torch.addmm column", lambda m, c, a, b: m.addmm(c, a, b, alpha=-1), [(3, 1), (3, 4), (4, 2)], "AddmmBackward0"),
    ("torch.addmm beta=0", lambda m, c, a, b: m.addmm(c, a, b, beta=0), [(), (3, 4), (4, 2)], "AddmmBackward0"),
    ("torch.addmv", lambda m, c, a, b: m.addmv(c, a, b, alpha=3), [(3,), (3, 4), (4,)], "AddmvBackward0"),
    ("Tensor.addr", lambda m, c, a, b: c.addr(a, b, beta=2), [(3, 4), (3,), (4,)], "AddrBackward0"),
    (
        "torch.baddbmm",
        lambda m, c, a, b: m.baddbmm(c, a, b, alpha=0.5),
        [(2, 3, 2), (2, 3, 4), (2, 4, 2)],
        "BaddbmmBackward0",
    ),
    ("torch.addbmm", lambda m, c, a, b: m.addbmm(c, a, b), [(3, 2), (2, 3, 4), (2, 4, 2)], "AddbmmBackward0"),
    ("torch.vdot", lambda m, a, b: m.vdot(a, b), [(4,), (4,)], "VdotBackward0"),
    ("Tensor.inner", lambda m, a, b: a.inner(b), [(2, 3, 4), (5, 4)], "ViewBackward0"),
    (
        "torch.tensordot",
        lambda m, a, b: m.tensordot(a, b, dims=([1, 0], [0, 2])),
        [(3, 2, 4), (2, 5, 3)],
        "ViewBackward0",
    ),
    ("einsum('bij,bjk')", lambda m, a, b: m.einsum("bij,bjk", [a, b]), [(2, 3, 4), (2, 4, 2)], "ViewBackward0"),
    (
        "einsum('...ij,...jk->...ik')",
        lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b),
        [(2, 3, 4), (4, 2)],
        "ViewBackward0",
    ),
    ("einsum('ii')", lambda m, a: m.einsum("ii", a), [(3, 3)], "SumBackward1"),
    ("einsum('iij->ji')", lambda m, a: m.einsum("iij->ji", a), [(3, 3, 2)], "PermuteBackward0"),
    # the operand itself comes back as a view (it was returned as the same object)
    ("einsum('ij->ij')", lambda m, a: m.einsum("ij->ij", a), [(2, 3)], "PermuteBackward0"),
    ("einsum('ii->i')", lambda m, a: m.einsum("ii->i", a), [(3, 3)], "PermuteBackward0"),
    ("einsum('i,j')", lambda m, a, b: m.einsum("i,j", a, b), [(3,), (4,)], "MulBackward0"),
    (
        "einsum('ij,jk,kl->il')",
        lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c),
        [(2, 3), (3, 4), (4, 5)],
        "ViewBackward0",
    ),
    ("torch.chain_matmul", lambda m, a, b: m.chain_matmul(a, b), [(3, 4), (4, 2)], "ViewBackward0"),
    ("torch.cross", lambda m, a, b: m.cross(a, b, dim=1), [(2, 3), (2, 3)], "LinalgCrossBackward0"),
    ("linalg.cross broadcast", lambda m, a, b: m.linalg.cross(a, b), [(2, 3), (1, 3)], "LinalgCrossBackward0"),
    (
        "linalg.vector_norm(3,dim=1)",
        lambda m, a: m.linalg.vector_norm(a, 3, dim=1),
        [(3, 4)],
        "LinalgVectorNormBackward0",
    ),
    ("linalg.matrix_norm('nuc')", lambda m, a: m.linalg.matrix_norm(a, "nuc"), [(3, 4)], "SumBackward1"),
    ("torch.norm('nuc',dim,keepdim)", lambda m, a: m.norm(a, "nuc", (0, 2), True), [(3, 2, 4)], "PermuteBackward0"),
    ("linalg.matrix_norm(2) batched", lambda m, a: m.linalg.matrix_norm(a, 2), [(2, 3, 4)], "AmaxBackward0"),
    ("linalg.norm(inf)", lambda m, a: m.linalg.norm(a, float("inf")), [(3, 4)], "AmaxBackward0"),
    ("linalg.inv batched", lambda m, a: m.linalg.inv(a), [(2, 3, 3)], "LinalgInvExBackward0"),
    ("Tensor.inverse", lambda m, a: a.inverse(), [(3, 3)], "LinalgInvExBackward0"),
    ("linalg.det batched", lambda m, a: m.linalg.det(a), [(2, 3, 3)], "LinalgDetBackward0"),
    ("Tensor.det", lambda m, a: a.det(), [(3, 3)], "LinalgDetBackward0"),
    ("torch.logdet", lambda m, a: m.logdet(_spd(m, a)), [(3, 3)], "WhereBackward0"),
    ("torch.slogdet", lambda m, a: m.slogdet(a).logabsdet, [(3, 3)], "LinalgSlogdetBackward0"),
    ("linalg.solve", lambda m, a, b: m.linalg.solve(a, b), [(2, 3, 3), (3, 2)], "LinalgSolveExBackward0"),
    ("linalg.cholesky", lambda m, a: m.linalg.cholesky(_spd(m, a)), [(2, 3, 3)], "LinalgCholeskyExBackward0"),
    ("Tensor.cholesky(upper)", lambda m, a: _spd(m, a).cholesky(upper=True), [(3, 3)], "CholeskyBackward0"),
    ("linalg.eigvalsh", lambda m, a: m.linalg.eigvalsh(a + a.transpose(0, 1)), [(3, 3)], "LinalgEighBackward0"),
    ("torch.svd().S", lambda m, a: m.svd(a).S, [(4, 3)], "LinalgSvdBackward0"),
    (
        "Tensor.svd() u1 v1^T",
        lambda m, a: (lambda r: r.U[:, :1] * r.V[:, :1].transpose(0, 1))(a.svd()),
        [(3, 4)],
        "MulBackward0",
    ),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=ONE)
for _name, _fn, _shapes, _grad_fn in [
    ("linalg.multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(3,), (3, 4), (4, 2)], "ViewBackward0"),
    ("torch.inner of size 0", lambda m, a, b: m.inner(a, b), [(0,), (0,)], "ViewBackward0"),
    ("einsum('ij,jk') of size 0", lambda m, a, b: m.einsum("ij,jk", a, b), [(2, 0), (0, 3)], "ViewBackward0"),
    ("linalg.inv of size 0", lambda m, a: m.linalg.inv(a), [(2, 0, 0)], "LinalgInvExBackward0"),
    ("linalg.solve vector", lambda m, a, b: m.linalg.solve(a, b), [(3, 3), (3,)], "LinalgSolveExBackward0"),
    (
        "linalg.solve(left=False)",
        lambda m, a, b: m.linalg.solve(a, b, left=False),
        [(3, 3), (2, 3)],
        "LinalgSolveExBackward0",
    ),
    (
        "linalg.matrix_norm(1,keepdim)",
        lambda m, a: m.linalg.matrix_norm(a, 1, keepdim=True),
        [(2, 3, 4)],
        "AmaxBackward0",
    ),
    ("linalg.qr Q@R", lambda m, a: (lambda r: r.Q @ r.R)(m.linalg.qr(a)), [(4, 3)], "MmBackward0"),
    ("Tensor.qr wide", lambda m, a: (lambda r: r.Q.abs() @ r.R.abs())(a.qr()), [(3, 4)], "MmBackward0"),
    ("linalg.pinv", lambda m, a: m.linalg.pinv(a), [(4, 3)], "LinalgPinvBackward0"),
    ("Tensor.pinverse batched", lambda m, a: a.pinverse(), [(2, 3, 4)], "LinalgPinvBackward0"),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=ONE)


# scatter/gather/index family (issue 13): coordinates of nonzero elements
for _name, _fn, _shapes in [
    ("torch.nonzero", lambda m, a: m.nonzero(a), [(3, 4)]),
    ("nonzero of 0-d", lambda m, a: a.nonzero(), [()]),
    ("torch.argwhere", lambda m, a: m.argwhere(a > 0), [(2, 3, 2)]),
]:
    nondiff(_name, _fn, _shapes)


# binary/ternary elementwise ops of issue 13 (layouts: their kernels are shared with clamp, where, ...)
for _name, _fn, _shapes, _grad_fn in [
    ("torch.clamp_min(x,-0.5)", lambda m, x: m.clamp_min(x, -0.5), [(3, 4)], "ClampMinBackward0"),
    ("Tensor.clamp_max(0.5)", lambda m, x: x.clamp_max(0.5), [(5,)], "ClampMaxBackward0"),
    ("torch.clamp_min(a,b)", lambda m, a, b: m.clamp_min(a, b), [(3, 4), (4,)], "ClampMinBackward1"),
    ("Tensor.clamp_max(b)", lambda m, a, b: a.clamp_max(b), [(3, 1), (2, 1, 4)], "ClampMaxBackward1"),
    ("torch.clamp_max(size 0)", lambda m, a, b: m.clamp_max(a, b), [(0, 4), (4,)], "ClampMaxBackward1"),
]:
    case(_name, _fn, _shapes, _grad_fn, layouts=LAYOUTS[:2])


# Table ops with no case here, and where they are compared with PyTorch instead
# (tests/test_meta.py checks that every other op of fastgrad._optable is called by a case above).
NOT_IN_CASES = {
    **dict.fromkeys(
        ["add_", "sub_", "mul_", "div_", "pow_", "floor_divide_", "remainder_", "fill_", "zero_"]
        + ["bitwise_and_", "bitwise_or_", "bitwise_xor_", "masked_fill_", "clip_"],
        "in place: tests/test_inplace.py, test_inplace_torch.py and test_intops.py",
    ),
    **dict.fromkeys(
        ["masked_fill"],
        "composed in the shared layer, several results or an index argument: tests/test_composed_ops.py",
    ),
    "floor_divide": "its result requires grad with no derivative (PyTorch's too): tests/test_intops.py",
    **dict.fromkeys(
        ["multinomial", "bernoulli", "poisson", "normal_", "bernoulli_", "exponential_", "geometric_"]
        + ["log_normal_", "cauchy_", "random_"],
        "random: compared with PyTorch's draws bit for bit in tests/test_random_streams.py (errors: test_random.py)",
    ),
    **dict.fromkeys(
        ["new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"], "creation: tests/test_creation.py"
    ),
    **dict.fromkeys(
        ["register_hook", "register_post_accumulate_grad_hook"], "not a tensor result: tests/test_hooks.py"
    ),
    **dict.fromkeys(
        ["arcsin_", "arccos_", "arctan_", "arcsinh_", "arccosh_", "arctanh_", "square_"]
        + ["neg_", "abs_", "sign_", "exp_", "log_", "log1p_", "expm1_"]
        + ["sqrt_", "sin_", "cos_", "tanh_", "sigmoid_", "relu_", "negative_"],
        "in place (elementwise math, issue 13): tests/test_math.py",
    ),
    "cdist": "PyTorch has no second derivative, which the cases' checks take: tests/test_linalg.py",
    "sign": "its gradient is zero with no graph, which the second-derivative checks of the cases cannot take: "
    "tests/test_numerics.py, test_regressions.py",
}
NOT_IN_CASES.update(
    dict.fromkeys(
        ["fill", "detach", "detach_"],
        "no gradient reaches the input: tests/test_inplace_torch.py (test_fill_is_a_filled_copy, test_module_detach)",
    )
)
NOT_IN_CASES.update(
    {
        **dict.fromkeys(
            ["split_with_sizes", "hsplit", "vsplit", "dsplit"], "several results: tests/test_small_math.py"
        ),
        **dict.fromkeys(["isin", "is_same_size", "is_inference"], "no gradient: tests/test_small_math.py"),
        "unravel_index": "integer results: tests/test_small_math.py",
        "sinc_": "in place: tests/test_small_math.py",
    }
)
# rounding and sign (issue 13)
NOT_IN_CASES.update(
    {
        "fix_": "in place: tests/test_rounding.py",
        **dict.fromkeys(
            ["sgn", "ceil", "trunc", "fix", "round"],
            "its gradient is zero with no graph (as sign's): tests/test_rounding.py",
        ),
    }
)
# shape family (issue 13)
NOT_IN_CASES.update(
    {
        **dict.fromkeys(["tril_", "triu_"], "in place: tests/test_shape_ops.py"),
        **dict.fromkeys(["tril_indices", "triu_indices"], "creation from sizes: tests/test_shape_ops.py"),
        "broadcast_shapes": "not a tensor result: tests/test_shape_ops.py",
    }
)
# scatter family (issue 13)
NOT_IN_CASES.update(dict.fromkeys(["scatter_reduce_", "put_", "masked_scatter_"], "in place: tests/test_index_ops.py"))
# binary/ternary elementwise ops of issue 13
NOT_IN_CASES.update(
    dict.fromkeys(["clamp_min_", "clamp_max_", "lerp_", "addcmul_", "addcdiv_"], "in place: tests/test_binary_ops.py")
)
# elementwise ops and in-place forms of issue 13 (ewise)
NOT_IN_CASES.update(
    {
        **dict.fromkeys(
            ["xlogy_", "copysign_", "logit_", "float_power_", "heaviside_", "atan2_", "arctan2_", "hypot_"]
            + ["true_divide_", "logical_and_", "logical_or_", "logical_xor_", "logical_not_"]
            + ["subtract_", "multiply_", "divide_", "absolute_"]
            + ["eq_", "ne_", "lt_", "le_", "gt_", "ge_", "not_equal_", "less_", "less_equal_", "greater_"]
            + ["greater_equal_", "bitwise_left_shift_", "bitwise_right_shift_"],
            "in place: tests/test_binary_ops.py",
        ),
        **dict.fromkeys(
            ["heaviside", "bitwise_left_shift", "bitwise_right_shift"],
            "no derivative (integer results, or PyTorch's NotImplemented node): tests/test_binary_ops.py",
        ),
    }
)
# in-place shape ops of issue 13: the cases' inputs are leaves requiring grad, which in-place ops refuse
NOT_IN_CASES.update(
    dict.fromkeys(
        ["t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_", "fill_diagonal_"],
        "in place: tests/test_inplace_shape.py",
    )
)
