"""Gradient hooks: Tensor.register_hook, register_post_accumulate_grad_hook, grad_fn.register_prehook
and grad_fn.register_hook, checked against PyTorch (what they see, what they replace, their order,
their errors) and for what PyTorch promises besides (removal, exceptions, garbage collection)."""

import gc
import threading
import weakref

import pytest

from oracle_helpers import doubling_function, same_error, same_on_both


def values(grads):
    """A tuple of gradients (None where none) as lists, so that a log compares across libraries."""
    return tuple(None if g is None else g.tolist() for g in grads)


def recorder(log, tag, result=None):
    """A hook of any kind that logs its tag (and what it was given) and returns `result`."""

    def hook(*args):
        log.append((tag, *(values(a) if isinstance(a, tuple) else a.tolist() if a is not None else None for a in args)))
        return result

    return hook


# ---- what a hook sees and replaces


def test_a_hook_that_doubles_the_gradient_doubles_the_leaf_grad(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        x.register_hook(lambda grad: grad * 2)
        (x * x).sum().backward()
        return x.grad

    assert same_on_both(fg, torch, program)[0] == [4.0, -8.0, 12.0]


def test_hooks_on_one_tensor_chain_in_registration_order(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda grad: grad + 1)
        x.register_hook(recorder(log, "second"))  # sees the first one's result; returns None: keeps it
        x.register_hook(lambda grad: grad * 10)
        (x * 3).sum().backward()
        return log, x.grad

    assert same_on_both(fg, torch, program) == ([("second", [4.0, 4.0])], ([40.0, 40.0], "float32", False))


def test_a_removed_hook_does_not_run(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        removed = x.register_hook(recorder(log, "removed", lib.zeros(2)))
        x.register_hook(recorder(log, "kept"))
        removed.remove()
        removed.remove()  # a second time does nothing
        with x.register_hook(recorder(log, "scoped")):
            pass
        y = x * 2
        y.register_hook(recorder(log, "on y")).remove()
        y.sum().backward()
        return log, x.grad

    assert same_on_both(fg, torch, program)[0] == [("kept", [2.0, 2.0])]


def test_a_non_leaf_hook_changes_what_flows_upstream_and_what_retain_grad_keeps(fg, torch):
    def program(lib, retain_first):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        if retain_first:
            y.retain_grad()
        y.register_hook(lambda grad: grad * 10)
        if not retain_first:
            y.retain_grad()
        (y * y).sum().backward()
        return y.grad, x.grad

    for retain_first in (True, False):  # PyTorch's retain_grad keeps the hooks' result either way
        result = same_on_both(fg, torch, lambda lib: program(lib, retain_first))
        assert result[0][0] == [40.0, 80.0] and result[1][0] == [80.0, 160.0]


def test_a_hook_on_the_output_and_on_a_leaf_that_is_the_output(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = (x * x).sum()
        out.register_hook(lambda grad: grad * 3)
        out.backward()
        leaf = lib.tensor([5.0], requires_grad=True)
        leaf.register_hook(lambda grad: grad - 1)
        leaf.backward(lib.tensor([2.0]))
        return x.grad, leaf.grad

    same_on_both(fg, torch, program)


def test_a_hook_registered_before_an_in_place_change_sees_the_former_values_gradient(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.register_hook(recorder(log, "before"))
        y.mul_(3)
        y.register_hook(recorder(log, "after"))
        (y * y).sum().backward()
        return log

    assert [tag for tag, _ in same_on_both(fg, torch, program)] == ["after", "before"]


def test_post_accumulate_grad_hook_sees_the_updated_grad(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda grad: grad * 2)
        x.register_post_accumulate_grad_hook(lambda t: log.append((t is x, t.grad.tolist())))
        for _ in range(2):
            (x * 3).sum().backward()
        return log

    assert same_on_both(fg, torch, program) == [(True, [6.0, 6.0]), (True, [12.0, 12.0])]


def test_node_hooks_receive_the_gradient_tuples(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        for y in (x * c, c * x, x * 2):  # no gradient for c, nor for the number: None
            y.grad_fn.register_prehook(recorder(log, "pre"))
            y.grad_fn.register_hook(recorder(log, "post"))
            y.sum().backward()
        return log

    same_on_both(fg, torch, program)


def test_node_hooks_may_replace_the_gradients(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0] * 5,))
        y.grad_fn.register_hook(recorder(log, "post sees the prehook's gradient"))
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] + 1, None))
        y.sum().backward()
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        z = w * 2
        z.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (None, None))  # takes the gradient away
        z.sum().backward()
        v = lib.tensor([1.0, 2.0], requires_grad=True)
        u = v * 2
        u.grad_fn.register_prehook(lambda grad_outputs: (None,))  # the node then gives none
        u.sum().backward()
        return log, x.grad, w.grad, v.grad

    assert same_on_both(fg, torch, program)[1:] == (([11.0, 11.0], "float32", False), None, None)


def two_outputs(lib):
    """A custom Function with two outputs (x * 2 and x * 3), so that one may get no gradient."""

    class TwoOutputs(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a * 2 + grad_b * 3

    return TwoOutputs


def test_hooks_of_a_node_output_that_gets_no_gradient_see_none(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = two_outputs(lib).apply(x)
        b.register_hook(recorder(log, "b"))
        a.register_hook(recorder(log, "a"))
        a.grad_fn.register_prehook(recorder(log, "pre"))
        a.grad_fn.register_hook(recorder(log, "post"))
        a.sum().backward()
        return log, x.grad

    assert same_on_both(fg, torch, program)[0][0] == ("b", None)


def test_hooks_of_a_node_that_no_gradient_reached_see_none(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.register_hook(recorder(log, "y"))
        y.grad_fn.register_prehook(recorder(log, "pre"))
        y.grad_fn.register_hook(recorder(log, "post"))
        x.register_hook(recorder(log, "x"))
        x.register_post_accumulate_grad_hook(recorder(log, "accumulated"))
        doubling_function(lib, lambda lib, grad: None).apply(y).sum().backward()
        return log, x.grad

    log, grad = same_on_both(fg, torch, program)
    assert log[0] == ("y", None) and log[-1] == ("accumulated", [1.0, 2.0]) and grad is None


# ---- order


def test_hooks_run_in_pytorchs_order_around_each_node(fg, torch):
    """Per node: its output tensors' hooks (for AccumulateGrad: its leaf's), then its pre-hooks, the
    node (an AccumulateGrad's post-accumulate hooks), then its post-hooks; nodes latest first."""

    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.register_hook(recorder(log, "y 1"))
        y.grad_fn.register_prehook(recorder(log, "y pre"))
        y.grad_fn.register_hook(recorder(log, "y post"))
        y.register_hook(recorder(log, "y 2"))
        y.retain_grad()
        x.register_hook(recorder(log, "x"))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("x accumulated", t.grad.tolist())))
        accumulate = y.grad_fn.next_functions[0][0]
        accumulate.register_prehook(recorder(log, "accumulate pre"))
        accumulate.register_hook(recorder(log, "accumulate post"))
        w = x * 3
        w.register_hook(recorder(log, "w"))
        z = (y + w).sum()
        z.register_hook(recorder(log, "z"))
        z.backward()
        return log

    tags = [entry[0] for entry in same_on_both(fg, torch, program)]
    assert tags == [
        "z",
        "w",
        "y 1",
        "y 2",
        "y pre",
        "y post",
        "x",
        "accumulate pre",
        "x accumulated",
        "accumulate post",
    ]


def test_hooks_of_a_nodes_outputs_run_output_by_output(fg, torch):
    """In the order of each output's first registration, as PyTorch keeps them."""

    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = two_outputs(lib).apply(x)
        b.register_hook(recorder(log, "b 1"))
        a.register_hook(recorder(log, "a"))
        b.register_hook(recorder(log, "b 2"))
        (a + b).sum().backward()
        return log

    assert [tag for tag, _ in same_on_both(fg, torch, program)] == ["b 1", "b 2", "a"]


def test_hooks_run_in_tape_order_with_fan_out(fg, torch):
    """A leaf's hooks run as soon as its last gradient has arrived (PyTorch runs AccumulateGrad first
    among the nodes ready), not after every other node."""

    def program(lib):
        log = []

        def tracked(name, t):
            t.register_hook(lambda grad: log.append((name, grad.tolist())))
            return t

        a, b, c, d = (tracked(name, lib.tensor([1.0, 2.0], requires_grad=True)) for name in "abcd")
        u = tracked("u", a * b)
        v = tracked("v", u * c)
        w = tracked("w", u + d)
        (v * w).sum().backward()
        return log

    assert [name for name, _ in same_on_both(fg, torch, program)] == ["w", "d", "v", "c", "u", "a", "b"]


# ---- autograd.grad


def test_tensor_hooks_fire_in_autograd_grad_and_post_accumulate_hooks_do_not(fg, torch):
    def program(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda grad: grad * 2)
        x.register_post_accumulate_grad_hook(recorder(log, "accumulated"))
        w = lib.tensor([1.0, 1.0], requires_grad=True)
        w.register_hook(recorder(log, "w, not asked for"))
        y = x * 2 * w
        y.register_hook(lambda grad: grad * 10)
        of_x = lib.autograd.grad(y.sum(), [x], retain_graph=True)
        of_y = lib.autograd.grad(y.sum(), [y], retain_graph=True)
        # y's node also runs (it leads to x): y's gradient is taken before its hooks, as in PyTorch
        of_both = lib.autograd.grad(y.sum(), [y, x])
        return of_x, of_y, of_both, log, x.grad

    result = same_on_both(fg, torch, program)
    assert result[0][0][0] == [40.0, 40.0] and result[2][0][0] == [1.0, 1.0] and result[3:] == ([], None)


# ---- errors


def test_registering_on_a_tensor_that_cannot_have_hooks(fg, torch):
    same_error(fg, torch, lambda lib: lib.tensor([1.0]).register_hook(lambda grad: grad))
    same_error(fg, torch, lambda lib: lib.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None))
    same_error(
        fg,
        torch,
        lambda lib: (lib.tensor([1.0], requires_grad=True) * 2).register_post_accumulate_grad_hook(lambda t: None),
    )


class CallableObject:  # a hook without __name__: PyTorch names it '<unknown>'
    def __call__(self, grad):
        return grad[:1]


@pytest.mark.parametrize(
    "register",
    [
        lambda lib, x, y: x.register_hook(lambda grad: lib.ones(3)),
        lambda lib, x, y: y.register_hook(lambda grad: lib.ones(3)),
        lambda lib, x, y: x.register_hook(CallableObject()),
        lambda lib, x, y: x.register_hook(lambda grad: lib.ones(2, dtype=lib.float64)),
        lambda lib, x, y: y.register_hook(lambda grad: 3),
        lambda lib, x, y: x.register_post_accumulate_grad_hook(lambda t: 1),
        lambda lib, x, y: x.register_post_accumulate_grad_hook(lambda t: lib.zeros(2)),
        lambda lib, x, y: y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (lib.ones(3),)),
        lambda lib, x, y: y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (lib.ones(2), lib.ones(2))),
        lambda lib, x, y: y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: 5),
        lambda lib, x, y: y.grad_fn.register_prehook(lambda grad_outputs: lib.ones(2)),
        lambda lib, x, y: y.grad_fn.register_prehook(lambda grad_outputs: (lib.ones(3),)),
        lambda lib, x, y: y.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0].long(),)),
    ],
    ids=[
        "leaf size",
        "non-leaf size",
        "unnamed",
        "dtype",
        "not a tensor",
        "post-accumulate int",
        "post-accumulate tensor",
        "post size",
        "post count",
        "post not a tuple",
        "pre not a tuple",
        "pre size",
        "pre dtype",
    ],
)
def test_a_hook_returning_the_wrong_thing(fg, torch, register):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        register(lib, x, y)
        y.sum().backward()

    same_error(fg, torch, program)


def test_replacing_a_missing_gradient(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * lib.tensor([3.0, 4.0])
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0], lib.ones(2)))
        y.sum().backward()

    same_error(fg, torch, program)


def test_an_exception_in_a_hook_propagates_and_the_engine_stays_usable(fg):
    class Boom(Exception):
        pass

    def explode(*args):
        raise Boom("from a hook")

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    for register in (
        lambda y: x.register_hook(explode),
        lambda y: y.register_hook(explode),
        lambda y: y.grad_fn.register_prehook(explode),
        lambda y: y.grad_fn.register_hook(explode),
        lambda y: x.register_post_accumulate_grad_hook(explode),
    ):
        y = x * 2
        handle = register(y)
        out = (y * y).sum()
        with pytest.raises(Boom, match="from a hook"):
            out.backward(retain_graph=True)
        handle.remove()
        x.grad = None
        out.backward()  # the same graph again, the hook gone
        assert x.grad.tolist() == [8.0, 16.0]
        x.grad = None
        (x * 3).sum().backward()  # and a new one
        assert x.grad.tolist() == [3.0, 3.0]
        x.grad = None


# ---- removal during backward, threads, lifetime (no PyTorch comparison)


def beyond_pytorch(fg, why):
    """Skips a check of a promise that PyTorch itself (FASTGRAD_TEST_BACKENDS=torch) does not keep."""
    if fg.__name__ == "torch":
        pytest.skip(why)


def test_a_hook_removed_while_backward_runs_never_runs(fg):
    beyond_pytorch(fg, "PyTorch still runs a hook that an earlier hook of the same tensor removed")
    log = []
    handles = {}
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2

    def first(grad):
        log.append("first")
        handles["second"].remove()
        handles["first"].remove()
        handles["x"].remove()
        handles["late"] = y.register_hook(lambda grad: log.append("registered during the pass"))

    handles["first"] = y.register_hook(first)
    handles["second"] = y.register_hook(lambda grad: log.append("second"))
    handles["x"] = x.register_hook(lambda grad: log.append("x"))
    y.sum().backward(retain_graph=True)
    assert log == ["first"]
    y.sum().backward()
    assert log == ["first", "registered during the pass"]


def test_backward_with_hooks_in_several_threads(fg):
    def work(results, i):
        x = fg.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda grad: grad * i)
        y = x * 3
        y.register_hook(lambda grad: grad + 1)
        for _ in range(20):
            x.grad = None
            (y * 1.0).sum().backward(retain_graph=True)
        results[i] = x.grad.tolist()

    results = {}
    threads = [threading.Thread(target=work, args=(results, i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: [6.0 * i, 6.0 * i] for i in range(4)}


def hook_cycles(lib):
    """Functions that each make a tensor whose hook refers back to it, returning a weak reference."""

    def leaf_hook():
        x = lib.tensor([1.0], requires_grad=True)
        x.register_hook(lambda grad: x)
        return weakref.ref(x)

    def post_accumulate_hook():
        x = lib.tensor([1.0], requires_grad=True)
        x.register_post_accumulate_grad_hook(lambda t: x)
        return weakref.ref(x)

    def non_leaf_hook():
        y = lib.tensor([1.0], requires_grad=True) * 2
        y.register_hook(lambda grad: y)
        return weakref.ref(y)

    def node_hook():
        y = lib.tensor([1.0], requires_grad=True) * 2
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: y)
        return weakref.ref(y)

    def handle_in_closure():
        x = lib.tensor([1.0], requires_grad=True)
        handles = [x.register_hook(lambda grad: (handles, x))]
        return weakref.ref(x)

    return [leaf_hook, post_accumulate_hook, non_leaf_hook, node_hook, handle_in_closure]


@pytest.mark.parametrize("case", range(5), ids=["leaf", "post accumulate", "non-leaf", "node", "handle"])
def test_a_hook_cycle_is_collected(fg, case):
    if case not in (0, 4):
        beyond_pytorch(fg, "PyTorch keeps this cycle")
    ref = hook_cycles(fg)[case]()
    gc.collect()
    assert ref() is None


def test_a_non_leaf_hook_outlives_the_tensors_python_object(fg):
    beyond_pytorch(fg, "PyTorch keeps the tensor alive after backward")

    def build(log):
        y = fg.tensor([1.0, 2.0], requires_grad=True) * 2
        y.register_hook(lambda grad: log.append(y.shape))
        return y.sum(), weakref.ref(y)

    log = []
    out, ref = build(log)
    gc.collect()
    assert ref() is not None  # the graph still holds the hook, which holds y
    out.backward()
    assert log == [(2,)]
    del out
    gc.collect()
    assert ref() is None
