"""Every op of the op table (tests/op_cases.py) compiles: a compiled call of it, with its backward
pass, is captured (no fallback to eager) and its replay gives the eager call's bits. An op whose
binding does not go through call_op (csrc/python/capture.h) falls back and fails here, unless it is
among the cases compile does not capture yet (docs/compile.md), which must still fall back."""

import warnings

import numpy as np

import fastgrad
from op_cases import CASES
from op_helpers import make_arrays

# The cases compile does not capture yet (docs/compile.md, "What makes a function run eagerly"), by
# the reason their calls fall back: these must fall back, every other case must be captured.
NOT_CAPTURED_YET = {
    # host reads in their Python form (quantiles)
    "quantile(q tensor,keepdim)",
    "torch.nanquantile(x,q,0,midpoint)",
    # boolean masks (a selection's shape depends on the values)
    "masked_select(x>0)",
    "torch.masked_select broadcast",
    "masked_scatter broadcast",
    # ops computed through numpy (linear algebra, cross, ...): host reads
    "torch.quantile(x,0.3,dim=1)",
    "torch.repeat_interleave(x,tensor,0)",
    "linalg.matrix_norm('nuc')",
    "torch.norm('nuc',dim,keepdim)",
    "torch.cross",
    "linalg.cross broadcast",
    "linalg.matrix_norm(2) batched",
    "linalg.inv batched",
    "Tensor.inverse",
    "linalg.det batched",
    "Tensor.det",
    "torch.logdet",
    "torch.slogdet",
    "linalg.solve",
    "linalg.cholesky",
    "Tensor.cholesky(upper)",
    "linalg.eigvalsh",
    "torch.svd().S",
    "Tensor.svd() u1 v1^T",
    "linalg.inv of size 0",
    "linalg.solve vector",
    "linalg.solve(left=False)",
    "linalg.qr Q@R",
    "Tensor.qr wide",
    "linalg.pinv",
    "Tensor.pinverse batched",
}


def leaves(case):
    arrays = make_arrays(case.shapes, case.domain, np.float32, case.name)
    return [fastgrad.tensor(a, requires_grad=True) for a in arrays]


def step_of(case):
    def step(*xs):
        out = case.fn(fastgrad, *xs)
        if out.requires_grad:
            out.sum().backward()
        return out

    return step


def bits(t):
    return None if t is None else t.detach().numpy().tobytes()


def test_every_op_case_is_captured_and_replays_the_eager_bits():
    fell_back, differ = {}, []
    for case in CASES:
        step = step_of(case)
        eager_leaves, compiled_leaves = leaves(case), leaves(case)
        compiled = fastgrad.compile(step)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fallback's warning: collected below instead
            for _ in range(3):  # the capture, the first replay (it makes the memory plan), a planned replay
                expected, got = step(*eager_leaves), compiled(*compiled_leaves)
                if bits(got) != bits(expected):
                    differ.append(case.name)
        if compiled.eager_reason is not None:
            fell_back[case.name] = compiled.eager_reason[0]
        elif [bits(x.grad) for x in compiled_leaves] != [bits(x.grad) for x in eager_leaves]:
            differ.append(case.name)
    assert differ == []
    assert {name: why for name, why in fell_back.items() if name not in NOT_CAPTURED_YET} == {}
    assert NOT_CAPTURED_YET - set(fell_back) == set(), "captured now: remove them from NOT_CAPTURED_YET"
