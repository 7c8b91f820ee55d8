"""torch.optim.lr_scheduler and torch.optim.swa_utils against PyTorch: the same lr (and momentum)
sequences to the last bit over long runs, state_dicts (keys in order, values) and resuming from them,
closed forms, warnings and errors. Each program is built through its library module, `fg` or `torch`."""

import copy
import inspect
import math
import os
import warnings

import pytest
from oracle_helpers import same_error


def _optimizer(lib, kind="SGD"):
    """Two parameter groups (lr 0.1 and the default 0.03); SGD with momentum, or Adam (betas)."""
    params = [lib.zeros(2, requires_grad=True) for _ in range(2)]
    groups = [{"params": params[:1], "lr": 0.1}, {"params": params[1:]}]
    if kind == "Adam":
        return lib.optim.Adam(groups, lr=0.03)
    return lib.optim.SGD(groups, lr=0.03, momentum=0.9)


def _plateau_metric(lib, i):
    """Improves, then plateaus with a little noise; a tensor now and then (step takes both)."""
    value = 1 / math.sqrt(1 + i % 300) + 0.01 * ((i * 7919) % 13)
    return lib.tensor(value) if i % 5 == 0 else value


def _warmup(m, optimizer):
    """A scheduler of the user's: a subclass of LRScheduler."""

    class Warmup(m.LRScheduler):
        def get_lr(self):
            return [base_lr * min(1.0, (self.last_epoch + 1) / 50) for base_lr in self.base_lrs]

    return Warmup(optimizer)


# name: (scheduler of (lr_scheduler module, optimizer), optimizer kind)
SCHEDULERS = {
    "LambdaLR": (lambda m, opt: m.LambdaLR(opt, [lambda e: 0.99**e, lambda e: 1 / (1 + e)]), "SGD"),
    "MultiplicativeLR": (lambda m, opt: m.MultiplicativeLR(opt, lambda e: 0.999 if e % 3 else 0.99), "SGD"),
    "StepLR": (lambda m, opt: m.StepLR(opt, step_size=33, gamma=0.7), "SGD"),
    "MultiStepLR": (lambda m, opt: m.MultiStepLR(opt, milestones=[10, 300, 300, 700], gamma=0.5), "SGD"),
    "ConstantLR": (lambda m, opt: m.ConstantLR(opt, factor=0.3, total_iters=100), "SGD"),
    "LinearLR": (lambda m, opt: m.LinearLR(opt, start_factor=0.1, end_factor=0.9, total_iters=400), "SGD"),
    "ExponentialLR": (lambda m, opt: m.ExponentialLR(opt, gamma=0.995), "SGD"),
    "PolynomialLR": (lambda m, opt: m.PolynomialLR(opt, total_iters=600, power=1.7), "SGD"),
    "CosineAnnealingLR": (lambda m, opt: m.CosineAnnealingLR(opt, T_max=77, eta_min=1e-4), "SGD"),
    "CosineAnnealingWarmRestarts": (
        lambda m, opt: m.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2, eta_min=1e-5),
        "SGD",
    ),
    "CosineAnnealingWarmRestarts-T_mult=1": (lambda m, opt: m.CosineAnnealingWarmRestarts(opt, T_0=37), "SGD"),
    "CyclicLR-triangular2": (
        lambda m, opt: m.CyclicLR(opt, 0.01, [0.1, 0.2], step_size_up=37, step_size_down=50, mode="triangular2"),
        "SGD",
    ),
    "CyclicLR-exp_range-Adam": (
        lambda m, opt: m.CyclicLR(opt, [0.01, 0.02], 0.1, step_size_up=37, mode="exp_range", gamma=0.999),
        "Adam",
    ),
    "CyclicLR-scale_fn": (
        lambda m, opt: m.CyclicLR(
            opt,
            0.01,
            0.1,
            25,
            scale_fn=lambda x: 0.5 + 0.5 * math.cos(x / 40),
            scale_mode="iterations",
            base_momentum=[0.7, 0.75],
            max_momentum=0.95,
        ),
        "SGD",
    ),
    "CyclicLR-no-momentum": (lambda m, opt: m.CyclicLR(opt, 0.01, 0.1, 60, cycle_momentum=False), "SGD"),
    "OneCycleLR": (lambda m, opt: m.OneCycleLR(opt, [0.1, 0.3], total_steps=1000), "SGD"),
    "OneCycleLR-three_phase-linear-Adam": (
        lambda m, opt: m.OneCycleLR(
            opt,
            0.1,
            epochs=10,
            steps_per_epoch=100,
            pct_start=0.25,
            anneal_strategy="linear",
            three_phase=True,
            div_factor=10.0,
            final_div_factor=100.0,
            base_momentum=0.8,
            max_momentum=[0.9, 0.99],
        ),
        "Adam",
    ),
    "ReduceLROnPlateau": (
        lambda m, opt: m.ReduceLROnPlateau(opt, factor=0.5, patience=5, cooldown=3, min_lr=[1e-3, 1e-4]),
        "SGD",
    ),
    "ReduceLROnPlateau-max-abs": (
        lambda m, opt: m.ReduceLROnPlateau(opt, "max", 0.7, 2, threshold=0.01, threshold_mode="abs", eps=1e-3),
        "SGD",
    ),
    "SequentialLR": (
        lambda m, opt: m.SequentialLR(
            opt,
            [m.LinearLR(opt, 0.1, total_iters=50), m.ExponentialLR(opt, 0.99), m.CosineAnnealingLR(opt, 100)],
            milestones=[50, 400],
        ),
        "SGD",
    ),
    "ChainedScheduler-of-SequentialLR": (
        lambda m, opt: m.ChainedScheduler(
            [
                m.SequentialLR(opt, [m.LinearLR(opt, 0.5, total_iters=80), m.StepLR(opt, 7)], [100]),
                m.MultiStepLR(opt, [30, 60]),
            ]
        ),
        "SGD",
    ),
    "LRScheduler subclass": (_warmup, "SGD"),
    "ChainedScheduler": (
        lambda m, opt: m.ChainedScheduler(
            [m.ConstantLR(opt, 0.5, 200), m.ExponentialLR(opt, 0.998), m.StepLR(opt, 90)]
        ),
        "SGD",
    ),
}


def _step(scheduler, lib, i):
    if isinstance(scheduler, lib.optim.lr_scheduler.ReduceLROnPlateau):
        scheduler.step(_plateau_metric(lib, i))
    else:
        scheduler.step()


def _trace(lib, optimizer, scheduler, steps, first=0):
    """get_last_lr() and the groups' momentum (or betas) after each step."""
    trace = []
    for i in range(first, first + steps):
        optimizer.step()
        _step(scheduler, lib, i)
        trace.append((scheduler.get_last_lr(), [g.get("momentum", g.get("betas")) for g in optimizer.param_groups]))
    return trace


def _run_and_resume(lib, name):
    """1000 steps, and the last 500 again by a new optimizer and scheduler resumed from state_dicts
    taken after step 500. Returns the first lrs, both traces and the final state_dict."""
    make, kind = SCHEDULERS[name]
    optimizer = _optimizer(lib, kind)
    scheduler = make(lib.optim.lr_scheduler, optimizer)
    first_lrs = scheduler.get_last_lr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stepped in the right order: no warning
        trace = _trace(lib, optimizer, scheduler, 500)
        saved = copy.deepcopy((optimizer.state_dict(), scheduler.state_dict()))
        trace += _trace(lib, optimizer, scheduler, 500, first=500)

        resumed_optimizer = _optimizer(lib, kind)
        resumed = make(lib.optim.lr_scheduler, resumed_optimizer)  # before loading the optimizer, which it changes
        resumed_optimizer.load_state_dict(saved[0])
        resumed.load_state_dict(saved[1])
        resumed_trace = _trace(lib, resumed_optimizer, resumed, 500, first=500)
    return first_lrs, trace, resumed_trace, scheduler.state_dict()


@pytest.mark.parametrize("name", SCHEDULERS)
def test_lr_sequence_and_resume_match_torch(fg, torch, name):
    first_lrs, trace, resumed_trace, state = _run_and_resume(fg, name)
    torch_first_lrs, torch_trace, torch_resumed_trace, torch_state = _run_and_resume(torch, name)
    assert first_lrs == torch_first_lrs
    assert trace == torch_trace  # the same float operations: exactly the same numbers
    assert resumed_trace == torch_resumed_trace == torch_trace[500:]
    assert list(state.items()) == list(torch_state.items())


def _parameters(function):
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]


def test_names_signatures_and_bases(fg, torch):
    for module in ["lr_scheduler", "swa_utils"]:
        ours, theirs = getattr(fg.optim, module), getattr(torch.optim, module)
        assert sorted(ours.__all__) == sorted(theirs.__all__)
        for name in ours.__all__:
            assert _parameters(getattr(ours, name)) == _parameters(getattr(theirs, name)), name
    for name in fg.optim.lr_scheduler.__all__:  # ReduceLROnPlateau too, as in PyTorch 2.13
        assert issubclass(getattr(fg.optim.lr_scheduler, name), fg.optim.lr_scheduler.LRScheduler)
    assert issubclass(fg.optim.lr_scheduler._LRScheduler, fg.optim.lr_scheduler.LRScheduler)


RESUMED = {
    "StepLR": lambda m, opt: m.StepLR(opt, 3, last_epoch=7),
    "CosineAnnealingLR": lambda m, opt: m.CosineAnnealingLR(opt, 10, 0.001, last_epoch=7),
    "ExponentialLR": lambda m, opt: m.ExponentialLR(opt, 0.9, last_epoch=7),
    "LinearLR": lambda m, opt: m.LinearLR(opt, 0.5, total_iters=10, last_epoch=7),
    "PolynomialLR": lambda m, opt: m.PolynomialLR(opt, 10, last_epoch=7),
    "CosineAnnealingWarmRestarts": lambda m, opt: m.CosineAnnealingWarmRestarts(opt, 5, last_epoch=7),
}


@pytest.mark.parametrize("name", RESUMED)
def test_constructed_with_last_epoch(fg, torch, name):
    def run(lib):
        optimizer = _optimizer(lib)
        for group in optimizer.param_groups:
            group["initial_lr"] = group["lr"] * 2
        scheduler = RESUMED[name](lib.optim.lr_scheduler, optimizer)
        with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
            lrs = [scheduler.get_last_lr(), scheduler.get_lr()]
        return lrs + [lr for lr, _ in _trace(lib, optimizer, scheduler, 6)]

    assert run(fg) == run(torch)


CLOSED_FORMS = {
    "StepLR": lambda m, opt: m.StepLR(opt, 3, 0.5),
    "MultiStepLR": lambda m, opt: m.MultiStepLR(opt, [2, 5, 5], 0.3),
    "ConstantLR": lambda m, opt: m.ConstantLR(opt, 0.25, 4),
    "LinearLR": lambda m, opt: m.LinearLR(opt, 0.2, 0.7, 6),
    "ExponentialLR": lambda m, opt: m.ExponentialLR(opt, 0.9),
    "PolynomialLR": lambda m, opt: m.PolynomialLR(opt, 8, 2.0),
    "CosineAnnealingLR": lambda m, opt: m.CosineAnnealingLR(opt, 9, 0.01),
    "LambdaLR": lambda m, opt: m.LambdaLR(opt, lambda e: 1 / (1 + e)),  # no closed form: get_lr at the epoch
}


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_step_with_epoch_uses_the_closed_form(fg, torch, name):
    def run(lib):
        optimizer = _optimizer(lib)
        scheduler = CLOSED_FORMS[name](lib.optim.lr_scheduler, optimizer)
        lrs = []
        for epoch in [3, 7, 2, 12, 5]:
            optimizer.step()
            with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
                scheduler.step(epoch)
            lrs.append(scheduler.get_last_lr())
        scheduler.step()  # chainable again, from there
        return lrs + [scheduler.get_last_lr(), scheduler.last_epoch]

    assert run(fg) == run(torch)


def test_warm_restarts_with_fractional_epochs(fg, torch):
    def run(lib, T_mult):
        optimizer = _optimizer(lib)
        scheduler = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=3, T_mult=T_mult, eta_min=0.001)
        trace = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no deprecation warning for this scheduler's epochs
            for epoch in range(30):
                for i in range(7):
                    optimizer.step()
                    scheduler.step(epoch + i / 7)
                    trace.append((scheduler.get_last_lr(), scheduler.T_cur, scheduler.T_i, scheduler.last_epoch))
        scheduler.step(26)
        scheduler.step()  # goes on from epoch 26
        return trace + [(scheduler.get_last_lr(), scheduler.T_cur, scheduler.last_epoch)]

    for T_mult in (1, 2):
        assert run(fg, T_mult) == run(torch, T_mult)


class _Decay:
    """A callable object: its attributes go into the state_dict of LambdaLR, MultiplicativeLR, CyclicLR."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, x):
        return self.rate**x


def test_state_dict_keeps_callable_objects_attributes(fg, torch):
    def run(lib):
        m = lib.optim.lr_scheduler
        makers = [
            lambda opt, decay: m.LambdaLR(opt, [lambda e: 1.0, decay]),
            lambda opt, decay: m.MultiplicativeLR(opt, decay),
            lambda opt, decay: m.CyclicLR(opt, 0.01, 0.1, 5, scale_fn=decay),
        ]
        results = []
        for make in makers:
            optimizer = _optimizer(lib)
            scheduler = make(optimizer, _Decay(0.9))
            optimizer.step()
            scheduler.step()
            state = scheduler.state_dict()
            saved = list(
                state.items()
            )  # (PyTorch's CyclicLR then drops _scale_fn_custom from `state`; fastgrad doesn't)
            loaded = make(_optimizer(lib), _Decay(0.5))
            loaded.load_state_dict(state)
            fn = loaded.lr_lambdas[-1] if hasattr(loaded, "lr_lambdas") else loaded._scale_fn_custom
            results.append((saved, fn.rate, loaded.last_epoch, list(loaded.state_dict())))
        return results

    assert run(fg) == run(torch)


def test_reduce_lr_on_plateau_after_a_new_param_group(fg, torch):
    def program(lib):
        optimizer = _optimizer(lib)
        scheduler = lib.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, min_lr=[0.0, 0.0])
        optimizer.add_param_group({"params": [lib.zeros(1, requires_grad=True)]})
        scheduler.step(1.0)
        scheduler.step(2.0)

    same_error(fg, torch, program)

    def with_one_min_lr(lib):
        optimizer = _optimizer(lib)
        scheduler = lib.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, min_lr=0.01)
        optimizer.add_param_group({"params": [lib.zeros(1, requires_grad=True)]})
        for metric in [1.0, 2.0, 2.0]:
            scheduler.step(metric)
        return scheduler.get_last_lr(), scheduler.min_lrs, scheduler.in_cooldown

    assert with_one_min_lr(fg) == with_one_min_lr(torch)


def test_tensor_lr_is_updated_in_place(fg, torch):
    def run(lib):
        optimizer = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=lib.tensor(0.1))
        lr = optimizer.param_groups[0]["lr"]
        scheduler = lib.optim.lr_scheduler.CyclicLR(optimizer, 0.01, lib.tensor([0.2]), 4, cycle_momentum=False)
        values = []
        for _ in range(10):
            optimizer.step()
            scheduler.step()
            last = scheduler.get_last_lr()[0]
            assert optimizer.param_groups[0]["lr"] is lr and last is not lr  # a copy, not the group's tensor
            values.append(last.item())
        return values

    assert run(fg) == run(torch)


def _warnings_of(program, lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program(lib)
    return [(w.category, str(w.message), os.path.basename(w.filename)) for w in caught]


def _scheduler_first(lib):
    optimizer = _optimizer(lib)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, 2)
    scheduler.step()
    optimizer.step()
    scheduler.step()  # warns once only


def _step_replaced(lib):
    optimizer = _optimizer(lib)
    scheduler = lib.optim.lr_scheduler.ExponentialLR(optimizer, 0.5)
    optimizer.step = lambda closure=None: None
    optimizer.step()
    scheduler.step()


def _get_lr_outside_step(lib):
    optimizer = _optimizer(lib)
    for scheduler in [
        lib.optim.lr_scheduler.LinearLR(optimizer),
        lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, 3),
        lib.optim.swa_utils.SWALR(optimizer, 0.05),
    ]:
        assert scheduler.get_lr() is not None


def _plateau_epoch(lib):
    lib.optim.lr_scheduler.ReduceLROnPlateau(_optimizer(lib)).step(1.0, epoch=3)


@pytest.mark.parametrize("program", [_scheduler_first, _step_replaced, _get_lr_outside_step, _plateau_epoch])
def test_warnings_match_torch(fg, torch, program):
    ours = _warnings_of(program, fg)
    assert ours and ours == _warnings_of(program, torch)


def _step_times(scheduler, optimizer, steps):
    for _ in range(steps):
        optimizer.step()
        scheduler.step()


ERRORS = {
    "not an optimizer": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(object(), 0.1, 10),
    "resume without initial_lr": lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, 3, last_epoch=4),
    "lambdas count": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0]),
    "lambda not callable": lambda lib, opt: lib.optim.lr_scheduler.MultiplicativeLR(opt, 0.9),
    "ConstantLR factor": lambda lib, opt: lib.optim.lr_scheduler.ConstantLR(opt, factor=1.5),
    "LinearLR start": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0),
    "LinearLR end": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, end_factor=-0.1),
    "T_0": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2.0),
    "T_mult": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2, 0),
    "eta_min": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2, eta_min="0"),
    "negative epoch": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2).step(-1),
    "CyclicLR mode": lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="sawtooth"),
    "CyclicLR max_lr count": lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, 0.01, [0.1]),
    "cycle_momentum without momentum": lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(
        lib.optim.Optimizer(opt.param_groups[0]["params"], {"lr": 0.1}), 0.01, 0.1
    ),
    "total_steps": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=0),
    "epochs": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=1.5, steps_per_epoch=3),
    "steps_per_epoch": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=2, steps_per_epoch=-3),
    "no total": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=2),
    "pct_start": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, 10, pct_start=1),
    "anneal_strategy": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, 10, anneal_strategy="exp"),
    "base_momentum count": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, 10, base_momentum=[0.8]),
    "past total_steps": lambda lib, opt: _step_times(lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, 2), opt, 3),
    "plateau factor": lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0),
    "plateau mode": lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="lowest"),
    "plateau threshold_mode": lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="pct"),
    "plateau min_lr count": lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1]),
    "plateau optimizer": lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(None),
    "SequentialLR empty": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [], []),
    "SequentialLR milestones": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.StepLR(opt, 2)], [3]
    ),
    "SequentialLR plateau": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.StepLR(opt, 2), lib.optim.lr_scheduler.ReduceLROnPlateau(opt)], [3]
    ),
    "SequentialLR not a scheduler": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [object()], []),
    "ChainedScheduler empty": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler([]),
    "ChainedScheduler other optimizer": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.StepLR(opt, 2), lib.optim.lr_scheduler.StepLR(_optimizer(lib), 2)]
    ),
    "SWALR anneal_strategy": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, 0.05, anneal_strategy="exp"),
    "SWALR anneal_epochs": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, 0.05, anneal_epochs=-1),
    "SWALR swa_lr count": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, [0.05]),
    "EMA decay": lambda lib, opt: lib.optim.swa_utils.get_ema_multi_avg_fn(1.5),
    "EMA single decay": lambda lib, opt: lib.optim.swa_utils.get_ema_avg_fn(-0.5),
    "two averaging functions": lambda lib, opt: lib.optim.swa_utils.AveragedModel(
        lib.nn.Linear(2, 2), avg_fn=lib.optim.swa_utils.get_swa_avg_fn(), multi_avg_fn=lambda *a: None
    ),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(fg, torch, name):
    same_error(fg, torch, lambda lib: ERRORS[name](lib, _optimizer(lib)))


# ---- swa_utils


def _net(lib, torch_model=None):
    """Linear(3, 2) and a float buffer (the same values in every library: those of torch_model)."""

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(3, 2)
            self.register_buffer("scale", lib.ones(2))

        def forward(self, x):
            return self.linear(x) * self.scale

    net = Net()
    if torch_model is not None:
        net.load_state_dict({k: lib.tensor(v.tolist()) for k, v in torch_model.state_dict().items()})
    return net


def _train(lib, model, averaged, updates):
    """A few updates of the model (made-up steps: the same arithmetic everywhere), each averaged."""
    with lib.no_grad():
        for i in range(updates):
            for j, tensor in enumerate([*model.parameters(), *model.buffers()]):
                tensor.mul_(0.9).add_(0.1 * (i + 1) * (j + 1))
            averaged.update_parameters(model)


AVERAGING = {
    "swa": lambda u: {"device": "cpu"},
    "ema avg_fn": lambda u: {"avg_fn": u.get_ema_avg_fn(0.9)},
    "ema multi_avg_fn": lambda u: {"multi_avg_fn": u.get_ema_multi_avg_fn(0.8)},
    "swa multi_avg_fn": lambda u: {"multi_avg_fn": u.get_swa_multi_avg_fn()},
    "swa avg_fn, buffers": lambda u: {"avg_fn": u.get_swa_avg_fn(), "use_buffers": True},
    "ema multi_avg_fn, buffers": lambda u: {"multi_avg_fn": u.get_ema_multi_avg_fn(), "use_buffers": True},
}


@pytest.mark.parametrize("name", AVERAGING)
def test_averaged_model_matches_torch(fg, torch, name):
    torch_net = _net(torch)

    def run(lib):
        model = _net(lib, torch_net)
        averaged = lib.optim.swa_utils.AveragedModel(model, **AVERAGING[name](lib.optim.swa_utils))
        _train(lib, model, averaged, 4)
        state = {k: (v.tolist(), str(v.dtype).split(".")[-1]) for k, v in averaged.state_dict().items()}
        output = averaged(lib.tensor([[1.0, -2.0, 0.5]])).tolist()
        return state, output, repr(averaged), averaged.module is not model

    (state, output, *rest), (torch_state, torch_output, *torch_rest) = run(fg), run(torch)
    assert (state, rest) == (torch_state, torch_rest)
    # a one-row product sums its k terms in another order than MKL's: float32 rounding apart
    assert output[0] == pytest.approx(torch_output[0], rel=1e-6, abs=1e-6)


def test_swa_multi_avg_fn_with_a_count_and_integer_tensors(fg, torch):
    def run(lib):
        averaged, current = [lib.tensor([1.0, 2.0], dtype=lib.float64)], [lib.tensor([4.0, -1.0], dtype=lib.float64)]
        lib.optim.swa_utils.get_swa_multi_avg_fn()(averaged, current, 2)
        ema = [lib.tensor([10, 20])]
        lib.optim.swa_utils.get_ema_multi_avg_fn(0.5)(ema, [lib.tensor([2, 4])], 0)
        return averaged[0].tolist(), ema[0].tolist(), str(ema[0].dtype).split(".")[-1]

    assert run(fg) == run(torch)
    same_error(
        fg, torch, lambda lib: lib.optim.swa_utils.get_swa_multi_avg_fn()([lib.tensor([1])], [lib.tensor([3])], 1)
    )


@pytest.mark.parametrize("options", [{}, {"anneal_strategy": "linear", "anneal_epochs": 5}, {"anneal_epochs": 0}])
def test_swalr_matches_torch(fg, torch, options):
    def run(lib):
        optimizer = _optimizer(lib)
        scheduler = lib.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=20)
        swa_scheduler = lib.optim.swa_utils.SWALR(optimizer, swa_lr=[0.05, 0.001], **options)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(40):
                optimizer.step()
                (swa_scheduler if i >= 15 else scheduler).step()
                lrs.append(optimizer.param_groups[0]["lr"])
                lrs.append(optimizer.param_groups[1]["lr"])
        state = swa_scheduler.state_dict()
        resumed = lib.optim.swa_utils.SWALR(_optimizer(lib), swa_lr=0.05)
        resumed.load_state_dict(state)
        return lrs, list(state.items()), resumed.anneal_func(0.5)

    assert run(fg) == run(torch)


def _batch_norm_stand_in(lib, name):
    """A module with BatchNorm1d's running statistics (the training-mode update, momentum None: the
    cumulative average), for update_bn until fastgrad has BatchNorm. update_bn recognizes BatchNorm
    by its base class _BatchNorm; another `name` keeps the same module out of its reach."""

    def __init__(self):
        lib.nn.Module.__init__(self)
        self.momentum = 0.1
        self.register_buffer("running_mean", lib.full((2,), 5.0))
        self.register_buffer("running_var", lib.full((2,), 5.0))
        self.register_buffer("num_batches_tracked", lib.tensor(7))

    def reset_running_stats(self):
        self.running_mean.zero_()
        self.running_var.fill_(1)
        self.num_batches_tracked.zero_()

    def forward(self, x):
        if self.training:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
            self.running_mean.mul_(1 - factor).add_(x.mean(0) * factor)
            self.running_var.mul_(1 - factor).add_(x.var(0) * factor)
        return x

    base = type(name, (lib.nn.Module,), {"__init__": __init__, "reset_running_stats": reset_running_stats})
    return type("BatchNorm1d", (base,), {"forward": forward})()


def test_update_bn_recomputes_the_running_statistics(fg, torch):
    torch_model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    torch_model[1].running_mean.fill_(5.0)
    torch_model[1].running_var.fill_(5.0)
    batches = [[[0.5, -1.0, 2.0], [1.5, 0.0, -0.5], [0.0, 1.0, 1.0]], [[2.0, 2.0, -2.0], [-1.0, 0.5, 0.25]]]

    def run(lib, model, batch_norm):
        model.eval()
        loader = [(lib.tensor(batch), lib.zeros(len(batch))) for batch in batches]
        lib.optim.swa_utils.update_bn(loader, model, device="cpu")
        stats = [
            batch_norm.running_mean.tolist(),
            batch_norm.running_var.tolist(),
            batch_norm.num_batches_tracked.item(),
        ]
        return stats, batch_norm.momentum, model.training

    ours_model = fg.nn.Sequential(fg.nn.Linear(3, 2), _batch_norm_stand_in(fg, "_BatchNorm"))
    ours_model[0].load_state_dict({k: fg.tensor(v.tolist()) for k, v in torch_model[0].state_dict().items()})
    (stats, momentum, training) = run(fg, ours_model, ours_model[1])
    (torch_stats, torch_momentum, torch_training) = run(torch, torch_model, torch_model[1])
    assert stats[0] == pytest.approx(torch_stats[0], rel=1e-6, abs=1e-7) and stats[1] == pytest.approx(
        torch_stats[1], rel=1e-6, abs=1e-7
    )
    assert stats[2] == torch_stats[2] == len(batches)
    assert (momentum, training) == (torch_momentum, torch_training) == (0.1, False)

    # not a _BatchNorm (as InstanceNorm, with running stats): untouched, the model not even put in training mode
    other = _batch_norm_stand_in(fg, "_InstanceNorm")
    assert run(fg, other, other) == ([[5.0, 5.0], [5.0, 5.0], 7], 0.1, False)
