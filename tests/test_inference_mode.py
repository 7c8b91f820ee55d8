"""torch.inference_mode: no graph inside, and the tensors made there are inference tensors, which
autograd refuses to save and which are written in place only in inference mode (PyTorch's errors)."""

import pytest

from oracle_helpers import same_error, same_on_both


def flags_inside(lib):
    weight = lib.ones(3, requires_grad=True)
    normal = lib.ones(3)
    with lib.inference_mode():
        made = lib.ones(3)
        product = made * weight
        view_of_normal = weight.view(3)
        normal.add_(1)  # a normal tensor may be written inside
        flags = [
            lib.is_inference_mode_enabled(),
            lib.is_grad_enabled(),
            made.is_inference(),
            product.is_inference(),
            product.requires_grad,
            product.grad_fn is None,
            view_of_normal.is_inference(),
            view_of_normal.requires_grad,
            normal.is_inference(),
        ]
    outside = [
        lib.is_inference_mode_enabled(),
        lib.is_grad_enabled(),
        made.view(3).is_inference(),
        made.detach().is_inference(),
        made.data.is_inference(),
        (made * 2).is_inference(),
        made.clone().is_inference(),
        normal._version,
    ]
    return flags, outside


def test_flags_inside_and_outside(fg, torch):
    same_on_both(fg, torch, flags_inside)


def nesting(lib):
    seen = []
    with lib.no_grad():
        with lib.inference_mode():
            with lib.inference_mode(False):
                seen.append((lib.is_inference_mode_enabled(), lib.is_grad_enabled(), lib.ones(1).is_inference()))
            seen.append((lib.is_inference_mode_enabled(), lib.is_grad_enabled()))
        seen.append((lib.is_inference_mode_enabled(), lib.is_grad_enabled()))
    return seen


def test_nesting_restores_both_modes(fg, torch):
    same_on_both(fg, torch, nesting)


def decorated(lib):
    @lib.inference_mode()
    def called():
        return lib.ones(1).is_inference(), lib.is_grad_enabled()

    @lib.inference_mode
    def bare():
        return lib.ones(1).is_inference(), lib.is_grad_enabled()

    @lib.inference_mode(False)
    def off():
        return lib.ones(1).is_inference(), lib.is_grad_enabled()

    return called(), bare(), off(), lib.is_inference_mode_enabled()


def test_as_decorator(fg, torch):
    same_on_both(fg, torch, decorated)


def test_an_exception_leaves_the_modes_restored(fg):
    with pytest.raises(ValueError):
        with fg.inference_mode():
            raise ValueError
    assert not fg.is_inference_mode_enabled() and fg.is_grad_enabled()


def inference_tensor(lib):
    with lib.inference_mode():
        return lib.ones(3)


MISUSES = {
    "saved for backward (mul)": lambda lib: lib.ones(3, requires_grad=True) * inference_tensor(lib),
    "saved by a module": lambda lib: lib.nn.Linear(3, 1)(inference_tensor(lib)),
    "in place": lambda lib: inference_tensor(lib).add_(1),
    "in place under no_grad": lambda lib: _under_no_grad(lib, lambda x: x.mul_(2)),
    "zero_ through a view": lambda lib: inference_tensor(lib)[1:].zero_(),
    "copy_ into": lambda lib: inference_tensor(lib).copy_(lib.zeros(3)),
    "setitem": lambda lib: inference_tensor(lib).__setitem__(0, 5.0),
    "requires_grad_": lambda lib: inference_tensor(lib).requires_grad_(),
    "_version": lambda lib: inference_tensor(lib)._version,
}


def _under_no_grad(lib, write):
    x = inference_tensor(lib)
    with lib.no_grad():
        write(x)


@pytest.mark.parametrize("misuse", MISUSES.values(), ids=MISUSES.keys())
def test_misuse_raises_as_pytorch(fg, torch, misuse):
    same_error(fg, torch, misuse)


def allowed(lib):
    weight = lib.ones(3, requires_grad=True)
    x = inference_tensor(lib)
    (weight + x).sum().backward()  # add saves neither operand
    copied = lib.zeros(3)
    copied.copy_(x)  # reading an inference tensor into a normal one
    cloned = x.clone().requires_grad_()
    (cloned * weight).sum().backward()
    with lib.inference_mode():
        x.add_(1)
        x.requires_grad_()  # allowed inside
    return weight.grad, copied, cloned.grad, x.requires_grad, x.is_leaf


def test_allowed_uses(fg, torch):
    same_on_both(fg, torch, allowed)


def evaluation_loop(lib):
    """The evaluation step of a training script: a model run under inference_mode, then training
    resumes with the same parameters."""
    model = lib.nn.Linear(4, 2)
    data = lib.arange(8.0).reshape(2, 4)
    with lib.inference_mode():
        prediction = model(data)
    loss = model(data).sum()  # a gradient that does not depend on the random initial weights
    loss.backward()
    return prediction.is_inference(), prediction.requires_grad, model.weight.grad, model.weight.is_inference()


def test_evaluation_inside_a_training_loop(fg, torch):
    same_on_both(fg, torch, evaluation_loop)
