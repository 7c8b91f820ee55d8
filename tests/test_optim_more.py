"""fastgrad.optim's RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop, SparseAdam and LBFGS,
and the Optimizer's hooks, against torch.optim: the same trajectories from the same weights, the same
updates from the same gradients (float32 to PyTorch's rounding, float64 to 1e-12), the same state and
state dicts, hooks run in PyTorch's order, and PyTorch's errors."""

import copy
import functools
import importlib

import numpy as np
import pytest
from test_optim import _error, _state_summary, _ulps

_RNG = np.random.default_rng(11)
# One tanh layer: weights and data, from numpy.
_WEIGHTS = [(_RNG.standard_normal((4, 3)) * 0.5).astype(np.float32), (_RNG.standard_normal(3) * 0.1).astype(np.float32)]
_X = _RNG.standard_normal((16, 4)).astype(np.float32)
_Y = (_RNG.standard_normal((16, 3)) * 0.5).astype(np.float32)
# A sequence of gradients for the parameters of _WEIGHTS' shapes.
_GRADS = [[_RNG.standard_normal(w.shape).astype(np.float32) for w in _WEIGHTS] for _ in range(12)]


def _optimizer_module(lib):
    """torch.optim.optimizer (a module PyTorch does not keep as an attribute of torch.optim)."""
    return importlib.import_module(lib.optim.__name__ + ".optimizer")


def _params(lib, dtype="float32"):
    return [lib.tensor(w.astype(dtype), requires_grad=True) for w in _WEIGHTS]


def _loss(lib, params):
    w, b = params
    x, y = lib.tensor(_X, dtype=w.dtype), lib.tensor(_Y, dtype=w.dtype)
    return (((x @ w + b).tanh() - y) ** 2).mean()


def _train(lib, params, opt, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _loss(lib, params)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _step_with_grads(lib, params, opt, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = lib.tensor(g, dtype=p.dtype)
        opt.step()


# Learning rates small enough that no run reaches the oscillations about a minimum (or the
# saturation of tanh when maximizing) that amplify the last-bit differences of the sums.
CONFIGS = [
    ("RMSprop", {"lr": 0.003}),
    ("RMSprop", {"lr": 0.003, "centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.003, "alpha": 0.3, "maximize": True}),
    ("Adagrad", {"lr": 0.03}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {"lr": 0.01}),
    ("Adamax", {"lr": 0.003, "betas": (0.4, 0.99), "weight_decay": 0.1, "maximize": True}),  # lerp from the far end
    ("NAdam", {"lr": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.003, "weight_decay": 0.1, "maximize": True}),
    ("RAdam", {"lr": 0.01}),  # rectified from the 6th step on
    ("RAdam", {"lr": 0.003, "betas": (0.4, 0.9), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("ASGD", {"lr": 0.05}),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "t0": 5, "weight_decay": 0.1}),  # averaging from the 6th step on
    ("Rprop", {"lr": 0.003}),
    ("Rprop", {"lr": 0.01, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.05), "maximize": True}),
]
CONFIG_IDS = [f"{n}-{'-'.join(o)}" for n, o in CONFIGS]
NAMES = ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


def _trajectory(lib, name, options, steps=100):
    params = _params(lib)
    losses = _train(lib, params, getattr(lib.optim, name)(params, **options), steps)
    return losses, [p.detach().numpy() for p in params]


@functools.lru_cache
def _torch_trajectory(torch, name, option_items):
    return _trajectory(torch, name, dict(option_items))


# Every optimizer, with options; test_updates_... below takes every configuration.
@pytest.mark.parametrize("name,options", CONFIGS[1::2], ids=CONFIG_IDS[1::2])
def test_trajectory_matches_torch(fg, torch, name, options):
    losses, params = _trajectory(fg, name, options)
    torch_losses, torch_params = _torch_trajectory(torch, name, tuple(options.items()))
    assert (losses[-1] > losses[0]) == options.get("maximize", False)
    # Each step differs from PyTorch's only in the last bits of the forward/backward sums and of
    # PyTorch's float32 sqrt (not correctly rounded); after 100 steps:
    np.testing.assert_allclose(losses, torch_losses, rtol=2e-6)
    for p, t in zip(params, torch_params):
        np.testing.assert_allclose(p, t, rtol=0, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,options", CONFIGS, ids=CONFIG_IDS)
def test_updates_and_state_from_the_same_gradients_match_torch(fg, torch, name, options, dtype):
    results = []
    for lib in (fg, torch):
        params = _params(lib, dtype)
        opt = getattr(lib.optim, name)(params, **options)
        _step_with_grads(lib, params, opt, _GRADS)
        results.append(([p.detach().numpy() for p in params], _state_summary(opt.state_dict())))
    (ours, our_state), (theirs, their_state) = results
    if dtype == "float32":
        # The same operations in the same order, rounded as PyTorch's kernels round (fused
        # multiply-adds included); only PyTorch's float32 sqrt differs, by an ulp now and then.
        assert max(_ulps(a, b) for a, b in zip(ours, theirs)) <= 3
    else:
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert our_state["param_groups"] == their_state["param_groups"]
    assert our_state["state"].keys() == their_state["state"].keys()
    for index, state in their_state["state"].items():
        assert list(our_state["state"][index]) == list(state)  # the same keys, in the same order
        for key, (dtype_name, values) in state.items():
            assert our_state["state"][index][key][0] == dtype_name, key  # 'step' a float32 tensor, ...
            np.testing.assert_allclose(our_state["state"][index][key][1], values, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,options", CONFIGS[::2], ids=CONFIG_IDS[::2])
def test_state_dict_round_trip_mid_run(fg, name, options):
    params = _params(fg)
    opt = getattr(fg.optim, name)(params, **options)
    _train(fg, params, opt, 6)
    saved = copy.deepcopy(opt.state_dict())
    copies = [p.detach().clone().requires_grad_() for p in params]
    other = getattr(fg.optim, name)(copies, lr=123.0)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == options.get("lr", 1.0)
    assert _train(fg, params, opt, 6) == _train(fg, copies, other, 6)
    for p, c in zip(params, copies):
        assert fg.equal(p.detach(), c.detach())


@pytest.mark.parametrize("name", NAMES + ["SparseAdam", "LBFGS"])
def test_defaults_and_repr_match_torch(fg, torch, name):
    ours, theirs = (getattr(lib.optim, name)(_params(lib)) for lib in (fg, torch))
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]
    assert repr(ours) == repr(theirs)
    # Adagrad's state exists from the start (step 0, the accumulator filled); the others' from the first step.
    assert _state_summary(ours.state_dict()) == _state_summary(theirs.state_dict())


def test_adagrad_parameters_added_later(fg, torch):
    results = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.Adagrad(params[:1], lr=0.1, initial_accumulator_value=0.25)
        # the group's own initial_accumulator_value is ignored, as in PyTorch: the constructor's counts
        opt.add_param_group({"params": params[1:], "initial_accumulator_value": 3.0})
        _step_with_grads(lib, params, opt, _GRADS[:3])
        results.append(_state_summary(opt.state_dict()))
    assert results[0]["state"][1]["sum"][1] == pytest.approx(results[1]["state"][1]["sum"][1], rel=1e-6)


# ---- LBFGS


def _lbfgs_run(lib, options, dtype, steps=3):
    params = _params(lib, dtype)
    opt = lib.optim.LBFGS(params, **options)
    calls = []

    def closure():
        calls.append(lib.is_grad_enabled())
        opt.zero_grad()
        loss = _loss(lib, params)
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    state = opt.state[params[0]]
    counts = (state["func_evals"], state["n_iter"], len(state["old_dirs"]), len(calls), all(calls))
    return losses, [p.detach().numpy() for p in params], counts, sorted(state)


# Fixed steps small enough to be stable (larger ones overshoot, and the runs amplify rounding).
LBFGS_CONFIGS = [
    {"lr": 0.1, "max_iter": 5},
    {"lr": 0.2, "max_iter": 6, "history_size": 2},
    {"line_search_fn": "strong_wolfe", "max_iter": 4},
    {"line_search_fn": "strong_wolfe", "max_iter": 6, "max_eval": 7, "history_size": 2},
    {"line_search_fn": "strong_wolfe", "tolerance_change": 1e-3},  # stops when the loss no longer changes
]


@pytest.mark.parametrize(
    "options", LBFGS_CONFIGS, ids=["-".join(f"{k}={v}" for k, v in o.items()) for o in LBFGS_CONFIGS]
)
def test_lbfgs_matches_torch(fg, torch, options):
    # float64: the same iterations, evaluations and line-search decisions, and the same numbers to
    # the last bits of the dot products' sums.
    losses, params, counts, keys = _lbfgs_run(fg, options, "float64")
    torch_losses, torch_params, torch_counts, torch_keys = _lbfgs_run(torch, options, "float64")
    assert counts == torch_counts and keys == torch_keys
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-12)
    for p, t in zip(params, torch_params):
        np.testing.assert_allclose(p, t, rtol=1e-12, atol=1e-12)
    # float32, two steps: the float32 dot products' last bits (summed in another order than
    # PyTorch's BLAS) move the iterates by up to 1e-5
    losses, params, counts, _ = _lbfgs_run(fg, options, "float32", steps=2)
    torch_losses, torch_params, torch_counts, _ = _lbfgs_run(torch, options, "float32", steps=2)
    assert counts == torch_counts
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-5)
    for p, t in zip(params, torch_params):
        np.testing.assert_allclose(p, t, rtol=0, atol=1e-5)


def test_lbfgs_state_dict_round_trip(fg):
    def closure_for(opt, params):
        def closure():
            opt.zero_grad()
            loss = _loss(fg, params)
            loss.backward()
            return loss

        return closure

    params = _params(fg, "float64")
    opt = fg.optim.LBFGS(params, max_iter=3, line_search_fn="strong_wolfe")
    opt.step(closure_for(opt, params))
    copies = [p.detach().clone().requires_grad_() for p in params]
    other = fg.optim.LBFGS(copies, max_iter=3, line_search_fn="strong_wolfe")
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    for _ in range(2):
        assert opt.step(closure_for(opt, params)).item() == other.step(closure_for(other, copies)).item()
    for p, c in zip(params, copies):
        assert fg.equal(p.detach(), c.detach())


def test_lbfgs_errors(fg, torch):
    def two_groups(lib):
        params = _params(lib)
        lib.optim.LBFGS([{"params": params[:1]}, {"params": params[1:]}])

    def no_closure(lib):
        lib.optim.LBFGS(_params(lib)).step()

    def unknown_line_search(lib):
        params = _params(lib)
        opt = lib.optim.LBFGS(params, line_search_fn="armijo")
        opt.step(lambda: _loss(lib, params).backward() or _loss(lib, params))

    for program in (two_groups, no_closure, unknown_line_search):
        ours, theirs = _error(lambda: program(fg)), _error(lambda: program(torch))
        assert ours is not None and ours == theirs


# ---- SparseAdam


def test_sparse_adam_refuses_dense_gradients_as_torch(fg, torch):
    errors = []
    for lib in (fg, torch):
        params = _params(lib)
        opt = lib.optim.SparseAdam(params, lr=0.01)
        assert opt.step() is None  # no gradients: nothing to do
        _loss(lib, params).backward()
        errors.append(_error(opt.step))
        assert len(opt.state) == 0
    expected = (RuntimeError, "SparseAdam does not support dense gradients, please consider Adam instead")
    assert errors[0] == errors[1] == expected


# ---- errors


BAD_ARGUMENTS = [
    ("RMSprop", {"lr": -1.0}),
    ("RMSprop", {"eps": -1.0}),
    ("RMSprop", {"momentum": -0.5}),
    ("RMSprop", {"weight_decay": -1}),
    ("RMSprop", {"alpha": -0.1}),
    ("Adagrad", {"lr": -0.1}),
    ("Adagrad", {"lr_decay": -1}),
    ("Adagrad", {"weight_decay": -1}),
    ("Adagrad", {"initial_accumulator_value": -1}),
    ("Adagrad", {"eps": -1e-10}),
    ("Adadelta", {"lr": -1}),
    ("Adadelta", {"rho": 1.5}),
    ("Adadelta", {"eps": -1}),
    ("Adadelta", {"weight_decay": -1}),
    ("Adamax", {"lr": -1}),
    ("Adamax", {"eps": -1}),
    ("Adamax", {"betas": (1.0, 0.9)}),
    ("Adamax", {"betas": (0.9, -0.1)}),
    ("Adamax", {"weight_decay": -1}),
    ("NAdam", {"lr": -1}),
    ("NAdam", {"betas": (0.9, 1.0)}),
    ("NAdam", {"momentum_decay": -1}),
    ("NAdam", {"weight_decay": -0.1}),
    ("RAdam", {"lr": -1}),
    ("RAdam", {"eps": -1}),
    ("RAdam", {"betas": (-0.1, 0.9)}),
    ("RAdam", {"weight_decay": -1}),
    ("ASGD", {"lr": -1}),
    ("ASGD", {"weight_decay": -1}),
    ("Rprop", {"lr": -1}),
    ("Rprop", {"etas": (1.5, 1.2)}),
    ("Rprop", {"etas": (0.5, 0.9)}),
    ("SparseAdam", {"lr": 0.0}),
    ("SparseAdam", {"eps": 0.0}),
    ("SparseAdam", {"betas": (0.9, 1.0)}),
    ("LBFGS", {"lr": -1}),
]


@pytest.mark.parametrize("name,options", BAD_ARGUMENTS, ids=[f"{n}-{o}" for n, o in BAD_ARGUMENTS])
def test_bad_options_raise_torch_errors(fg, torch, name, options):
    ours = _error(lambda: getattr(fg.optim, name)(_params(fg), **options))
    theirs = _error(lambda: getattr(torch.optim, name)(_params(torch), **options))
    assert ours is not None and ours == theirs


def test_param_group_checks(fg, torch):
    def required_option(lib):
        return lib.optim.Optimizer(_params(lib), {"lr": _optimizer_module(lib).required})

    def overlapping_group(lib):
        params = _params(lib)
        lib.optim.RMSprop(params).add_param_group({"params": params[1:]})

    def named_and_unnamed_groups(lib):
        params = _params(lib)
        lib.optim.Adamax([("w", params[0])]).add_param_group({"params": params[1:]})

    for program in (required_option, overlapping_group, named_and_unnamed_groups):
        ours, theirs = _error(lambda: program(fg)), _error(lambda: program(torch))
        assert ours is not None and ours == theirs
    assert repr(_optimizer_module(fg).required) == repr(_optimizer_module(torch).required)


def test_a_parameter_listed_twice_is_numbered_as_torch(fg, torch):
    indices = []
    for lib in (fg, torch):
        w, b = _params(lib)
        with pytest.warns(UserWarning, match="duplicate parameters"):
            opt = lib.optim.NAdam([{"params": [w, w]}, {"params": [b]}])
        indices.append([g["params"] for g in opt.state_dict()["param_groups"]])
    assert indices[0] == indices[1] == [[1, 1], [2]]


# ---- hooks


def _hook_events(lib):
    """What the step and state-dict hooks of an optimizer see, in order."""
    params = _params(lib)
    opt = lib.optim.RMSprop(params, lr=0.1)
    events = []

    def pre(name):
        def hook(optimizer, args, kwargs):
            assert optimizer is opt and args[0] is opt  # the hooks see the optimizer as the first argument
            events.append((name, len(args), sorted(kwargs)))

        return hook

    def replacing_closure(optimizer, args, kwargs):
        events.append(("replace", len(args), sorted(kwargs)))
        return (optimizer,), {"closure": lambda: events.append("closure") or 7.0}

    handles = [
        _optimizer_module(lib).register_optimizer_step_post_hook(pre("global post")),
        opt.register_step_post_hook(pre("post")),
        opt.register_step_pre_hook(pre("pre")),
        _optimizer_module(lib).register_optimizer_step_pre_hook(pre("global pre")),
    ]
    try:
        _loss(lib, params).backward()
        opt.step()
        replacing = opt.register_step_pre_hook(replacing_closure)
        events.append(opt.step())
        replacing.remove()
        handles.pop().remove()  # the global pre-hook
        opt.step(closure=lambda: 3.0)
    finally:
        for handle in handles:
            handle.remove()
    opt.step()  # no hooks left
    events.append("hooks removed")

    opt.register_state_dict_pre_hook(lambda o: events.append("state_dict pre"))
    opt.register_state_dict_pre_hook(lambda o: events.append("state_dict pre, prepended"), prepend=True)
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    saved = opt.state_dict()
    events.append(sorted(saved))
    opt.register_load_state_dict_pre_hook(lambda o, sd: events.append(("load pre", sorted(sd))))
    opt.register_load_state_dict_pre_hook(lambda o, sd: {**sd, "param_groups": [{**sd["param_groups"][0], "lr": 0.5}]})
    opt.register_load_state_dict_post_hook(lambda o: events.append(("load post", o.param_groups[0]["lr"])))
    opt.load_state_dict(saved)
    events.append(sorted(saved))  # the hooks saw a copy
    events.append(len(copy.deepcopy(opt)._optimizer_step_pre_hooks))  # a copy has no hooks
    return events


def test_hooks_run_in_torch_order(fg, torch):
    ours, theirs = _hook_events(fg), _hook_events(torch)
    assert ours == theirs
    assert ours[:4] == [("global pre", 1, []), ("pre", 1, []), ("post", 1, []), ("global post", 1, [])]


def test_step_pre_hook_must_return_args_and_kwargs(fg, torch):
    messages = []
    for lib in (fg, torch):
        opt = lib.optim.Adadelta(_params(lib))
        opt.register_step_pre_hook(lambda optimizer, args, kwargs: 3)
        error = _error(opt.step)
        assert error[0] is RuntimeError
        messages.append(error[1].split(" must return ")[1])
    assert messages[0] == messages[1] == "None or a tuple of (new_args, new_kwargs), but got 3."
