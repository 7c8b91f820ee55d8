"""fastgrad.optim against torch.optim: the same model, data and options give the same losses and
parameters; zero_grad, closures, parameter groups, state_dict and the schedulers behave as PyTorch's;
bad arguments raise PyTorch's errors."""

import copy
from fractions import Fraction

import numpy as np
import pytest

_RNG = np.random.default_rng(7)
# A 2-layer MLP written with matmul + relu: weights and data, float32, from numpy.
_WEIGHTS = [
    (_RNG.standard_normal((4, 8)) * 0.5).astype(np.float32),
    (_RNG.standard_normal(8) * 0.1).astype(np.float32),
    (_RNG.standard_normal((8, 3)) * 0.5).astype(np.float32),
    (_RNG.standard_normal(3) * 0.1).astype(np.float32),
]
_X = _RNG.standard_normal((16, 4)).astype(np.float32)
_Y = _RNG.standard_normal((16, 3)).astype(np.float32)


def _params(lib):
    return [lib.tensor(w, requires_grad=True) for w in _WEIGHTS]


def _loss(lib, params):
    w1, b1, w2, b2 = params
    out = (lib.tensor(_X) @ w1 + b1).relu() @ w2 + b2
    return ((out - lib.tensor(_Y)) ** 2).mean()


def _train(lib, params, opt, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _loss(lib, params)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _run(lib, name, options, steps=50):
    params = _params(lib)
    losses = _train(lib, params, getattr(lib.optim, name)(params, **options), steps)
    return losses, [p.detach().numpy() for p in params]


def _assert_same_run(ours, theirs):
    """(losses, parameters) of two runs agree to the last bits of the forward/backward sums."""
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    for p, t in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(p, t, rtol=1e-6, atol=1e-6)


def _ulps(a, b):
    """The largest difference between a and b in units in the last place of b's largest element."""
    return float(np.abs(a - b).max() / np.spacing(np.abs(b).max()))


CONFIGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.5}),
    ("SGD", {"lr": 0.1, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.003, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "betas": (0.4, 0.99)}),  # beta1 < 0.5: lerp from the far end
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
]


@pytest.mark.parametrize("name,options", CONFIGS, ids=[f"{n}-{'-'.join(o)}" for n, o in CONFIGS])
def test_training_matches_torch(fg, torch, name, options):
    ours = _run(fg, name, options)
    losses = ours[0]
    assert np.isfinite(losses).all() and (losses[-1] > losses[0]) == options.get("maximize", False)
    # Each step differs from PyTorch's only in the last bits of the forward/backward sums (and, for
    # Adam, PyTorch's vectorized sqrt, which is not correctly rounded). After 50 steps the losses
    # agree to 2.5e-7 relative and the parameters to 2.5e-7 absolute.
    _assert_same_run(ours, _run(torch, name, options))


@pytest.mark.parametrize("name,options", CONFIGS, ids=[f"{n}-{'-'.join(o)}" for n, o in CONFIGS])
def test_updates_from_the_same_gradients_match_torch_to_the_last_bits(fg, torch, name, options):
    rng = np.random.default_rng(3)
    start = [rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(20).astype(np.float32)]
    grads = [[rng.standard_normal(p.shape).astype(np.float32) for p in start] for _ in range(20)]
    results = []
    for lib in (fg, torch):
        params = [lib.tensor(p, requires_grad=True) for p in start]
        opt = getattr(lib.optim, name)(params, **options)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = lib.tensor(g)
            opt.step()
        results.append([p.detach().numpy() for p in params])
    # The same operations in the same order, with fused multiply-adds where PyTorch's kernels fuse
    # them (on FMA hardware): SGD is bit-identical to PyTorch, and Adam nearly (PyTorch's vectorized
    # sqrt is not correctly rounded): at least 92% of the elements, the others within half an ulp of
    # the largest parameter. Rounding twice instead of fusing leaves 44-96% identical, up to 1 ulp.
    identical = np.mean(np.concatenate([(a == b).ravel() for a, b in zip(*results)]))
    assert identical >= 0.9
    assert max(_ulps(ours, theirs) for ours, theirs in zip(*results)) <= 0.5


def test_sgd_step_rounds_once_like_a_fused_multiply_add(fg):
    # PyTorch's p.add_(g, alpha=-lr) is one fused multiply-add: p + float32(-lr) * g rounded once.
    rng = np.random.default_rng(5)
    start, grad = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    p = fg.tensor(start, requires_grad=True)
    p.grad = fg.tensor(grad)
    fg.optim.SGD([p], lr=0.1).step()
    alpha = Fraction(float(np.float32(-0.1)))
    for got, p0, g in zip(p.detach().numpy(), start, grad):
        exact = Fraction(float(p0)) + alpha * Fraction(float(g))
        neighbours = [np.nextafter(got, np.float32(np.inf)), np.nextafter(got, np.float32(-np.inf))]
        assert all(abs(Fraction(float(got)) - exact) <= abs(Fraction(float(n)) - exact) for n in neighbours)


def test_step_updates_leaves_in_place_without_a_graph(fg):
    params = _params(fg)
    opt = fg.optim.Adam(params, lr=0.1)
    before = [p.detach().clone() for p in params]
    _loss(fg, params).backward()
    opt.step()
    for p, b in zip(params, before):
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
        assert not fg.equal(p.detach(), b)
    for state in opt.state.values():
        assert not any(t.requires_grad for t in state.values())


def test_parameters_without_grad_are_skipped(fg, torch):
    counts = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.Adam(params)
        _loss(lib, params).backward()
        params[0].grad = None
        opt.step()
        assert np.array_equal(params[0].detach().numpy(), _WEIGHTS[0])
        counts.append([len(opt.state[p]) for p in params])
    assert counts[0] == counts[1] == [0, 3, 3, 3]


def test_zero_grad(fg, torch):
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.SGD(params, lr=0.1)
        _loss(lib, params).backward()
        opt.zero_grad()
        assert all(p.grad is None for p in params)

        _loss(lib, params).backward()
        grad = params[0].grad
        opt.zero_grad(set_to_none=False)
        assert params[0].grad is grad  # zeroed in place
        assert all(np.array_equal(p.grad.numpy(), np.zeros_like(w)) for p, w in zip(params, _WEIGHTS))

        params[1].grad = params[0].sum() * lib.ones(8)  # a gradient with a graph: detached by zero_grad
        opt.zero_grad(set_to_none=False)
        assert params[1].grad.grad_fn is None and not params[1].grad.requires_grad


def test_step_with_closure(fg, torch):
    results = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.SGD(params, lr=0.1, momentum=0.9)
        calls = []

        def closure():
            calls.append(lib.is_grad_enabled())
            opt.zero_grad()
            loss = _loss(lib, params)
            loss.backward()
            return loss

        with lib.no_grad():
            losses = [opt.step(closure).item() for _ in range(5)]
        assert calls == [True] * 5
        results.append(losses)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


def test_param_groups_with_their_own_options(fg, torch):
    runs = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.SGD(
            [{"params": params[:2], "lr": 0.2, "nesterov": True}, {"params": params[2:]}], lr=0.05, momentum=0.9
        )
        losses = _train(lib, params, opt, 20)
        runs.append((losses, [p.detach().numpy() for p in params], repr(opt), opt.param_groups[0]["lr"]))
    _assert_same_run(runs[0], runs[1])
    assert runs[0][2] == runs[1][2] and runs[0][2].startswith("SGD (\nParameter Group 0\n    dampening: 0\n")
    assert runs[0][3] == 0.2


def test_add_param_group(fg, torch):
    runs = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.Adam(params[:2], lr=0.01)
        losses = _train(lib, params, opt, 5)
        opt.add_param_group({"params": params[2:], "lr": 0.03, "amsgrad": True})
        losses += _train(lib, params, opt, 5)
        runs.append((losses, [p.detach().numpy() for p in params], repr(opt)))
        with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
            opt.add_param_group({"params": params[0]})
    _assert_same_run(runs[0], runs[1])
    assert runs[0][2] == runs[1][2]


def _state_summary(state_dict):
    """state_dict with tensors as (dtype name, values) for comparing two libraries."""

    def plain(value):
        if hasattr(value, "numpy"):
            return str(value.dtype).split(".")[-1], value.numpy().tolist()
        return value

    return {
        "state": {k: {name: plain(v) for name, v in s.items()} for k, s in state_dict["state"].items()},
        "param_groups": state_dict["param_groups"],
    }


@pytest.mark.parametrize(
    "name,options", [("SGD", {"lr": 0.05, "momentum": 0.9}), ("Adam", {"lr": 0.01, "amsgrad": True})]
)
def test_state_dict_round_trip(fg, torch, name, options):
    params = _params(fg)
    opt = getattr(fg.optim, name)(params, **options)
    _train(fg, params, opt, 5)
    saved = copy.deepcopy(opt.state_dict())  # state_dict() shares the optimizer's tensors, as PyTorch's

    torch_params = _params(torch)
    torch_opt = getattr(torch.optim, name)(torch_params, **options)
    _train(torch, torch_params, torch_opt, 5)
    ours, theirs = _state_summary(saved), _state_summary(torch_opt.state_dict())
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for k in theirs["state"]:
        assert ours["state"][k].keys() == theirs["state"][k].keys()
        for key, (dtype, values) in theirs["state"][k].items():
            assert ours["state"][k][key][0] == dtype
            np.testing.assert_allclose(ours["state"][k][key][1], values, rtol=1e-5, atol=1e-7)

    # A second optimizer over copies of the parameters, loaded from the state dict, continues identically.
    copies = [p.detach().clone().requires_grad_() for p in params]
    other = getattr(fg.optim, name)(copies, lr=123.0)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == options["lr"] and other.param_groups[0]["params"] == copies
    _train(fg, params, opt, 5)
    _train(fg, copies, other, 5)
    for p, c in zip(params, copies):
        assert fg.equal(p.detach(), c.detach())


def test_load_state_dict_checks_the_groups(fg, torch):
    for lib in (fg, torch):
        params = _params(lib)
        one_group = lib.optim.SGD(params).state_dict()
        two_groups = lib.optim.SGD([{"params": params[:2]}, {"params": params[2:]}]).state_dict()
        with pytest.raises(ValueError, match="^loaded state dict has a different number of parameter groups$"):
            lib.optim.SGD(params).load_state_dict(two_groups)
        with pytest.raises(
            ValueError,
            match="^loaded state dict contains a parameter group that doesn't match the size of optimizer's group$",
        ):
            lib.optim.SGD(params[:3]).load_state_dict(one_group)


def test_load_state_dict_casts_state_to_the_parameter_dtype(fg, torch):
    loaded = []
    for lib in (fg, torch):
        p = lib.ones(2, requires_grad=True)
        opt = lib.optim.SGD([p], momentum=0.9)
        saved = lib.optim.SGD([p], lr=0.5, momentum=0.9).state_dict()
        saved["state"] = {0: {"momentum_buffer": lib.ones(2, dtype=lib.float64)}, "extra": 5}
        opt.load_state_dict(saved)
        buf = opt.state[p]["momentum_buffer"]
        loaded.append((str(buf.dtype).split(".")[-1], buf.tolist(), opt.state["extra"], opt.param_groups[0]["lr"]))
    assert loaded[0] == loaded[1] == ("float32", [1.0, 1.0], 5, 0.5)


def _error(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the type and message are what is compared
        return type(e), str(e).replace("torch.", "fastgrad.")
    return None


BAD_ARGUMENTS = [
    ("SGD", {"lr": -1}),
    ("SGD", {"momentum": -0.1}),
    ("SGD", {"weight_decay": -1e-3}),
    ("SGD", {"nesterov": True}),
    ("SGD", {"nesterov": True, "momentum": 0.9, "dampening": 0.1}),
    ("Adam", {"lr": -1}),
    ("Adam", {"eps": -1e-8}),
    ("Adam", {"betas": (1.0, 0.999)}),
    ("Adam", {"betas": (0.9, -0.5)}),
    ("Adam", {"weight_decay": -1}),
    ("Adam", {"betas": (0, 0.999)}),
    ("AdamW", {"lr": -0.5}),
    ("AdamW", {"betas": (0.9, 1.5)}),
]


@pytest.mark.parametrize("name,options", BAD_ARGUMENTS, ids=[f"{n}-{o}" for n, o in BAD_ARGUMENTS])
def test_bad_options_raise_torch_errors(fg, torch, name, options):
    ours = _error(lambda: getattr(fg.optim, name)(_params(fg), **options))
    theirs = _error(lambda: getattr(torch.optim, name)(_params(torch), **options))
    assert ours is not None and ours == theirs


def _one_param_in_two_groups(lib):
    x = lib.ones(2, requires_grad=True)
    return [{"params": [x]}, {"params": [x]}]


BAD_PARAMS = {
    "empty": lambda lib: [],
    "a tensor": lambda lib: lib.ones(2, requires_grad=True),
    "a number": lambda lib: [lib.ones(2, requires_grad=True), 3],
    "a non-leaf": lambda lib: [lib.ones(2, requires_grad=True) * 2],
    "a set": lambda lib: [{"params": {lib.ones(2, requires_grad=True)}}],
    "a group not a dict": lambda lib: [{"params": [lib.ones(2, requires_grad=True)]}, 5],
    "one param in two groups": _one_param_in_two_groups,
    "names for some": lambda lib: [("w", lib.ones(2, requires_grad=True)), lib.ones(2, requires_grad=True)],
}


@pytest.mark.parametrize("case", BAD_PARAMS)
def test_bad_params_raise_torch_errors(fg, torch, case):
    ours = _error(lambda: fg.optim.SGD(BAD_PARAMS[case](fg)))
    theirs = _error(lambda: torch.optim.SGD(BAD_PARAMS[case](torch)))
    assert ours is not None and ours == theirs


def test_named_params_and_duplicates(fg, torch):
    for lib in (fg, torch):
        w, b = _params(lib)[:2]
        opt = lib.optim.SGD([("w", w), ("b", b)], lr=0.1)
        assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]
        with pytest.warns(UserWarning, match="duplicate parameters"):
            lib.optim.SGD([w, w])


def _lr_sequences(lib, make_scheduler, epochs=30):
    params = _params(lib)
    opt = lib.optim.SGD([{"params": params[:2], "lr": 0.1}, {"params": params[2:]}], lr=0.03)
    scheduler = make_scheduler(lib, opt)
    initial = [g["initial_lr"] for g in opt.param_groups]
    lrs = [scheduler.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr())
        assert lrs[-1] == [g["lr"] for g in opt.param_groups]
    return initial, lrs, scheduler.last_epoch, scheduler.state_dict()


SCHEDULERS = {
    "StepLR": lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "CosineAnnealingLR": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-3),
}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_lr_sequence_matches_torch(fg, torch, name):
    initial, lrs, last_epoch, state = _lr_sequences(fg, SCHEDULERS[name])
    torch_initial, torch_lrs, torch_last_epoch, torch_state = _lr_sequences(torch, SCHEDULERS[name])
    assert initial == torch_initial == [0.1, 0.03]
    assert lrs == torch_lrs  # the same float operations: exactly the same numbers
    assert last_epoch == torch_last_epoch == 30
    assert {k: v for k, v in state.items() if k in torch_state} == {k: torch_state[k] for k in state}


def test_scheduler_state_dict_and_closed_form(fg, torch):
    closed_form = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.SGD(params, lr=0.1)
        scheduler = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        for _ in range(3):
            opt.step()
            scheduler.step()
        resumed = lib.optim.lr_scheduler.CosineAnnealingLR(lib.optim.SGD(params, lr=0.1), T_max=10)
        resumed.load_state_dict(scheduler.state_dict())
        assert resumed.last_epoch == 3 and resumed.get_last_lr() == scheduler.get_last_lr()
        with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
            scheduler.step(7)
        closed_form.append(scheduler.get_last_lr())
    assert closed_form[0] == closed_form[1]


def test_scheduler_needs_an_optimizer(fg, torch):
    ours = _error(lambda: fg.optim.lr_scheduler.StepLR(object(), 3))
    theirs = _error(lambda: torch.optim.lr_scheduler.StepLR(object(), 3))
    assert ours == theirs == (TypeError, "object is not an Optimizer")


@pytest.mark.parametrize("option", ["fused", "differentiable"])
def test_unsupported_modes_are_refused(fg, option):
    # fastgrad keeps PyTorch's option names (and the defaults in each group), but implements only
    # the default single-tensor update.
    if fg.__name__ == "torch":
        pytest.skip("a fastgrad limit")
    with pytest.raises(NotImplementedError, match=f"SGD\\({option}=True\\) is not supported by fastgrad"):
        fg.optim.SGD(_params(fg), **{option: True})
