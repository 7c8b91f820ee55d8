"""The optimizers' fused updates (csrc/kernels/optim_impl.h, the reference's _optim.py) against
torch.optim, bit for bit: parameters and state after 20 steps from the same gradients, float32 and
float64, sizes around the vector widths, infinities and NaN, strided tensors, any thread count; and
the primitive's errors. tests/test_kernels.py reruns this file under every other ISA.

PyTorch's CPU sqrt is MKL's (VML_HA), which is not correctly rounded (about 20% of float32 and 1% of
float64 results are one ulp off the nearest value, depending on MKL and the CPU); fastgrad's is. The
oracle is PyTorch's own optimizer run with a correctly rounded Tensor.sqrt, so that every other
rounding of the chain (the fused multiply-adds, the order of the operations, the scalars) is
checked exactly; test_optim.py compares with PyTorch unchanged.
"""

import numpy as np
import pytest

_RNG = np.random.default_rng(13)
# Sizes around the AVX2 / AVX-512 widths, so both vector bodies and tails run.
_SHAPES = [(5, 7), (37,), (3,), (17,), (1,)]
_START = [_RNG.standard_normal(s) for s in _SHAPES]
_GRADS = [[_RNG.standard_normal(s) for s in _SHAPES] for _ in range(20)]

CONFIGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.5, "weight_decay": 0.1, "maximize": True}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.01, "betas": (0.4, 0.99), "weight_decay": 0.1, "eps": 1e-3}),  # lerp from the far end
    ("AdamW", {"lr": 0.01, "amsgrad": True}),
    ("AdamW", {"lr": 0.03, "weight_decay": 0.3, "betas": (0.2, 0.5), "maximize": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0}),
]
IDS = [f"{n}-{'-'.join(o)}" for n, o in CONFIGS]


@pytest.fixture
def correctly_rounded_torch(torch, monkeypatch):
    """torch with Tensor.sqrt correctly rounded (numpy's), see the module's docstring."""
    monkeypatch.setattr(torch.Tensor, "sqrt", lambda t: torch.from_numpy(np.sqrt(t.numpy())))
    return torch


def _run(lib, name, options, dtype, start=_START, grads=_GRADS, layout=lambda t: t):
    """Parameters (as numpy) and state after one step per list of gradients; `layout` makes each
    parameter and gradient tensor (a strided view, say)."""
    params = [layout(lib.tensor(p.astype(dtype))).requires_grad_() for p in start]
    opt = getattr(lib.optim, name)(params, **options)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = layout(lib.tensor(g.astype(dtype)))
        opt.step()
    state = [{k: v.numpy() for k, v in opt.state[p].items()} for p in params]
    return [p.detach().numpy() for p in params], state


def _assert_identical(ours, theirs):
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_array_equal(a, b, strict=True)
    for ours_state, their_state in zip(ours[1], theirs[1]):
        assert list(ours_state) == list(their_state)
        for key, value in their_state.items():
            np.testing.assert_array_equal(ours_state[key], value, strict=True, err_msg=key)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_updates_and_state_match_torch_bit_for_bit(fg, correctly_rounded_torch, name, options, dtype):
    _assert_identical(_run(fg, name, options, dtype), _run(correctly_rounded_torch, name, options, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infinities_and_nan_as_torch(fg, correctly_rounded_torch, dtype):
    # An infinite or NaN gradient poisons its element's moments (and, with amsgrad, the maximum keeps
    # the NaN); infinite parameters meet the weight decay.
    start = [np.array([1.0, np.inf, -2.0, 0.5, -0.0, 3.0, 1.0, 2.0, -1.0])]
    grads = [[np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, 1e30, -1e-30, 0.0, 2.0])]] + [[np.full(9, 0.5)]] * 2
    configs = [
        ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
        ("AdamW", {"weight_decay": 0.5}),
        ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
        ("Adagrad", {"weight_decay": 0.1}),
    ]
    for name, options in configs:
        ours = _run(fg, name, options, dtype, start, grads)
        _assert_identical(ours, _run(correctly_rounded_torch, name, options, dtype, start, grads))


@pytest.mark.parametrize("name,options", [("Adam", {"lr": 0.1, "amsgrad": True}), ("SGD", {"momentum": 0.5})])
def test_writes_through_strided_parameters_and_gradients(fg, correctly_rounded_torch, name, options):
    start = [_RNG.standard_normal((6, 5))]
    grads = [[_RNG.standard_normal((6, 5))] for _ in range(3)]

    def transposed(t):
        return t.t().contiguous().t()  # column-major: not contiguous

    ours = _run(fg, name, options, np.float32, start, grads, transposed)
    _assert_identical(ours, _run(correctly_rounded_torch, name, options, np.float32, start, grads, transposed))


def test_results_do_not_depend_on_the_thread_count(fg):
    if not hasattr(fg, "set_num_threads") or fg.__name__.endswith("reference"):
        pytest.skip("the C++ core's thread pool")  # and the reference is too slow for this size
    start = [_RNG.standard_normal(100_003)]  # more than two parallel chunks, with a tail
    grads = [[_RNG.standard_normal(100_003)] for _ in range(2)]
    threads = fg.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            fg.set_num_threads(n)
            results.append(_run(fg, "Adam", {"amsgrad": True}, np.float32, start, grads))
            results[-1][0].extend(_run(fg, "SGD", {"momentum": 0.9}, np.float32, start, grads)[0])
    finally:
        fg.set_num_threads(threads)
    _assert_identical(results[0], results[1])
    _assert_identical(results[0], results[2])


# ---- the primitive


@pytest.fixture
def prims(fg):
    """The backend's primitives (PyTorch, as FASTGRAD_TEST_BACKENDS=torch, has no such layer)."""
    if not hasattr(getattr(fg, "_prims", None), "sgd_"):
        pytest.skip("fastgrad's own primitives")
    return fg._prims


def _adam_(prims, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs=()):
    """adam_ with Adam's defaults at step 1."""
    n = len(params)
    scalars = (0.1, 0.999, 1e-3, 1e-8, 0.0, 1.0, False)
    prims.adam_(params, grads, exp_avgs, exp_avg_sqs, list(max_exp_avg_sqs), [1e-2] * n, [1e-3**0.5] * n, *scalars)


def _sgd_(prims, params, grads, momentum_buffers):
    """sgd_ with momentum 0.9 after the first step."""
    prims.sgd_(params, grads, momentum_buffers, [False] * len(params), 0.1, 0.9, 1.0, 0.0, False, False)


UPDATES = {
    "adam_": lambda prims, params, grads, states: _adam_(prims, params, grads, states, [s.clone() for s in states]),
    "sgd_": _sgd_,
    "adagrad_": lambda prims, params, grads, states: prims.adagrad_(
        params, grads, states, [0.1] * 2, 1e-10, 0.0, False
    ),
}
ERRORS = {
    "length": "{}(): expected lists of the same length, got 2 and 1",
    "shape": "{}(): expected float32 or float64 tensors of one dtype and shape, got Float[3] and Float[2]",
    "dtype": "{}(): expected float32 or float64 tensors of one dtype and shape, got Float[3] and Double[3]",
    "half": "{}(): expected float32 or float64 tensors of one dtype and shape, got Half[3] and Half[3]",
    "grad": "{}() does not record gradients: call it under no_grad()",
}


@pytest.mark.parametrize("case", ERRORS)
@pytest.mark.parametrize("update", UPDATES)
def test_errors_leave_tensors_unchanged(fg, prims, update, case):
    first = fg.zeros(3)
    second = fg.zeros(3, dtype=fg.float16) if case == "half" else fg.zeros(3, requires_grad=case == "grad")
    grad = {"shape": fg.ones(2), "dtype": fg.ones(3, dtype=fg.float64), "half": fg.ones(3, dtype=fg.float16)}
    grads = [fg.ones(3)] if case == "length" else [fg.ones(3), grad.get(case, fg.ones(3))]
    states = [fg.zeros(3), fg.zeros(3, dtype=second.dtype)]
    with pytest.raises(RuntimeError) as info:
        UPDATES[update](prims, [first, second], grads, states)
    assert str(info.value) == ERRORS[case].format(update)
    assert first.tolist() == [0.0] * 3 and [first._version, states[0]._version] == [0, 0]


def test_updates_reject_non_tensors(fg, prims):
    with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but got int"):
        _sgd_(prims, [fg.zeros(1), 3], [fg.zeros(1), fg.zeros(1)], [fg.zeros(1), fg.zeros(1)])


def test_adam_bumps_the_versions_of_what_it_writes(fg, prims):
    param, grad, state = fg.zeros(4), fg.ones(4), [fg.zeros(4), fg.zeros(4), fg.zeros(4)]
    _adam_(prims, [param], [grad], [state[0]], [state[1]], [state[2]])
    assert [t._version for t in (param, grad, *state)] == [1, 0, 1, 1, 1]
    assert param.tolist() == [pytest.approx(-1e-3)] * 4  # the first step moves by lr


@pytest.mark.parametrize(
    "name,options",
    [("Adam", {"lr": 0.01, "amsgrad": True}), ("AdamW", {"weight_decay": 0.3}), ("SGD", {"momentum": 0.9})],
)
def test_eager_steps_in_cpp_give_the_python_methods_bits(fg, prims, monkeypatch, name, options):
    # From its second step on (the first makes the state), an optimizer without hooks steps and zeroes
    # its gradients as a compiled replay does (csrc/python/optim_replay.cpp): compared with the
    # Python methods, which the same run takes with that path turned off, and with a scheduler
    # changing the learning rate between steps.
    if fg.__name__.endswith("reference"):
        pytest.skip("the reference's optimizers always run their Python methods")

    def run():
        params = [fg.tensor(p.astype(np.float32)).requires_grad_() for p in _START]
        opt = getattr(fg.optim, name)(params, **options)
        scheduler = fg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        for step_grads in _GRADS[:6]:
            opt.zero_grad()
            assert all(p.grad is None for p in params)
            for p, g in zip(params, step_grads):
                p.grad = fg.tensor(g.astype(np.float32))
            opt.step()
            scheduler.step()
        return [p.detach().numpy() for p in params], [{k: v.numpy() for k, v in opt.state[p].items()} for p in params]

    taken = []
    in_cpp = prims._run_fused_update
    monkeypatch.setattr(prims, "_run_fused_update", lambda d: taken.append(in_cpp(d)) or taken[-1])
    fast = run()
    assert taken.count(True) == 2 * 6 - 1  # the first step (it makes the state) runs in Python
    monkeypatch.setattr(prims, "_run_fused_update", lambda d: False)
    _assert_identical(fast, run())


def test_step_hooks_run_the_python_method(fg, prims):
    # With a hook the C++ path declines (it runs no Python), and the hook sees every step.
    param = fg.ones(3, requires_grad=True)
    opt = fg.optim.Adam([param])
    seen = []
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append(o.state[param]["step"].item()))
    for _ in range(3):
        param.grad = fg.ones(3)
        opt.step()
    assert seen == [1.0, 2.0, 3.0]
