"""One direction of one recurrent layer, the twin of csrc/ops/recurrent.cpp (_prims.recurrent_layer):
the states (1, T, B, H), LSTM's (2, T, B, H) (h, then c), of every step in time order, from the
input projection `projected` (T, B, G * H) of every step, h0 (B, H), LSTM's c0, w_hh and b_hh.

Written as the definition: the cell formulas of ATen's CPU cells (the ones nn/rnn.py composes) on
tensor ops, step after step, stacked at the end. Its gradients are the ops' own, so it is
differentiable to any order."""

from . import _elementwise as ew, _matmul, _shape

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _gate(x, k, hidden):
    """The k-th (hidden-wide) gate block of rows x."""
    return _shape.slice(x, 1, k * hidden, (k + 1) * hidden, 1)


def _step(mode, x, h, c, w_hh, b_hh):
    """One step: the new (h, c) (c None but for LSTM)."""
    add, mul = ew.AddBackward0.run, ew.MulBackward0.run
    sigmoid, tanh = ew.SigmoidBackward0.run, ew.TanhBackward0.run
    w_t = _shape.t(w_hh)
    hh = _matmul.mm(h, w_t) if b_hh is None else _matmul.addmm(b_hh, h, w_t, 1, 1)
    H = h.shape[1]
    if mode in ("RNN_TANH", "RNN_RELU"):
        return (tanh if mode == "RNN_TANH" else ew.ReluBackward0.run)(add(hh, x)), None
    if mode == "LSTM":
        gates = add(hh, x)
        i, f, g, o = (_gate(gates, k, H) for k in range(4))
        c = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
        return mul(sigmoid(o), tanh(c)), c
    reset = sigmoid(add(_gate(hh, 0, H), _gate(x, 0, H)))
    update = sigmoid(add(_gate(hh, 1, H), _gate(x, 1, H)))
    new = tanh(add(_gate(x, 2, H), mul(_gate(hh, 2, H), reset)))
    return add(mul(ew.SubBackward0.run(h, new), update), new), None


def recurrent_layer(mode, projected, h0, c0, w_hh, b_hh, reverse):
    if mode not in _GATES:
        raise ValueError("Unrecognized RNN mode: " + mode)
    steps = projected.shape[0]
    lstm = mode == "LSTM"
    if (
        projected.dim() != 3
        or h0.dim() != 2
        or projected.shape[2] != _GATES[mode] * h0.shape[1]
        or (c0 is not None) != lstm
        or w_hh.shape != (projected.shape[2], h0.shape[1])
    ):
        raise RuntimeError("recurrent_layer: the shapes of projected, h0, c0, w_hh and b_hh do not match the mode")
    h, c = h0, c0
    hs, cs = [None] * steps, [None] * steps
    for t in reversed(range(steps)) if reverse else range(steps):
        h, c = _step(mode, _shape.select(projected, 0, t), h, c, w_hh, b_hh)
        hs[t], cs[t] = h, c
    planes = [_shape.stack(hs, 0)] + ([_shape.stack(cs, 0)] if lstm else [])
    return _shape.stack(planes, 0)
