"""The recurrent layers (RNN, LSTM, GRU, their cells) and nn.utils.rnn's packed sequences against
PyTorch: outputs, final states and the gradients of the input, the initial state and every weight,
from PyTorch's weights loaded through state_dict, over a table of options (layers, directions,
batch_first, projections, no bias, unbatched and packed inputs); float64 gradcheck; reprs,
state_dict keys, init bounds and errors."""

import numpy as np
import pytest

from op_helpers import gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error

MODULES = {  # id: (class name, constructor kwargs, input shape (time, batch, features) unless noted)
    "rnn tanh": ("RNN", {}, (4, 3, 5)),
    "rnn relu 2 layers": ("RNN", {"nonlinearity": "relu", "num_layers": 2}, (3, 2, 5)),
    "lstm": ("LSTM", {}, (4, 3, 5)),
    "gru": ("GRU", {}, (4, 3, 5)),
    "lstm 2 layers bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}, (3, 2, 5)),
    "lstm proj batch_first": ("LSTM", {"proj_size": 3, "batch_first": True}, (2, 4, 5)),
    "gru bidirectional batch_first no bias": (
        "GRU",
        {"bidirectional": True, "batch_first": True, "bias": False},
        (2, 3, 5),
    ),
    "lstm eval dropout": ("LSTM", {"num_layers": 2, "dropout": 0.5}, (3, 2, 5)),
    "rnn unbatched": ("RNN", {"bidirectional": True}, (4, 5)),
    "lstm unbatched batch_first": ("LSTM", {"batch_first": True, "proj_size": 2}, (3, 5)),
}
WITH_INITIAL_STATE = ["rnn tanh", "lstm 2 layers bidirectional", "lstm proj batch_first", "rnn unbatched", "gru"]
PACKED = {  # id: (class name, kwargs, lengths, enforce_sorted)
    "lstm packed": ("LSTM", {}, [4, 2, 2, 1], True),
    "gru packed unsorted bidirectional": ("GRU", {"bidirectional": True, "num_layers": 2}, [2, 4, 1], False),
    "lstm packed unsorted proj bidirectional": ("LSTM", {"bidirectional": True, "proj_size": 2}, [1, 3, 3], False),
}


def _module(lib, name, kwargs, torch_module=None):
    module = getattr(lib.nn, name)(5, 4, **kwargs).double()
    if torch_module is not None:  # PyTorch's weights, loaded through state_dict
        module.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()})
    return module


def _states(result):
    output, state = result
    return output, (state if isinstance(state, tuple) else (state,))


def _run(lib, module, x, initial=None, packed=None):
    """The output, the final states, and the gradients of the input, the initial states and the
    weights for a weighted sum of the output and the final states."""
    x = lib.tensor(x, requires_grad=True)
    states = None if initial is None else [lib.tensor(s, requires_grad=True) for s in initial]
    hx = None if states is None else (tuple(states) if len(states) == 2 else states[0])
    rnn_input = x
    if packed is not None:
        lengths, enforce_sorted = packed
        rnn_input = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted)
    output, finals = _states(module(rnn_input, hx))
    if packed is not None:
        output, _ = lib.nn.utils.rnn.pad_packed_sequence(output)
    weights = lib.tensor(np.linspace(-1, 1, output.numel()).reshape(tuple(output.shape)))
    loss = (output * weights).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(finals))
    loss.backward()
    grads = [x.grad] + [s.grad for s in states or []] + [p.grad for p in module.parameters()]
    return [to_numpy(output)] + [to_numpy(s) for s in finals] + [to_numpy(g) for g in grads]


def _compare(ours, theirs):
    assert len(ours) == len(theirs)
    for got, expected in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def _initial_states(torch_module, x_shape, rng):
    layers = torch_module.num_layers * (2 if torch_module.bidirectional else 1)
    batch = () if len(x_shape) == 2 else (x_shape[0] if torch_module.batch_first else x_shape[1],)
    sizes = [torch_module.proj_size or torch_module.hidden_size]
    if torch_module.mode == "LSTM":
        sizes.append(torch_module.hidden_size)
    return [rng.uniform(-1, 1, (layers, *batch, size)) for size in sizes]


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("case", list(MODULES))
def test_layers_match_pytorch(fg, torch, case, with_state):
    if with_state and case not in WITH_INITIAL_STATE:
        pytest.skip("initial states on a subset of the table")
    name, kwargs, shape = MODULES[case]
    torch.manual_seed(0)
    theirs_module = _module(torch, name, kwargs)
    ours_module = _module(fg, name, kwargs, theirs_module)
    for module in (theirs_module, ours_module):
        module.train("dropout" not in case)
    rng = rng_for("rnn", case)
    x = rng.uniform(-1, 1, shape)
    initial = _initial_states(theirs_module, shape, rng) if with_state else None
    _compare(_run(fg, ours_module, x, initial), _run(torch, theirs_module, x, initial))


@pytest.mark.parametrize("case", list(PACKED))
def test_packed_sequences_match_pytorch(fg, torch, case):
    name, kwargs, lengths, enforce_sorted = PACKED[case]
    torch.manual_seed(1)
    theirs_module = _module(torch, name, kwargs)
    ours_module = _module(fg, name, kwargs, theirs_module)
    rng = rng_for("packed", case)
    x = rng.uniform(-1, 1, (max(lengths), len(lengths), 5))
    initial = _initial_states(theirs_module, x.shape, rng)
    packed = (lengths, enforce_sorted)
    _compare(_run(fg, ours_module, x, initial, packed), _run(torch, theirs_module, x, initial, packed))


def test_float32_lstm_matches_pytorch(fg, torch):
    torch.manual_seed(2)
    theirs = torch.nn.LSTM(6, 8, num_layers=2)
    ours = fg.nn.LSTM(6, 8, num_layers=2)
    ours.load_state_dict({k: fg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = rng_for("lstm float32").standard_normal((5, 3, 6)).astype(np.float32)
    (out, (h, c)), (expected, (h_expected, c_expected)) = ours(fg.tensor(x)), theirs(torch.tensor(x))
    for got, want in ((out, expected), (h, h_expected), (c, c_expected)):
        assert got.dtype == fg.float32
        np.testing.assert_allclose(to_numpy(got), want.detach().numpy(), rtol=1e-5, atol=1e-6)


CELLS = {  # id: (class name, kwargs, input shape, state count)
    "rnn cell": ("RNNCell", {}, (3, 5), 1),
    "rnn cell relu": ("RNNCell", {"nonlinearity": "relu"}, (2, 5), 1),
    "lstm cell": ("LSTMCell", {}, (3, 5), 2),
    "gru cell": ("GRUCell", {}, (3, 5), 1),
    "gru cell no bias": ("GRUCell", {"bias": False}, (2, 5), 1),
    "lstm cell unbatched": ("LSTMCell", {}, (5,), 2),
    "rnn cell unbatched": ("RNNCell", {}, (5,), 1),
}


def _cell_steps(lib, cell, xs, initial):
    """Three steps of the cell from `initial` (None: zeros); outputs and all gradients."""
    xs = [lib.tensor(x, requires_grad=True) for x in xs]
    states = None if initial is None else [lib.tensor(s, requires_grad=True) for s in initial]
    state = None if states is None else (tuple(states) if len(states) == 2 else states[0])
    outputs = []
    for x in xs:
        state = cell(x, state)
        outputs.extend(state if isinstance(state, tuple) else (state,))
    sum((o * (i + 1)).sum() for i, o in enumerate(outputs)).backward()
    grads = [x.grad for x in xs] + [s.grad for s in states or []] + [p.grad for p in cell.parameters()]
    return [to_numpy(o) for o in outputs] + [to_numpy(g) for g in grads]


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("case", list(CELLS))
def test_cells_match_pytorch(fg, torch, case, with_state):
    name, kwargs, shape, count = CELLS[case]
    torch.manual_seed(3)
    theirs = getattr(torch.nn, name)(5, 4, **kwargs).double()
    ours = getattr(fg.nn, name)(5, 4, **kwargs).double()
    ours.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    rng = rng_for("cell", case)
    xs = [rng.uniform(-1, 1, shape) for _ in range(3)]
    initial = [rng.uniform(-1, 1, (*shape[:-1], 4)) for _ in range(count)] if with_state else None
    _compare(_cell_steps(fg, ours, xs, initial), _cell_steps(torch, theirs, xs, initial))


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_gradcheck(fg, name):
    module = getattr(fg.nn, name)(3, 2, num_layers=2, bidirectional=True).double()
    rng = rng_for("rnn gradcheck", name)
    x = fg.tensor(rng.uniform(-1, 1, (3, 2, 3)), requires_grad=True)
    h = fg.tensor(rng.uniform(-1, 1, (4, 2, 2)), requires_grad=True)

    def fn(x, h):
        return module(x, (h, h * 0.5) if name == "LSTM" else h)[0]

    assert gradcheck_for(fg)(fn, [x, h], eps=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.LSTM(10, 20, num_layers=2, bidirectional=True, proj_size=5, batch_first=True),
        lambda nn: nn.GRU(3, 4, bias=False, dropout=0.25, num_layers=3),
        lambda nn: nn.RNN(3, 4, 1, "relu"),
        lambda nn: nn.RNN(3, 4, nonlinearity="tanh"),
        lambda nn: nn.GRUCell(3, 4, bias=False),
        lambda nn: nn.RNNCell(3, 4, nonlinearity="relu"),
    ],
)
def test_parameters_reprs_and_init_match_pytorch(fg, torch, make):
    ours, theirs = make(fg.nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    bound = 1 / np.sqrt(ours.hidden_size)  # PyTorch's init: every weight uniform in +-1/sqrt(hidden)
    values = np.concatenate([to_numpy(p).ravel() for p in ours.parameters()])
    assert np.abs(values).max() <= bound and values.std() > bound / 3


def test_dropout_applies_between_layers_in_training_only(fg):
    fg.manual_seed(0)
    module = fg.nn.GRU(3, 4, num_layers=2, dropout=0.5).double()
    x = fg.tensor(rng_for("rnn dropout").uniform(-1, 1, (5, 2, 3)))
    module.eval()
    expected, _ = module(x)
    module.train()
    first, _ = module(x)
    second, _ = module(x)
    assert not np.array_equal(to_numpy(first), to_numpy(expected))
    assert not np.array_equal(to_numpy(first), to_numpy(second))
    module.num_layers = 1  # one layer: nothing between layers, so training equals evaluation
    module.eval()
    single, _ = module(x)
    module.train()
    np.testing.assert_array_equal(to_numpy(module(x)[0]), to_numpy(single))


ERRORS = {
    "input 4-D": lambda t: t.nn.LSTM(3, 4)(t.zeros(2, 2, 2, 3)),
    "input 1-D rnn": lambda t: t.nn.RNN(3, 4)(t.zeros(3)),
    "input size": lambda t: t.nn.GRU(3, 4)(t.zeros(2, 2, 5)),
    "hidden size": lambda t: t.nn.GRU(3, 4)(t.zeros(2, 2, 3), t.zeros(1, 3, 4)),
    "lstm cell size": lambda t: t.nn.LSTM(3, 4)(t.zeros(2, 2, 3), (t.zeros(1, 2, 4), t.zeros(1, 2, 3))),
    "hidden dims": lambda t: t.nn.RNN(3, 4)(t.zeros(2, 2, 3), t.zeros(2, 4)),
    "unbatched hidden dims": lambda t: t.nn.RNN(3, 4)(t.zeros(2, 3), t.zeros(1, 1, 4)),
    "lstm hidden dims": lambda t: t.nn.LSTM(3, 4)(t.zeros(2, 2, 3), (t.zeros(2, 4), t.zeros(1, 2, 4))),
    "dtype": lambda t: t.nn.LSTM(3, 4)(t.zeros(2, 2, 3, dtype=t.float64)),
    "empty sequence": lambda t: t.nn.LSTM(3, 4, bidirectional=True)(t.zeros(0, 3)),
    "empty batched sequence": lambda t: t.nn.GRU(3, 4, batch_first=True)(t.zeros(2, 0, 3)),
    "proj_size gru": lambda t: t.nn.GRU(3, 4, proj_size=2),
    "proj_size too large": lambda t: t.nn.LSTM(3, 4, proj_size=4),
    "nonlinearity": lambda t: t.nn.RNN(3, 4, nonlinearity="sigmoid"),
    "dropout range": lambda t: t.nn.LSTM(3, 4, dropout=1.5),
    "hidden_size zero": lambda t: t.nn.LSTM(3, 0),
    "hidden_size float": lambda t: t.nn.LSTM(3, 4.0),
    "bias type": lambda t: t.nn.GRU(3, 4, bias=1),
    "cell input dims": lambda t: t.nn.LSTMCell(3, 4)(t.zeros(1, 2, 3)),
    "cell input size": lambda t: t.nn.GRUCell(3, 4)(t.zeros(2, 5)),
    "cell batch": lambda t: t.nn.RNNCell(3, 4)(t.zeros(2, 3), t.zeros(3, 4)),
    "cell hidden size": lambda t: t.nn.LSTMCell(3, 4)(t.zeros(2, 3), (t.zeros(2, 4), t.zeros(2, 5))),
    "cell hidden dims": lambda t: t.nn.GRUCell(3, 4)(t.zeros(2, 3), t.zeros(1, 2, 4)),
    "pack unsorted": lambda t: t.nn.utils.rnn.pack_padded_sequence(t.zeros(3, 2, 1), [2, 3]),
    "pack zero length": lambda t: t.nn.utils.rnn.pack_padded_sequence(t.zeros(3, 2, 1), [3, 0]),
    "pack lengths count": lambda t: t.nn.utils.rnn.pack_padded_sequence(t.zeros(3, 2, 1), [3]),
    "pad total_length": lambda t: t.nn.utils.rnn.pad_packed_sequence(
        t.nn.utils.rnn.pack_sequence([t.zeros(3), t.zeros(2)]), total_length=2
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


def test_dropout_warning_for_one_layer(fg):
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        fg.nn.LSTM(3, 4, dropout=0.2)


def test_pack_and_pad_match_pytorch(fg, torch):
    rng = rng_for("pack")
    sequences = [rng.uniform(-1, 1, (n, 2)) for n in (2, 5, 1, 3)]

    def program(lib):
        rnn = lib.nn.utils.rnn
        tensors = [lib.tensor(s, requires_grad=True) for s in sequences]
        packed = rnn.pack_sequence(tensors, enforce_sorted=False)
        padded, lengths = rnn.pad_packed_sequence(packed, batch_first=True, padding_value=-3.0, total_length=6)
        unpacked = rnn.unpack_sequence(packed)
        padded_seq = rnn.pad_sequence(tensors)
        unpadded = rnn.unpad_sequence(padded_seq, lengths)
        (padded * lib.tensor(np.arange(padded.numel()).reshape(tuple(padded.shape)))).sum().backward()
        return (
            [packed.data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices, padded, lengths]
            + unpacked
            + unpadded
            + [t.grad for t in tensors]
        )

    ours, theirs = program(fg), program(torch)
    assert len(ours) == len(theirs)
    for got, expected in zip(ours, theirs):
        assert got.dtype.__repr__().split(".")[-1] == expected.dtype.__repr__().split(".")[-1]
        np.testing.assert_array_equal(to_numpy(got), expected.detach().numpy())
    packed = fg.nn.utils.rnn.pack_sequence([fg.tensor(s) for s in sequences], enforce_sorted=False)
    assert isinstance(packed, tuple) and packed._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert packed.to(fg.float32).data.dtype == fg.float32 and packed.double() is packed


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.LSTM(3, 5, num_layers=3, proj_size=2, bidirectional=True),
        lambda nn: nn.GRU(4, 6, num_layers=2, bias=False),
        lambda nn: nn.RNN(2, 3),
    ],
)
def test_layers_beyond_the_memory_fail_at_once(fg, monkeypatch, make):
    """A MemoryError before any parameter is made, exactly when the float32 parameters exceed the
    machine's memory (num_layers=2**63 would otherwise make layers forever, as PyTorch does)."""
    needed = sum(p.numel() for p in make(fg.nn).parameters()) * 4
    pages = {"SC_PAGE_SIZE": 1}
    monkeypatch.setattr("os.sysconf", lambda name: pages.get(name, needed))
    make(fg.nn)  # exactly the memory: made
    pages["SC_PAGE_SIZE"] = 1
    monkeypatch.setattr("os.sysconf", lambda name: pages.get(name, needed - 1))
    with pytest.raises(MemoryError, match="more than this machine's"):
        make(fg.nn)
    monkeypatch.undo()
    with pytest.raises(MemoryError):
        fg.nn.RNN(2, 3, 2**63)
