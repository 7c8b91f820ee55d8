"""The differential fuzzer's op table (tests/fuzz_programs.py): OPS, one entry per op form (a template
and the drawers of fuzz_drawers.py that fill its placeholders), and CONSTRUCTS, what the census counts.
"""

import re
from dataclasses import dataclass


from fuzz_drawers import (
    along_index,
    bool_partner,
    cat_args,
    class_targets,
    conv_weight,
    dim,
    expand_sizes,
    flatten_args,
    index_key,
    indices_into,
    last_dims,
    matmul_partner,
    new_shape,
    numpy_operand,
    options,
    partner,
    permutation,
    positions_along,
    reduce_args,
    scalar,
    setitem_value,
    squeeze_args,
    tensor,
)
from fuzz_run import ANY, FLOAT, NUM

# ---------------------------------------------------------------------------------------------
# The op table: one entry per op form. A template is a Python expression (its value becomes a new
# variable) or, with statement=True, a statement (in-place writes); {name} placeholders are filled
# by the drawers given as keywords, in order.


@dataclass(frozen=True)
class Op:
    template: str
    drawers: tuple  # ((placeholder, drawer), ...)
    statement: bool = False
    smooth: object = True  # False, or False for some arguments (a function of them): finite
    # differences see what backward does not (detach), or PyTorch's
    # gradient takes a convention there

    def __repr__(self):
        return self.template


OPS = []


def op(template, statement=False, weight=1, smooth=True, **drawers):
    OPS.extend([Op(template, tuple(drawers.items()), statement, smooth)] * weight)


# elementwise, two tensors (broadcasting) or a tensor and a Python number on either side
for _t in [
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "{a} / {b}",
    "{a} ** {b}",
    "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})",
    "torch.add({a}, {b}, alpha=2)",
    "{a}.sub({b})",
    "torch.mul({a}, {b})",
    "torch.div({a}, {b})",
    "{a}.pow({b})",
    "torch.max({a}, {b})",
    "{a}.min({b})",
    "{a} // {b}",
    "{a} % {b}",
    "torch.fmod({a}, {b})",
    "{a}.remainder({b})",
    "{a} & {b}",
    "{a} | {b}",
    "torch.bitwise_xor({a}, {b})",
]:
    op(_t, a=tensor(NUM), b=partner("a"))
for _t in [
    "{a} + {s}",
    "{s} + {a}",
    "{a} - {s}",
    "{s} - {a}",
    "{a} * {s}",
    "{s} * {a}",
    "{a} / {s}",
    "{s} / {a}",
    "{a} ** {s}",
    "{s} ** {a}",
    "torch.pow({a}, {s})",
    "torch.add({a}, {s})",
    "{a} // {s}",
    "{s} // {a}",
    "{a} % {s}",
    "{s} % {a}",
    "{a}.fmod({s})",
    "{a} ^ {s}",
    "{s} | {a}",
    "{a}.div({s}, rounding_mode='trunc')",
    "torch.div({a}, {s}, rounding_mode='floor')",
]:
    op(_t, a=tensor(NUM), s=scalar())
op("{a} ** {s}", a=tensor(), s=options("2", "3", "0.5", "-1", "-2", "0", "1.5", "-0.5"))
# unary
for _t in [
    "-{a}",
    "torch.neg({a})",
    "abs({a})",
    "{a}.abs()",
    "{a}.exp()",
    "torch.exp({a})",
    "{a}.log()",
    "torch.log({a})",
    "{a}.log1p()",
    "torch.expm1({a})",
    "{a}.sqrt()",
    "torch.sqrt({a})",
    "{a}.sin()",
    "torch.cos({a})",
    "{a}.tanh()",
    "torch.sigmoid({a})",
    "{a}.relu()",
    "torch.relu({a})",
    "{a}.sign()",
    "~{a}",
    "torch.logical_not({a})",
    "torch.negative({a})",
    "torch.absolute({a})",
    "{a}.absolute()",
]:
    op(_t, a=tensor(NUM))
# elementwise math (issue 13): float functions, their aliases and in-place forms
for _t in [
    "torch.log10({a})",
    "{a}.log2()",
    "torch.exp2({a})",
    "{a}.sinh()",
    "torch.cosh({a})",
    "{a}.asinh()",
    "torch.acosh({a})",
    "{a}.atanh()",
    "torch.asin({a})",
    "{a}.acos()",
    "torch.atan({a})",
    "{a}.erf()",
    "torch.erfc({a})",
    "{a}.erfinv()",
    "torch.lgamma({a})",
    "{a}.digamma()",
    "torch.rsqrt({a})",
    "{a}.reciprocal()",
    "torch.deg2rad({a})",
    "{a}.rad2deg()",
    "torch.arcsin({a})",
    "torch.arccos({a})",
    "torch.arctan({a})",
    "torch.arcsinh({a})",
    "torch.arccosh({a})",
    "torch.arctanh({a})",
    "torch.square({a})",
    "torch.isnan({a})",
    "{a}.isinf()",
    "torch.isposinf({a})",
    "{a}.isneginf()",
    "torch.isfinite({a})",
    "{a}.isreal()",
]:
    op(_t, a=tensor(NUM))
for _t in [
    "torch.log10_({a})",
    "{a}.log2_()",
    "torch.exp2_({a})",
    "{a}.sinh_()",
    "{a}.cosh_()",
    "{a}.asin_()",
    "{a}.acos_()",
    "{a}.atan_()",
    "{a}.erf_()",
    "{a}.erfc_()",
    "{a}.erfinv_()",
    "{a}.lgamma_()",
    "{a}.digamma_()",
    "torch.rsqrt_({a})",
    "{a}.reciprocal_()",
    "{a}.deg2rad_()",
    "{a}.rad2deg_()",
    "{a}.arcsin_()",
    "{a}.arccos_()",
    "{a}.arctan_()",
    "torch.square_({a})",
    "{a}.neg_()",
    "{a}.abs_()",
    "{a}.sign_()",
    "torch.exp_({a})",
    "{a}.log_()",
    "{a}.log1p_()",
    "{a}.expm1_()",
    "{a}.sqrt_()",
    "{a}.sin_()",
    "{a}.cos_()",
    "{a}.tanh_()",
    "{a}.sigmoid_()",
    "torch.relu_({a})",
    "{a}.negative_()",
]:
    op(_t, statement=True, a=tensor(target=True))
# rounding and sign (issue 13): piecewise constant, or with jumps (frac): no finite differences
for _t in [
    "torch.floor({a})",
    "{a}.ceil()",
    "torch.trunc({a})",
    "{a}.fix()",
    "torch.round({a})",
    "{a}.round(decimals=1)",
    "torch.frac({a})",
]:
    op(_t, smooth=False, a=tensor(NUM))
op("torch.nan_to_num({a}, {v}, posinf={w})", a=tensor(NUM), v=options("0.0", "-1.5"), w=options("2.0", "None"))
for _t in ["{a}.floor_()", "{a}.ceil_()", "{a}.trunc_()", "{a}.fix_()", "{a}.round_(decimals=-1)", "torch.frac_({a})"]:
    op(_t, statement=True, smooth=False, a=tensor(target=True))
op("torch.nan_to_num_({a}, neginf=-3.0)", statement=True, a=tensor(target=True))
# clamp, where, comparisons
op("{a}.clamp({lo}, {hi})", a=tensor(NUM), lo=options("-1", "-0.5", "0", "None"), hi=options("1", "0.5", "2", "None"))
op("torch.clamp({a}, min={lo})", a=tensor(NUM), lo=options("0", "-0.5", "0.25", "1"))
op("{a}.clamp(max={hi})", a=tensor(NUM), hi=options("0", "0.5", "-1"))
op("torch.clip({a}, {lo}, {hi})", a=tensor(), lo=options("-1", "-0.25"), hi=options("1", "0.75"))
# Where min == max, PyTorch's gradient takes conventions that no derivative matches (x gets all of
# it at x == min == max, neither bound gets it elsewhere): no finite differences.
op("torch.clamp({a}, {lo}, {hi})", a=tensor(), lo=partner("a"), hi=partner("a"), smooth=False)
op("{a}.clamp(min={lo})", a=tensor(), lo=partner("a"))
op("torch.where({c}, {a}, {b})", weight=2, a=tensor(NUM), b=partner("a"), c=bool_partner("a"))
op("torch.where({a} > {s}, {a}, {b})", a=tensor(NUM), s=scalar(), b=partner("a"))
op("torch.where({c}, {a}, {s})", a=tensor(NUM), c=bool_partner("a"), s=scalar())
op("{a}.where({c}, {b})", a=tensor(NUM), c=bool_partner("a"), b=partner("a"))
for _t in [
    "{a} > {b}",
    "{a} < {b}",
    "{a} <= {b}",
    "{a} >= {b}",
    "{a} == {b}",
    "{a} != {b}",
    "torch.gt({a}, {b})",
    "{a}.le({b})",
    "torch.less({a}, {b})",
    "{a}.less_equal({b})",
    "torch.greater({a}, {b})",
    "{a}.greater_equal({b})",
    "torch.not_equal({a}, {b})",
]:
    op(_t, a=tensor(NUM), b=partner("a"))
for _t in ["{a} > {s}", "{a} <= {s}", "{s} < {a}", "{a} == {s}", "{a}.ne({s})"]:
    op(_t, a=tensor(NUM), s=scalar())
for _t in ["torch.logical_and({a}, {b})", "{a}.logical_or({b})", "torch.logical_xor({a}, {b})", "{a}.isclose({b})"]:
    op(_t, a=tensor(NUM), b=partner("a"))
# reductions
for _t in [
    "{a}.sum({args})",
    "torch.sum({a}, {args})",
    "{a}.mean({args})",
    "torch.mean({a}, {args})",
    "{a}.amax({args})",
    "torch.amin({a}, {args})",
]:
    op(_t, a=tensor(ANY if "sum" in _t else NUM), args=reduce_args("a", optional="torch." not in _t))
op("{a}.var({args})", a=tensor(), args=reduce_args("a", extra=("unbiased=False", "correction=0", "correction=2")))
op("torch.std({a}, {args})", a=tensor(), args=reduce_args("a", optional=False, extra=("unbiased=False",)))
op(
    "{a}.norm({args})",
    a=tensor(),
    args=reduce_args(
        "a",
        dim_keyword=True,
        extra=("p=1", "p=3", "p='fro'", "p=0", "p=-1", "p=0.5", "p=float('inf')", "p=-float('inf')"),
    ),
)
op("torch.norm({a}, {p})", a=tensor(), p=options("2", "1", "3", "0.5", "0", "-0.5", "float('inf')"))
op("{a}.prod({args})", a=tensor(NUM), args=reduce_args("a", multi=False))
op("torch.prod({a}, {d})", a=tensor(NUM), d=dim("a"))
for _t in [
    "{a}.max()",
    "torch.min({a})",
    "{a}.max({d}).values",
    "torch.max({a}, {d}, keepdim=True)[0]",
    "{a}.min(dim={d}).values",
    "{a}.max({d})[1]",
    "torch.min({a}, {d}).indices",
]:
    op(_t, a=tensor(NUM), **({"d": dim("a")} if "{d}" in _t else {}))
op("{a}.argmax({args})", a=tensor(NUM), args=reduce_args("a", multi=False))
# reductions and set ops of issue 13 (reduce)
op("torch.logsumexp({a}, {args})", a=tensor(ANY), args=reduce_args("a", optional=False))
op("torch.nansum({a}, {args})", a=tensor(ANY), args=reduce_args("a"))
op("{a}.nanmean({args})", a=tensor(ANY), args=reduce_args("a"))
op("torch.count_nonzero({a}, {d})", a=tensor(ANY), d=dim("a"))
op("torch.aminmax({a}, dim={d}).max", a=tensor(NUM), d=dim("a"))
op("{a}.aminmax()[0]", a=tensor(NUM))
op("torch.var_mean({a}, {args})[0]", a=tensor(), args=reduce_args("a", extra=("unbiased=False", "correction=0")))
op("torch.std_mean({a}, {args})[1]", a=tensor(), args=reduce_args("a", extra=("correction=2",)))
op("{a}.sum(axis={d}, keepdims=True)", a=tensor(ANY), d=dim("a"))
op("torch.cosine_similarity({a}, {b}, dim={d})", a=tensor(ANY, min_rank=1), b=partner("a"), d=dim("a", wrong=False))
op("torch.dist({a}, {b}, {p})", a=tensor(), b=partner("a"), p=options("2", "1", "3", "0.5", "float('inf')"))
op("torch.nn.functional.pairwise_distance({a}, {b}, p={p})", a=tensor(), b=partner("a"), p=options("2.0", "1.0", "3.0"))
op("torch.searchsorted({a}.flatten().sort()[0], {b}, right=True)", a=tensor(NUM), b=tensor(NUM))
op("torch.bucketize({b}, {a}.flatten().sort()[0])", a=tensor(NUM), b=tensor(NUM))
op("{a}.histc(5, -1, 1)", a=tensor())
op("torch.histogram({a}, torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype={a}.dtype))[0]", a=tensor())
op("torch.bincount({a}.flatten().abs().long(), minlength=3)", a=tensor(NUM))
op("torch.unique({a}, return_counts=True)[1]", a=tensor(ANY))
op("torch.unique({a}, dim={d}, return_inverse=True)[1]", a=tensor(ANY, min_rank=1), d=dim("a", wrong=False))
op("{a}.unique_consecutive(return_inverse=True)[1]", a=tensor(ANY))
op("torch.quantile({a}, {q}, dim={d})", a=tensor(min_rank=1), q=options("0.3", "0.5", "1.0"), d=dim("a"))
op("{a}.nanquantile(0.25, interpolation={i})", a=tensor(), i=options("'lower'", "'nearest'", "'midpoint'"))
# sorting and selection (tied values in PyTorch's CPU order: tests/test_sort.py)
op("{a}.sort({d})[0]", a=tensor(NUM), d=dim("a"))
op("torch.sort({a}, dim={d}, descending=True, stable=True).indices", a=tensor(ANY), d=dim("a"))
op("torch.argsort({a}, {d}, descending=True)", a=tensor(ANY), d=dim("a"))
op("torch.msort({a})", a=tensor(ANY))
op("torch.topk({a}, {k}, {d}).values", a=tensor(NUM), k=options("0", "1", "2", "3"), d=dim("a"))
op("{a}.topk({k}, largest=False)[1]", a=tensor(NUM), k=options("1", "2"))
op("{a}.kthvalue({k}, {d}).values", a=tensor(NUM), k=options("1", "2", "3"), d=dim("a"))
op("torch.median({a})", a=tensor(NUM))
op("{a}.median({d}, keepdim=True)[0]", a=tensor(NUM), d=dim("a"))
op("torch.mode({a}, {d}).values", a=tensor(NUM), d=dim("a"))
# composed in the shared layer
op("{a}.split({n}, {d})[-1]", a=tensor(ANY), n=options("1", "2", "3", "[1, 1]"), d=dim("a"))
op("torch.chunk({a}, {n}, {d})[0]", a=tensor(ANY), n=options("1", "2", "3"), d=dim("a"))
op("{a}.masked_fill({c}, {s})", a=tensor(NUM), c=bool_partner("a"), s=scalar())
op("{a}.all({d})", a=tensor(ANY), d=dim("a"))
op("torch.any({a})", a=tensor(ANY))
# the fused nn ops (integer inputs: the errors)
op("{a}.softmax({d})", weight=2, a=tensor(NUM), d=dim("a"))
op("torch.log_softmax({a}, {d})", weight=2, a=tensor(NUM), d=dim("a"))
op("{a}.log_softmax({d}, dtype=torch.float64)", a=tensor(NUM), d=dim("a"))
op("torch.nn.functional.gelu({a}{approximate})", a=tensor(NUM), approximate=options("", ", approximate='tanh'"))
op("torch.argmin({a}{args})", a=tensor(NUM), args=options("", ", 0", ", dim=-1", ", 1, keepdim=True"))
# scans along one dim (integer inputs: int64 results, and logcumsumexp's error)
op("{a}.cumsum({d})", a=tensor(ANY), d=dim("a"))
op("torch.cumsum({a}, {d}, dtype=torch.float64)", a=tensor(NUM), d=dim("a"))
op("torch.cumprod({a}, {d})", a=tensor(NUM), d=dim("a"))
op("{a}.logcumsumexp({d})", a=tensor(NUM), d=dim("a"))
op("torch.cummax({a}, {d}).values", a=tensor(NUM), d=dim("a"))
op("{a}.cummin({d})[1]", a=tensor(ANY), d=dim("a"))
op("{a}.cumsum_({d})", statement=True, a=tensor(NUM, target=True), d=dim("a"))
op("{a}.cumprod_({d})", statement=True, a=tensor(NUM, target=True), d=dim("a"))
# products, every rank combination
op("{a} @ {b}", weight=3, a=tensor(), b=matmul_partner("a"))
op("torch.matmul({a}, {b})", weight=2, a=tensor(min_rank=1), b=matmul_partner("a"))
op("torch.mm({a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mm"))
op("{a}.bmm({b})", a=tensor(rank=3), b=matmul_partner("a", "bmm"))
op("torch.mv({a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mv"))
op("torch.dot({a}, {b})", a=tensor(rank=1), b=matmul_partner("a", "dot"))
# linear algebra (fastgrad.linalg): the products whose operand shapes the drawers make
op("torch.vdot({a}, {b})", a=tensor(rank=1), b=matmul_partner("a", "dot"))
op("torch.inner({a}, {b})", a=tensor(rank=1), b=matmul_partner("a", "dot"))
op("torch.einsum('ij,jk->ik', {a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mm"))
op("torch.tensordot({a}, {b}, dims=1)", a=tensor(rank=2), b=matmul_partner("a", "mm"))
op("torch.addmm({a} @ {b}, {a}, {b}, beta=0.5)", a=tensor(rank=2), b=matmul_partner("a", "mm"))
op("torch.baddbmm({a} @ {b}, {a}, {b}, alpha=2)", a=tensor(rank=3), b=matmul_partner("a", "bmm"))
op("torch.addmv({a} @ {b}, {a}, {b})", a=tensor(rank=2), b=matmul_partner("a", "mv"))
# shapes and views
op("{a}.reshape({s})", a=tensor(ANY), s=new_shape("a"))
op("torch.reshape({a}, {s})", a=tensor(), s=new_shape("a", as_tuple=True))
op("{a}.view({s})", a=tensor(ANY), s=new_shape("a"))
op("{a}.flatten({args})", a=tensor(ANY), args=flatten_args("a"))
op("{a}.squeeze({args})", a=tensor(ANY), args=squeeze_args("a"))
op("torch.unsqueeze({a}, {d})", a=tensor(ANY), d=dim("a", extra=1))
op("{a}.transpose({d0}, {d1})", weight=2, a=tensor(ANY), d0=dim("a"), d1=dim("a"))
op("torch.swapaxes({a}, {d0}, {d1})", a=tensor(ANY), d0=dim("a"), d1=dim("a"))
op("{a}.permute({p})", a=tensor(ANY), p=permutation("a"))
op("{a}.t()", a=tensor(ANY, rank=(2, 1, 0, 2, 2, 3)))
op("{a}.T", a=tensor(NUM))
op("{a}.expand({s})", weight=2, a=tensor(ANY), s=expand_sizes("a"))
op("{a}.expand_as({b})", a=tensor(), b=partner("a"))
op("torch.cat({args})", a=tensor(ANY), args=cat_args("a"))
op("torch.concat({args})", a=tensor(ANY), args=cat_args("a"))
op("torch.concatenate({args})", a=tensor(), args=cat_args("a"))
op("torch.stack({args})", a=tensor(), args=cat_args("a", stack=True))
# shape family (issue 13): views, copies and joins composed in the shared layer
op("{a}.narrow({d}, {s}, 1)", a=tensor(ANY, min_rank=1), d=dim("a"), s=options("0", "1", "-1"))
op("{a}.select({d}, {s})", a=tensor(ANY, min_rank=1), d=dim("a"), s=options("0", "-1"))
op("torch.select({a}, {d}, 0)", a=tensor(ANY, min_rank=1), d=dim("a"))
op("{a}.unfold({d}, 1, {s})", a=tensor(ANY), d=dim("a"), s=options("1", "2"))
op("{a}.unfold({d}, {a}.size({d}) // 2, 1)", a=tensor(ANY, min_rank=1), d=dim("a"))
op("torch.ravel({a})", a=tensor(ANY))
op("{a}.ravel()", a=tensor(ANY))
op("torch.positive({a})", a=tensor(NUM))
op("{a}.positive()", a=tensor(NUM))
op("{a}.mT", a=tensor(ANY, min_rank=2))
op("{a}.mH", a=tensor(ANY, min_rank=2))
op("torch.unbind({a}, {d})[0]", a=tensor(ANY, min_rank=1), d=dim("a"))
op("torch.movedim({a}, {d0}, {d1})", a=tensor(ANY), d0=dim("a"), d1=dim("a"))
op("{a}.moveaxis(({d0}, {d1}), (0, -1))", a=tensor(ANY, min_rank=2), d0=dim("a"), d1=dim("a"))
op("{a}.swapdims({d0}, {d1})", a=tensor(ANY), d0=dim("a"), d1=dim("a"))
op("{a}.broadcast_to({s})", a=tensor(ANY), s=expand_sizes("a"))
op("torch.broadcast_tensors({a}, {b})[1]", a=tensor(NUM), b=partner("a"))
for _t in ["torch.atleast_1d({a})", "torch.atleast_2d({a})", "torch.atleast_3d([{a}])[0]"]:
    op(_t, a=tensor(ANY))
op("{a}.unflatten(0, (1, -1))", a=tensor(ANY, min_rank=1))
op("torch.flip({a}, ({d},))", a=tensor(ANY), d=dim("a"))
op("{a}.fliplr()", a=tensor(NUM))
op("torch.flipud({a})", a=tensor(NUM))
op("{a}.roll({s}{d})", a=tensor(ANY), s=options("1", "-2", "5"), d=options("", ", 0", ", -1", ", (0, -1)"))
op("{a}.rot90({k})", a=tensor(ANY), k=options("1", "2", "3", "-1", "0"))
op("{a}.repeat(*([2] + [1] * {a}.dim()))", a=tensor(ANY))
op("torch.tile({a}, ({r},))", a=tensor(NUM), r=options("1", "2", "0"))
op("{a}.repeat_interleave({r}{d})", a=tensor(ANY), r=options("2", "0", "torch.tensor(2)"), d=options("", ", 0", ", -1"))
op("torch.tril({a}, {k})", a=tensor(ANY), k=options("0", "1", "-1"))
op("{a}.triu({k})", a=tensor(NUM), k=options("0", "2", "-1"))
op("{a}.tril_({k})", statement=True, a=tensor(NUM, target=True), k=options("0", "-1"))
op("{a}.triu_({k})", statement=True, a=tensor(NUM, target=True), k=options("0", "1"))
op("torch.diag({a}{k})", a=tensor(NUM), k=options("", ", 1", ", -1"))
op("torch.diagflat({a}{k})", a=tensor(NUM), k=options("", ", 1", ", -2"))
# fmax/fmin (session 19): NaN-ignoring; at a tie the gradient goes to the first operand (no finite differences)
op("torch.fmax({a}, {b})", a=tensor(NUM), b=partner("a"), smooth=False)
op("{a}.fmin({b})", a=tensor(NUM), b=partner("a"), smooth=False)
op("torch.sinc({a})", a=tensor(NUM))
op("{a}.sinc_()", statement=True, a=tensor(target=True))
op("{a}.diagonal({k})", a=tensor(NUM), k=options("0", "1", "-2"))
op("torch.diag_embed({a}{k})", a=tensor(NUM), k=options("", ", 1", ", -1, 0, 1"))
op("{a}.trace()", a=tensor(ANY))
op("torch.outer({a}.flatten(), {b}.flatten())", a=tensor(NUM), b=partner("a"))
op("{a}.flatten().ger({a}.flatten())", a=tensor(NUM))
op("torch.kron({a}, {b})", a=tensor(NUM), b=partner("a"))
op(
    "torch.meshgrid({a}.flatten(), {b}.flatten(), indexing={i})[1]",
    a=tensor(NUM),
    b=partner("a"),
    i=options("'ij'", "'xy'"),
)
op("torch.cartesian_prod({a}.flatten(), {b}.flatten())", a=tensor(NUM), b=partner("a"))
op("torch.block_diag({a}, {b})", a=tensor(NUM), b=partner("a"))
op("{a}.tensor_split({n}, {d})[0]", a=tensor(ANY), n=options("1", "2", "3", "[1, 2]", "(0, -1)"), d=dim("a"))
for _t in ["hstack", "vstack", "row_stack", "dstack", "column_stack"]:
    op(f"torch.{_t}([{{a}}, {{a}}])", a=tensor(NUM))
op("{a}.diff({args})", a=tensor(ANY), args=options("", "2", "dim=0"))
op("torch.diff({a}, 1, 0, {a}, {a})", a=tensor(NUM))
op("{a}.clone()", a=tensor(ANY))
op("{a}.contiguous()", a=tensor())
op("{a}.detach()", a=tensor(), smooth=False)
op("{a}.double()", a=tensor(NUM))
op("{a}.to(torch.float32)", a=tensor(NUM))
op("{a}.long()", a=tensor(FLOAT))
# indexing
op("{a}[{key}]", weight=6, a=tensor(ANY), key=index_key("a"))
op(
    "{a}[{key}] = {value}",
    statement=True,
    weight=3,
    a=tensor(ANY, target=True),
    key=index_key("a", for_set=True),
    value=setitem_value("a", "key"),
)
# in place, on non-leaves (the drawer also picks the odd leaf that requires grad: an error)
for _t in [
    "{a}.add_({b})",
    "{a} += {b}",
    "{a}.sub_({b})",
    "{a}.mul_({b})",
    "{a} *= {b}",
    "{a}.div_({b})",
    "{a} /= {b}",
    "{a} //= {b}",
    "{a} %= {b}",
    "{a}.fmod_({b})",
    "{a} &= {b}",
    "{a} |= {b}",
    "{a} ^= {b}",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), b=partner("a", into=True))
op("{a}.copy_({b})", statement=True, a=tensor(ANY, target=True), b=partner("a", into=True, not_itself=True))
for _t in [
    "{a}.add_({s})",
    "{a} -= {s}",
    "{a}.mul_({s})",
    "{a}.div_({s})",
    "{a}.floor_divide_({s})",
    "{a} %= {s}",
    "{a} |= {s}",
    "{a} &= {s}",
    "{a} ^= {s}",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), s=scalar())
op("{a}.fill_({s})", statement=True, a=tensor(ANY, target=True), s=scalar())
op("{a}.zero_()", statement=True, a=tensor(ANY, target=True))
op("torch.fill({a}, {s})", a=tensor(ANY), s=scalar())
op(
    "{a}.clamp_({lo}, {hi})",
    statement=True,
    a=tensor(target=True),
    lo=options("-1", "0", "None"),
    hi=options("1", "0.5", "None"),
)
op("{a}.clip_({lo}, {hi})", statement=True, a=tensor(target=True), lo=options("-1", "None"), hi=options("0.5", "None"))
op("{a}.masked_fill_({c}, {s})", statement=True, a=tensor(NUM, target=True), c=bool_partner("a"), s=scalar())
op("{a}.bitwise_not_()", statement=True, a=tensor(ANY, target=True))
# the augmented operators that are not shorthand for one of the in-place methods above
op("{a} **= {s}", statement=True, a=tensor(NUM, target=True), s=options("2", "0.5", "-1", "3"))
op("{a} **= {b}", statement=True, a=tensor(target=True), b=partner("a", into=True))
op("{a} @= {b}", statement=True, a=tensor(target=True), b=matmul_partner("a"))
# in-place shape ops (issue 13): the target's shape and strides change, later draws read them anew
op("{a}.t_()", statement=True, a=tensor(ANY, rank=(2, 1, 0, 2, 3), target=True))
for _t in ["{a}.transpose_({d0}, {d1})", "{a}.swapaxes_({d0}, {d1})", "{a}.swapdims_({d0}, {d1})"]:
    op(_t, statement=True, a=tensor(ANY, target=True), d0=dim("a"), d1=dim("a"))
op("{a}.squeeze_({args})", statement=True, a=tensor(ANY, target=True), args=squeeze_args("a"))
op("{a}.unsqueeze_({d})", statement=True, a=tensor(ANY, target=True), d=dim("a", extra=1))
op(
    "{a}.fill_diagonal_({s}{wrap})",
    statement=True,
    a=tensor(ANY, rank=(2, 2, 3), target=True),
    s=scalar(),
    wrap=options("", ", True", ", wrap=False"),
)

# numpy scalars and arrays on either side of an operator. numpy on the left may hand back an ndarray
# (PyTorch's result too, for a tensor that does not require grad): as_tensor makes it a value.
for _t in ["+", "-", "*", "/", "**", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", "@"]:
    op(f"{{a}} {_t} {{n}}", a=tensor(ANY), n=numpy_operand("a"))
    op(f"torch.as_tensor({{n}} {_t} {{a}})", a=tensor(ANY), n=numpy_operand("a"))

# the history around in-place writes: retained gradients, views made without grad, .data, requires_grad_
op("{a}.retain_grad()", statement=True, weight=3, a=tensor())
op(
    "with torch.no_grad(): {out} = {a}{view}",
    weight=2,
    smooth=False,
    a=tensor(ANY),
    view=options("[...]", "[1:]", ".view(-1)", ".unsqueeze(0)", ".transpose(0, -1)", "[0]", ".t()"),
)
op("{a}.data", a=tensor(ANY), smooth=False)
op(
    "{a}.data.{write}",
    statement=True,
    a=tensor(),
    write=options("mul_(2)", "clamp_(-1.5, 1.5)", "zero_()", "add_(0.5)"),
    smooth=False,
)
op("{a}.requires_grad_({flag})", statement=True, a=tensor(ANY), flag=options("", "True", "False"), smooth=False)
op(
    "torch.as_tensor({a}{dtype})",
    a=tensor(ANY),
    dtype=options("", ", dtype=torch.float64", ", dtype=torch.float32", ", dtype=torch.int64"),
)

# nn.functional (with create_graph, test_second_derivatives_agree takes their second derivatives)
for _t in [
    "torch.nn.functional.relu({a})",
    "torch.nn.functional.sigmoid({a})",
    "torch.nn.functional.tanh({a})",
    "torch.nn.functional.dropout({a}, p=0.0)",
    "torch.nn.functional.dropout({a}, 0.5, training=False)",
]:
    op(_t, a=tensor(NUM))
op("torch.nn.functional.leaky_relu({a}{slope})", weight=2, a=tensor(NUM), slope=options("", ", 0.2", ", -0.5", ", 1.5"))
# the activations composed in nn.functional (integer inputs: their errors); those with kinks or
# thresholds take PyTorch's conventions there, which finite differences do not see
for _t in [
    "torch.nn.functional.elu({a}{alpha})",
    "torch.nn.functional.celu({a}{alpha})",
    "torch.nn.functional.selu({a})",
    "torch.nn.functional.silu({a})",
    "torch.nn.functional.mish({a})",
    "torch.nn.functional.softplus({a}{alpha})",
    "torch.nn.functional.logsigmoid({a})",
    "torch.nn.functional.softsign({a})",
    "torch.nn.functional.tanhshrink({a})",
]:
    op(_t, a=tensor(NUM), alpha=options("", ", 0.5", ", 2.0"))
op("torch.nn.functional.softplus({a}, 2, {t})", smooth=False, a=tensor(NUM), t=options("1.5", "-1.0"))
for _t in [
    "torch.nn.functional.hardtanh({a}{bounds})",
    "torch.nn.functional.relu6({a})",
    "torch.nn.functional.hardswish({a})",
    "torch.nn.functional.hardsigmoid({a})",
    "torch.nn.functional.rrelu({a}{bounds})",
]:
    op(_t, smooth=False, a=tensor(NUM), bounds=options("", ", -0.5, 0.5", ", 0.1, 0.3"))
for _t in [
    "torch.nn.functional.softshrink({a}{lambd})",
    "torch.nn.functional.hardshrink({a}{lambd})",
    "torch.nn.functional.threshold({a}, 0.5{lambd})",
]:
    op(_t, smooth=False, a=tensor(NUM), lambd=options(", 0.25", ", 1.0"))
for _t in [
    "torch.nn.functional.elu_({a})",
    "torch.nn.functional.selu_({a})",
    "torch.nn.functional.celu_({a}, 0.5)",
    "torch.nn.functional.silu({a}, inplace=True)",
]:
    op(_t, statement=True, a=tensor(target=True))
for _t in [
    "torch.nn.functional.hardtanh_({a}, -0.5, 0.5)",
    "torch.nn.functional.relu6({a}, inplace=True)",
    "torch.nn.functional.leaky_relu_({a}, 0.2)",
    "torch.nn.functional.leaky_relu({a}, inplace=True)",
    "torch.nn.functional.threshold_({a}, 0.0, 2.0)",
]:
    op(_t, statement=True, smooth=False, a=tensor(target=True))
op("torch.nn.functional.softmin({a}, {d})", a=tensor(NUM), d=dim("a"))
op("torch.nn.functional.normalize({a}, {p}, {d})", a=tensor(), p=options("2.0", "1.0", "3.0"), d=dim("a"))
op("torch.nn.functional.pad({a}, {pad})", a=tensor(NUM), pad=options("(1, 2)", "(0, -1)", "[2, 0, 1, 1]"))
op("torch.nn.functional.prelu({a}, {b}.reshape(-1)[:1])", smooth=False, a=tensor(), b=partner("a"))


for _t in [
    "torch.nn.functional.mse_loss({a}, {b}{reduction})",
    "torch.nn.functional.l1_loss({a}, {b}{reduction})",
    "torch.nn.functional.smooth_l1_loss({a}, {b}{reduction}, beta=0.5)",
    "torch.nn.functional.huber_loss({a}, {b}{reduction}, delta=0.75)",
    "torch.nn.functional.binary_cross_entropy_with_logits({a}, {b}{reduction})",
]:
    op(_t, a=tensor(), b=partner("a"), reduction=options("", ", reduction='sum'", ", reduction='none'"))
_reduction = options("", ", reduction='sum'", ", reduction='none'")
op(
    "torch.nn.functional.binary_cross_entropy({a}.sigmoid(), {b}.sigmoid(){reduction})",
    a=tensor(),
    b=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.kl_div({a}.log_softmax(-1), {b}{target}, reduction={reduction})",
    a=tensor(min_rank=1),
    b=partner("a"),
    target=options(".softmax(-1)", ".log_softmax(-1), log_target=True"),
    reduction=options("'sum'", "'none'", "'batchmean'"),
)
op(
    "torch.nn.functional.poisson_nll_loss({a}, {b}.exp(){full}{reduction})",
    a=tensor(),
    b=partner("a"),
    full=options("", ", full=True"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.gaussian_nll_loss({a}, {b}, {c}.exp(){reduction})",
    a=tensor(),
    b=partner("a"),
    c=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.multilabel_soft_margin_loss({a}, {b}.sigmoid(){reduction})",
    a=tensor(min_rank=1),
    b=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.soft_margin_loss({a}, {b}.sign().detach(){reduction})",
    a=tensor(),
    b=partner("a"),
    reduction=_reduction,
)
# hinges: the fuzzer's values (halves) put them at their kinks, where PyTorch's gradient takes a side
op(
    "torch.nn.functional.margin_ranking_loss({a}, {b}, {a}.sign().detach(){reduction}, margin=0.5)",
    smooth=False,
    a=tensor(),
    b=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.hinge_embedding_loss({a}, {b}.sign().detach(){reduction})",
    smooth=False,
    a=tensor(),
    b=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.cosine_embedding_loss({a}, {b}, {a}[:, 0].sign().detach(){reduction}, margin=0.25)",
    smooth=False,
    a=tensor(rank=2),
    b=partner("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.multi_margin_loss({a}, {t}{p}{reduction})",
    smooth=False,
    a=tensor(rank=(2, 1)),
    t=class_targets("a"),
    p=options("", ", p=2, margin=0.5"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.multilabel_margin_loss({a}, {t}.unsqueeze(-1).expand_as({a}){reduction})",
    smooth=False,
    a=tensor(rank=(2, 1)),
    t=class_targets("a"),
    reduction=_reduction,
)
op(
    "torch.nn.functional.triplet_margin_loss({a}, {b}, {c}{swap})",
    smooth=False,
    a=tensor(min_rank=1),
    b=partner("a"),
    c=partner("a"),
    swap=options("", ", p=1, swap=True"),
)
op(
    "torch.nn.functional.triplet_margin_with_distance_loss({a}, {b}, {c}, swap=True, reduction='none')",
    smooth=False,
    a=tensor(min_rank=1),
    b=partner("a"),
    c=partner("a"),
)
op("torch.nn.functional.linear({a}, {b}.t())", a=tensor(min_rank=1), b=matmul_partner("a", "mm"))
op("torch.nn.functional.linear({a}, {b}.t(), {b}[0])", a=tensor(min_rank=1), b=matmul_partner("a", "mm"))
op("torch.nn.functional.layer_norm({a}, {shape})", a=tensor(min_rank=1), shape=last_dims("a"))
# 4-D: the fused (flash) op; heads from a transpose read strided
op("torch.nn.functional.scaled_dot_product_attention({a}{t}, {b}{t}, {c}{t}{causal})", a=tensor(rank=4),
   b=partner("a"), c=partner("a"), t=options("", ".transpose(1, 2)"),
   causal=options("", ", is_causal=True"))  # fmt: skip
op("torch.nn.functional.rms_norm({a}, {shape}{eps})", a=tensor(min_rank=1), shape=last_dims("a"),
   eps=options("", ", eps=1e-3"))  # fmt: skip
op("torch.nn.functional.cross_entropy({a}, {t})", weight=2, a=tensor(rank=(2, 1)), t=class_targets("a", ignore=True))
op("torch.nn.functional.cross_entropy({a}, {t}, label_smoothing=0.1)", a=tensor(rank=2), t=class_targets("a"))
op("torch.nn.functional.nll_loss({a}.log_softmax(-1), {t})", a=tensor(rank=(2, 1)), t=class_targets("a", ignore=True))
op("torch.nn.functional.embedding({i}, {a})", a=tensor(rank=2), i=indices_into("a"))
op("torch.nn.functional.conv1d({a}, {w}, {w}[:, 0, 0]{options})", a=tensor(rank=3), w=conv_weight("a"),
   options=options("", ", padding=1", ", stride=2", ", padding='same'", ", dilation=2, padding='valid'"))  # fmt: skip
op("torch.nn.functional.conv2d({a}, {w}{options})", a=tensor(rank=4), w=conv_weight("a"),
   options=options("", ", padding=(1, 0)", ", stride=(2, 1)", ", padding='same'", ", groups=2",
                   ", dilation=2"))  # fmt: skip
# a convolution's weight (out, in, *k) transposed is a transposed convolution's (in, out, *k)
op("torch.nn.functional.conv_transpose1d({a}, {w}.transpose(0, 1){options})", a=tensor(rank=3), w=conv_weight("a"),
   options=options("", ", padding=1", ", stride=2, output_padding=1", ", dilation=2, output_padding=1"))  # fmt: skip
op("torch.nn.functional.conv_transpose2d({a}, {w}.transpose(0, 1), {w}[:, 0, 0, 0]{options})", a=tensor(rank=4),
   w=conv_weight("a"), options=options("", ", padding=(1, 0)", ", stride=(2, 1), output_padding=(1, 0)",
                                       ", dilation=2", ", stride=3, output_padding=2"))  # fmt: skip
op("torch.nn.functional.unfold({a}, {options})", a=tensor(rank=4),
   options=options("1", "(2, 1)", "2, padding=1", "2, stride=2, dilation=(1, 2)"))  # fmt: skip
# the blocks of a 2x2 kernel fold back onto the image they came from (stride 1 or 2, so the sizes fit)
op("torch.nn.functional.fold(torch.nn.functional.unfold({a}, 2{options}), {a}.shape[-2:], 2{options})",
   a=tensor(rank=4), options=options("", ", stride=2", ", padding=1"))  # fmt: skip
op("torch.nn.functional.one_hot({i}, 5).float() * {a}.sum()", a=tensor(), i=indices_into("a"))
# pooling (issue 16): many drawn shapes are too small for the window (PyTorch's errors); a window's
# maximum may be tied, where the gradient takes PyTorch's first-maximum convention
op("torch.nn.functional.max_pool2d({a}{options})", a=tensor(rank=(3, 4)), smooth=False,
   options=options(", 2", ", 3, 2, 1", ", (2, 1), ceil_mode=True", ", 2, 1, dilation=2"))  # fmt: skip
op("torch.nn.functional.max_pool1d({a}{options})", a=tensor(rank=(2, 3)), smooth=False,
   options=options(", 2", ", 3, 2, 1, ceil_mode=True", ", 2, dilation=2"))  # fmt: skip
op("torch.nn.functional.avg_pool2d({a}{options})", a=tensor(rank=(3, 4)),
   options=options(", 2", ", 3, 2, 1", ", 3, 2, 1, ceil_mode=True, count_include_pad=False",
                   ", 2, divisor_override=3"))  # fmt: skip
op("torch.nn.functional.avg_pool1d({a}{options})", a=tensor(rank=(2, 3)), options=options(", 2", ", 3, 2, 1, True"))
op("torch.nn.functional.adaptive_avg_pool2d({a}, {size})", a=tensor(rank=(3, 4)),
   size=options("1", "2", "(3, 2)", "(None, 1)"))  # fmt: skip
op("torch.nn.functional.adaptive_max_pool2d({a}, {size})", a=tensor(rank=(3, 4)), smooth=False,
   size=options("1", "2", "(3, 2)"))  # fmt: skip
op("torch.nn.functional.adaptive_avg_pool1d({a}, {size})", a=tensor(rank=(2, 3)), size=options("1", "3"))
op("torch.nn.functional.adaptive_max_pool1d({a}, {size})", a=tensor(rank=(2, 3)), smooth=False,
   size=options("1", "3"))  # fmt: skip
op("torch.nn.functional.max_unpool2d(*torch.nn.functional.max_pool2d({a}, 2, return_indices=True), 2)",
   a=tensor(rank=(3, 4)), smooth=False)  # fmt: skip
# resizing (issue 16), a template per mode family (the rank it needs); sizes and factors that fit any
# drawn shape (an empty input or output is PyTorch's error)
op("torch.nn.functional.interpolate({a}{options})", a=tensor(rank=3),
   options=options(", scale_factor=1.5", ", size=4, mode='linear'", ", size=3, mode='nearest-exact'",
                   ", scale_factor=0.6, mode='linear', align_corners=True", ", size=2, mode='area'"))  # fmt: skip
op("torch.nn.functional.interpolate({a}, mode='nearest'{options})", a=tensor(rank=(4, 5)),
   options=options(", scale_factor=2", ", size=3", ", scale_factor=0.7"))  # fmt: skip
op("torch.nn.functional.interpolate({a}, mode='bilinear'{options})", a=tensor(rank=4),
   options=options(", scale_factor=(1.5, 0.7)", ", size=(3, 2), align_corners=True", ", scale_factor=2"))  # fmt: skip
op("torch.nn.functional.interpolate({a}, mode='bicubic'{options})", a=tensor(rank=4),
   options=options(", scale_factor=(1.5, 0.7)", ", size=(3, 2), align_corners=True",
                   ", scale_factor=0.5, antialias=True",
                   ", size=(1, 2), antialias=True, align_corners=True"))  # fmt: skip
op("torch.nn.functional.interpolate({a}, mode='bilinear', antialias=True{options})", a=tensor(rank=4),
   options=options(", scale_factor=0.4", ", size=(3, 2), align_corners=True", ", scale_factor=(2.5, 0.6)"))  # fmt: skip
op("torch.nn.functional.interpolate({a}, mode='trilinear'{options})", a=tensor(rank=5),
   options=options(", size=(2, 3, 2)", ", scale_factor=1.5, align_corners=True"))  # fmt: skip
# spatial transformers (issue 16): a grid made from the input itself (the gradient reaches both), theta
# cut from a rank-3 tensor; kinks at whole source coordinates (the grid draws quarters): not smooth
op("torch.nn.functional.grid_sample({a}, {a}[:, 0, :, :2].unsqueeze(1).tanh() * 1.2{options})", a=tensor(rank=4),
   smooth=False,
   options=options(", align_corners=False", ", mode='nearest', align_corners=True",
                   ", mode='bicubic', padding_mode='reflection', align_corners=False",
                   ", padding_mode='border', align_corners=True"))  # fmt: skip
op("torch.nn.functional.affine_grid({a}[:, :2, :3], ({a}.shape[0], 1, 3, 2), align_corners={corners})",
   a=tensor(rank=3), corners=options("False", "True"))  # fmt: skip
# the fused normalizations (issue 16); per-channel vectors drawn from the input's first value of each
# channel (so they exist whenever the input has values) or its detached statistics (running stats)
_CHANNELS = "{a}.transpose(0, 1).flatten(1)"
op(f"torch.nn.functional.batch_norm({{a}}, None, None, {_CHANNELS}[:, 0], {_CHANNELS}[:, -1], training=True)",
   a=tensor(min_rank=2))  # fmt: skip
op(f"torch.nn.functional.batch_norm({{a}}, {_CHANNELS}.detach().mean(1), {_CHANNELS}.detach().var(1) + 1, "
   f"{_CHANNELS}[:, 0])", a=tensor(min_rank=2))  # fmt: skip
op(f"torch.nn.functional.group_norm({{a}}, 1, {_CHANNELS}[:, 0])", a=tensor(min_rank=2))
# (not a bias without a weight: PyTorch's backward of that raises "tensor does not have a device")
op(f"torch.nn.functional.group_norm({{a}}, 1, {_CHANNELS}[:, 0], {_CHANNELS}[:, -1], eps=1e-3)", a=tensor(min_rank=2))
op("torch.nn.functional.instance_norm({a})", a=tensor(min_rank=3))


# the recurrent layers and cells (issue 17: fastgrad's fused op) over the drawn input, unbatched
# (rank 2, a cell's rank 1) or batched; weights evenly spread in [-0.6, 0.6], the same on both sides
# (no braces: the template is formatted twice)
_WEIGHTS = (
    "dict((k, torch.linspace(-0.6, 0.6, v.flatten().shape[0], dtype=torch.float64).reshape(v.shape)) "
    "for k, v in m.state_dict().items())"
)
for _layer in ("LSTM({f}, 3, bidirectional=True)", "GRU({f}, 2, num_layers=2)", "RNN({f}, 3, nonlinearity='relu')",
               "LSTMCell({f}, 2)", "GRUCell({f}, 3)"):  # fmt: skip
    _cell = "Cell" in _layer
    op(f"(lambda m: m.load_state_dict({_WEIGHTS}) and m({{a}}){'' if _cell and 'LSTM' not in _layer else '[0]'})"
       f"(torch.nn.{_layer.format(f='{a}.shape[-1]')}.to({{a}}.dtype))",
       a=tensor(rank=(1, 2) if _cell else (2, 3)), smooth=not _layer.startswith("RNN("))  # fmt: skip


# scatter/gather/index family (issue 13): sources drawn by gather/index_select have the index's shape
for _t in [
    "{a}.gather({d}, {i})",
    "torch.scatter({a}, {d}, {i}, {a}.gather({d}, {i}) * 2)",
    "{a}.scatter({d}, {i}, 1.5)",
    "torch.scatter_add({a}, {d}, {i}, {a}.gather({d}, {i}))",
]:
    op(_t, a=tensor(), d=dim("a", wrong=False), i=along_index("a", "d"))
# (sources not read from the target: PyTorch's gather saves its input, which the write would change)
for _t in ["{a}.scatter_({d}, {i}, 2.5)", "{a}.scatter_add_({d}, {i}, torch.ones({i}.shape, dtype={a}.dtype))"]:
    op(_t, statement=True, a=tensor(target=True), d=dim("a", wrong=False), i=along_index("a", "d"))
for _t in [
    "torch.index_select({a}, {d}, {p})",
    "{a}.index_add({d}, {p}, {a}.index_select({d}, {p}), alpha=2)",
    "torch.index_copy({a}, {d}, {p}[:1], {a}.index_select({d}, {p}[:1]) * 3)",
    "{a}.index_fill({d}, {p}, -1.5)",
]:
    op(_t, a=tensor(), d=dim("a", wrong=False), p=positions_along("a", "d"))
for _t in [
    "{a}.index_add_({d}, {p}, {a}.index_select({d}, {p}))",
    "{a}.index_copy_({d}, {p}[:1], {a}.index_select({d}, {p}[:1]) * 2)",
    "{a}.index_fill_({d}, {p}, torch.tensor(0.5, dtype={a}.dtype))",
]:
    op(_t, statement=True, a=tensor(target=True), d=dim("a", wrong=False), p=positions_along("a", "d"))
for _t in [
    "torch.masked_select({a}, {a} > 0)",
    "torch.nonzero({a})",
    "{a}.argwhere()",
    "{a}.take(torch.tensor([0, -1]))",
]:
    op(_t, a=tensor())
op("{a}.take_along_dim({a}.argsort(dim={d}, stable=True), {d})", a=tensor(), d=dim("a", wrong=False))
op("torch.take_along_dim({a}, {a}.argsort(dim=0, stable=True))", a=tensor(min_rank=1))  # ties: one order
op("{a}.index_put(({p},), {a}.index_select(0, {p}) * 2, accumulate=True)", a=tensor(), p=positions_along("a"))
op("{a}.index_put_(({p},), torch.tensor(-0.5, dtype={a}.dtype))", statement=True, a=tensor(target=True),
   p=positions_along("a"))  # fmt: skip

# scatter family (issue 13): scatter_reduce, put, masked_scatter
_REDUCE = options("'sum'", "'prod'", "'mean'", "'amax'", "'amin'")
for _t in [
    "torch.scatter_reduce({a}, {d}, {i}, {a}.gather({d}, {i}) * 2, {r})",
    "{a}.scatter_reduce({d}, {i}, {a}.gather({d}, {i}) - 1, {r}, include_self=False)",
]:
    op(_t, a=tensor(), d=dim("a", wrong=False), i=along_index("a", "d"), r=_REDUCE)
for _t in [
    "{a}.put(torch.tensor([0, -1]), {a}.reshape(-1)[:1].expand(2) * 2, accumulate=True)",
    "torch.masked_scatter({a}, {a} > 0, {a} * 3)",
]:
    op(_t, a=tensor())
op("{a}.put_(torch.tensor([-1]), torch.tensor([0.5], dtype={a}.dtype))", statement=True, a=tensor(target=True))
op("{a}.masked_scatter_({a} < 0, torch.ones_like({a}))", statement=True, a=tensor(target=True))
op("{a}.scatter_reduce_({d}, {i}, torch.full({i}.shape, 1.5, dtype={a}.dtype), {r})", statement=True,
   a=tensor(target=True), d=dim("a", wrong=False), i=along_index("a", "d"), r=_REDUCE)  # fmt: skip

# binary/ternary elementwise ops of issue 13 (ties of an input and its bound: no derivative there)
op("torch.clamp_min({a}, {s})", a=tensor(NUM), s=scalar())
op("{a}.clamp_max({s})", a=tensor(NUM), s=scalar())
op("torch.clamp_min({a}, {b})", a=tensor(), b=partner("a"), smooth=False)
op("{a}.clamp_max({b})", a=tensor(), b=partner("a"), smooth=False)
op("{a}.clamp_min_({s})", statement=True, a=tensor(target=True), s=options("-0.5", "0.5"))
op("torch.clamp_max_({a}, {s})", statement=True, a=tensor(target=True), s=options("-0.5", "0.5"))
op("torch.lerp({a}, {b}, {w})", a=tensor(), b=partner("a"), w=options("0.25", "0.75", "-1.5"))
op("{a}.lerp({b}, {c})", a=tensor(), b=partner("a"), c=partner("a"))
op("torch.addcmul({a}, {b}, {c}, value={w})", a=tensor(), b=partner("a"), c=partner("a"), w=options("1", "-0.5"))
op("{a}.addcdiv({b}, {b}.exp() + 1, value=2)", a=tensor(), b=partner("a"))
op("{a}.lerp_({b}, 0.25)", statement=True, a=tensor(target=True), b=partner("a"))
op("{a}.addcmul_({b}, {b})", statement=True, a=tensor(target=True), b=partner("a"))
op("{a}.addcdiv_({b}, {b}.exp() + 1)", statement=True, a=tensor(target=True), b=partner("a"))
for _t in [
    "torch.atan2({a}, {b})",
    "{a}.arctan2({b})",
    "torch.logaddexp({a}, {b})",
    "{a}.logaddexp2({b})",
    "{a}.hypot({b})",
]:
    op(_t, a=tensor(), b=partner("a"))
op("torch.true_divide({a}, {b}.exp())", a=tensor(NUM), b=partner("a"))
op("torch.divide({a}, {b}.exp())", a=tensor(NUM), b=partner("a"))
op("{a}.multiply({b})", a=tensor(NUM), b=partner("a"))
op("torch.subtract({a}, {b}, alpha=2)", a=tensor(NUM), b=partner("a"))
# alpha that rounds: one rounding (a fused multiply-add), as PyTorch's loops
op("torch.add({a}, {b}, alpha={w})", a=tensor(NUM), b=partner("a"), w=options("0.3", "-1.7"))
op("{a}.sub(0.7, alpha=0.3)", a=tensor(NUM))
op("{a}.add_({b}, alpha=-0.1)", statement=True, a=tensor(target=True), b=partner("a"))

# elementwise ops and in-place forms of issue 13 (ewise): sign changes and clamps have no derivative there
op("torch.xlogy({a}, {b}.abs() + 0.5)", a=tensor(NUM), b=partner("a"))
op("{a}.xlogy({s})", a=tensor(NUM), s=options("2.5", "0.5"))
op("torch.xlogy(2, {a}.abs() + 0.5)", a=tensor())
op("torch.copysign({a}, {b})", a=tensor(NUM), b=partner("a"), smooth=False)
op("{a}.copysign(-1.5)", a=tensor(NUM), smooth=False)
op("torch.heaviside({a}.detach(), {b}.detach())", a=tensor(ANY), b=partner("a"))
op("{a}.sigmoid().logit()", a=tensor())
op("torch.logit({a}, eps=0.25)", a=tensor(), smooth=False)
op("torch.float_power({a}.abs() + 0.5, {b})", a=tensor(NUM), b=partner("a"))
op("{a}.float_power({s})", a=tensor(NUM), s=options("2", "0.5", "-1"))
op("torch.tan({a})", a=tensor())
op("{a} << {s}", a=tensor(NUM), s=options("1", "3", "70", "-1"))
op("torch.bitwise_right_shift({a}, {b})", a=tensor(NUM), b=partner("a"))
op("{a}.bitwise_left_shift({b})", a=tensor(NUM), b=partner("a"))
for _t in [
    "{a}.xlogy_({b}.abs() + 0.5)",
    "{a}.copysign_({b})",
    "{a}.heaviside_({b}.detach())",
    "{a}.atan2_({b})",
    "{a}.arctan2_({b})",
    "{a}.hypot_({b})",
    "{a}.true_divide_({b}.exp())",
    "{a}.divide_({b}.exp())",
    "{a}.multiply_({b})",
    "{a}.subtract_({b})",
    "{a}.absolute_()",
    "{a}.logical_and_({b})",
    "{a}.logical_or_({b})",
    "{a}.logical_xor_({b})",
    "{a}.eq_({b})",
    "{a}.ne_({b})",
    "{a}.lt_({b})",
    "{a}.le_({b})",
    "{a}.gt_({b})",
    "{a}.ge_({b})",
    "{a}.greater_({b})",
    "{a}.greater_equal_({b})",
    "{a}.less_({b})",
    "{a}.less_equal_({b})",
    "{a}.not_equal_({b})",
    "{a}.float_power_({b})",
    "{a}.bitwise_left_shift_({b})",
    "{a}.bitwise_right_shift_({b})",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), b=partner("a"), smooth=False)
for _t in [
    "{a}.logit_(0.25)",
    "{a}.tan_()",
    "{a}.logical_not_()",
    "{a}.xlogy_(2.5)",
    "{a}.lt_(0.5)",
    "{a} <<= 2",
    "{a} >>= 1",
    "{a}.div_(2, rounding_mode='floor')",
]:
    op(_t, statement=True, a=tensor(NUM, target=True), smooth=False)

# Ops of the op table (fastgrad._optable) that no template calls, by name or by operator, and why
# (tests/test_optable.py checks that every other op is in the grammar).
# small math of session 19, second part
op("torch.rsub({a}, {b}{alpha})", a=tensor(NUM), b=partner("a"), alpha=options("", ", alpha=2"))
op("torch.rsub({a}, {s})", a=tensor(NUM), s=scalar())
op("torch.trapezoid({a}{args})", a=tensor(NUM), args=options("", ", dx=0.5", ", dim=0"))
op("torch.trapz({a}, torch.arange(float({a}.shape[-1])) ** 2)", a=tensor(NUM, rank=(1, 3)))
op("torch.cumulative_trapezoid({a}{args})", a=tensor(NUM), args=options("", ", dx=2", ", dim=0"))

NOT_IN_GRAMMAR = {
    **dict.fromkeys(
        ["split_with_sizes", "hsplit", "vsplit", "dsplit"],
        "tensor_split and split with sizes, which the grammar calls: tests/test_small_math.py",
    ),
    **dict.fromkeys(["isin", "is_same_size", "is_inference"], "no gradient: tests/test_small_math.py"),
    "unravel_index": "integer results: tests/test_small_math.py",
    "detach_": "detaches its tensor from the program's graph, which the programs' gradient checks then miss; "
    "compared with PyTorch in tests/test_inplace_torch.py",
    **dict.fromkeys(
        ["addr", "addbmm", "chain_matmul", "cross", "cdist", "det", "logdet", "slogdet", "inverse", "cholesky", "svd"]
        + ["qr", "pinverse"],
        "linear algebra: operands of related shapes (length-3 dims, square or positive-definite matrices) that the "
        "drawers do not make yet: tests/test_linalg.py",
    ),
    "view_as": "its shape comes from another tensor of as many elements: view and reshape draw the shapes",
    "reshape_as": "its shape comes from another tensor of as many elements: view and reshape draw the shapes",
    **dict.fromkeys(
        ["equal", "allclose", "is_floating_point", "is_complex", "is_nonzero", "is_tensor", "numel", "register_hook"]
        + ["register_post_accumulate_grad_hook"]
        + ["is_signed"],
        "not a tensor result",
    ),
    **dict.fromkeys(
        ["multinomial", "bernoulli", "poisson", "uniform_", "normal_", "bernoulli_", "exponential_", "geometric_"]
        + ["log_normal_", "cauchy_", "random_"],
        "random: compared with PyTorch's draws bit for bit in tests/test_random_streams.py",
    ),
    **dict.fromkeys(
        ["new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"],
        "creation from sizes and values, not from a tensor's values: tests/test_creation.py",
    ),
    **dict.fromkeys(
        ["sgn", "sgn_"],
        "PyTorch's sgn gradient of a real tensor is a ZeroTensor, which stays zero through later formulas that give "
        "NaN for a plain zero (0 / 0 in log's backward), and sgn_ saves its result: tests/test_rounding.py",
    ),
    # shape family (issue 13)
    "broadcast_shapes": "not a tensor result: tests/test_shape_ops.py",
    **dict.fromkeys(["tril_indices", "triu_indices"], "creation from sizes: tests/test_shape_ops.py"),
    "signbit": "it shows the sign bit of NaNs, which differs between the reference (Python's math gives +NaN) and "
    "the core (x86 gives -NaN for an invalid operation, as PyTorch's): tests/test_math.py",
    **dict.fromkeys(
        ["asinh_", "acosh_", "atanh_", "arcsinh_", "arccosh_", "arctanh_"],
        "backward raises, as PyTorch's (no derivative); PyTorch raises a floor_divide's NotImplemented first "
        "(its sequence number is the largest), which fastgrad's tape does not model: tests/test_math.py",
    ),
}


# What the census counts (FASTGRAD_FUZZ_CENSUS in test_fuzz_programs.py): the constructs that fuzzers
# without them let bugs through, each recognised by the templates that make it.
CONSTRUCTS = {
    "numpy operand on the left": lambda t: t.startswith("torch.as_tensor({n} "),
    "numpy operand on the right": lambda t: re.fullmatch(r"\{a\} \S+ \{n\}", t) is not None,
    "augmented assignment": lambda t: re.search(r" \S*= ", t) is not None,
    "retain_grad": lambda t: t.endswith(".retain_grad()"),
    "view made under no_grad": lambda t: t.startswith("with torch.no_grad():"),
    ".data read or written": lambda t: ".data" in t,
    "requires_grad_": lambda t: ".requires_grad_(" in t,
    "as_tensor of a tensor": lambda t: t.startswith("torch.as_tensor({a}"),
    "nn.functional": lambda t: t.startswith("torch.nn.functional.") or "torch.nn.functional." in t,
}


def constructs(program):
    """The CONSTRUCTS a program uses, and "retain_grad, then an in-place write" when one follows."""
    found = {name for op_ in program.ops for name, makes in CONSTRUCTS.items() if makes(op_.template)}
    retained = [k for k, op_ in enumerate(program.ops) if op_.template.endswith(".retain_grad()")]
    if retained and any(op_.statement and "retain_grad" not in op_.template for op_ in program.ops[retained[0] :]):
        found.add("retain_grad, then an in-place write")
    return found
