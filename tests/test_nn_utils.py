"""torch.nn.utils against PyTorch: gradient clipping, parameters as a vector, pad_sequence,
parametrize and the weight_norm / spectral_norm parametrizations.

Values made by a random draw (initial weights, power-iteration vectors) are copied from PyTorch's
module into ours through load_state_dict, so the outputs and gradients compare.
"""

import pickle
import warnings

import numpy as np
import pytest

from op_helpers import to_numpy
from oracle_helpers import same_error, same_on_both


def _grads_of(t, dtypes=("float32", "float64")):
    """Parameters of several dtypes with known gradients (one without a gradient)."""
    params = []
    for i, dtype in enumerate(dtypes):
        p = t.nn.Parameter(t.zeros(3, dtype=getattr(t, dtype)))
        p.grad = t.tensor([0.5 + i, -2.25, 3.0 * (i + 1)], dtype=getattr(t, dtype))
        params.append(p)
    params.append(t.nn.Parameter(t.zeros(2)))
    return params


def _close(ours, theirs, rtol=1e-6, cancelling=False):
    """Equal to float32 rounding; `cancelling`: values made by subtractions, within a few ulps of
    the largest element."""
    expected = theirs.detach().numpy()
    atol = 4 * np.finfo(np.float32).eps * np.abs(expected).max() if cancelling else 1e-7
    np.testing.assert_allclose(to_numpy(ours), expected, rtol=rtol, atol=atol)


# ---- clipping


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf")])
@pytest.mark.parametrize("max_norm", [1.0, 100.0])
def test_clip_grad_norm_matches_torch(fg, torch, norm_type, max_norm):
    def program(t):
        params = _grads_of(t)
        total = t.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
        return total, [p.grad for p in params]

    same_on_both(fg, torch, program)


def test_clip_grad_norm_of_one_tensor_float64(fg, torch):
    def program(t):
        (p,) = _grads_of(t, ("float64",))[:1]
        return t.nn.utils.clip_grad_norm_(p, 0.5), p.grad

    ours, theirs = program(fg), program(torch)
    for a, b in zip(ours, theirs):
        _close(a, b, rtol=1e-13)
        assert str(a.dtype) == str(b.dtype).replace("torch", "fastgrad")


def test_clip_grad_norm_non_finite(fg, torch):
    def with_inf(t, error):
        p = t.nn.Parameter(t.zeros(2))
        p.grad = t.tensor([float("inf"), 1.0])
        return t.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=error), p.grad

    same_error(fg, torch, lambda t: with_inf(t, True))
    for ours, theirs in zip(with_inf(fg, False), with_inf(torch, False)):
        np.testing.assert_array_equal(to_numpy(ours), theirs.numpy())  # inf, and nan in the same places


def test_clip_grad_norm_of_nothing(fg, torch):
    def program(t):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            total = t.nn.utils.clip_grad_norm_((p for p in []), 1.0)
        return total, [str(w.message) for w in caught], t.nn.utils.clip_grad_norm_([t.nn.Parameter(t.ones(1))], 1.0)

    same_on_both(fg, torch, program)


def test_total_norm_then_clip_with_it(fg, torch):
    def program(t):
        params = _grads_of(t)
        total = t.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None], 2.0)
        t.nn.utils.clip_grads_with_norm_(params, 2.0, total)
        return total, [p.grad for p in params]

    same_on_both(fg, torch, program)


def test_clip_grad_value(fg, torch):
    def program(t):
        params = _grads_of(t)
        assert t.nn.utils.clip_grad_value_(params, 1.5) is None
        return [p.grad for p in params]

    same_on_both(fg, torch, program)


# ---- parameters as a vector


def test_parameters_to_vector_and_back(fg, torch):
    def program(t):
        model = t.nn.Linear(3, 2)
        with t.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(t.arange(p.numel(), dtype=t.float32).view_as(p) + 10 * i)
        vec = t.nn.utils.parameters_to_vector(model.parameters())
        vec.sum().backward()
        new = t.arange(8, dtype=t.float32) * -1
        t.nn.utils.vector_to_parameters(new, model.parameters())
        return vec, model.weight.grad, model.weight, model.bias, model.weight.requires_grad

    same_on_both(fg, torch, program)


def test_vector_to_parameters_wants_a_tensor(fg, torch):
    same_error(fg, torch, lambda t: t.nn.utils.vector_to_parameters([1.0], t.nn.Linear(1, 1).parameters()))


# ---- pad_sequence


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(fg, torch, batch_first, padding_side):
    def program(t):
        a = t.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = t.tensor([[5.0, 6.0]], requires_grad=True)
        c = t.tensor([[7.0, 8.0], [9.0, 1.0], [2.0, 3.0]])
        out = t.nn.utils.rnn.pad_sequence(
            [a, b, c], batch_first=batch_first, padding_value=-1.0, padding_side=padding_side
        )
        (out * t.arange(out.numel(), dtype=t.float32).view(out.shape)).sum().backward()
        return out, a.grad, b.grad

    same_on_both(fg, torch, program)


def test_pad_sequence_of_integers(fg, torch):
    same_on_both(
        fg,
        torch,
        lambda t: t.nn.utils.rnn.pad_sequence([t.tensor([1, 2]), t.tensor([3, 4, 5])], padding_value=-1.5),
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda t, pad: pad([]),
        lambda t, pad: pad(3),
        lambda t, pad: pad([t.ones(2)], padding_side="up"),
    ],
    ids=["empty", "not iterable", "padding side"],
)
def test_pad_sequence_errors(fg, torch, call):
    same_error(fg, torch, lambda t: call(t, t.nn.utils.rnn.pad_sequence))


# ---- parametrize


def _symmetric(t):
    class Symmetric(t.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()

    return Symmetric()


def _scaled(t, factor):
    class Scale(t.nn.Module):
        def forward(self, x):
            return x * factor

    return Scale()


def _parametrized(t):
    """A Linear whose weight is symmetric, then doubled; its parameters copied from fixed values."""
    model = t.nn.Linear(3, 3)
    with t.no_grad():
        model.weight.copy_(t.arange(9, dtype=t.float32).view(3, 3) / 4)
        model.bias.fill_(0.5)
    t.nn.utils.parametrize.register_parametrization(model, "weight", _symmetric(t))
    t.nn.utils.parametrize.register_parametrization(model, "weight", _scaled(t, 2.0))
    return model


def test_parametrization_outputs_gradients_keys_and_repr(fg, torch):
    def program(t):
        P = t.nn.utils.parametrize
        model = _parametrized(t)
        out = model(t.tensor([[1.0, -1.0, 2.0]]))
        out.sum().backward()
        original = model.parametrizations.weight.original
        return [
            type(model).__name__,
            P.type_before_parametrizations(model).__name__,
            repr(model),
            list(model.state_dict()),
            [name for name, _ in model.named_parameters()],
            (P.is_parametrized(model), P.is_parametrized(model, "weight"), P.is_parametrized(model, "bias")),
            model.weight,
            out,
            original.grad,
        ]

    same_on_both(fg, torch, program)


def test_assigning_a_parametrized_tensor_stores_its_right_inverse(fg, torch):
    def program(t):
        model = t.nn.Linear(2, 2)
        t.nn.utils.parametrize.register_parametrization(model, "weight", _symmetric(t))
        original = model.parametrizations.weight.original
        model.weight = t.tensor([[1.0, 2.0], [3.0, 4.0]])
        return model.parametrizations.weight.original is original, original, model.weight

    same_on_both(fg, torch, program)


def test_cached_computes_once(fg, torch):
    def program(t):
        model = _parametrized(t)
        with t.nn.utils.parametrize.cached():
            same = model.weight is model.weight
        return same, model.weight is model.weight

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("leave_parametrized", [True, False])
def test_remove_parametrizations(fg, torch, leave_parametrized):
    def program(t):
        model = _parametrized(t)
        original = model.parametrizations.weight.original
        t.nn.utils.parametrize.remove_parametrizations(model, "weight", leave_parametrized=leave_parametrized)
        return [
            type(model).__name__,
            hasattr(model, "parametrizations"),
            model.weight is original,
            isinstance(model.weight, t.nn.Parameter),
            model.weight,
            list(model.state_dict()),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda t: t.nn.utils.parametrize.remove_parametrizations(t.nn.Linear(1, 1), "weight"),
        lambda t: t.nn.utils.parametrize.register_parametrization(t.nn.Linear(2, 2), "nope", _symmetric(t)),
        lambda t: t.nn.utils.parametrize.register_parametrization(t.nn.Linear(3, 2), "weight", _SliceFirstRow.make(t)),
        lambda t: t.nn.utils.parametrize.register_parametrization(_parametrized(t), "weight", _SliceFirstRow.make(t)),
    ],
    ids=["not parametrized", "no such tensor", "shape changed", "shape changed when stacking"],
)
def test_parametrization_errors(fg, torch, program):
    ours, theirs = pytest.raises(Exception, program, fg).value, pytest.raises(Exception, program, torch).value
    assert type(ours) is type(theirs)
    assert str(ours).replace("fastgrad.", "torch.") == str(theirs)


class _SliceFirstRow:
    @staticmethod
    def make(t):
        class FirstRow(t.nn.Module):
            def forward(self, x):
                return x[:1]

        return FirstRow()


def test_parametrized_module_refuses_pickling(fg, torch):
    same_error(fg, torch, lambda t: pickle.dumps(_parametrized(t)))


# ---- weight_norm and spectral_norm


def test_weight_norm_parametrization(fg, torch):
    torch.manual_seed(0)
    theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4))
    ours = fg.nn.utils.parametrizations.weight_norm(fg.nn.Linear(3, 4))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: fg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    g = ours.parametrizations.weight.original0
    assert g.shape == (4, 1)
    x = [[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]]
    out_ours, out_theirs = ours(fg.tensor(x)), theirs(torch.tensor(x))
    _close(ours.weight, theirs.weight)
    _close(out_ours, out_theirs, rtol=1e-5)  # the matmul's sums may round differently
    (out_ours**2).sum().backward()
    (out_theirs**2).sum().backward()
    for name in ("original0", "original1"):
        ours_grad, theirs_grad = (getattr(m.parametrizations.weight, name).grad for m in (ours, theirs))
        _close(ours_grad, theirs_grad, cancelling=True)


def test_weight_norm_over_another_dim_loads_legacy_keys(fg, torch):
    def program(t):
        model = t.nn.utils.parametrizations.weight_norm(t.nn.Linear(2, 3, bias=False), dim=1)
        model.load_state_dict({"weight_g": t.tensor([[2.0, 0.5]]), "weight_v": t.tensor([[1.0, 2.0]] * 3)})
        return model.weight, model.parametrizations.weight.original0

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dim", [None, 1])
def test_spectral_norm_parametrization(fg, torch, dim):
    torch.manual_seed(0)
    theirs = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 3), dim=dim)
    ours = fg.nn.utils.parametrizations.spectral_norm(fg.nn.Linear(4, 3), dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # the u and v buffers included
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: fg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = [[1.0, -2.0, 0.5, 2.0]]
    for _ in range(2):  # training mode: each call advances the power iteration
        out_ours, out_theirs = ours(fg.tensor(x)), theirs(torch.tensor(x))
        _close(out_ours, out_theirs, rtol=1e-5)
    for key, value in theirs.state_dict().items():
        _close(ours.state_dict()[key], value, rtol=1e-5)
    out_ours.sum().backward()
    out_theirs.sum().backward()
    _close(ours.parametrizations.weight.original.grad, theirs.parametrizations.weight.original.grad, rtol=1e-5)
    ours.eval()
    before = ours.parametrizations.weight[0]._u.tolist()
    ours(fg.tensor(x))
    assert ours.parametrizations.weight[0]._u.tolist() == before  # eval: no iteration


def test_spectral_norm_errors(fg, torch):
    same_error(fg, torch, lambda t: t.nn.utils.parametrizations.spectral_norm(t.nn.Linear(2, 2), "nope"))
    same_error(fg, torch, lambda t: t.nn.utils.parametrizations.spectral_norm(t.nn.Linear(2, 2), dim=2))
    same_error(fg, torch, lambda t: t.nn.utils.parametrizations.spectral_norm(t.nn.Linear(2, 2), n_power_iterations=0))


def test_legacy_weight_norm(fg, torch):
    def program(t):
        model = t.nn.Linear(2, 3)
        with t.no_grad():
            model.weight.copy_(t.tensor([[1.0, 2.0], [-3.0, 0.5], [0.0, 4.0]]))
            model.bias.fill_(0.25)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t.nn.utils.weight_norm(model, dim=None)
        keys = list(model.state_dict())
        with t.no_grad():
            model.weight_g.mul_(2.0)
        out = model(t.ones(1, 2))  # the pre-hook recomputes the weight from weight_g and weight_v
        out.sum().backward()
        grads = model.weight_g.grad, model.weight_v.grad
        t.nn.utils.remove_weight_norm(model)
        return (
            [str(w.message) for w in caught],
            [w.category.__name__ for w in caught],
            keys,
            out,
            grads,
            [
                list(model.state_dict()),
                isinstance(model.weight, t.nn.Parameter),
                model.weight,
            ],
        )

    same_on_both(fg, torch, program)


def test_legacy_weight_norm_errors(fg, torch):
    def twice(t):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t.nn.utils.weight_norm(t.nn.utils.weight_norm(t.nn.Linear(1, 1)))

    same_error(fg, torch, twice)
    same_error(fg, torch, lambda t: t.nn.utils.remove_weight_norm(t.nn.Linear(1, 1)))
