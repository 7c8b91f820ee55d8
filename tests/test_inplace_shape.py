"""In-place shape ops of issue 13 (t_, transpose_, swapaxes_, swapdims_, squeeze_, unsqueeze_,
fill_diagonal_), checked against PyTorch: same object, new shape and strides, version, grad_fn,
gradients through the op, views and bases, and the errors."""

import pytest

from oracle_helpers import same_error, same_on_both

RESTRIDES = {
    "t_": lambda x: x.t_(),
    "transpose_": lambda x: x.transpose_(0, -1),
    "swapaxes_": lambda x: x.swapaxes_(axis0=2, axis1=1),
    "swapdims_": lambda x: x.swapdims_(dim0=0, dim1=1),
    "squeeze_": lambda x: x.squeeze_(),
    "squeeze_(dim)": lambda x: x.squeeze_(-1),
    "squeeze_(dims)": lambda x: x.squeeze_((0, 2)),
    "squeeze_([dims])": lambda x: x.squeeze_([1, 2]),
    "squeeze_((dim,))": lambda x: x.squeeze_((2,)),  # a sequence of one dim: SqueezeBackward5, not 4
    "unsqueeze_": lambda x: x.unsqueeze_(1),
}
SHAPES = {"t_": (2, 3)}  # the others on a 3-d tensor with size-1 dims to squeeze


def _geometry(x):
    return tuple(x.shape), x.stride(), x.is_contiguous(), x._version


@pytest.mark.parametrize("op", RESTRIDES)
def test_restride_in_place(fg, torch, op):
    """Same object, the out-of-place op's geometry, the version bumped, the gradient of its values."""

    def program(lib):
        shape = SHAPES.get(op, (1, 3, 1))
        x = lib.arange(1.0, 4.0 if op != "t_" else 7.0).reshape(shape).requires_grad_()
        h = x * 2
        expected = h.detach().clone()
        result = RESTRIDES[op](h)
        weights = lib.arange(float(h.numel())).reshape(h.shape)
        (h * weights).sum().backward()
        return (
            result is h,
            _geometry(h),
            h.grad_fn.name(),
            h.grad_fn.next_functions[0][0].name(),
            h,
            RESTRIDES[op](expected),
            x.grad,
        )

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("op", RESTRIDES)
def test_restride_in_place_without_grad(fg, torch, op):
    """A tensor not requiring grad, and under no_grad a non-leaf: the version moves, no node is recorded."""

    def program(lib):
        shape = SHAPES.get(op, (1, 3, 1))
        plain = lib.zeros(shape)
        RESTRIDES[op](plain)
        h = lib.ones(shape, requires_grad=True) * 3
        with lib.no_grad():
            RESTRIDES[op](h)
        return _geometry(plain), plain.grad_fn, _geometry(h), h.grad_fn.name()

    same_on_both(fg, torch, program)


def test_restride_a_view_keeps_its_base(fg, torch):
    """A view transposed in place stays a view of its base, whose history is untouched; its other
    views share the version and get a fresh history; the gradient reaches through the view."""

    def program(lib):
        x = lib.arange(6.0).requires_grad_()
        base = x * 1
        view, other = base.view(3, 2), base[1:3]
        view.t_()
        names = view.grad_fn.name(), base.grad_fn.name(), other.grad_fn.name()
        (view * lib.arange(6.0).reshape(2, 3)).sum().backward()
        return names, _geometry(view), base._version, view, x.grad

    same_on_both(fg, torch, program)


def test_restride_unsqueeze_view_then_base_gradient(fg, torch):
    def program(lib):
        x = lib.arange(6.0).reshape(2, 3).requires_grad_()
        base = x * 1
        row = base[1]
        row.unsqueeze_(0)
        (base * lib.arange(6.0).reshape(2, 3)).sum().backward()
        return row.grad_fn.name(), _geometry(row), base.grad_fn.name(), x.grad

    same_on_both(fg, torch, program)


def test_restride_leaves_a_retained_gradient_with_the_old_node(fg, torch):
    def program(lib):
        x = lib.arange(1.0, 7.0).reshape(2, 3).requires_grad_()
        h = x * x
        h.retain_grad()
        h.t_()
        (h * lib.arange(6.0).reshape(3, 2)).sum().backward()
        return h.grad, x.grad

    same_on_both(fg, torch, program)


def test_restride_second_derivative(fg, torch):
    def program(lib):
        x = lib.arange(1.0, 7.0).reshape(2, 3).requires_grad_()
        h = x * x
        h.unsqueeze_(0).transpose_(0, 2)
        (g,) = lib.autograd.grad((h * h).sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad(g.sum(), x)
        return g, g2

    same_on_both(fg, torch, program)


def test_restride_invalidates_saved_tensor(fg, torch):
    """A tensor saved for backward and then transposed in place is at a newer version."""

    def program(lib):
        h = lib.ones(2, 3, requires_grad=True) * 1
        product = h * h
        h.t_()
        product.sum().backward()

    same_error(fg, torch, program)


ERRORS = {
    "leaf": lambda lib: lib.ones(2, 3, requires_grad=True).t_(),
    "leaf before dims": lambda lib: lib.ones(2, 3, requires_grad=True).squeeze_(5),
    "view of leaf": lambda lib: lib.ones(2, 3, requires_grad=True)[0].unsqueeze_(0),
    "t_ 3-d": lambda lib: lib.ones(2, 3, 4).t_(),
    "transpose_ dim": lambda lib: lib.ones(2, 3).transpose_(0, 2),
    "unsqueeze_ dim": lambda lib: lib.ones(2, 3).unsqueeze_(3),
    "squeeze_ dim": lambda lib: lib.ones(2, 3).squeeze_(2),
    "squeeze_ dims twice": lambda lib: lib.ones(2, 3).squeeze_((0, 0)),
}


@pytest.mark.parametrize("program", ERRORS.values(), ids=ERRORS)
def test_restride_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_restride_view_made_without_grad(fg, torch):
    def program(lib):
        x = lib.ones(2, 3, requires_grad=True)
        with lib.no_grad():
            view = x[0]
        view.unsqueeze_(0)

    same_error(fg, torch, program)


def test_restride_zero_dims(fg, torch):
    def program(lib):
        results = []
        ops = (lambda x: x.t_(), lambda x: x.squeeze_(0), lambda x: x.unsqueeze_(-1), lambda x: x.transpose_(0, -1))
        for op in ops:
            x = lib.tensor(2.0, requires_grad=True) * 1
            op(x)
            results.append((_geometry(x), x.grad_fn.name()))
        return results

    same_on_both(fg, torch, program)


# ---- fill_diagonal_


@pytest.mark.parametrize(
    "shape, wrap",
    [
        ((7, 3), True),
        ((7, 3), False),
        ((10, 3), True),
        ((3, 3), True),
        ((2, 5), True),
        ((3, 3, 3), False),
        ((5, 0), True),
        ((0, 3), False),
    ],
)
def test_fill_diagonal(fg, torch, shape, wrap):
    def program(lib):
        x = lib.zeros(shape)
        result = x.fill_diagonal_(5.0, wrap)
        return result is x, x, x._version

    same_on_both(fg, torch, program)


def test_fill_diagonal_transposed_and_keywords(fg, torch):
    def program(lib):
        x = lib.zeros(3, 7).t()  # tall, not contiguous: the wrapped diagonal restarts once
        x.fill_diagonal_(fill_value=1, wrap=True)
        y = lib.zeros(3, 3, dtype=lib.int64).fill_diagonal_(2.5)
        z = lib.zeros(2, 2).fill_diagonal_(lib.tensor(4.0))
        return x, y, z

    same_on_both(fg, torch, program)


def test_fill_diagonal_gradient(fg, torch):
    def program(lib):
        x = lib.arange(21.0).reshape(7, 3).requires_grad_()
        h = x * 1
        h.fill_diagonal_(-1.0, wrap=True)
        (h * h).sum().backward()
        return h.grad_fn.name(), h, x.grad

    same_on_both(fg, torch, program)


FILL_DIAGONAL_ERRORS = {
    "1-d": lambda lib: lib.zeros(3).fill_diagonal_(1),
    "unequal dims": lambda lib: lib.zeros(2, 2, 3).fill_diagonal_(1),
    "leaf": lambda lib: lib.zeros(3, 3, requires_grad=True).fill_diagonal_(1),
    "wrap None": lambda lib: lib.zeros(2, 2).fill_diagonal_(1, None),
    "overflow": lambda lib: lib.zeros(2, 2, dtype=lib.int8).fill_diagonal_(300),
}


@pytest.mark.parametrize("program", FILL_DIAGONAL_ERRORS.values(), ids=FILL_DIAGONAL_ERRORS)
def test_fill_diagonal_errors(fg, torch, program):
    same_error(fg, torch, program)
