"""fastgrad.autograd.Function: custom differentiable operations, checked against PyTorch.

Each Function is built by a factory over the library under test (`fg`, or `torch` as the oracle),
so the same program runs on both and its values, gradients, node names and errors are compared.
"""

import gc
import json
import re
import textwrap
import weakref

import pytest

from oracle_helpers import doubling_function, mul_sin_function, same_error, same_on_both
from semantics_helpers import graph_names, run_python


# ---- Functions used below, over a library `lib`


def exp_function(lib, log=None):
    """y = exp(x) * k for a tensor x and a number k; saves its output."""

    class MyExp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            if log is not None:
                log.append(("forward", lib.is_grad_enabled(), ctx.needs_input_grad))
            y = x.exp() * k
            ctx.save_for_backward(y)
            ctx.k = k
            return y

        @staticmethod
        def backward(ctx, grad):
            if log is not None:
                log.append(("backward", lib.is_grad_enabled(), ctx.k))
            (y,) = ctx.saved_tensors
            return grad * y, None

    return MyExp


# ---- values, gradients, names


def test_forward_backward_values_name_and_modes_match_torch(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = exp_function(lib, log).apply(x, 3)
        (y * y).sum().backward()
        return y, x.grad, y.grad_fn.name(), graph_names(y.grad_fn), y.is_leaf, log

    result = same_on_both(fg, torch, program)
    assert result[2] == "MyExpBackward"
    assert result[5] == [("forward", False, (True, False)), ("backward", False, 3)]


def test_function_between_builtin_ops_runs_in_tape_order(fg, torch):
    def program(lib):
        MulSin, MyExp = mul_sin_function(lib), exp_function(lib)
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = lib.tensor([1.5, 0.5, -0.25], requires_grad=True)
        h = x * w  # builtin before
        a = MulSin.apply(h, x)  # custom on a non-leaf and a leaf
        b = MyExp.apply(a, 2) + h  # custom on a custom output, then builtin again
        out = (b * a).sum()  # a fans out to two consumers
        out.backward()
        names = [graph_names(a.grad_fn), graph_names(b.grad_fn.next_functions[0][0])]
        return out, x.grad, w.grad, names

    result = same_on_both(fg, torch, program)
    assert result[3] == [["MulBackward0", "AccumulateGrad"], ["MulSinBackward"]]


def test_gradcheck_float64(fg):
    MulSin = mul_sin_function(fg)
    x = fg.tensor([[0.3, -1.2], [2.0, 0.7]], dtype=fg.float64, requires_grad=True)
    y = fg.tensor([[1.1, 0.4], [-0.9, 2.5]], dtype=fg.float64, requires_grad=True)
    assert fg.autograd.gradcheck(MulSin.apply, (x, y))
    Wrong = mul_sin_function(fg, wrong=True)
    assert fg.autograd.gradcheck(Wrong.apply, (x, y), raise_exception=False) is False


def test_grad_fn_identity_and_next_functions(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = exp_function(fg).apply(x * 2, 1)
    assert y.grad_fn is y.grad_fn
    ((mul_node, nr),) = y.grad_fn.next_functions
    assert nr == 0 and mul_node.name() == "MulBackward0"
    assert mul_node.next_functions[0][0].variable is x


def test_multiple_outputs_non_tensor_outputs_and_zero_gradients(fg, torch):
    def program(lib):
        seen = []

        class Split(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, "tag", x * 3

            @staticmethod
            def backward(ctx, g0, g1, g2):
                seen.append((g0, g1, g2))
                return g0 * 2 + g2 * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, tag, b = Split.apply(x)
        a.sum().backward()  # b receives no gradient: zeros; the string output: None
        return tag, a.output_nr, b.output_nr, a.grad_fn is b.grad_fn, x.grad, seen

    result = same_on_both(fg, torch, program)
    assert result[1:4] == (0, 2, True)


def test_set_materialize_grads_false_passes_none(fg, torch):
    def program(lib):
        seen = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x.clone(), x.clone()

            @staticmethod
            def backward(ctx, g0, g1):
                seen.append(g1)
                return g0

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Two.apply(x)
        a.sum().backward()
        return x.grad, seen

    assert same_on_both(fg, torch, program)[1] == [None]


def test_mark_non_differentiable_and_integer_outputs(fg, torch):
    def program(lib):
        seen = []

        class MaxWithIndex(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                scaled = x * 10
                ctx.mark_non_differentiable(scaled)
                return x.max(), x.argmax(), scaled  # the int64 index is never differentiable

            @staticmethod
            def backward(ctx, g_max, g_index, g_scaled):
                seen.append((g_index, g_scaled))
                return lib.ones(3) * g_max

        x = lib.tensor([1.0, 5.0, 2.0], requires_grad=True)
        value, index, scaled = MaxWithIndex.apply(x)
        flags = [(t.requires_grad, t.grad_fn is None, t.is_leaf) for t in (value, index, scaled)]
        value.backward()
        return flags, x.grad, seen

    result = same_on_both(fg, torch, program)
    assert result[0] == [(True, False, False), (False, True, True), (False, True, True)]


def test_needs_input_grad_and_ctx_attributes(fg, torch):
    def program(lib):
        seen = []

        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, w, factor):
                seen.append(ctx.needs_input_grad)
                ctx.factor = factor
                ctx.note = {"calls": 1}
                return x * w * factor

            @staticmethod
            def backward(ctx, grad):
                seen.append((ctx.factor, ctx.note, ctx.needs_input_grad))
                return grad * ctx.factor, None, None

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0])
        Scale.apply(x, w, 5).sum().backward()
        with lib.no_grad():
            Scale.apply(x, w, 5)
        Scale.apply(w, w, 5)
        return x.grad, seen

    result = same_on_both(fg, torch, program)
    assert result[1] == [
        (True, False, False),
        (5, {"calls": 1}, (True, False, False)),
        (True, False, False),
        (False, False, False),
    ]


@pytest.mark.parametrize("case", ["no_grad", "no_input_requires_grad"])
def test_nothing_recorded_without_grad(fg, case):
    calls = []

    class Twice(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls.append("forward")
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            calls.append("backward")
            return grad * 2

    x = fg.tensor([1.0, 2.0], requires_grad=case == "no_grad")
    with fg.set_grad_enabled(case != "no_grad"):
        y = Twice.apply(x)
    assert y.tolist() == [2.0, 4.0]
    assert y.requires_grad is False and y.grad_fn is None and y.is_leaf
    assert calls == ["forward"]


def test_input_returned_as_is_gets_a_new_output(fg, torch):
    def program(lib):
        class Ident(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 10

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Ident.apply(x)
        facts = (y is x, x.is_leaf, x.grad_fn is None, y.is_leaf, y.grad_fn.name())
        y.sum().backward()
        return facts, x.grad

    assert same_on_both(fg, torch, program)[0] == (False, True, True, False, "IdentBackward")


def test_setup_context_style(fg, torch):
    def program(lib):
        class Power(lib.autograd.Function):
            @staticmethod
            def forward(x, exponent=3):
                return x**exponent

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, exponent = inputs
                ctx.save_for_backward(x)
                ctx.exponent = exponent

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * ctx.exponent * x ** (ctx.exponent - 1), None

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        Power.apply(x).sum().backward()
        return x.grad

    same_on_both(fg, torch, program)


def test_save_for_backward_none_and_non_tensor(fg, torch):
    def program(lib, bad=False):
        seen = []

        class Keep(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(None, x, 3) if bad else ctx.save_for_backward(None, x)
                return x * 1

            @staticmethod
            def backward(ctx, grad):
                seen.append(ctx.saved_tensors)
                return grad

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        Keep.apply(x).sum().backward()
        return seen

    same_on_both(fg, torch, program)
    error = same_error(fg, torch, lambda lib: program(lib, bad=True))
    assert str(error) == "save_for_backward can only save variables, but argument 2 is of type int"


# ---- saved tensors: version checks and release


def test_modified_saved_input_is_an_error(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 1
        y = mul_sin_function(lib).apply(h, x)
        h.mul_(2)
        y.sum().backward()

    error = same_error(fg, torch, program)
    assert re.search(
        r"\[\w+\.FloatTensor \[2\]\], which is output 0 of Mul, is at version 1; expected version 0", str(error)
    )


def test_modified_saved_output_is_an_error(fg, torch):
    def program(lib):
        class SaveSecond(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                a, b = x * 2, x * 3
                ctx.save_for_backward(b)
                return a, b

            @staticmethod
            def backward(ctx, ga, gb):
                (b,) = ctx.saved_tensors
                return ga * 2 + gb * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = SaveSecond.apply(x)
        b.add_(1)
        a.sum().backward()

    error = same_error(fg, torch, program)
    assert "which is output 1 of SaveSecond, is at version 1; expected version 0 instead." in str(error)


def test_saved_tensors_freed_after_backward_unless_retain_graph(fg, torch):
    def program(lib):
        MyExp = exp_function(lib)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = MyExp.apply(x, 1).sum()
        y.backward(retain_graph=True)
        y.backward()  # the saved output is still there
        y.backward()

    error = same_error(fg, torch, program)
    assert str(error).startswith("Trying to backward through the graph a second time")


def test_ctx_is_freed_with_its_graph(fg):
    refs = []

    class Keep(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            refs.append(weakref.ref(ctx))
            ctx.save_for_backward(x)
            y = x * 2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = Keep.apply(x)
    y.sum().backward()
    assert refs[0]() is not None  # the graph is alive while y is
    del y
    gc.collect()
    assert refs[0]() is None
    z = Keep.apply(x)
    del z  # dropped without backward
    gc.collect()
    assert refs[1]() is None


# ---- what backward returns


@pytest.mark.parametrize(
    "result",
    [
        lambda lib, g: g,  # one gradient for two arguments
        lambda lib, g: (g, g, g),  # three, the extra one not None
        lambda lib, g: [g, g],  # a list is one value, not a tuple of gradients
    ],
)
def test_wrong_number_of_gradients(fg, torch, result):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        doubling_function(lib, result).apply(x, x).sum().backward()

    error = same_error(fg, torch, program)
    assert re.fullmatch(
        r"function CustomBackward returned an incorrect number of gradients \(expected 2, got \d\)", str(error)
    )


def test_extra_none_gradients_are_allowed(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        doubling_function(lib, lambda lib, g: (g * 2, None, None)).apply(x).sum().backward()
        return x.grad

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "result,message",
    [
        (
            lambda lib, g: (g, g),
            "function CustomBackward returned a gradient different than None at position 2, but the "
            "corresponding forward input was not a Variable",
        ),
        (lambda lib, g: (3, None), "expected Variable or None (got int)"),
        (
            lambda lib, g: (lib.ones(3), None),
            "Function CustomBackward returned an invalid gradient at index 0 - got [3] "
            "but expected shape compatible with [2]",
        ),
        (
            lambda lib, g: (lib.ones(1), None),
            "Function CustomBackward returned an invalid gradient at index 0 - got [1] "
            "but expected shape compatible with [2]",
        ),
    ],
)
def test_invalid_gradients(fg, torch, result, message):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        doubling_function(lib, result).apply(x, 5).sum().backward()

    assert str(same_error(fg, torch, program)) == message


def test_gradients_are_summed_to_shape_and_converted_to_dtype(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        doubling_function(lib, lambda lib, g: lib.ones(3, 2, dtype=lib.float64)).apply(x).sum().backward()
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        doubling_function(lib, lambda lib, g: lib.tensor([2, 3])).apply(w).sum().backward()
        return x.grad, w.grad

    assert same_on_both(fg, torch, program) == (([3.0, 3.0], "float32", False), ([2.0, 3.0], "float32", False))


def test_none_gradient_and_node_reached_by_none_runs_on_zeros(fg, torch):
    def program(lib):
        seen = []

        Drop = doubling_function(lib, lambda lib, grad: None)

        class Pass(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                seen.append(grad)
                return grad

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        Drop.apply(Pass.apply(x)).sum().backward()
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        Drop.apply(w * 3).sum().backward()  # a builtin node reached by no gradient does not run
        return x.grad, w.grad, seen

    assert same_on_both(fg, torch, program)[1] is None


def test_exception_in_backward_propagates_unchanged(fg):
    class Boom(Exception):
        pass

    raised = Boom("from backward")

    def fail(lib, grad):
        raise raised

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (doubling_function(fg, fail).apply(x * 3) * 2).sum()
    with pytest.raises(Boom) as info:
        y.backward()
    assert info.value is raised
    assert x.grad is None
    # The failed pass left the graph usable: a builtin-only graph over the same leaf still works.
    (x * 4).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_missing_forward_or_backward(fg, torch):
    def no_backward(lib):
        class NoBackward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        NoBackward.apply(lib.ones(2, requires_grad=True)).sum().backward()

    def no_forward(lib):
        class NoForward(lib.autograd.Function):
            pass

        NoForward.apply(lib.ones(2, requires_grad=True))

    assert isinstance(same_error(fg, torch, no_backward), NotImplementedError)
    assert isinstance(same_error(fg, torch, no_forward), NotImplementedError)


# ---- a backward that runs a backward of its own


def test_reentrant_backward_over_shared_leaf(fg, torch):
    def program(lib):
        w = lib.tensor([0.5, -1.5], requires_grad=True)

        class Recompute(lib.autograd.Function):
            """As activation checkpointing: forward without a graph, backward recomputes with one."""

            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x * w).sin()

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                with lib.enable_grad():
                    x = x.detach().requires_grad_()
                    y = (x * w).sin()
                (gx,) = lib.autograd.grad(y, x, grad, retain_graph=True)
                y.backward(grad)  # accumulates into w.grad, whose AccumulateGrad the outer pass also uses
                return gx

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = (Recompute.apply(x * 2) * w).sum()
        out.backward()
        return x.grad, w.grad

    same_on_both(fg, torch, program)


def test_passes_in_threads_sharing_a_leaf(fg):
    """A custom backward gives up the GIL, so passes in other threads start while one is running;
    all of them add into the same leaf's .grad. In a fresh interpreter: a crash fails this test only."""
    result = run_python(
        textwrap.dedent(f"""
        import json, sys, threading, time
        import {fg.__name__} as lib

        w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)

        class Yielding(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                time.sleep(0)  # lets another thread take the GIL
                return grad * 2

        errors = []

        def steps():
            try:
                for _ in range(50):
                    x = lib.ones(3, requires_grad=True)
                    (Yielding.apply(x * w) * w).sum().backward()  # d/dw sum(2 w^2) = 4 w
            except Exception as error:
                errors.append(repr(error))

        sys.setswitchinterval(1e-6)
        threads = [threading.Thread(target=steps) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(dict(errors=errors, grad=w.grad.tolist())))
    """)
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"errors": [], "grad": [800.0, 1600.0, 2400.0]}


# ---- fastgrad's own: graph nodes are given back


def test_many_function_calls_leave_no_live_nodes(fg):
    if fg.__name__ != "fastgrad":
        pytest.skip("graph_stats() is fastgrad's own introspection")
    result = run_python(
        textwrap.dedent("""
        import gc, json
        import fastgrad
        from fastgrad._C import graph_stats

        class MulExp(fastgrad.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                y = (x * w).exp()
                ctx.save_for_backward(w, y)
                ctx.scale = 1.0
                return y

            @staticmethod
            def backward(ctx, grad):
                w, y = ctx.saved_tensors
                g = grad * y * ctx.scale
                return g * w, g * (y.log() / w)

        x = fastgrad.tensor([0.1, 0.2], requires_grad=True)
        w = fastgrad.tensor([1.0, 2.0], requires_grad=True)
        for i in range(10_000):
            y = MulExp.apply(x * 1.0, w)
            (y * 2).sum().backward(retain_graph=i % 2 == 0)
        del y
        gc.collect()
        after_loop = graph_stats()["live_nodes"]
        del x, w
        gc.collect()
        print(json.dumps(dict(after_loop=after_loop, final=graph_stats()["live_nodes"])))
    """)
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"after_loop": 0, "final": 0}


def test_once_differentiable_backward(fg, torch):
    def program(lib):
        MulSin = mul_sin_function(lib, decorate=lib.autograd.function.once_differentiable)
        x, y = lib.tensor([1.0, -3.0], requires_grad=True), lib.tensor([0.5, 2.0], requires_grad=True)
        MulSin.apply(x, y).sum().backward()
        return x.grad, y.grad

    same_on_both(fg, torch, program)
