"""Recurrent layers: RNN, LSTM, GRU and their one-step cells, with torch.nn's constructor arguments,
parameter names and shapes (so state_dicts load both ways), initialization, repr and errors.

A layer projects the inputs of all time steps at once (one product), then runs the recurrence one
step at a time with ATen's CPU cell formulas op for op (gates = h W_hh^T + b_hh + the projected
input; GRU's h' = (h - n) z + n), so the numbers are PyTorch's.

With `fused_kernels` on (the default), a direction of a layer over padded inputs, and a cell's step,
is instead one op of the backend (_prims.recurrent_layer: csrc/ops/recurrent.cpp, its twin
reference/_rnn.py), one graph node that runs the same formulas with the same kernels (the same
states, bit for bit) and its own backward through time (with create_graph, it differentiates the
recomputed composition, so gradients of any order follow). `fused_kernels = False` takes the
composition (for comparisons). LSTM with proj_size and packed sequences (a batch that changes from
step to step) always take the composition."""

import math
import numbers
import os
import warnings

from fastgrad._types import float32, float64

from .. import _factories, _prims
from . import functional as F, init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

fused_kernels = True


def _fusable(projected, w_hr):
    return fused_kernels and w_hr is None and projected.dtype in (float32, float64)


def _run_fused(mode, projected, state, weights, reverse):
    """One direction over (time, batch, gates) inputs as the backend's one op: the outputs (time,
    batch, hidden) and the final state."""
    w_hh, b_hh, _ = weights
    c0 = state[1] if mode == "LSTM" else None
    states = _prims.recurrent_layer(mode, projected, state[0], c0, w_hh, b_hh, reverse)
    last = 0 if reverse else projected.shape[0] - 1
    # select views, not indexing: fastgrad.compile captures them
    per_state = [_prims.select_view(states, 0, i) for i in range(states.shape[0])]
    return per_state[0], tuple(_prims.select_view(s, 0, last) for s in per_state)


def _simple_step(nonlinearity):
    def step(projected_input, state, w_hh, b_hh, w_hr):
        return (nonlinearity(F.linear(state[0], w_hh, b_hh) + projected_input),)

    return step


def _lstm_step(projected_input, state, w_hh, b_hh, w_hr):
    h, c = state
    gates = F.linear(h, w_hh, b_hh) + projected_input
    i, f, g, o = gates.chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else F.linear(h, w_hr), c)


def _gru_step(projected_input, state, w_hh, b_hh, w_hr):
    h = state[0]
    input_r, input_z, input_n = projected_input.chunk(3, 1)
    hidden_r, hidden_z, hidden_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    reset = (hidden_r + input_r).sigmoid()
    update = (hidden_z + input_z).sigmoid()
    new = (input_n + hidden_n * reset).tanh()
    return ((h - new) * update + new,)


_STEPS = {
    "RNN_TANH": _simple_step(_prims.tanh),
    "RNN_RELU": _simple_step(_prims.relu),
    "LSTM": _lstm_step,
    "GRU": _gru_step,
}


def _run_padded(step, projected, state, weights, reverse):
    """One direction over (time, batch, gates) inputs: the outputs (time, batch, hidden), final state."""
    outputs = []
    for t in reversed(range(projected.shape[0])) if reverse else range(projected.shape[0]):
        state = step(projected[t], state, *weights)
        outputs.append(state[0])
    if reverse:
        outputs.reverse()
    return _prims.stack(outputs, 0), state


def _run_packed(step, projected, batch_sizes, state, weights, reverse):
    """One direction over packed inputs (the steps' rows one after another, batch_sizes rows each,
    longest sequences first): the packed outputs and each sequence's final state. A sequence that
    has ended keeps its last state: forwards, its rows leave the running state; backwards, they
    enter it from the initial state when its last step comes."""
    steps = projected.split(batch_sizes)
    outputs = [None] * len(steps)
    if reverse:
        initial, running = state, tuple(s[: batch_sizes[-1]] for s in state)
        for t in reversed(range(len(steps))):
            rows = running[0].shape[0]
            if batch_sizes[t] > rows:
                running = tuple(_prims.cat([r, s[rows : batch_sizes[t]]], 0) for r, s in zip(running, initial))
            running = step(steps[t], running, *weights)
            outputs[t] = running[0]
        return _prims.cat(outputs, 0), running
    ended = []  # the final states of sequences that ended, latest rows first
    for t, rows in enumerate(batch_sizes):
        if rows < state[0].shape[0]:
            ended.append(tuple(s[rows:] for s in state))
            state = tuple(s[:rows] for s in state)
        state = step(steps[t], state, *weights)
        outputs[t] = state[0]
    final = tuple(_prims.cat([s, *(e[i] for e in reversed(ended))], 0) for i, s in enumerate(state))
    return _prims.cat(outputs, 0), final


def _check_parameters_fit(num_layers, directions, gate_size, input_size, output_size, hidden_size, proj_size, bias):
    """A MemoryError at once for layers whose float32 parameters alone exceed the machine's memory:
    made one layer at a time, they would fill it for minutes (num_layers=2**63 never ends) before
    an allocation failed."""
    biases = 2 if bias else 0
    per_direction = gate_size * (input_size + output_size + biases) + proj_size * hidden_size
    deeper = gate_size * (output_size * directions + output_size + biases) + proj_size * hidden_size
    elements = directions * (per_direction + (num_layers - 1) * deeper)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the 64-bit address space
        memory = 2**63
    if elements * 4 > memory:
        raise MemoryError(
            f"{num_layers} layers of {elements:,} parameters need {elements * 4:,} bytes, more than this machine's "
            f"{memory:,}"
        )


class RNNBase(Module):
    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=2,
            )
        for name, value in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        output_size = proj_size or hidden_size
        _check_parameters_fit(num_layers, directions, gate_size, input_size, output_size, hidden_size, proj_size, bias)
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else output_size * directions
            for suffix in ("", "_reverse")[:directions]:
                shapes = {"weight_ih": (gate_size, layer_input_size), "weight_hh": (gate_size, output_size)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                names = []
                for kind, shape in shapes.items():
                    names.append(f"{kind}_l{layer}{suffix}")
                    setattr(self, names[-1], Parameter(_factories.empty(shape, dtype=dtype, device=device)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self):
        """PyTorch packs the weights for cuDNN here; on a CPU it does nothing, as here."""

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0  # a cell may have none
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def _layer_weights(self, layer, suffix):
        """(w_ih, b_ih) and the step's (w_hh, b_hh, w_hr) of one layer and direction."""

        def weight(kind):
            name = f"{kind}_l{layer}{suffix}"
            return getattr(self, name) if name in self._flat_weights_names else None

        return (weight("weight_ih"), weight("bias_ih")), (weight("weight_hh"), weight("bias_hh"), weight("weight_hr"))

    def _state_sizes(self):
        """The hidden sizes of the state tensors: (h,) or LSTM's (h, c)."""
        return (self.proj_size or self.hidden_size, self.hidden_size) if self.mode == "LSTM" else (self.hidden_size,)

    def _check_input(self, input, packed):
        if input.dtype != self.weight_ih_l0.dtype:
            weight_dtype = self.weight_ih_l0.dtype
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})"
            )
        expected = 2 if packed else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.size(-1)}"
            )

    def _check_hidden(self, state, batch):
        layers = self.num_layers * (2 if self.bidirectional else 1)
        for i, (s, size) in enumerate(zip(state, self._state_sizes())):
            expected = (layers, batch, size)
            if tuple(s.shape) != expected:
                what = f"hidden[{i}]" if self.mode == "LSTM" else "hidden"
                raise RuntimeError(f"Expected {what} size {expected}, got {list(s.shape)}")

    def forward(self, input, hx=None):
        name = "LSTM" if self.mode == "LSTM" else "GRU" if self.mode == "GRU" else "RNN"
        packed = isinstance(input, PackedSequence)
        if packed:
            input, batch_sizes, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in batch_sizes.tolist()]
            batch = batch_sizes[0]
            batched = True
        else:
            if input.dim() not in (2, 3):
                got = f"{input.dim()}D instead" if name == "LSTM" else f"{input.dim()}D tensor instead"
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {got}")
            batched = input.dim() == 3
            if not batched:  # one sequence: time-major whatever batch_first says
                input = input.unsqueeze(1)
            elif self.batch_first:
                input = input.transpose(0, 1)
            batch = input.shape[1]
            sorted_indices = unsorted_indices = None
        state = self._initial_state(hx, input, batch, batched, packed, sorted_indices)
        self._check_input(input, packed)
        self._check_hidden(state, batch)
        if input.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        output, final = self._run_layers(input, state, batch_sizes if packed else None)
        if packed:
            final = tuple(s.index_select(1, unsorted_indices) if unsorted_indices is not None else s for s in final)
            output = PackedSequence(output, _factories.tensor(batch_sizes), sorted_indices, unsorted_indices)
        elif not batched:
            output = output.squeeze(1)
            final = tuple(s.squeeze(1) for s in final)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (final if self.mode == "LSTM" else final[0])

    def _initial_state(self, hx, input, batch, batched, packed, sorted_indices):
        """The state tuple (h,) or (h, c), zeros when hx is None, with the batch dimension added to an
        unbatched input's and permuted to a packed input's sorted order."""
        layers = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return tuple(_factories.zeros(layers, batch, size, dtype=input.dtype) for size in self._state_sizes())
        state = tuple(hx) if self.mode == "LSTM" else (hx,)
        if not packed:
            dims = 3 if batched else 2
            if any(s.dim() != dims for s in state):
                kind = "batched 3-D" if batched else "unbatched 2-D"
                if self.mode == "LSTM":
                    got = ", ".join(f"{s.dim()}-D" for s in state)
                    raise RuntimeError(f"For {kind} input, hx and cx should also be {dims}-D but got ({got}) tensors")
                raise RuntimeError(f"For {kind} input, hx should also be {dims}-D but got {hx.dim()}-D tensor")
            if not batched:
                state = tuple(s.unsqueeze(1) for s in state)
        if sorted_indices is not None:
            state = tuple(s.index_select(1, sorted_indices) for s in state)
        return state

    def _run_layers(self, input, state, batch_sizes):
        step = _STEPS[self.mode]
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                (w_ih, b_ih), weights = self._layer_weights(layer, suffix)
                index = layer * directions + direction
                start = tuple(_prims.select_view(s, 0, index) for s in state)
                projected = F.linear(input, w_ih, b_ih)
                if batch_sizes is None and _fusable(projected, weights[2]):
                    output, final = _run_fused(self.mode, projected, start, weights, reverse=direction == 1)
                elif batch_sizes is None:
                    output, final = _run_padded(step, projected, start, weights, reverse=direction == 1)
                else:
                    output, final = _run_packed(step, projected, batch_sizes, start, weights, reverse=direction == 1)
                outputs.append(output)
                finals.append(final)
            input = outputs[0] if directions == 1 else _prims.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                input = F.dropout(input, self.dropout, True)
        return input, tuple(_prims.stack([f[i] for f in finals], 0) for i in range(len(state)))


class RNN(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_factories.empty((num_chunks * hidden_size, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(
            _factories.empty((num_chunks * hidden_size, hidden_size), dtype=dtype, device=device)
        )
        for name in ("bias_ih", "bias_hh"):
            if bias:
                setattr(self, name, Parameter(_factories.empty(num_chunks * hidden_size, dtype=dtype, device=device)))
            else:
                self.register_parameter(name, None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _cell(self, name, input, state, mode):
        """Checks as ATen's cells, then one step; an unbatched (1-D) input and state gain and lose a
        batch dimension around it."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if state is None:
            zeros = _factories.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
            state = (zeros,) * (2 if mode == "LSTM" else 1)
        elif not batched:
            state = tuple(s.unsqueeze(0) for s in state)
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for i, s in enumerate(state):
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise RuntimeError(
                    f"hidden{i} has inconsistent hidden_size: got {s.size(1)}, expected {self.hidden_size}"
                )
        projected = F.linear(input, self.weight_ih, self.bias_ih)
        weights = (self.weight_hh, self.bias_hh, None)
        if _fusable(projected, None):
            state = _run_fused(mode, projected.unsqueeze(0), state, weights, reverse=False)[1]
        else:
            state = _STEPS[mode](projected, state, *weights)
        return state if batched else tuple(s.squeeze(0) for s in state)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        return self._cell("RNNCell", input, None if hx is None else (hx,), mode)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None:
            for i, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{i}] to be 1D or 2D, got {value.dim()}D instead")
        return self._cell("LSTMCell", input, None if hx is None else tuple(hx), "LSTM")


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        return self._cell("GRUCell", input, None if hx is None else (hx,), "GRU")[0]
