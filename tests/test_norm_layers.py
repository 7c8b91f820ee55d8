"""The normalization layers over channels (batch, instance, group, local response; layer norm over
image dims) and pixel (un)shuffle against PyTorch (interpolate / Upsample: test_interpolate.py):
values and gradients, float64 gradcheck and gradgradcheck, running statistics over training steps, train/eval
behaviour, state_dicts loaded both ways, reprs, errors, and a small model trained step by step.

A case is a function of (F, t, *inputs) run on both libraries with the same numpy data; the float
inputs require grad and the output is backpropagated with the same upstream gradient.
"""

import re
import warnings

import numpy as np
import pytest

from op_helpers import assert_same_bits_at_thread_counts, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error


def _batch_norm_stats(F, t, x, w, b, training):
    """batch_norm with running stats made from fixed numbers; returns the output and the stats."""
    channels = x.shape[1]
    mean = t.tensor(np.linspace(-0.5, 0.5, channels), dtype=x.dtype)
    var = t.tensor(np.linspace(0.5, 2.0, channels), dtype=x.dtype)
    out = F.batch_norm(x, mean, var, w, b, training=training, momentum=0.3, eps=1e-3)
    return out, mean, var


def _instance_norm_stats(F, t, x):
    mean, var = t.zeros(x.shape[1], dtype=x.dtype), t.ones(x.shape[1], dtype=x.dtype)
    return F.instance_norm(x, mean, var, momentum=0.2), mean, var


CASES = {  # id: (fn(F, t, *inputs), input shapes)
    "batch_norm train": (lambda F, t, x, w, b: _batch_norm_stats(F, t, x, w, b, True), [(4, 3, 5), (3,), (3,)]),
    "batch_norm eval": (lambda F, t, x, w, b: _batch_norm_stats(F, t, x, w, b, False), [(2, 3, 2, 3), (3,), (3,)]),
    "batch_norm batch stats": (lambda F, t, x: F.batch_norm(x, None, None, training=True), [(5, 2)]),
    "batch_norm 3d": (lambda F, t, x: F.batch_norm(x, None, None, training=True), [(2, 2, 2, 3, 2)]),
    "instance_norm": (lambda F, t, x, w, b: F.instance_norm(x, weight=w, bias=b), [(2, 3, 6), (3,), (3,)]),
    "instance_norm stats": (_instance_norm_stats, [(3, 2, 3, 4)]),
    "group_norm": (lambda F, t, x, w, b: F.group_norm(x, 3, w, b, eps=1e-3), [(2, 6, 3, 2), (6,), (6,)]),
    "group_norm plain": (lambda F, t, x: F.group_norm(x, 1), [(3, 2, 5)]),
    "local_response_norm": (lambda F, t, x: F.local_response_norm(x, 3, alpha=0.5, k=2.0), [(2, 5, 4)]),
    "local_response_norm 4d": (lambda F, t, x: F.local_response_norm(x, 2, 0.3, 0.5), [(2, 4, 3, 2)]),
    "layer_norm image": (lambda F, t, x, w, b: F.layer_norm(x, (3, 4, 5), w, b), [(2, 3, 4, 5), (3, 4, 5), (3, 4, 5)]),
    "pixel_shuffle": (lambda F, t, x: F.pixel_shuffle(x, 2), [(2, 8, 3, 2)]),
    "pixel_shuffle batchless": (lambda F, t, x: F.pixel_shuffle(x, 3), [(9, 2, 1)]),
    "pixel_unshuffle": (lambda F, t, x: F.pixel_unshuffle(x, 2), [(2, 1, 2, 4, 6)]),
}


def _run(lib, fn, arrays, upstream):
    """fn's outputs and the float inputs' gradients for sum(output * upstream) (the first output)."""
    inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
    outputs = fn(lib.nn.functional, lib, *inputs)
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    (outputs[0] * lib.tensor(upstream(outputs[0].shape))).sum().backward()
    return [to_numpy(o) for o in outputs] + [to_numpy(x.grad) for x in inputs]


# float32 too where the computation has float32 steps of its own (statistics)
IN_FLOAT32 = [
    "batch_norm train",
    "group_norm",
]


@pytest.mark.parametrize(
    "case,dtype", [(case, "float64") for case in CASES] + [(case, "float32") for case in IN_FLOAT32]
)
def test_values_and_gradients_match_pytorch(fg, torch, case, dtype):
    fn, shapes = CASES[case]
    rng = rng_for(case, dtype)
    arrays = [rng.uniform(-2, 2, size=shape).astype(dtype) for shape in shapes]

    def upstream(shape):
        return rng_for(case, "upstream").uniform(-1, 1, size=tuple(shape)).astype(dtype)

    ours, theirs = _run(fg, fn, arrays, upstream), _run(torch, fn, arrays, upstream)
    tolerance = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for got, expected in zip(ours, theirs, strict=True):
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, **tolerance)


GRADCHECKED = {  # float64 finite differences of the composed gradients, and of their gradients
    "batch_norm train": (
        lambda F, t, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        [(3, 2, 2), (2,), (2,)],
    ),
    "instance_norm": (lambda F, t, x: F.instance_norm(x), [(2, 2, 3)]),
    "group_norm": (lambda F, t, x, w: F.group_norm(x, 2, w), [(2, 4, 2), (4,)]),
    "batch_norm eval": (
        lambda F, t, x, w: F.batch_norm(x, t.zeros(2, dtype=x.dtype), t.full((2,), 2.0, dtype=x.dtype), w),
        [(3, 2, 2), (2,)],
    ),
    "batch_norm 2d bias": (
        lambda F, t, x, b: F.batch_norm(x, None, None, None, b, training=True),
        [(2, 2, 1, 3), (2,)],
    ),
    "group_norm bias 2d": (lambda F, t, x, w, b: F.group_norm(x, 1, w, b), [(2, 2, 2, 1), (2,), (2,)]),
    "local_response_norm": (lambda F, t, x: F.local_response_norm(x, 2, alpha=0.5), [(1, 3, 2)]),
}


@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
@pytest.mark.parametrize("case", list(GRADCHECKED))
def test_gradcheck(fg, case, check):
    fn, shapes = GRADCHECKED[case]
    rng = rng_for("gradcheck", case)
    inputs = [fg.tensor(rng.uniform(-2, 2, size=shape), requires_grad=True) for shape in shapes]
    assert gradcheck_for(fg, check)(lambda *xs: fn(fg.nn.functional, fg, *xs), inputs, eps=1e-6, atol=1e-5)


# ---- the modules: running statistics, modes, state_dicts, reprs


MODULES = {  # id: (constructor(nn), input shape)
    "BatchNorm1d": (lambda nn: nn.BatchNorm1d(3), (4, 3)),
    "BatchNorm1d cumulative": (lambda nn: nn.BatchNorm1d(3, momentum=None, affine=False), (4, 3, 2)),
    "BatchNorm2d": (lambda nn: nn.BatchNorm2d(2, eps=1e-3, momentum=0.25), (3, 2, 2, 3)),
    "BatchNorm2d untracked": (lambda nn: nn.BatchNorm2d(2, track_running_stats=False), (3, 2, 2, 2)),
    "BatchNorm3d": (lambda nn: nn.BatchNorm3d(2, bias=False), (2, 2, 2, 1, 3)),
    "InstanceNorm1d tracked": (lambda nn: nn.InstanceNorm1d(3, affine=True, track_running_stats=True), (2, 3, 4)),
    "InstanceNorm2d": (lambda nn: nn.InstanceNorm2d(2), (2, 2, 3, 3)),
    "InstanceNorm2d batchless": (lambda nn: nn.InstanceNorm2d(2, track_running_stats=True), (2, 3, 3)),
    "GroupNorm": (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3)),
}


def _steps(lib, name, batches):
    """Three training steps (each followed by a parameter update) and an evaluation; returns the
    outputs, the parameters' gradients, the state_dict and the evaluation's output."""
    constructor, _ = MODULES[name]
    module = constructor(lib.nn).double()
    results = []
    for batch in batches[:-1]:
        x = lib.tensor(batch, requires_grad=True)
        out = module(x)
        (out**3).sum().backward()
        results += [to_numpy(out), to_numpy(x.grad)]
        with lib.no_grad():
            for p in module.parameters():
                results.append(to_numpy(p.grad))
                p -= 0.1 * p.grad
                p.grad = None
    module.eval()
    results.append(to_numpy(module(lib.tensor(batches[-1]))))
    state = {k: to_numpy(v) for k, v in module.state_dict().items()}
    return results, state


@pytest.mark.parametrize("name", list(MODULES))
def test_training_steps_and_evaluation_match_pytorch(fg, torch, name):
    shape = MODULES[name][1]
    rng = rng_for("steps", name)
    batches = [rng.standard_normal(shape) * 2 + 1 for _ in range(4)]
    (ours, our_state), (theirs, their_state) = _steps(fg, name, batches), _steps(torch, name, batches)
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert list(our_state) == list(their_state)
    for key, expected in their_state.items():
        assert our_state[key].dtype == expected.dtype, key
        np.testing.assert_allclose(our_state[key], expected, rtol=1e-10, atol=1e-12, err_msg=key)


def test_eval_mode_normalizes_with_the_running_stats(fg):
    bn = fg.nn.BatchNorm1d(2)
    with fg.no_grad():
        bn.running_mean.copy_(fg.tensor([1.0, -1.0]))
        bn.running_var.copy_(fg.tensor([4.0, 0.25]))
    bn.eval()
    out = bn(fg.tensor([[3.0, -1.5], [1.0, 0.0]]))
    np.testing.assert_allclose(to_numpy(out), [[1.0, -1.0], [0.0, 2.0]], rtol=1e-4)
    assert bn.num_batches_tracked.item() == 0  # evaluation does not count batches


def test_state_dict_loads_both_ways(fg, torch):
    rng = rng_for("state_dict")

    def model(nn):
        return nn.Sequential(nn.BatchNorm2d(3), nn.GroupNorm(1, 3), nn.InstanceNorm2d(3, track_running_stats=True))

    source = model(torch.nn)
    source(torch.tensor(rng.standard_normal((4, 3, 2, 2)), dtype=torch.float32))  # running stats move
    ours = model(fg.nn)
    ours.load_state_dict({k: fg.tensor(v.numpy()) for k, v in source.state_dict().items()})
    assert ours[0].num_batches_tracked.dtype is fg.int64 and ours[0].num_batches_tracked.item() == 1
    back = model(torch.nn)
    back.load_state_dict({k: torch.tensor(to_numpy(v)) for k, v in ours.state_dict().items()})
    for key, value in source.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key


def test_state_dict_without_num_batches_tracked(fg, torch):
    """A checkpoint from before num_batches_tracked (no version in its metadata) loads with the count kept."""
    for t in (fg, torch):
        bn = t.nn.BatchNorm1d(2)
        bn.num_batches_tracked.fill_(5)
        state = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        assert repr(bn.load_state_dict(state)) == "<All keys matched successfully>"
        assert bn.num_batches_tracked.item() == 5


def test_lazy_batch_norm_takes_its_features_from_the_first_input(fg, torch):
    results = []
    for t in (fg, torch):
        bn = t.nn.LazyBatchNorm2d(momentum=0.5)
        assert bn.has_uninitialized_params()
        out = bn(t.tensor(np.arange(24.0, dtype=np.float32).reshape(2, 3, 2, 2)))
        assert type(bn).__name__ == "BatchNorm2d" and bn.num_features == 3
        results.append([repr(bn), to_numpy(out), to_numpy(bn.running_var), list(bn.state_dict())])
    assert results[0][0] == results[1][0] and results[0][3] == results[1][3]
    for got, expected in zip(results[0][1:3], results[1][1:3]):
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_swa_update_bn_recomputes_the_batch_norm_stats(fg, torch):
    results = []
    data = [np.arange(6.0, dtype=np.float32).reshape(3, 2) * k for k in (1, 2)]
    for t in (fg, torch):
        model = t.nn.Sequential(t.nn.Linear(2, 2), t.nn.BatchNorm1d(2))
        model.load_state_dict({"0.weight": t.eye(2), "0.bias": t.zeros(2)}, strict=False)
        t.optim.swa_utils.update_bn([t.tensor(batch) for batch in data], model)
        results.append([to_numpy(model[1].running_mean), to_numpy(model[1].running_var), model[1].momentum])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == results[1][2] == 0.1


REPRS = [
    lambda nn: nn.BatchNorm1d(3),
    lambda nn: nn.BatchNorm2d(4, eps=1e-3, momentum=None, affine=False),
    lambda nn: nn.BatchNorm3d(2, track_running_stats=False, bias=False),
    lambda nn: nn.LazyBatchNorm1d(),
    lambda nn: nn.InstanceNorm1d(3),
    lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
    lambda nn: nn.InstanceNorm3d(2),
    lambda nn: nn.LazyInstanceNorm2d(),
    lambda nn: nn.GroupNorm(2, 4, affine=False),
    lambda nn: nn.GroupNorm(3, 6, eps=0.1, bias=False),
    lambda nn: nn.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2),
    lambda nn: nn.PixelShuffle(3),
    lambda nn: nn.PixelUnshuffle(2),
    lambda nn: nn.Sequential(nn.BatchNorm2d(2), nn.Dropout2d(0.2), nn.Dropout1d()),
]


@pytest.mark.parametrize("index", range(len(REPRS)))
def test_reprs_and_state_dict_keys_match_pytorch(fg, torch, index):
    ours, theirs = REPRS[index](fg.nn), REPRS[index](torch.nn)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_buffers()] == [name for name, _ in theirs.named_buffers()]


def _floats(t, *shape):
    return t.ones(*shape)


ERRORS = {
    "BatchNorm1d rank": lambda t: t.nn.BatchNorm1d(2)(_floats(t, 2, 2, 2, 2)),
    "BatchNorm2d rank": lambda t: t.nn.BatchNorm2d(2)(_floats(t, 2, 2)),
    "BatchNorm3d rank": lambda t: t.nn.BatchNorm3d(2)(_floats(t, 2, 2, 2, 2)),
    "InstanceNorm2d rank": lambda t: t.nn.InstanceNorm2d(2)(_floats(t, 2, 2)),
    "InstanceNorm1d features": lambda t: t.nn.InstanceNorm1d(3, affine=True)(_floats(t, 2, 2, 3)),
    "one value per channel": lambda t: t.nn.BatchNorm1d(2)(_floats(t, 1, 2)),
    "one spatial element": lambda t: t.nn.InstanceNorm1d(2)(_floats(t, 2, 2, 1)),
    "running_mean size": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), t.zeros(2), t.ones(3)),
    "running_var size": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), t.zeros(3), t.ones(2)),
    "weight size": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), None, None, t.ones(2), training=True),
    "bias size": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), None, None, None, t.ones(4), True),
    "eval without stats": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), None, None),
    "eval without var": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), t.zeros(3), None),
    "negative eps": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), t.zeros(3), t.ones(3), eps=-1.0),
    "zero eps training": lambda t: t.nn.functional.batch_norm(_floats(t, 2, 3), None, None, training=True, eps=0.0),
    "integer input": lambda t: t.nn.functional.batch_norm(t.ones(2, 3, dtype=t.long), t.zeros(3), t.ones(3)),
    "double parameters": lambda t: t.nn.functional.batch_norm(
        _floats(t, 2, 3), t.zeros(3, dtype=t.float64), t.ones(3, dtype=t.float64)
    ),
    "float parameters": lambda t: t.nn.functional.batch_norm(
        t.ones(2, 3, dtype=t.float64), t.zeros(3), t.ones(3), training=True
    ),
    "instance_norm stats": lambda t: t.nn.functional.instance_norm(_floats(t, 2, 3, 4), use_input_stats=False),
    "instance_norm weight": lambda t: t.nn.functional.instance_norm(_floats(t, 2, 3, 4), weight=t.ones(2)),
    "GroupNorm divisible": lambda t: t.nn.GroupNorm(2, 3),
    "group_norm divisible": lambda t: t.nn.functional.group_norm(_floats(t, 2, 3, 2), 2),
    "group_norm weight": lambda t: t.nn.functional.group_norm(_floats(t, 2, 4, 2), 2, t.ones(2)),
    "group_norm groups": lambda t: t.nn.functional.group_norm(_floats(t, 2, 4, 3), -2),
    "local_response_norm size": lambda t: t.nn.functional.local_response_norm(_floats(t, 2, 3, 4), 0),
    "group_norm rank": lambda t: t.nn.functional.group_norm(_floats(t, 4), 2),
    "group_norm integers": lambda t: t.nn.functional.group_norm(t.ones(2, 4, 2, dtype=t.long), 2),
    "local_response_norm rank": lambda t: t.nn.LocalResponseNorm(2)(_floats(t, 2, 3)),
    "pixel_shuffle rank": lambda t: t.nn.PixelShuffle(2)(_floats(t, 4, 2)),
    "pixel_shuffle factor": lambda t: t.nn.functional.pixel_shuffle(_floats(t, 4, 2, 2), 0),
    "pixel_shuffle channels": lambda t: t.nn.functional.pixel_shuffle(_floats(t, 3, 2, 2), 2),
    "pixel_shuffle float": lambda t: t.nn.functional.pixel_shuffle(_floats(t, 4, 2, 2), 2.0),
    "pixel_unshuffle height": lambda t: t.nn.functional.pixel_unshuffle(_floats(t, 1, 3, 4), 2),
    "pixel_unshuffle width": lambda t: t.nn.functional.pixel_unshuffle(_floats(t, 1, 4, 3), 2),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(fg, torch, ERRORS[case])


def test_float16_batch_norm_with_float32_parameters(fg, torch):
    """As PyTorch's kernel: normalized in float32, the output in float16, the float32 stats updated."""
    x = rng_for("float16").standard_normal((4, 3, 5)).astype(np.float16)
    results = []
    for t in (fg, torch):
        running_mean, running_var = t.zeros(3), t.ones(3)
        out = t.nn.functional.batch_norm(t.tensor(x), running_mean, running_var, t.ones(3), t.zeros(3), True)
        assert out.dtype == t.float16
        results.append([to_numpy(out).astype(np.float32), to_numpy(running_mean), to_numpy(running_var)])
    for got, expected in zip(*results):
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


def test_instance_norm_warns_when_features_differ_without_affine(fg):
    with pytest.warns(UserWarning, match=re.escape("input's size at dim=1 does not match num_features")):
        fg.nn.InstanceNorm1d(3)(fg.ones(2, 2, 3))


def test_empty_batch_leaves_the_running_stats(fg, torch):
    for t in (fg, torch):
        bn = t.nn.BatchNorm2d(2)
        assert bn(t.ones(0, 2, 3, 3)).shape == (0, 2, 3, 3)
        assert bn.running_mean.tolist() == [0.0, 0.0] and bn.running_var.tolist() == [1.0, 1.0]
        assert t.nn.functional.batch_norm(t.ones(2, 0, 3), None, None, training=True).shape == (2, 0, 3)


# ---- a model with batch norm trained as in PyTorch


def _train(lib, state, x, target):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(lib.tensor(x[0])), lib.tensor(target))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    evaluation = to_numpy(model(lib.tensor(x[-1])))
    return losses, evaluation, {k: to_numpy(v) for k, v in model.state_dict().items()}


def test_linear_batch_norm_model_trains_as_pytorch(fg, torch):
    torch.manual_seed(0)
    reference = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2)
    )
    state = {k: v.numpy().copy() for k, v in reference.state_dict().items()}
    rng = rng_for("batch norm model")
    x = rng.standard_normal((2, 16, 4)).astype(np.float32)  # a training batch and an evaluation batch
    target = rng.standard_normal((16, 2)).astype(np.float32)
    (losses, evaluation, params), expected = _train(fg, state, x, target), _train(torch, state, x, target)
    np.testing.assert_allclose(losses, expected[0], rtol=1e-5)
    assert expected[0][-1] < expected[0][0]  # it learns
    np.testing.assert_allclose(evaluation, expected[1], rtol=1e-4, atol=1e-5)
    assert params.keys() == expected[2].keys()
    for key, value in expected[2].items():
        np.testing.assert_allclose(params[key], value, rtol=1e-4, atol=1e-6, err_msg=key)


# ---- the fused kernels (csrc/ops/normalization.cpp and its twin reference/_norm.py)


def _norm_program(F, t, kind, x, w, b):
    if kind == "batch_norm":
        mean, var = t.zeros(x.shape[1], dtype=x.dtype), t.ones(x.shape[1], dtype=x.dtype)
        return [F.batch_norm(x, mean, var, w, b, training=True, momentum=0.2), mean, var]
    return [F.group_norm(x, 2, w, b)]


FUSED = {  # id: (kind, input shape): rows of one value per channel, rows longer than a summing block
    "batch_norm rows": ("batch_norm", (37, 6)),
    "batch_norm planes": ("batch_norm", (3, 4, 15, 13)),
    "group_norm planes": ("group_norm", (3, 4, 15, 13)),
    "group_norm rows": ("group_norm", (5, 6, 1)),
}


@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("case", list(FUSED))
def test_float32_kernels_far_from_zero_match_pytorchs_float64(fg, torch, case, transposed):
    """Values, gradients and running stats of a float32 input whose mean is 300 times its spread,
    within a few float32 roundings of the input's size of PyTorch's float64 results (a variance
    taken as E[x^2] - E[x]^2 in float32 would be off by 300^2 float32 roundings); also for a
    transposed (non-contiguous) input."""
    kind, shape = FUSED[case]
    rng = rng_for("fused", case)
    x = (rng.standard_normal(shape) + 300).astype(np.float32)
    w, b = (rng.uniform(0.5, 2, size=shape[1]).astype(np.float32) for _ in range(2))
    upstream = rng.standard_normal(shape).astype(np.float32)
    results = []
    for t, dtype in ((fg, "float32"), (torch, "float64")):
        x_in, w_in, b_in, up_in = (a.astype(dtype) for a in (x, w, b, upstream))
        xt = t.tensor(x_in.swapaxes(0, -1).copy()).swapaxes(0, -1) if transposed else t.tensor(x_in)
        xt.requires_grad_()
        wt, bt = t.tensor(w_in, requires_grad=True), t.tensor(b_in, requires_grad=True)
        outputs = _norm_program(t.nn.functional, t, kind, xt, wt, bt)
        outputs[0].backward(t.tensor(up_in))
        results.append([to_numpy(o) for o in outputs] + [to_numpy(g.grad) for g in (xt, wt, bt)])
    for got, expected in zip(*results, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["batch_norm", "group_norm"])
def test_kernels_do_not_depend_on_the_thread_count(kind, dtype):
    """Each sum runs in one thread in a fixed order, so 1, 2 and 3 threads give the same bits (an
    input big enough to split: channels, rows and samples)."""
    import fastgrad

    rng = rng_for("norm threads", kind, dtype)
    x, upstream = (rng.standard_normal((6, 4, 64, 96)).astype(dtype) for _ in range(2))
    w, b = (rng.standard_normal(4).astype(dtype) for _ in range(2))

    def run():
        xt, wt, bt = (fastgrad.tensor(a, requires_grad=True) for a in (x, w, b))
        outputs = _norm_program(fastgrad.nn.functional, fastgrad, kind, xt, wt, bt)
        outputs[0].backward(fastgrad.tensor(upstream))
        return [to_numpy(t) for t in outputs + [xt.grad, wt.grad, bt.grad]]

    assert_same_bits_at_thread_counts(run)


@pytest.mark.parametrize(
    "program,name",
    [
        (lambda t, x, w: t.nn.functional.batch_norm(x, None, None, w, None, training=True), "NativeBatchNormBackward0"),
        (lambda t, x, w: t.nn.functional.group_norm(x, 2, None, w), "NativeGroupNormBackward0"),
    ],
    ids=["batch_norm", "group_norm"],
)
def test_one_node_with_pytorchs_name_and_edges(fg, torch, program, name):
    """One node for the whole normalization, its edges (input, weight, bias) empty where PyTorch's are."""
    edges = []
    for t in (fg, torch):
        x, w = t.ones(2, 4, 3, requires_grad=True), t.ones(4, requires_grad=True)
        out = program(t, x, w)
        assert out.grad_fn.name() == name
        edges.append([None if fn is None else fn.name() for fn, _ in out.grad_fn.next_functions])
    assert edges[0] == edges[1]


def test_running_stats_are_updated_in_place(fg):
    """The running stats are written in place, bumping their version (a saved copy would see it)."""
    bn = fg.nn.BatchNorm1d(3)
    mean, version = bn.running_mean, bn.running_mean._version
    bn(fg.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3)))
    assert bn.running_mean is mean and mean._version > version
    np.testing.assert_allclose(to_numpy(mean), [0.45, 0.55, 0.65], rtol=1e-6)
