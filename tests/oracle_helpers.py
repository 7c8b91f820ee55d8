"""Running one program on the library under test and on PyTorch, and comparing the outcomes."""

import pytest


def plain(value):
    """Tensors as (values, dtype name, requires_grad), recursively, so results of two libraries compare."""
    if isinstance(value, (tuple, list)):
        return type(value)(plain(v) for v in value)
    if hasattr(value, "tolist") and hasattr(value, "requires_grad"):
        return value.tolist(), str(value.dtype).rsplit(".", 1)[-1], value.requires_grad
    return value


def assert_same(ours, theirs, path="result"):
    """Equal structure and values; floats equal to float32 rounding (summation orders differ)."""
    if isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-7), path
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), f"{path}: {ours!r} != {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs, path


def same_on_both(fg, torch, program):
    """Runs program(lib) on fastgrad and on PyTorch; the plain results must agree."""
    ours, theirs = plain(program(fg)), plain(program(torch))
    assert_same(ours, theirs)
    return ours


def error_of(program, lib):
    with pytest.raises(Exception) as info:
        program(lib)
    return info.value


def same_error(fg, torch, program):
    """program(lib) fails the same way on both: exception type and message (PyTorch's may add a hint)."""
    ours, theirs = error_of(program, fg), error_of(program, torch)
    assert type(ours) is type(theirs)
    message = str(ours).replace("fastgrad.", "torch.")
    assert str(theirs).startswith(message), f"{message!r} is not the start of {str(theirs)!r}"
    return ours


def doubling_function(lib, result):
    """A custom Function over `lib` whose forward returns its first argument times 2 and whose
    backward returns `result(lib, grad)` (right or wrong: the tests check what the engine makes of it)."""

    class Custom(lib.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            return args[0] * 2

        @staticmethod
        def backward(ctx, grad):
            return result(lib, grad)

    return Custom


def mul_sin_function(lib, wrong=False, decorate=lambda backward: backward):
    """A custom Function over `lib`: x * sin(y) for two tensors, saving both. `wrong` gives a backward
    with a wrong formula; `decorate` wraps the backward (as once_differentiable does)."""

    class MulSin(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y.sin()

        @staticmethod
        @decorate
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y.sin(), grad * x * (y.sin() if wrong else y.cos())

    return MulSin
