"""The op table: one row per op, read at import; see docs/ops.md for how to add an op.

A row gives the op's PyTorch signature, its variants, what implements it, the name of its shape/dtype
rule (fastgrad._meta) and the name of its test-case family (tests/op_cases.py). Derived from it:
the Tensor methods and module functions of both backends (fastgrad._methods), the public name lists
(fastgrad._api), and the checks that every op has op cases, a fuzzer grammar entry and a shape rule.

Signatures are written as PyTorch documents them (`-> Tensor` left out), with ATen's types: `int` is
converted with operator.index, `int[1]?` (dims; None or () for all) and `SymInt[]` (sizes, one int or
a sequence) as _methods's _dims and _sizes read them, `SymInt...` is varargs sizes (x.view(2, 3) or
x.view((2, 3))). Other types are documentation: the primitive checks them. A signature opening with
`Tensor.` is a method's own form (the function of the same name has another row). Parameters are
separated by ", " (so a default may not contain one).

Variants: `function` (fastgrad.<name>), `method` (Tensor.<name>), `out` (an `out=` keyword),
`inplace` (Tensor.<name>_, over the primitive _prims.<name>_: in-place ops are primitives, the core
checks leaves and versions), `inplace_function` (fastgrad.<name>_ as well: PyTorch has the module
function for some in-place forms only, torch.exp2_ but not torch.erfinv_).

Implementation:
    _prims.<p>    a wrapper generated from the signature (plain Python code, made once at import)
                  calls the backend primitive <p> (C++ in fastgrad._prims, Python in fastgrad.reference._prims)
    _methods.<f>  the function <f> written in the shared Python layer, run on both backends
    Tensor        the backend's Tensor type binds the method itself (for speed); nothing to register
"""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    type: str
    name: str
    default: object  # the default's source text, or None when the parameter is required
    keyword_only: bool


@dataclass(frozen=True)
class Op:
    signature: str
    variants: tuple
    impl: str
    meta: object  # the name of the shape/dtype rule in fastgrad._meta; None for a non-tensor result
    cases: object  # the name of the test-case family tests/op_cases.py expands; None for cases by hand

    @property
    def name(self):
        return re.match(r"(?:Tensor\.)?(\w+)\(", self.signature).group(1)

    @property
    def params(self):
        text = re.search(r"\((.*)\)", self.signature).group(1)
        params, keyword_only = [], False
        for item in filter(None, (p.strip() for p in text.split(", "))):
            if item == "*":
                keyword_only = True
                continue
            declaration, _, default = item.partition("=")
            type_, name = declaration.rsplit(" ", 1)
            params.append(Param(type_, name, default or None, keyword_only))
        return params


OPS = []


def op(signature, variants, impl, meta, cases=None):
    OPS.append(Op(signature, tuple(variants.split()), impl, meta, cases))


# ---- elementwise, binary (broadcasting, PyTorch's type promotion)
# fmt: off
op("add(Tensor input, Tensor other, *, Scalar alpha=1)",
   "function method out", "_methods.add", "binary", "binary")
op("sub(Tensor input, Tensor other, *, Scalar alpha=1)",
   "function method out", "_methods.sub", "binary", "binary")
op("mul(Tensor input, Tensor other)",
   "function method out", "_prims.mul", "binary", "binary")
op("div(Tensor input, Tensor other, *, str? rounding_mode=None)",
   "function method out", "_methods.div", "div", "binary(real,nonzero)")
op("pow(Tensor input, Tensor exponent)",
   "function method out", "_methods.pow", "binary", "binary(pos,real)")
op("maximum(Tensor input, Tensor other)",
   "function method out", "_prims.maximum", "binary", "binary")
op("minimum(Tensor input, Tensor other)",
   "function method out", "_prims.minimum", "binary", "binary")
op("floor_divide(Tensor input, Tensor other)",
   "function method out", "_methods.floor_divide", "binary")
op("remainder(Tensor input, Tensor other)",
   "function method out", "_methods.remainder", "binary", "binary(real,nonzero)")
op("fmod(Tensor input, Tensor other)",
   "function method out inplace", "_prims.fmod", "binary", "binary(real,nonzero)")
op("bitwise_and(Tensor input, Tensor other)",
   "function method out", "_methods.bitwise_and", "binary")
op("bitwise_or(Tensor input, Tensor other)",
   "function method out", "_methods.bitwise_or", "binary")
op("bitwise_xor(Tensor input, Tensor other)",
   "function method out", "_methods.bitwise_xor", "binary")
op("logical_and(Tensor input, Tensor other)",
   "function method out", "_methods.logical_and", "comparison")
op("logical_or(Tensor input, Tensor other)",
   "function method out", "_methods.logical_or", "comparison")
op("logical_xor(Tensor input, Tensor other)",
   "function method out", "_methods.logical_xor", "comparison")
op("lt(Tensor input, Tensor other)",
   "function method out", "_prims.lt", "comparison")
op("le(Tensor input, Tensor other)",
   "function method out", "_prims.le", "comparison")
op("gt(Tensor input, Tensor other)",
   "function method out", "_prims.gt", "comparison")
op("ge(Tensor input, Tensor other)",
   "function method out", "_prims.ge", "comparison")
op("eq(Tensor input, Tensor other)",
   "function method out", "_prims.eq", "comparison")
op("ne(Tensor input, Tensor other)",
   "function method out", "_prims.ne", "comparison")
op("isclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False)",
   "function method", "_methods.isclose", "comparison")
op("equal(Tensor input, Tensor other) -> bool",
   "function method", "_methods.equal", None)
op("allclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> bool",
   "function method", "_methods.allclose", None)
op("where(Tensor condition, Tensor input, Tensor other)",
   "function", "_methods.where", "where")
op("Tensor.where(Tensor self, Tensor condition, Tensor other)",
   "method", "_methods.where_method", "where_method")
op("clamp(Tensor input, Scalar? min=None, Scalar? max=None)",
   "function method out inplace inplace_function", "_methods.clamp", "clamp")
op("clip(Tensor input, Scalar? min=None, Scalar? max=None)",
   "function method out", "_methods.clamp", "clamp")
op("clip_(Tensor input, Scalar? min=None, Scalar? max=None)",
   "function method", "_prims.clamp_", "inplace")
op("masked_fill(Tensor input, Tensor mask, Scalar value)",
   "function method", "_methods.masked_fill", "masked_fill")
# binary/ternary elementwise ops of issue 13
op("clamp_min(Tensor input, Scalar min)",
   "function method out", "_methods.clamp_min", "clamp")
op("clamp_max(Tensor input, Scalar max)",
   "function method out", "_methods.clamp_max", "clamp")
op("clamp_min_(Tensor self, Scalar min)",
   "function method", "_methods.clamp_min_", "inplace")
op("clamp_max_(Tensor self, Scalar max)",
   "function method", "_methods.clamp_max_", "inplace")
op("lerp(Tensor input, Tensor end, Tensor weight)",
   "function method out", "_methods.lerp", "lerp")
op("Tensor.lerp_(Tensor self, Tensor end, Tensor weight)",
   "method", "_methods.lerp_", "inplace")
op("addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1)",
   "function method out", "_methods.addcmul", "addcmul")
op("Tensor.addcmul_(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)",
   "method", "_methods.addcmul_", "inplace")
op("addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1)",
   "function method out", "_methods.addcdiv", "addcmul")
op("Tensor.addcdiv_(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)",
   "method", "_methods.addcdiv_", "inplace")
op("atan2(Tensor input, Tensor other)",
   "function method out", "_methods.atan2", "binary_float")
op("arctan2(Tensor input, Tensor other)",
   "function method out", "_methods.arctan2", "binary_float")
op("logaddexp(Tensor input, Tensor other)",
   "function method out", "_methods.logaddexp", "binary_float")
op("logaddexp2(Tensor input, Tensor other)",
   "function method out", "_methods.logaddexp2", "binary_float")
op("hypot(Tensor input, Tensor other)",
   "function method out", "_methods.hypot", "binary_float")
op("true_divide(Tensor input, Tensor other)",
   "function method out", "_methods.true_divide", "div")
# PyTorch's alias names (torch.multiply is torch.mul, ...): the same implementation, node and rule
op("subtract(Tensor input, Tensor other, *, Scalar alpha=1)",
   "function method out", "_methods.sub", "binary")
op("multiply(Tensor input, Tensor other)",
   "function method out", "_prims.mul", "binary")
op("divide(Tensor input, Tensor other, *, str? rounding_mode=None)",
   "function method out", "_methods.div", "div")
op("less(Tensor input, Tensor other)",
   "function method out", "_prims.lt", "comparison")
op("less_equal(Tensor input, Tensor other)",
   "function method out", "_prims.le", "comparison")
op("greater(Tensor input, Tensor other)",
   "function method out", "_prims.gt", "comparison")
op("greater_equal(Tensor input, Tensor other)",
   "function method out", "_prims.ge", "comparison")
op("not_equal(Tensor input, Tensor other)",
   "function method out", "_prims.ne", "comparison")
# elementwise ops and in-place forms of issue 13 (ewise): each in-place form records its op's node
op("xlogy(Tensor input, Tensor other)",
   "function method out", "_methods.xlogy", "binary_float")
op("xlogy_(Tensor self, Tensor other)",
   "function method", "_methods.xlogy_", "inplace")
op("copysign(Tensor input, Tensor other)",
   "function method out", "_methods.copysign", "binary_float")
op("Tensor.copysign_(Tensor self, Tensor other)",
   "method", "_methods.copysign_", "inplace")
op("heaviside(Tensor input, Tensor values)",
   "function method out", "_methods.heaviside", "binary")
op("Tensor.heaviside_(Tensor self, Tensor values)",
   "method", "_methods.heaviside_", "inplace")
op("logit(Tensor input, float? eps=None)",
   "function method out", "_methods.logit", "unary_float")
op("logit_(Tensor self, float? eps=None)",
   "function method", "_methods.logit_", "inplace")
op("float_power(Tensor input, Tensor exponent)",
   "function method out", "_methods.float_power", "float_power")
op("Tensor.float_power_(Tensor self, Tensor exponent)",
   "method", "_methods.float_power_", "inplace")
op("Tensor.atan2_(Tensor self, Tensor other)",
   "method", "_methods.atan2_", "inplace")
op("Tensor.arctan2_(Tensor self, Tensor other)",
   "method", "_methods.arctan2_", "inplace")
op("Tensor.hypot_(Tensor self, Tensor other)",
   "method", "_methods.hypot_", "inplace")
op("Tensor.true_divide_(Tensor self, Tensor other)",
   "method", "_methods.true_divide_", "inplace")
op("Tensor.logical_and_(Tensor self, Tensor other)",
   "method", "_methods.logical_and_", "inplace")
op("Tensor.logical_or_(Tensor self, Tensor other)",
   "method", "_methods.logical_or_", "inplace")
op("Tensor.logical_xor_(Tensor self, Tensor other)",
   "method", "_methods.logical_xor_", "inplace")
op("Tensor.logical_not_(Tensor self)",
   "method", "_methods.logical_not_", "inplace")
op("bitwise_left_shift(Tensor input, Tensor other)",
   "function method out", "_methods.bitwise_left_shift", "binary")
op("Tensor.bitwise_left_shift_(Tensor self, Tensor other)",
   "method", "_methods.bitwise_left_shift_", "inplace")
op("bitwise_right_shift(Tensor input, Tensor other)",
   "function method out", "_methods.bitwise_right_shift", "binary")
op("Tensor.bitwise_right_shift_(Tensor self, Tensor other)",
   "method", "_methods.bitwise_right_shift_", "inplace")
op("Tensor.eq_(Tensor self, Tensor other)",
   "method", "_methods.eq_", "inplace")
op("Tensor.ne_(Tensor self, Tensor other)",
   "method", "_methods.ne_", "inplace")
op("Tensor.lt_(Tensor self, Tensor other)",
   "method", "_methods.lt_", "inplace")
op("Tensor.le_(Tensor self, Tensor other)",
   "method", "_methods.le_", "inplace")
op("Tensor.gt_(Tensor self, Tensor other)",
   "method", "_methods.gt_", "inplace")
op("Tensor.ge_(Tensor self, Tensor other)",
   "method", "_methods.ge_", "inplace")
op("Tensor.not_equal_(Tensor self, Tensor other)",
   "method", "_methods.not_equal_", "inplace")
op("Tensor.less_(Tensor self, Tensor other)",
   "method", "_methods.less_", "inplace")
op("Tensor.less_equal_(Tensor self, Tensor other)",
   "method", "_methods.less_equal_", "inplace")
op("Tensor.greater_(Tensor self, Tensor other)",
   "method", "_methods.greater_", "inplace")
op("Tensor.greater_equal_(Tensor self, Tensor other)",
   "method", "_methods.greater_equal_", "inplace")
# small math of the torch namespace (session 19)
op("rsub(Tensor input, Tensor other, *, Scalar alpha=1)",
   "function", "_methods.rsub", "binary")
op("fmax(Tensor input, Tensor other)",
   "function method out", "_methods.fmax", "binary", "binary")
op("fmin(Tensor input, Tensor other)",
   "function method out", "_methods.fmin", "binary", "binary")

# ---- elementwise, unary
op("neg(Tensor input)",
   "function method out", "_prims.neg", "unary", "unary")
op("negative(Tensor input)",
   "function method out", "_prims.neg", "unary", "unary")
op("abs(Tensor input)",
   "function method out", "_prims.abs", "unary", "unary(nonzero)")
op("absolute(Tensor input)",
   "function method out", "_prims.abs", "unary", "unary(nonzero)")
op("sign(Tensor input)",
   "function method out", "_prims.sign", "unary")
op("exp(Tensor input)",
   "function method out", "_prims.exp", "unary_float", "unary")
op("log(Tensor input)",
   "function method out", "_prims.log", "unary_float", "unary(pos)")
op("log1p(Tensor input)",
   "function method out", "_prims.log1p", "unary_float", "unary(pos)")
op("expm1(Tensor input)",
   "function method out", "_prims.expm1", "unary_float", "unary")
op("sqrt(Tensor input)",
   "function method out", "_prims.sqrt", "unary_float", "unary(pos)")
op("sin(Tensor input)",
   "function method out", "_prims.sin", "unary_float", "unary")
op("cos(Tensor input)",
   "function method out", "_prims.cos", "unary_float", "unary")
op("tanh(Tensor input)",
   "function method out", "_prims.tanh", "unary_float", "unary")
op("sigmoid(Tensor input)",
   "function method out", "_prims.sigmoid", "unary_float", "unary")
op("relu(Tensor input)",
   "function method out", "_prims.relu", "unary", "unary(nonzero)")
op("bitwise_not(Tensor input)",
   "function method out inplace", "_prims.bitwise_not", "unary")
op("logical_not(Tensor input)",
   "function method out", "_methods.logical_not", "unary_bool")
op("clone(Tensor input)",
   "function method", "_prims.clone", "unary")

# ---- elementwise math (issue 13): float functions, each with its in-place form
op("log10(Tensor input)",
   "function method out inplace inplace_function", "_prims.log10", "unary_float")
op("log2(Tensor input)",
   "function method out inplace inplace_function", "_prims.log2", "unary_float")
op("exp2(Tensor input)",
   "function method out inplace inplace_function", "_prims.exp2", "unary_float")
op("sinh(Tensor input)",
   "function method out inplace inplace_function", "_prims.sinh", "unary_float")
op("cosh(Tensor input)",
   "function method out inplace inplace_function", "_prims.cosh", "unary_float")
op("asinh(Tensor input)",
   "function method out inplace inplace_function", "_prims.asinh", "unary_float")
op("acosh(Tensor input)",
   "function method out inplace inplace_function", "_prims.acosh", "unary_float")
op("atanh(Tensor input)",
   "function method out inplace inplace_function", "_prims.atanh", "unary_float")
op("asin(Tensor input)",
   "function method out inplace inplace_function", "_prims.asin", "unary_float")
op("acos(Tensor input)",
   "function method out inplace inplace_function", "_prims.acos", "unary_float")
op("tan(Tensor input)",
   "function method out inplace inplace_function", "_prims.tan", "unary_float")
op("atan(Tensor input)",
   "function method out inplace inplace_function", "_prims.atan", "unary_float")
op("erf(Tensor input)",
   "function method out inplace inplace_function", "_prims.erf", "unary_float")
op("erfc(Tensor input)",
   "function method out inplace inplace_function", "_prims.erfc", "unary_float")
op("erfinv(Tensor input)",
   "function method out inplace", "_prims.erfinv", "unary_float")
op("lgamma(Tensor input)",
   "function method out inplace", "_prims.lgamma", "unary_float")
op("digamma(Tensor input)",
   "function method out inplace", "_prims.digamma", "unary_float")
op("rsqrt(Tensor input)",
   "function method out inplace inplace_function", "_prims.rsqrt", "unary_float")
op("reciprocal(Tensor input)",
   "function method out inplace inplace_function", "_prims.reciprocal", "unary_float")
op("deg2rad(Tensor input)",
   "function method out inplace inplace_function", "_prims.deg2rad", "unary_float")
op("rad2deg(Tensor input)",
   "function method out inplace inplace_function", "_prims.rad2deg", "unary_float")
op("arcsin(Tensor input)",
   "function method out", "_prims.asin", "unary_float")
op("arcsin_(Tensor input)",
   "function method", "_prims.asin_", "inplace")
op("arccos(Tensor input)",
   "function method out", "_prims.acos", "unary_float")
op("arccos_(Tensor input)",
   "function method", "_prims.acos_", "inplace")
op("arctan(Tensor input)",
   "function method out", "_prims.atan", "unary_float")
op("arctan_(Tensor input)",
   "function method", "_prims.atan_", "inplace")
op("arcsinh(Tensor input)",
   "function method out", "_prims.asinh", "unary_float")
op("arcsinh_(Tensor input)",
   "function method", "_prims.asinh_", "inplace")
op("arccosh(Tensor input)",
   "function method out", "_prims.acosh", "unary_float")
op("arccosh_(Tensor input)",
   "function method", "_prims.acosh_", "inplace")
op("arctanh(Tensor input)",
   "function method out", "_prims.atanh", "unary_float")
op("arctanh_(Tensor input)",
   "function method", "_prims.atanh_", "inplace")
op("square(Tensor input)",
   "function method out", "_methods.square", "square")
op("square_(Tensor input)",
   "function method", "_methods.square_", "inplace")
# rounding and sign (issue 13): floor, ceil, trunc and round keep integer dtypes; fix is trunc
op("floor(Tensor input)",
   "function method out inplace inplace_function", "_prims.floor", "unary")
op("ceil(Tensor input)",
   "function method out inplace inplace_function", "_prims.ceil", "unary")
op("trunc(Tensor input)",
   "function method out inplace inplace_function", "_prims.trunc", "unary")
op("fix(Tensor input)",
   "function method out", "_prims.trunc", "unary")
op("fix_(Tensor input)",
   "function method", "_prims.trunc_", "inplace")
op("round(Tensor input, *, int? decimals=None)",
   "function method out inplace inplace_function", "_prims.round", "unary")
op("frac(Tensor input)",
   "function method out inplace inplace_function", "_prims.frac", "unary")
op("sgn(Tensor input)",
   "function method out inplace", "_prims.sgn", "unary")
op("nan_to_num(Tensor input, float? nan=0.0, float? posinf=None, float? neginf=None)",
   "function method out inplace inplace_function", "_prims.nan_to_num", "unary")
op("signbit(Tensor input)",
   "function method out", "_prims.signbit", "unary_bool")
op("isnan(Tensor input)",
   "function method", "_methods.isnan", "unary_bool")
op("isinf(Tensor input)",
   "function method", "_methods.isinf", "unary_bool")
op("isposinf(Tensor input)",
   "function method out", "_methods.isposinf", "unary_bool")
op("isneginf(Tensor input)",
   "function method out", "_methods.isneginf", "unary_bool")
op("isfinite(Tensor input)",
   "function method", "_methods.isfinite", "unary_bool")
op("isreal(Tensor input)",
   "function method", "_methods.isreal", "unary_bool")
# the in-place forms of the unary ops above (elementwise, unary)
op("neg_(Tensor input)",
   "function method", "_prims.neg_", "inplace")
op("abs_(Tensor input)",
   "function method", "_prims.abs_", "inplace")
op("Tensor.sign_(Tensor self)",
   "method", "_prims.sign_", "inplace")
op("exp_(Tensor input)",
   "function method", "_prims.exp_", "inplace")
op("log_(Tensor input)",
   "function method", "_prims.log_", "inplace")
op("log1p_(Tensor input)",
   "function method", "_prims.log1p_", "inplace")
op("expm1_(Tensor input)",
   "function method", "_prims.expm1_", "inplace")
op("sqrt_(Tensor input)",
   "function method", "_prims.sqrt_", "inplace")
op("sin_(Tensor input)",
   "function method", "_prims.sin_", "inplace")
op("cos_(Tensor input)",
   "function method", "_prims.cos_", "inplace")
op("tanh_(Tensor input)",
   "function method", "_prims.tanh_", "inplace")
op("sigmoid_(Tensor input)",
   "function method", "_prims.sigmoid_", "inplace")
op("relu_(Tensor input)",
   "function method", "_prims.relu_", "inplace")
op("negative_(Tensor input)",
   "function method", "_prims.neg_", "inplace")
op("sinc(Tensor input)",
   "function method out", "_methods.sinc", "unary_float", "unary")
op("sinc_(Tensor input)",
   "function method", "_methods.sinc_", "inplace")
op("isin(Tensor elements, Tensor test_elements, *, bool assume_unique=False, bool invert=False)",
   "function", "_methods.isin", "isin")
op("unravel_index(Tensor indices, SymInt[] shape) -> Tensor[]",
   "function", "_methods.unravel_index", "unravel_index")
op("trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1)",
   "function", "_methods.trapezoid", "trapezoid")
op("trapz(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1)",
   "function", "_methods.trapz", "trapezoid")
op("cumulative_trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1)",
   "function", "_methods.cumulative_trapezoid", "cumulative_trapezoid")
op("is_same_size(Tensor input, Tensor other) -> bool",
   "function method", "_methods.is_same_size", None)
op("is_inference(Tensor input) -> bool",
   "function", "_methods.is_inference", None)

# ---- in place (the other in-place forms are `inplace` variants above)
op("Tensor.add_(Tensor self, Tensor other, *, Scalar alpha=1)",
   "method", "_methods.add_", "inplace")
op("Tensor.sub_(Tensor self, Tensor other, *, Scalar alpha=1)",
   "method", "_methods.sub_", "inplace")
op("Tensor.mul_(Tensor self, Tensor other)",
   "method", "Tensor", "inplace")
op("Tensor.div_(Tensor self, Tensor other, *, str? rounding_mode=None)",
   "method", "_methods.div_", "inplace")
op("Tensor.subtract_(Tensor self, Tensor other, *, Scalar alpha=1)",
   "method", "_methods.sub_", "inplace")
op("Tensor.multiply_(Tensor self, Tensor other)",
   "method", "_methods.multiply_", "inplace")
op("Tensor.divide_(Tensor self, Tensor other, *, str? rounding_mode=None)",
   "method", "_methods.div_", "inplace")
op("Tensor.absolute_(Tensor self)",
   "method", "_prims.abs_", "inplace")
op("Tensor.pow_(Tensor self, Tensor exponent)",
   "method", "Tensor", "inplace")
op("Tensor.floor_divide_(Tensor self, Tensor other)",
   "method", "_prims.floor_divide_", "inplace")
op("Tensor.remainder_(Tensor self, Tensor other)",
   "method", "_prims.remainder_", "inplace")
op("Tensor.bitwise_and_(Tensor self, Tensor other)",
   "method", "_prims.bitwise_and_", "inplace")
op("Tensor.bitwise_or_(Tensor self, Tensor other)",
   "method", "_prims.bitwise_or_", "inplace")
op("Tensor.bitwise_xor_(Tensor self, Tensor other)",
   "method", "_prims.bitwise_xor_", "inplace")
op("fill_(Tensor input, Scalar value)",
   "function method", "_prims.fill_", "inplace")
op("zero_(Tensor input)",
   "function method", "_prims.zero_", "inplace")
op("fill(Tensor input, Scalar value)",
   "function", "_methods.fill", "unary")
op("detach(Tensor input)",
   "function", "_methods.detach", "unary")
op("detach_(Tensor input)",
   "function", "_methods.detach_", "inplace")
op("Tensor.copy_(Tensor self, Tensor src, bool non_blocking=False)",
   "method", "_methods.copy_", "inplace")
op("Tensor.masked_fill_(Tensor self, Tensor mask, Scalar value)",
   "method", "_methods.masked_fill_", "inplace")

# ---- reductions
op("sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
   "function method out", "_prims.sum", "sum")
op("mean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
   "function method out", "_methods.mean", "mean")
op("prod(Tensor input, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
   "function method", "_methods.prod", "sum")
op("var(Tensor input, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, Scalar? correction=None)",
   "function method", "_methods.var", "var")
op("std(Tensor input, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, Scalar? correction=None)",
   "function method", "_methods.std", "var")
op("max(Tensor input, int? dim=None, bool keepdim=False)",
   "function method out", "_methods.max", "extreme")
op("min(Tensor input, int? dim=None, bool keepdim=False)",
   "function method out", "_methods.min", "extreme")
op("amax(Tensor input, int[1] dim=(), bool keepdim=False)",
   "function method", "_prims.amax", "reduction")
op("amin(Tensor input, int[1] dim=(), bool keepdim=False)",
   "function method", "_prims.amin", "reduction")
op("argmax(Tensor input, int? dim=None, bool keepdim=False)",
   "function method", "_prims.argmax", "argmax")
op("argmin(Tensor input, int? dim=None, bool keepdim=False)",
   "function method", "_prims.argmin", "argmax")
op("all(Tensor input, int? dim=None, bool keepdim=False)",
   "function method", "_methods.all", "all")
op("any(Tensor input, int? dim=None, bool keepdim=False)",
   "function method", "_methods.any", "all")
op("norm(Tensor input, Scalar p='fro', int[1]? dim=None, bool keepdim=False, ScalarType? dtype=None)",
   "function method", "_methods.norm", "norm")
# reductions and set ops of issue 13 (reduce)
op("logsumexp(Tensor input, int[1] dim, bool keepdim=False)",
   "function method out", "_methods.logsumexp", "logsumexp")
op("nansum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
   "function method out", "_methods.nansum", "sum")
op("nanmean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
   "function method out", "_methods.nanmean", "mean")
op("count_nonzero(Tensor input, int[1]? dim=None)",
   "function method", "_methods.count_nonzero", "count_nonzero")
op("aminmax(Tensor input, *, int? dim=None, bool keepdim=False)",
   "function method", "_methods.aminmax", "aminmax")
op("std_mean(Tensor input, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, Scalar? correction=None)",
   "function", "_methods.std_mean", "var_mean")
op("var_mean(Tensor input, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, Scalar? correction=None)",
   "function", "_methods.var_mean", "var_mean")
op("dist(Tensor input, Tensor other, Scalar p=2)",
   "function method", "_methods.dist", "dist")
op("pairwise_distance(Tensor x1, Tensor x2, float p=2.0, float eps=1e-06, bool keepdim=False)",
   "function", "_methods.pairwise_distance", "pairwise_distance")
op("cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08)",
   "function", "_methods.cosine_similarity", "cosine_similarity")
op("quantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear')",
   "function method out", "_methods.quantile", "quantile")
op("nanquantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear')",
   "function method out", "_methods.nanquantile", "quantile")
# searching, counting, unique. The sizes of bincount's and unique's results depend on the input's
# values, which a shape rule does not read: they return `SizedByValues` tensors (no rule).
op("searchsorted(Tensor sorted_sequence, Tensor input, *, bool out_int32=False, bool right=False, "
   "str? side=None, Tensor? sorter=None)",
   "function out", "_methods.searchsorted", "searchsorted")
op("bucketize(Tensor input, Tensor boundaries, *, bool out_int32=False, bool right=False)",
   "function out", "_methods.bucketize", "bucketize")
op("bincount(Tensor input, Tensor? weights=None, int minlength=0) -> SizedByValues",
   "function method", "_methods.bincount", None)
op("histc(Tensor input, int bins=100, Scalar min=0, Scalar max=0)",
   "function method out", "_methods.histc", "histc")
op("histogram(Tensor input, Tensor bins, *, float[]? range=None, Tensor? weight=None, bool density=False)",
   "function method", "_methods.histogram", "histogram")
op("unique(Tensor input, bool sorted=True, bool return_inverse=False, bool return_counts=False, int? dim=None) "
   "-> SizedByValues",
   "function method", "_methods.unique", None)
op("unique_consecutive(Tensor input, bool return_inverse=False, bool return_counts=False, int? dim=None) "
   "-> SizedByValues",
   "function method", "_methods.unique_consecutive", None)
op("softmax(Tensor input, int dim, ScalarType? dtype=None)",
   "function method", "_methods.softmax", "softmax")
op("log_softmax(Tensor input, int dim, ScalarType? dtype=None)",
   "function method", "_methods.log_softmax", "softmax")

# ---- sorting and selection (named tuples of values and indices)
op("sort(Tensor input, int dim=-1, bool descending=False, *, bool? stable=None)",
   "function method", "_methods.sort", "sort")
op("msort(Tensor input)", "function method out", "_methods.msort", "msort")
op("argsort(Tensor input, int dim=-1, bool descending=False, *, bool stable=False)",
   "function method", "_methods.argsort", "argsort")
op("topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True)",
   "function method", "_methods.topk", "topk")
op("kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False)",
   "function method", "_methods.kthvalue", "kthvalue")
op("median(Tensor input, int? dim=None, bool keepdim=False)",
   "function method", "_methods.median", "median")
op("mode(Tensor input, int dim=-1, bool keepdim=False)",
   "function method", "_methods.mode", "mode")

# ---- products
op("matmul(Tensor input, Tensor other)",
   "function method out", "_prims.matmul", "matmul")
op("mm(Tensor input, Tensor mat2)",
   "function method out", "_prims.mm", "matmul")
op("bmm(Tensor input, Tensor mat2)",
   "function method out", "_prims.bmm", "matmul")
op("mv(Tensor input, Tensor vec)",
   "function method out", "_prims.mv", "matmul")
op("dot(Tensor input, Tensor tensor)",
   "function method out", "_prims.dot", "matmul")

# ---- linear algebra (fastgrad.linalg: products with beta/alpha, contractions, decompositions)
op("addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)",
   "function method out", "_prims.addmm", "addmm")
op("addmv(Tensor input, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1)",
   "function method out", "_linalg_ops.addmv", "addmm")
op("addr(Tensor input, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1)",
   "function method out", "_linalg_ops.addr", "addr")
op("baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)",
   "function method out", "_linalg_ops.baddbmm", "addmm")
op("addbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)",
   "function method out", "_linalg_ops.addbmm", "addbmm")
op("vdot(Tensor input, Tensor other)",
   "function method out", "_linalg_ops.vdot", "matmul")
op("inner(Tensor input, Tensor other)",
   "function method out", "_linalg_ops.inner", "inner")
op("tensordot(Tensor a, Tensor b, int[] dims=2, Tensor? out=None)",
   "function", "_linalg_ops.tensordot", "tensordot")
op("einsum(str equation, Tensor... operands)",
   "function", "_linalg_ops.einsum", "einsum")
op("chain_matmul(Tensor... matrices)",
   "function out", "_linalg_ops.chain_matmul", "chain_matmul")
op("cross(Tensor input, Tensor other, int? dim=None)",
   "function method out", "_linalg_ops.cross", "cross")
op("cdist(Tensor x1, Tensor x2, float p=2.0, str? compute_mode=None)",
   "function", "_linalg_ops.cdist", "cdist")
op("det(Tensor input)",
   "function method", "_linalg_ops.det", "det")
op("logdet(Tensor input)",
   "function method", "_linalg_ops.logdet", "det")
op("slogdet(Tensor input)",
   "function method", "_linalg_ops.slogdet", "slogdet")
op("inverse(Tensor input)",
   "function method out", "_linalg_ops.inverse", "unary")
op("cholesky(Tensor input, bool upper=False)",
   "function method out", "_linalg_ops.cholesky", "unary")
op("svd(Tensor input, bool some=True, bool compute_uv=True)",
   "function method", "_linalg_ops.svd", "svd")
op("qr(Tensor input, bool some=True)",
   "function method", "_linalg_ops.qr", "qr")
op("pinverse(Tensor input, float rcond=1e-15)",
   "function method", "_linalg_ops.pinverse", "pinverse")

# ---- shapes and views
op("reshape(Tensor input, SymInt[] shape)",
   "function", "_prims.reshape", "view")
op("Tensor.reshape(Tensor self, SymInt... shape)",
   "method", "_prims.reshape", "view")
op("Tensor.view(Tensor self, SymInt... shape)",
   "method", "_prims.view", "view")
op("Tensor.view_as(Tensor self, Tensor other)",
   "method", "_methods.view_as", "view_as")
op("Tensor.reshape_as(Tensor self, Tensor other)",
   "method", "_methods.reshape_as", "view_as")
op("Tensor.expand(Tensor self, SymInt... size)",
   "method", "_prims.expand", "expand")
op("Tensor.expand_as(Tensor self, Tensor other)",
   "method", "_methods.expand_as", "view_as")
op("permute(Tensor input, int[] dims)",
   "function", "_methods.permute_function", "permute")
op("Tensor.permute(Tensor self, int... dims)",
   "method", "_methods.permute", "permute")
op("transpose(Tensor input, int dim0, int dim1)",
   "function method", "_prims.transpose", "transpose")
op("swapaxes(Tensor input, int axis0, int axis1)",
   "function method", "_prims.transpose", "transpose")
op("t(Tensor input)",
   "function", "_prims.t", "t")
op("Tensor.t(Tensor self)",
   "method", "Tensor", "t")
op("squeeze(Tensor input, int[1]? dim=None)",
   "function method", "_methods.squeeze", "squeeze")
op("unsqueeze(Tensor input, int dim)",
   "function method", "_prims.unsqueeze", "unsqueeze")
op("flatten(Tensor input, int start_dim=0, int end_dim=-1)",
   "function method", "_prims.flatten", "flatten")
op("cat(Tensor[] tensors, int dim=0)",
   "function out", "_prims.cat", "cat")
op("concat(Tensor[] tensors, int dim=0)",
   "function out", "_prims.cat", "cat")
op("concatenate(Tensor[] tensors, int dim=0)",
   "function out", "_prims.cat", "cat")
op("stack(Tensor[] tensors, int dim=0)",
   "function out", "_prims.stack", "stack")
op("split(Tensor tensor, SymInt split_size_or_sections, int dim=0) -> Tensor[]",
   "function method", "_methods.split", "split")
op("split_with_sizes(Tensor input, SymInt[] split_sizes, int dim=0) -> Tensor[]",
   "function method", "_methods.split_with_sizes", "split_with_sizes")
op("hsplit(Tensor input, SymInt indices_or_sections) -> Tensor[]",
   "function method", "_methods.hsplit", "hsplit")
op("vsplit(Tensor input, SymInt indices_or_sections) -> Tensor[]",
   "function method", "_methods.vsplit", "vsplit")
op("dsplit(Tensor input, SymInt indices_or_sections) -> Tensor[]",
   "function method", "_methods.dsplit", "dsplit")
op("chunk(Tensor input, int chunks, int dim=0) -> Tensor[]",
   "function method", "_methods.chunk", "chunk")
# shape family (issue 13): views, copies and joins composed in _methods
op("narrow(Tensor input, int dim, SymInt start, SymInt length)",
   "function method", "_methods.narrow", "narrow")
op("select(Tensor input, int dim, SymInt index)",
   "function method", "_methods.select", "select")
op("Tensor.unfold(Tensor self, int dimension, int size, int step)",
   "method", "_prims.unfold", "unfold")
op("ravel(Tensor input)",
   "function method", "_methods.ravel", "flatten")
op("positive(Tensor input)",
   "function method", "_methods.positive", "unary")
op("unbind(Tensor input, int dim=0) -> Tensor[]",
   "function method", "_methods.unbind", "unbind")
op("movedim(Tensor input, int[1] source, int[1] destination)",
   "function method", "_methods.movedim", "movedim")
op("moveaxis(Tensor input, int[1] source, int[1] destination)",
   "function method", "_methods.movedim", "movedim")
op("swapdims(Tensor input, int dim0, int dim1)",
   "function method", "_prims.transpose", "transpose")
op("broadcast_to(Tensor input, SymInt[] size)",
   "function", "_prims.expand", "expand")
op("Tensor.broadcast_to(Tensor self, SymInt... size)",
   "method", "_prims.expand", "expand")
op("broadcast_tensors(Tensor... tensors) -> Tensor[]",
   "function", "_methods.broadcast_tensors", "broadcast_tensors")
op("broadcast_shapes(SymInt... shapes) -> Size",
   "function", "_methods.broadcast_shapes", None)
op("atleast_1d(Tensor... tensors)",
   "function", "_methods.atleast_1d", "atleast_1d")
op("atleast_2d(Tensor... tensors)",
   "function", "_methods.atleast_2d", "atleast_2d")
op("atleast_3d(Tensor... tensors)",
   "function", "_methods.atleast_3d", "atleast_3d")
# in-place shape ops (issue 13): self takes its view's shape and strides
op("Tensor.t_(Tensor self)",
   "method", "_prims.t_", "t")
op("Tensor.transpose_(Tensor self, int dim0, int dim1)",
   "method", "_prims.transpose_", "transpose")
op("Tensor.swapaxes_(Tensor self, int axis0, int axis1)",
   "method", "_prims.transpose_", "transpose")
op("Tensor.swapdims_(Tensor self, int dim0, int dim1)",
   "method", "_prims.transpose_", "transpose")
op("Tensor.squeeze_(Tensor self, int[1]? dim=None)",
   "method", "_methods.squeeze_", "squeeze")
op("Tensor.unsqueeze_(Tensor self, int dim)",
   "method", "_prims.unsqueeze_", "unsqueeze")
op("Tensor.fill_diagonal_(Tensor self, Scalar fill_value, bool wrap=False)",
   "method", "_methods.fill_diagonal_", "inplace")
op("unflatten(Tensor input, int dim, SymInt[] sizes)",
   "function method", "_methods.unflatten", "unflatten")
op("flip(Tensor input, int[] dims)",
   "function", "_methods.flip", "same")
op("Tensor.flip(Tensor self, int... dims)",
   "method", "_methods.flip_method", "same")
op("fliplr(Tensor input)",
   "function method", "_methods.fliplr", "same")
op("flipud(Tensor input)",
   "function method", "_methods.flipud", "same")
op("roll(Tensor input, int[1] shifts, int[1]? dims=None)",
   "function method", "_methods.roll", "same")
op("rot90(Tensor input, int k=1, int[] dims=[0,1])",
   "function method", "_methods.rot90", "rot90")
op("Tensor.repeat(Tensor self, SymInt... repeats)",
   "method", "_methods.repeat", "repeat")
op("tile(Tensor input, SymInt[] dims)",
   "function", "_methods.tile", "tile")
op("Tensor.tile(Tensor self, SymInt... dims)",
   "method", "_methods.tile_method", "tile")
op("repeat_interleave(Tensor input, Tensor? repeats=None, int? dim=None, *, SymInt? output_size=None)",
   "function method", "_methods.repeat_interleave", "repeat_interleave")
op("tril(Tensor input, int diagonal=0)",
   "function method", "_methods.tril", "same")
op("triu(Tensor input, int diagonal=0)",
   "function method", "_methods.triu", "same")
op("Tensor.tril_(Tensor self, int diagonal=0)",
   "method", "_methods.tril_", "inplace")
op("Tensor.triu_(Tensor self, int diagonal=0)",
   "method", "_methods.triu_", "inplace")
op("tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None, Layout? layout=None)",
   "function", "_methods.tril_indices", "triangle_indices")
op("triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None, Layout? layout=None)",
   "function", "_methods.triu_indices", "triangle_indices")
op("diag(Tensor input, int diagonal=0)",
   "function method", "_methods.diag", "diag")
op("diagflat(Tensor input, int offset=0)",
   "function method", "_methods.diagflat", "diagflat")
op("diagonal(Tensor input, int offset=0, int dim1=0, int dim2=1)",
   "function method", "_prims.diagonal", "diagonal")
op("diag_embed(Tensor input, int offset=0, int dim1=-2, int dim2=-1)",
   "function method", "_methods.diag_embed", "diag_embed")
op("trace(Tensor input)",
   "function method", "_methods.trace", "trace")
op("outer(Tensor input, Tensor vec2)",
   "function method", "_methods.outer", "outer")
op("ger(Tensor input, Tensor vec2)",
   "function method", "_methods.outer", "outer")
op("kron(Tensor input, Tensor other)",
   "function method", "_methods.kron", "kron")
op("meshgrid(Tensor... tensors, *, str? indexing=None) -> Tensor[]",
   "function", "_methods.meshgrid", "meshgrid")
op("cartesian_prod(Tensor... tensors)",
   "function", "_methods.cartesian_prod", "cartesian_prod")
op("block_diag(Tensor... tensors)",
   "function", "_methods.block_diag", "block_diag")
op("tensor_split(Tensor input, SymInt indices_or_sections, int dim=0) -> Tensor[]",
   "function method", "_methods.tensor_split", "tensor_split")
op("hstack(Tensor[] tensors)",
   "function out", "_methods.hstack", "hstack")
op("vstack(Tensor[] tensors)",
   "function out", "_methods.vstack", "vstack")
op("row_stack(Tensor[] tensors)",
   "function out", "_methods.row_stack", "vstack")
op("dstack(Tensor[] tensors)",
   "function out", "_methods.dstack", "dstack")
op("column_stack(Tensor[] tensors)",
   "function out", "_methods.column_stack", "column_stack")
op("diff(Tensor input, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None)",
   "function method", "_methods.diff", "diff")
# scatter/gather/index family (issue 13)
op("gather(Tensor input, int dim, Tensor index, *, bool sparse_grad=False)",
   "function method out", "_methods.gather", "gather")
op("index_select(Tensor input, int dim, Tensor index)",
   "function method out", "_methods.index_select", "index_select")
op("scatter(Tensor input, int dim, Tensor index, Tensor src=None, Scalar value=None, *, str? reduce=None)",
   "function method out", "_methods.scatter", "like_input")
op("Tensor.scatter_(Tensor self, int dim, Tensor index, Tensor src=None, Scalar value=None, *, str? reduce=None)",
   "method", "_methods.scatter_", "inplace")
op("scatter_add(Tensor input, int dim, Tensor index, Tensor src)",
   "function method out", "_methods.scatter_add", "like_input")
op("Tensor.scatter_add_(Tensor self, int dim, Tensor index, Tensor src)",
   "method", "_methods.scatter_add_", "inplace")
op("index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1)",
   "function method out", "_methods.index_add", "like_input")
op("Tensor.index_add_(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)",
   "method", "_methods.index_add_", "inplace")
op("index_copy(Tensor input, int dim, Tensor index, Tensor source)",
   "function method out", "_methods.index_copy", "like_input")
op("Tensor.index_copy_(Tensor self, int dim, Tensor index, Tensor source)",
   "method", "_methods.index_copy_", "inplace")
op("index_fill(Tensor input, int dim, Tensor index, Scalar value)",
   "function method", "_methods.index_fill", "like_input")
op("Tensor.index_fill_(Tensor self, int dim, Tensor index, Scalar value)",
   "method", "_methods.index_fill_", "inplace")
op("nonzero(Tensor input, *, bool as_tuple=False)",
   "function method out", "_methods.nonzero", "nonzero")
op("argwhere(Tensor input)",
   "function method", "_methods.argwhere", "nonzero")
op("masked_select(Tensor input, Tensor mask)",
   "function method out", "_methods.masked_select", "masked_select")
op("take(Tensor input, Tensor index)",
   "function method out", "_methods.take", "take")
op("take_along_dim(Tensor input, Tensor indices, int? dim=None)",
   "function method out", "_methods.take_along_dim", "take_along_dim")
# scatter family (issue 13): scatter_reduce, put, masked_scatter
op("scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True)",
   "function method out", "_methods.scatter_reduce", "like_input")
op("Tensor.scatter_reduce_(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True)",
   "method", "_methods.scatter_reduce_", "inplace")
op("put(Tensor input, Tensor index, Tensor source, bool accumulate=False)",
   "function method", "_methods.put", "like_input")
op("Tensor.put_(Tensor self, Tensor index, Tensor source, bool accumulate=False)",
   "method", "_methods.put_", "inplace")
op("masked_scatter(Tensor input, Tensor mask, Tensor source)",
   "function method", "_methods.masked_scatter", "masked_fill")
op("Tensor.masked_scatter_(Tensor self, Tensor mask, Tensor source)",
   "method", "_methods.masked_scatter_", "inplace")
op("index_put(Tensor input, Tensor?[] indices, Tensor values, bool accumulate=False)",
   "function method", "_methods.index_put", "like_input")
op("index_put_(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False)",
   "function method", "_methods.index_put_", "inplace")

# ---- scans along one dim
op("cumsum(Tensor input, int dim, *, ScalarType? dtype=None)",
   "function method out inplace", "_prims.cumsum", "cumsum")
op("cumprod(Tensor input, int dim, *, ScalarType? dtype=None)",
   "function method out inplace", "_prims.cumprod", "cumsum")
op("logcumsumexp(Tensor input, int dim)",
   "function method out", "_prims.logcumsumexp", "scan")
op("cummax(Tensor input, int dim)",
   "function method", "_methods.cummax", "cummax")
op("cummin(Tensor input, int dim)",
   "function method", "_methods.cummin", "cummax")

# ---- queries (no tensor result)
op("numel(Tensor input) -> int",
   "function", "_methods.numel", None)
op("is_tensor(object obj) -> bool",
   "function", "_methods.is_tensor", None)
op("is_floating_point(Tensor input) -> bool",
   "function method", "_methods.is_floating_point", None)
op("is_complex(Tensor input) -> bool",
   "function method", "_methods.is_complex", None)
op("is_nonzero(Tensor input) -> bool",
   "function method", "_methods.is_nonzero", None)
# dtypes (issue 13)
op("is_signed(Tensor input) -> bool",
   "function method", "_methods.is_signed", None)

# ---- random draws (fastgrad._sampling; the factories rand, randn, ... are not ops: _sampling.__all__)
op("multinomial(Tensor input, int num_samples, bool replacement=False, *, Generator? generator=None)",
   "function method out", "_sampling.multinomial", "multinomial")
op("bernoulli(Tensor input, float? p=None, *, Generator? generator=None)",
   "function method out", "_sampling.bernoulli", "unary")
op("poisson(Tensor input, Generator? generator=None)",
   "function", "_sampling.poisson", "unary")
op("Tensor.uniform_(Tensor self, float a=0.0, float b=1.0, *, Generator? generator=None)",
   "method", "_sampling.uniform_", "inplace")
op("Tensor.normal_(Tensor self, float mean=0.0, float std=1.0, *, Generator? generator=None)",
   "method", "_sampling.normal_", "inplace")
op("Tensor.bernoulli_(Tensor self, float p=0.5, *, Generator? generator=None)",
   "method", "_sampling.bernoulli_", "inplace")
op("Tensor.exponential_(Tensor self, float lambd=1.0, *, Generator? generator=None)",
   "method", "_sampling.exponential_", "inplace")
op("Tensor.geometric_(Tensor self, float p, *, Generator? generator=None)",
   "method", "_sampling.geometric_", "inplace")
op("Tensor.log_normal_(Tensor self, float mean=1.0, float std=2.0, *, Generator? generator=None)",
   "method", "_sampling.log_normal_", "inplace")
op("Tensor.cauchy_(Tensor self, float median=0.0, float sigma=1.0, *, Generator? generator=None)",
   "method", "_sampling.cauchy_", "inplace")
op("Tensor.random_(Tensor self, int... bounds, *, int? to=None, Generator? generator=None)",
   "method", "_sampling.random_", "inplace")

# ---- tensors made like self (fastgrad._factories)
op("Tensor.new_zeros(Tensor self, SymInt... size, *, ScalarType? dtype=None, Device? device=None, "
   "bool requires_grad=False)",
   "method", "_factories.new_zeros", "new")
op("Tensor.new_ones(Tensor self, SymInt... size, *, ScalarType? dtype=None, Device? device=None, "
   "bool requires_grad=False)",
   "method", "_factories.new_ones", "new")
op("Tensor.new_empty(Tensor self, SymInt... size, *, ScalarType? dtype=None, Device? device=None, "
   "bool requires_grad=False)",
   "method", "_factories.new_empty", "new")
op("Tensor.new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None, "
   "bool requires_grad=False)",
   "method", "_factories.new_full", "new_full")
op("Tensor.new_tensor(Tensor self, object data, *, ScalarType? dtype=None, Device? device=None, "
   "bool requires_grad=False)",
   "method", "_factories.new_tensor", "new_tensor")

# ---- hooks (fastgrad._hooks)
op("Tensor.register_hook(Tensor self, Callable hook) -> RemovableHandle",
   "method", "_hooks.register_hook", None)
op("Tensor.register_post_accumulate_grad_hook(Tensor self, Callable hook) -> RemovableHandle",
   "method", "_hooks.register_post_accumulate_grad_hook", None)
# fmt: on


def wrapper_source(row, primitive):
    """The Python source of `row`'s wrapper over _prims.<primitive>: PyTorch's parameters, each
    converted as its type says, passed positionally to the fixed-signature primitive."""
    return _source(row.name, row.params, primitive, "out" in row.variants)


def inplace_source(row):
    """Tensor.<name>_ over the in-place primitive _prims.<name>_, with the row's parameters (no out=)."""
    this = Param("Tensor", "self", None, False)
    return _source(f"{row.name}_", [this] + row.params[1:], f"{row.name}_", with_out=False)


def inplace_function_source(row):
    """fastgrad.<name>_: the in-place form as a module function, its tensor named `input` (as PyTorch's)."""
    this = Param("Tensor", "input", None, False)
    return _source(f"{row.name}_", [this] + row.params[1:], f"{row.name}_", with_out=False)


def _source(name, params, primitive, with_out):
    declared = []
    for p in params:
        if p.keyword_only and "*" not in declared:
            declared.append("*")
        if p.type.endswith("..."):
            declared.append(f"*{p.name}")
        else:
            declared.append(p.name if p.default is None else f"{p.name}={p.default}")
    call = f"_prims.{primitive}({', '.join(_converted(p, name) for p in params)})"
    if with_out:
        declared += ["out=None"] if "*" in declared else ["*", "out=None"]
        call = f"_with_out({call}, out)"
    return f"def {name}({', '.join(declared)}):\n    return {call}\n"


def _converted(p, op):
    """The expression that passes parameter `p` of `op` to the primitive. An int or a bool is checked
    inline (an identity test when it is right: no call) and otherwise gets PyTorch's TypeError naming it;
    pybind11 would take True for 1, and 1, 0.5 or None for a bool."""
    n = p.name
    if p.type.endswith("..."):  # varargs sizes
        return f'_sizes({n}, "{n}")'
    if p.type == "SymInt[]":  # sizes as one argument
        return f'_sizes(({n},), "{n}")'
    if p.type.startswith("int["):  # dims
        return f"_dims({n})"
    if p.type in ("int", "int?"):
        test, refusal = f"{n}.__class__ is int", f'_int_argument({n}, "{op}", "{n}")'
    elif p.type in ("bool", "bool?"):
        test, refusal = f"{n} is True or {n} is False", f'_not_bool("{op}", "{n}", {n})'
    else:
        return n
    if p.type.endswith("?"):
        test = f"{n} is None or {test}"
    return f"({n} if {test} else {refusal})"


# PyTorch's argument parser takes numpy's names for two parameters of its native ops
# (x.sum(axis=0, keepdims=True)); the ops PyTorch writes in Python (torch.functional, _tensor.py) do not.
NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}
WRITTEN_IN_PYTHON_BY_PYTORCH = {"norm", "split", "unique", "unique_consecutive"}


def numpy_names(row):
    """The numpy names `row`'s op takes, each with the parameter it stands for."""
    if row.name in WRITTEN_IN_PYTHON_BY_PYTORCH:
        return {}
    params = {p.name for p in row.params}
    return {alias: name for alias, name in NUMPY_NAMES.items() if name in params}


def names(variant):
    """The public names of the table's ops that have `variant` (function: module names; method: Tensor's)."""
    found = {r.name for r in OPS if variant in r.variants}
    if variant == "method":
        found |= {f"{r.name}_" for r in OPS if "inplace" in r.variants}
    if variant == "function":
        found |= {f"{r.name}_" for r in OPS if "inplace_function" in r.variants}
    return sorted(found)
