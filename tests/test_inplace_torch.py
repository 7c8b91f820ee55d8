"""In-place semantics checked against PyTorch (issue 12): augmented assignment, retain_grad through
in-place ops, views made under no_grad, `.data`'s version counter, requires_grad_ on non-leaves."""
import operator

import pytest

from oracle_helpers import same_error, same_on_both


# ---- augmented assignment: in place (same object, views see the write), the leaf rule, dtypes

def _pow_in_place_program(call, exponent):
    def program(lib):
        t = lib.tensor([1, 2, 3])
        view, alias = t[:2], t
        result = call(t, exponent(lib))
        return result is alias, t, view

    return program


@pytest.mark.parametrize("call", [operator.ipow, lambda t, e: t.pow_(e)], ids=["**=", "pow_"])
@pytest.mark.parametrize("exponent", [lambda lib: 2, lambda lib: lib.tensor([2, 1, 0])], ids=["int", "tensor"])
def test_pow_in_place_writes_self(fg, torch, call, exponent):
    same_on_both(fg, torch, _pow_in_place_program(call, exponent))


@pytest.mark.parametrize("call", [operator.ipow, lambda t, e: t.pow_(e)], ids=["**=", "pow_"])
def test_pow_in_place_checks(fg, torch, call):
    def leaf(lib):
        call(lib.tensor([1.0, 2.0], requires_grad=True), 2)

    def int_to_float(lib):
        call(lib.tensor([1, 2]), 0.5)

    def broadcast(lib):
        call(lib.tensor([2.0, 3.0]), lib.ones(2, 2))

    for program in (leaf, int_to_float, broadcast):
        same_error(fg, torch, program)


@pytest.mark.parametrize("exponent", [lambda lib: 3.0, lambda lib: lib.tensor([2.0, 1.0, 3.0], requires_grad=True)],
                         ids=["number", "tensor"])
def test_pow_in_place_gradient(fg, torch, exponent):
    def program(lib):
        x, e = lib.tensor([1.0, 2.0, 3.0], requires_grad=True), exponent(lib)
        h = x * 1
        alias = h
        h **= e
        (alias * lib.tensor([1.0, -2.0, 0.5])).sum().backward()
        return h.grad_fn.name(), h, x.grad, e.grad if isinstance(e, lib.Tensor) else None

    same_on_both(fg, torch, program)


# ---- requires_grad_ on a non-leaf

def test_requires_grad_true_on_non_leaf_is_a_no_op(fg, torch):
    def program(lib):
        h = lib.tensor([1.0, 2.0], requires_grad=True) * 2
        return h.requires_grad_() is h, h.requires_grad_(True) is h, h.is_leaf, h.requires_grad

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("change", [lambda h: h.requires_grad_(False), lambda h: setattr(h, "requires_grad", False),
                                    lambda h: setattr(h, "requires_grad", True)], ids=["method", "False", "True"])
def test_requires_grad_change_on_non_leaf_raises(fg, torch, change):
    same_error(fg, torch, lambda lib: change(lib.tensor([1.0, 2.0], requires_grad=True) * 2))


def test_leaf_that_stops_requiring_grad_after_the_forward_gets_no_gradient(fg, torch):
    """Its AccumulateGrad is in the graph, but PyTorch's accumulates nothing into a leaf that no
    longer requires grad; the other leaves still get theirs. Found by the fuzzer."""
    def program(lib):
        x, y = lib.tensor([1.0, -2.0], requires_grad=True), lib.tensor(3.0, requires_grad=True)
        (x * y).sum().backward()
        x.requires_grad_(False)
        (x * y).sum().backward()  # x's first gradient stays as it was
        z = x * 1
        x.requires_grad_(True)
        loss = (x * y * 2).sum()
        x.requires_grad = False
        loss.backward()
        return x.grad, y.grad, z.requires_grad

    same_on_both(fg, torch, program)


# ---- retain_grad(): the gradient of the tensor's value after in-place writes, not of its old value

def _retained(write, weight=(1.0, -2.0, 0.5)):
    """h retains its grad, is written in place by write(lib, h), and is used with its new value."""
    def program(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 2
        h.retain_grad()
        used = write(lib, h)
        (used * used * lib.tensor(weight[:used.shape[0]])).sum().backward()
        return h.grad, x.grad, h.retains_grad

    return program


def _write_through_view(lib, h):
    h[:2].mul_(3)
    return h


@pytest.mark.parametrize("write", [
    lambda lib, h: h.mul_(3),
    lambda lib, h: h.masked_fill_(lib.tensor([True, False, False]), 5.0),
    lambda lib, h: h.clamp_(3.0, 5.0).add_(1),
    _write_through_view,
], ids=["mul_", "masked_fill_", "chain", "through_view"])
def test_retain_grad_follows_in_place_writes(fg, torch, write):
    same_on_both(fg, torch, _retained(write))


def test_retain_grad_of_view_follows_writes_to_its_base(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 2
        view = h[:2]
        view.retain_grad()
        h.mul_(3)
        (view * view).sum().backward()
        return view.grad, x.grad

    same_on_both(fg, torch, program)


# ---- a view made under no_grad, written in place with grad enabled: PyTorch refuses it

def _no_grad_view_of(lib, base):
    with lib.no_grad():
        return base[:2]


@pytest.mark.parametrize("write", [
    lambda lib, v: v.mul_(3),
    lambda lib, v: v.pow_(2),
    lambda lib, v: v.zero_(),
    lambda lib, v: v.copy_(lib.ones(2)),
], ids=["mul_", "pow_", "zero_", "copy_"])
@pytest.mark.parametrize("base", [
    lambda lib: lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 2,
    lambda lib: lib.tensor([1.0, 2.0, 3.0], requires_grad=True),
], ids=["non_leaf", "leaf"])
def test_in_place_on_view_made_under_no_grad_raises(fg, torch, write, base):
    same_error(fg, torch, lambda lib: write(lib, _no_grad_view_of(lib, base(lib))))


def test_in_place_on_view_made_under_no_grad_with_operand_requiring_grad_raises(fg, torch):
    same_error(fg, torch, lambda lib: _no_grad_view_of(lib, lib.zeros(3)).mul_(lib.ones(2, requires_grad=True)))


def test_in_place_on_view_made_under_no_grad_allowed_without_gradients(fg, torch):
    def program(lib):
        plain = lib.tensor([1.0, 2.0, 3.0])
        _no_grad_view_of(lib, plain).mul_(3)  # nothing requires grad
        h = lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 2
        view = _no_grad_view_of(lib, h)
        with lib.no_grad():
            view.mul_(3)  # both under no_grad
        return plain, h

    same_on_both(fg, torch, program)


# ---- .data: the same memory, its own version counter (detach() keeps sharing it)

def test_in_place_write_through_data_leaves_saved_tensors_valid(fg, torch):
    def program(lib):
        w = lib.tensor([-2.0, 0.5, 3.0], requires_grad=True)
        loss = (w * w).sum()
        data = w.data
        data.clamp_(-1.5, 1.5)
        loss.backward()
        return w, w.grad, w._version, data._version

    same_on_both(fg, torch, program)


def test_in_place_write_through_detach_invalidates_saved_tensors(fg, torch):
    def program(lib):
        w = lib.tensor([-2.0, 0.5, 3.0], requires_grad=True)
        loss = (w * w).sum()
        w.detach().clamp_(-1.5, 1.5)
        loss.backward()

    same_error(fg, torch, program)
