"""In-place semantics checked against PyTorch (issue 12): augmented assignment, retain_grad through
in-place ops, views made under no_grad, `.data`'s version counter, requires_grad_ on non-leaves."""

import math
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


@pytest.mark.parametrize(
    "exponent", [lambda lib: 3.0, lambda lib: lib.tensor([2.0, 1.0, 3.0], requires_grad=True)], ids=["number", "tensor"]
)
def test_pow_in_place_gradient(fg, torch, exponent):
    def program(lib):
        x, e = lib.tensor([1.0, 2.0, 3.0], requires_grad=True), exponent(lib)
        h = x * 1
        alias = h
        h **= e
        (alias * lib.tensor([1.0, -2.0, 0.5])).sum().backward()
        return h.grad_fn.name(), h, x.grad, e.grad if isinstance(e, lib.Tensor) else None

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("later", ["self", "base of a view"])
def test_pow_in_place_result_is_saved_as_self(fg, torch, later):
    """x **= t saves its result for the exponent's gradient: a later in-place change of x is an error,
    as in PyTorch (the message names the producer as fastgrad's own node, also for a view)."""

    def program(lib):
        x0, x1 = lib.tensor([1.5, 2.0, 0.5], requires_grad=True), lib.tensor([2.0, 1.0, 3.0], requires_grad=True)
        v = x0 + x0
        if later == "self":
            v **= x1
            v.add_(x0)
        else:
            w = v[1:]
            w **= x1[1:]
            v.add_(1)
        v.sum().backward()

    if later == "self":
        same_error(fg, torch, program)
    else:
        assert type(pytest.raises(Exception, program, fg).value) is type(pytest.raises(Exception, program, torch).value)


# ---- requires_grad_ on a non-leaf


def test_requires_grad_true_on_non_leaf_is_a_no_op(fg, torch):
    def program(lib):
        h = lib.tensor([1.0, 2.0], requires_grad=True) * 2
        return h.requires_grad_() is h, h.requires_grad_(True) is h, h.is_leaf, h.requires_grad

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "change",
    [
        lambda h: h.requires_grad_(False),
        lambda h: setattr(h, "requires_grad", False),
        lambda h: setattr(h, "requires_grad", True),
    ],
    ids=["method", "False", "True"],
)
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
        (used * used * lib.tensor(weight[: used.shape[0]])).sum().backward()
        return h.grad, x.grad, h.retains_grad

    return program


def _write_through_view(lib, h):
    h[:2].mul_(3)
    return h


@pytest.mark.parametrize(
    "write",
    [
        lambda lib, h: h.mul_(3),
        lambda lib, h: h.masked_fill_(lib.tensor([True, False, False]), 5.0),
        lambda lib, h: h.clamp_(3.0, 5.0).add_(1),
        _write_through_view,
    ],
    ids=["mul_", "masked_fill_", "chain", "through_view"],
)
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


@pytest.mark.parametrize(
    "write",
    [
        lambda lib, v: v.mul_(3),
        lambda lib, v: v.pow_(2),
        lambda lib, v: v.zero_(),
        lambda lib, v: v.copy_(lib.ones(2)),
    ],
    ids=["mul_", "pow_", "zero_", "copy_"],
)
@pytest.mark.parametrize(
    "base",
    [
        lambda lib: lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 2,
        lambda lib: lib.tensor([1.0, 2.0, 3.0], requires_grad=True),
    ],
    ids=["non_leaf", "leaf"],
)
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


# ---- a view OF a view made under no_grad (PyTorch's CreationMeta passes to it) and the flags of both

VIEWS_OF_VIEWS = {
    "slice": lambda v: v[0:1],
    "select": lambda v: v[0],
    "view": lambda v: v.view(-1),
    "reshape": lambda v: v.reshape(3),
    "transpose": lambda v: v.view(3, 1).transpose(0, 1),
    "unsqueeze": lambda v: v.unsqueeze(0),
    "expand": lambda v: v.expand(2, 3),
    "squeeze": lambda v: v.view(1, 3).squeeze(0),
    "t": lambda v: v.t(),
    "permute": lambda v: v.permute(0),
}


def _no_grad_view_of_product(lib):
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    base = x * 2
    with lib.no_grad():
        return x, base, base[1:]


@pytest.mark.parametrize("view", VIEWS_OF_VIEWS.values(), ids=VIEWS_OF_VIEWS.keys())
def test_in_place_on_view_of_view_made_under_no_grad_raises(fg, torch, view):
    def program(lib):
        x, base, v = _no_grad_view_of_product(lib)
        try:
            view(v).mul_(3)
        finally:
            assert base.tolist() == [2.0, 4.0, 6.0, 8.0]  # refused before writing, as PyTorch

    same_error(fg, torch, program)


def _flags(t):
    return t.requires_grad, t.is_leaf, None if t.grad_fn is None else t.grad_fn.name()


@pytest.mark.parametrize("leaf_base", [True, False], ids=["leaf_base", "non_leaf_base"])
def test_view_made_under_no_grad_requires_grad_through_its_base(fg, torch, leaf_base):
    """Such a view (and its views, and ops on it) report requires_grad as PyTorch's do, but no
    gradient reaches it or its base."""

    def program(lib):
        x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        base = x if leaf_base else x * 2
        with lib.no_grad():
            v = base[1:]
            untouched = base[1:][0]
        flags = [_flags(t) for t in (v, untouched, v[0:1], v.view(-1), v * 2, v.detach())]
        (v[0:1] * 2 + v.sum()).backward()
        return flags, x.grad, v.grad

    same_on_both(fg, torch, program)


def test_view_made_under_no_grad_as_backward_root_or_input(fg, torch):
    same_error(fg, torch, lambda lib: _no_grad_view_of_product(lib)[2].backward(lib.ones(3)))
    same_error(fg, torch, lambda lib: (lambda v: lib.autograd.grad((v * 2).sum(), v))(_no_grad_view_of_product(lib)[2]))
    same_on_both(
        fg,
        torch,
        lambda lib: (lambda v: lib.autograd.grad((v * 2).sum(), v, allow_unused=True))(
            _no_grad_view_of_product(lib)[2]
        ),
    )


@pytest.mark.parametrize(
    "write",
    [
        lambda lib, base, v: base.mul_(2),
        lambda lib, base, v: lib.no_grad()(base.mul_)(2),
        lambda lib, base, v: v.detach().add_(1),
    ],
    ids=["base_with_grad", "base_under_no_grad", "detached_alias"],
)
@pytest.mark.parametrize(
    "use",
    [
        lambda lib, v: v * 2,
        lambda lib, v: v.is_leaf,
        lambda lib, v: v[0:1] * 2,
    ],
    ids=["op", "is_leaf", "view_op"],
)
def test_view_made_under_no_grad_used_after_its_memory_was_written_raises(fg, torch, write, use):
    def program(lib):
        x, base, v = _no_grad_view_of_product(lib)
        write(lib, base, v)
        return use(lib, v)

    same_error(fg, torch, program)


def test_view_of_view_made_under_no_grad_used_after_its_memory_was_written(fg, torch):
    def program(lib):
        x, base, v = _no_grad_view_of_product(lib)
        w = v[0:1]
        base.mul_(2)
        with lib.no_grad():
            assert (w * 2).tolist() == [16.0]  # without grad mode, nothing is asked of its history
        return w * 2

    same_error(fg, torch, program)


def test_view_made_under_no_grad_after_its_memory_was_written_prints_and_keeps_leaf_calls(fg, torch):
    """Only what asks for its history raises (is_leaf, grad_fn, ops with grad): printing says
    grad_fn=<Invalid>, and retain_grad, .grad and requires_grad_(False) treat it as the leaf it was."""

    def program(lib):
        x, base, v = _no_grad_view_of_product(lib)
        base.mul_(2)
        v.retain_grad()
        return repr(v), v.grad, v.requires_grad_(False).requires_grad

    assert same_on_both(fg, torch, program)[0].endswith("grad_fn=<Invalid>)")


# ---- a view returned by a custom Function's forward (PyTorch's CreationMeta IN_CUSTOM_FUNCTION)


def _custom_function_view(lib):
    class TailView(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a[1:]

        @staticmethod
        def backward(ctx, grad):
            return lib.cat([lib.zeros(1, dtype=grad.dtype), grad])

    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = x * 2
    return x, base, TailView.apply(base)


@pytest.mark.parametrize(
    "program",
    [
        lambda lib, base, y: y.mul_(2),
        lambda lib, base, y: y[0:1].mul_(2),
        lambda lib, base, y: (base.mul_(2), y * 1),
    ],
    ids=["written", "view_written", "used_after_base_written"],
)
def test_view_returned_by_custom_function_written_in_place_raises(fg, torch, program):
    same_error(fg, torch, lambda lib: program(lib, *_custom_function_view(lib)[1:]))


# ---- what a node saves, as PyTorch's node: an in-place change of it before backward is an error
# exactly where PyTorch's is (a node keeping an input or a result it does not need would refuse a
# program PyTorch runs; one keeping only shapes would let through a program PyTorch refuses)


@pytest.mark.parametrize(
    "op",
    [
        lambda lib, v: lib.atan2(v, v + 1),
        lambda lib, v: lib.logaddexp(v, v + 1),
        lambda lib, v: lib.logaddexp2(v, v + 1),
        lambda lib, v: lib.hypot(v, v + 1),
        lambda lib, v: v.gather(0, lib.tensor([1, 0, 1])),
        lambda lib, v: v.take(lib.tensor([2, -1])),
        lambda lib, v: v.take_along_dim(lib.tensor([0, 2]), 0),
        lambda lib, v: v.take_along_dim(lib.tensor([1])),
        lambda lib, v: v.masked_select(lib.tensor([True, False, True])),
        lambda lib, v: v.index_select(0, lib.tensor([2, 0])),
        lambda lib, v: lib.diff(v, n=0),
        lambda lib, v: lib.diff(v[:0]),
        lambda lib, v: lib.cummax(v, 0).values,
        lambda lib, v: v.cummin(0).values,
    ],
    ids=[
        "atan2",
        "logaddexp",
        "logaddexp2",
        "hypot",
        "gather",
        "take",
        "take_along_dim",
        "take_along_dim flat",
        "masked_select",
        "index_select",
        "diff n=0",
        "diff empty",
        "cummax",
        "cummin",
    ],
)
@pytest.mark.parametrize("changed", ["input", "result"])
def test_in_place_change_of_what_the_node_saves(fg, torch, op, changed):
    def program(lib):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        v = x * 1
        result = op(lib, v)
        (v if changed == "input" else result).mul_(2)
        try:
            (result * result).sum().backward()
        except RuntimeError as e:
            return "modified by an inplace operation" in str(e)
        return x.grad

    same_on_both(fg, torch, program)


def test_block_diag_promotes_zero_dim_tensors_as_numbers(fg, torch):
    same_on_both(
        fg,
        torch,
        lambda lib: [
            lib.block_diag(lib.zeros(2), lib.tensor(1.0, dtype=lib.float64)),
            lib.block_diag(lib.arange(2), lib.tensor(1.0, dtype=lib.float64)),
            lib.block_diag(lib.zeros(1, dtype=lib.int32), lib.tensor(1)),
        ],
    )


def test_diff_of_an_empty_dim_is_its_input(fg, torch):
    def program(lib):
        x = lib.zeros(0, requires_grad=True)
        return x.diff() is x, x.diff(n=0) is x, x.diff(n=0).grad_fn.name(), tuple(lib.zeros(2).diff(n=3).shape)

    same_on_both(fg, torch, program)


# ---- the module's in-place functions (torch.clamp_(x, ...) is x.clamp_(...)), fill, detach

MODULE_CALLS = {
    "clamp_": lambda m, x: m.clamp_(x, min=-0.5, max=0.7),
    "clip_": lambda m, x: m.clip_(x, 0.0),
    "round_": lambda m, x: m.round_(x, decimals=1),
    "floor_": lambda m, x: m.floor_(x),
    "ceil_": lambda m, x: m.ceil_(x),
    "trunc_": lambda m, x: m.trunc_(x),
    "fix_": lambda m, x: m.fix_(x),
    "frac_": lambda m, x: m.frac_(x),
    "nan_to_num_": lambda m, x: m.nan_to_num_(x, nan=2.0, posinf=3.0),
    "square_": lambda m, x: m.square_(x),
    "fill_": lambda m, x: m.fill_(x, 1.5),
    "fill_ (tensor)": lambda m, x: m.fill_(x, m.tensor(-2.0, dtype=m.float64, requires_grad=True)),
    "zero_": lambda m, x: m.zero_(x),
}


@pytest.mark.parametrize("name", MODULE_CALLS)
def test_module_in_place_function_is_the_method(fg, torch, name):
    def program(m):
        leaf = m.tensor([0.26, -1.75, 2.5, math.inf], dtype=m.float64, requires_grad=True)
        x = leaf * 1
        result = MODULE_CALLS[name](m, x)
        (result * m.tensor([1.0, -2.0, 0.5, 0.0], dtype=m.float64)).sum().backward()
        return result is x, x.grad_fn.name(), x._version, [repr(v) for v in x.tolist() + leaf.grad.tolist()]

    same_on_both(fg, torch, program)


def test_fill_is_a_filled_copy(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 2.0]], dtype=m.float64, requires_grad=True)
        value = m.tensor(3.0, dtype=m.float64, requires_grad=True)
        by_number, by_tensor = m.fill(x, 4), m.fill(x, value)
        (by_number * 2 + by_tensor * m.tensor([[1.0, 5.0]], dtype=m.float64)).sum().backward()
        ints = m.fill(m.tensor([1, 2]), 7.9)
        return x, by_number, by_tensor, x.grad, value.grad, ints

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.fill(m.ones(2), m.tensor([1.0, 2.0])))


def test_module_detach(fg, torch):
    def program(m):
        leaf = m.tensor([1.0, 2.0], requires_grad=True)
        x = leaf * 2
        detached = m.detach(x)
        in_place = m.detach_(x)
        return detached, detached.requires_grad, in_place is x, x.requires_grad, x.grad_fn is None

    same_on_both(fg, torch, program)
    for call in ("detach", "detach_"):
        same_error(fg, torch, lambda m: getattr(m, call)(1.0))
