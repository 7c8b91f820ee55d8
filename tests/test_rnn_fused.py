"""The fused recurrent op (_prims.recurrent_layer: csrc/ops/recurrent.cpp and reference/_rnn.py),
which nn.RNN/LSTM/GRU and the cells run by default: the same states, bit for bit, as the
composition of elementwise ops (nn.rnn.fused_kernels = False), gradients that agree with it,
results that do not depend on the thread count, float64 gradcheck of the op on both backends and
gradgradcheck of the fused layers, one graph node per layer and direction, and clear errors for bad
arguments. (Agreement with PyTorch: test_rnn.py.)"""

import numpy as np
import pytest

import fastgrad
from op_helpers import gradcheck_for, rng_for

MODES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
LAYERS = {  # id: (class name, kwargs)
    "rnn tanh": ("RNN", {}),
    "rnn relu": ("RNN", {"nonlinearity": "relu"}),
    "lstm bidirectional": ("LSTM", {"bidirectional": True}),
    "gru 2 layers no bias": ("GRU", {"num_layers": 2, "bias": False}),
}


@pytest.fixture
def composed():
    """Runs fn with the layers composed of elementwise ops instead of the fused op."""

    def run(fn):
        fastgrad.nn.rnn.fused_kernels = False
        try:
            return fn()
        finally:
            fastgrad.nn.rnn.fused_kernels = True

    return run


def _layer_run(name, kwargs, x, dtype, seed, hidden=16):
    """Output, final states and the gradients of the input and every weight of a fastgrad layer
    seeded with `seed`, for a weighted sum of the output and the final states."""
    fastgrad.manual_seed(seed)
    module = getattr(fastgrad.nn, name)(x.shape[-1], hidden, **kwargs).to(getattr(fastgrad, dtype))
    xt = fastgrad.tensor(x.astype(dtype), requires_grad=True)
    output, state = module(xt)
    finals = state if isinstance(state, tuple) else (state,)
    weights = np.linspace(-1, 1, output.numel()).reshape(tuple(output.shape)).astype(dtype)
    loss = (output * fastgrad.tensor(weights)).sum() + sum(s.sum() for s in finals)
    loss.backward()
    values = [output.detach().numpy(), *(s.detach().numpy() for s in finals)]
    return values, [xt.grad.numpy(), *(p.grad.numpy() for p in module.parameters())]


@pytest.mark.parametrize("case", LAYERS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_layer_matches_the_composition(case, dtype, composed):
    name, kwargs = LAYERS[case]
    x = rng_for(case, dtype).standard_normal((5, 3, 6))
    fused_values, fused_grads = _layer_run(name, kwargs, x, dtype, 1)
    composed_values, composed_grads = composed(lambda: _layer_run(name, kwargs, x, dtype, 1))
    for got, expected in zip(fused_values, composed_values):  # same kernels in the same order
        np.testing.assert_array_equal(got, expected)
    tol = 1e-5 if dtype == "float32" else 1e-12  # the gradients' sums run in another order
    for got, expected in zip(fused_grads, composed_grads):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch", [1, 2])
def test_fused_layer_matches_the_composition_at_odd_sizes(name, batch, composed):
    """Hidden 19: the gate kernels' last vector is a partial one on every vector ISA; batch 1: the
    hidden product is a matrix-vector product (other bits than the GEMM's tiles, as in mm)."""
    x = rng_for(name, batch).standard_normal((4, batch, 5))
    fused_values, fused_grads = _layer_run(name, {}, x, "float32", 2, hidden=19)
    composed_values, composed_grads = composed(lambda: _layer_run(name, {}, x, "float32", 2, hidden=19))
    for got, expected in zip(fused_values, composed_values):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip(fused_grads, composed_grads):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_run_the_fused_op_as_one_node_and_match_the_composition(cell, composed):
    def run():
        fastgrad.manual_seed(3)
        module = getattr(fastgrad.nn, cell)(6, 8)
        x = fastgrad.tensor(rng_for(cell).standard_normal((4, 6)).astype("float32"), requires_grad=True)
        state = module(x)
        h = state[0] if isinstance(state, tuple) else state
        (h.sum() + (state[1].sum() if isinstance(state, tuple) else 0)).backward()
        return h, x.grad.numpy()

    h, grad = run()
    node = h.grad_fn
    while node.name() != "RnnLayerBackward0":  # the selects of the step's states, then the op
        assert node.name() == "SelectBackward0"
        node = node.next_functions[0][0]
    h_composed, grad_composed = composed(run)
    np.testing.assert_array_equal(h.detach().numpy(), h_composed.detach().numpy())
    np.testing.assert_allclose(grad, grad_composed, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bitwise_independent_of_threads(mode, dtype):
    """Batch 16 and hidden 128: the layer's rows are split among threads (8 + 8 rows with two, 5 + 5 + 6
    with three), every step of a block on its thread."""
    rng = rng_for(mode, dtype)
    steps, batch, hidden = 8, 16, 128
    gates = MODES[mode] * hidden

    def tensor(*shape, scale=1.0):
        return fastgrad.tensor((rng.standard_normal(shape) * scale).astype(dtype), requires_grad=True)

    projected, h0 = tensor(steps, batch, gates), tensor(batch, hidden)
    c0 = tensor(batch, hidden) if mode == "LSTM" else None
    w_hh, b_hh = tensor(gates, hidden, scale=0.1), tensor(gates)
    seed = tensor(2 if mode == "LSTM" else 1, steps, batch, hidden).detach()
    inputs = [t for t in (projected, h0, c0, w_hh, b_hh) if t is not None]

    def run():
        for t in inputs:
            t.grad = None
        states = fastgrad._prims.recurrent_layer(mode, projected, h0, c0, w_hh, b_hh, False)
        (states * seed).sum().backward()
        return [states.detach().numpy(), *(t.grad.numpy() for t in inputs)]

    saved = fastgrad.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            fastgrad.set_num_threads(n)
            results.append(run())
    finally:
        fastgrad.set_num_threads(saved)
    for one, *others in zip(*results):
        assert all(one.tobytes() == other.tobytes() for other in others)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_op_gradcheck(fg, mode, reverse, bias):
    if fg.__name__ == "fastgrad.reference" and not (reverse and bias):
        pytest.skip("the reference's op is a composition of checked ops: one case a mode (seconds each)")
    rng = rng_for(mode, reverse, bias)
    hidden, gates = 3, MODES[mode] * 3

    def tensor(*shape):
        return fg.tensor(rng.uniform(-0.8, 0.8, shape), requires_grad=True)

    inputs = [tensor(3, 2, gates), tensor(2, hidden), tensor(2, hidden) if mode == "LSTM" else None]
    inputs += [tensor(gates, hidden), tensor(gates) if bias else None]
    if mode == "RNN_RELU":  # away from relu's kink
        inputs[0] = fg.tensor(rng.uniform(0.5, 1.0, (3, 2, gates)), requires_grad=True)
    given = [t for t in inputs if t is not None]

    def op(*tensors):
        it = iter(tensors)
        args = [next(it) if t is not None else None for t in inputs]
        return fg._prims.recurrent_layer(mode, *args[:3], *args[3:], reverse)

    assert gradcheck_for(fg)(op, given)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_fused_layer_gradgradcheck(name):
    """The node's backward with create_graph differentiates the recomputed composition."""
    rng = rng_for("double backward", name)
    layer = getattr(fastgrad.nn, name)(3, 2, bidirectional=True).double()
    x = fastgrad.tensor(rng.standard_normal((2, 1, 3)), requires_grad=True)
    h0 = fastgrad.tensor(rng.standard_normal((2, 1, 2)), requires_grad=True)
    output, _ = layer(x, (h0, h0 * 0.5) if name == "LSTM" else h0)
    assert output.grad_fn.next_functions[0][0].next_functions[0][0].name() == "RnnLayerBackward0"
    gradgradcheck = gradcheck_for(fastgrad, "gradgradcheck")
    assert gradgradcheck(lambda x, h: layer(x, (h, h * 0.5) if name == "LSTM" else h)[0], [x, h0])
    weight = layer.weight_hh_l0
    assert gradgradcheck(
        lambda w: fastgrad.nn.rnn._run_fused(
            name if name != "RNN" else "RNN_TANH",
            x.new_ones(2, 1, w.shape[0]),
            (h0[0], h0[0]) if name == "LSTM" else (h0[0],),
            (w, None, None),
            False,
        )[0],
        [weight.detach().requires_grad_()],
    )


def test_reference_op_is_differentiable_twice():
    import fastgrad.reference as ref

    rng = rng_for("reference double backward")
    projected = ref.tensor(rng.uniform(-1, 1, (2, 1, 6)), requires_grad=True)
    h0, w_hh = ref.tensor(rng.uniform(-1, 1, (1, 2))), ref.tensor(rng.uniform(-1, 1, (6, 2)))
    assert gradcheck_for(ref, "gradgradcheck")(
        lambda p: ref._prims.recurrent_layer("GRU", p, h0, None, w_hh, None, True), [projected]
    )


def test_packed_and_projected_layers_keep_the_composition():
    lstm = fastgrad.nn.LSTM(3, 4, proj_size=2)
    output, _ = lstm(fastgrad.randn(2, 1, 3, requires_grad=True))
    assert output.grad_fn.name() == "StackBackward0"
    gru = fastgrad.nn.GRU(3, 4)
    packed = fastgrad.nn.utils.rnn.pack_sequence([fastgrad.randn(3, 3), fastgrad.randn(2, 3)])
    assert gru(packed)[0].data.grad_fn.name() == "CatBackward0"


def _error_cases(fg):
    x, h, w = fg.zeros(2, 1, 8), fg.zeros(1, 2), fg.zeros(8, 2)
    return [
        ((ValueError, "Unrecognized RNN mode: LSTM2"), ("LSTM2", x, h, fg.zeros(1, 2), w, None, False)),
        ((RuntimeError, "do not match the mode"), ("LSTM", x, h, None, w, None, False)),  # no c0
        ((RuntimeError, "do not match the mode"), ("GRU", x, h, None, w, None, False)),  # 8 is not 3 * 2
        ((RuntimeError, "do not match the mode"), ("LSTM", x, h, fg.zeros(1, 2), fg.zeros(8, 3), None, False)),
        ((TypeError, "recurrent_layer"), ("LSTM", x, [0.0, 0.0], fg.zeros(1, 2), w, None, False)),
    ]


@pytest.mark.parametrize("case", range(5))
def test_bad_arguments_raise(fg, case):
    (error, message), args = _error_cases(fg)[case]
    with pytest.raises(error, match=message):
        fg._prims.recurrent_layer(*args)


def test_int_inputs_are_not_implemented():
    x, h, w = fastgrad.zeros(2, 1, 2, dtype=fastgrad.int64), fastgrad.zeros(1, 2), fastgrad.zeros(2, 2)
    with pytest.raises(NotImplementedError, match="recurrent_layer"):
        fastgrad._prims.recurrent_layer("RNN_TANH", x, h, None, w, None, False)
