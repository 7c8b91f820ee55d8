"""Training code written for PyTorch runs on fastgrad with only the import changed, and learns the
same way: an nn.Linear MLP with weights copied from a torch model, the same data, 50 optimizer
steps with each loss (and each optimizer), gives PyTorch's losses and parameters (float32)."""

import numpy as np
import pytest

STEPS = 50
OPTIMIZERS = {
    "SGD(momentum)": lambda optim, p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "SGD(nesterov)": lambda optim, p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "Adam": lambda optim, p: optim.Adam(p, lr=0.01),
    "AdamW(amsgrad)": lambda optim, p: optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True),
}
# loss -> (the loss module, the model's last layer size, targets from a numpy generator)
LOSSES = {
    "MSELoss": (lambda nn: nn.MSELoss(), 2, lambda rng: rng.standard_normal((16, 2)).astype(np.float32)),
    # targets far from the outputs: a residual's sign flipping near 0 would amplify rounding
    "L1Loss": (lambda nn: nn.L1Loss(), 2, lambda rng: (rng.standard_normal((16, 2)) + 4).astype(np.float32)),
    "SmoothL1Loss": (
        lambda nn: nn.SmoothL1Loss(beta=0.5),
        2,
        lambda rng: rng.standard_normal((16, 2)).astype(np.float32),
    ),
    "HuberLoss": (lambda nn: nn.HuberLoss(delta=0.7), 2, lambda rng: rng.standard_normal((16, 2)).astype(np.float32)),
    "CrossEntropyLoss": (lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1), 3, lambda rng: rng.integers(0, 3, 16)),
    "NLLLoss": (lambda nn: nn.Sequential(nn.LogSoftmax(dim=1)), 3, lambda rng: rng.integers(0, 3, 16)),
    "BCEWithLogitsLoss": (
        lambda nn: nn.BCEWithLogitsLoss(),
        2,
        lambda rng: rng.integers(0, 2, (16, 2)).astype(np.float32),
    ),
}


def train(torch, state, x, target, loss_name, optimizer_name, outputs):
    """STEPS steps from the weights in `state` (numpy); returns (losses, final parameters as numpy)."""
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, outputs))
    model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    make_loss = LOSSES[loss_name][0]
    if loss_name == "NLLLoss":  # log_softmax as a module before nn.NLLLoss
        log_softmax, nll = make_loss(nn), nn.NLLLoss()
        loss_fn = lambda out, t: nll(log_softmax(out), t)  # noqa: E731
    else:
        loss_fn = make_loss(nn)
    optimizer = OPTIMIZERS[optimizer_name](torch.optim, model.parameters())
    x, target = torch.tensor(x), torch.tensor(target)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses), {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


# Each loss with one optimizer, every optimizer in turn: a loss's gradients and an optimizer's update
# are separate code, so the full cross product (28 runs) reached no line more than these 7 do.
PAIRS = [(loss, list(OPTIMIZERS)[i % len(OPTIMIZERS)]) for i, loss in enumerate(LOSSES)]


@pytest.mark.parametrize("loss_name,optimizer_name", PAIRS)
def test_training_matches_pytorch(fg, torch, loss_name, optimizer_name):
    outputs = LOSSES[loss_name][1]
    rng = np.random.default_rng(sum(map(ord, loss_name + optimizer_name)))
    torch.manual_seed(0)
    reference_model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, outputs)
    )
    state = {k: v.detach().numpy().copy() for k, v in reference_model.state_dict().items()}
    x = rng.standard_normal((16, 4)).astype(np.float32)
    target = LOSSES[loss_name][2](rng)

    expected_losses, expected_params = train(torch, state, x, target, loss_name, optimizer_name, outputs)
    losses, params = train(fg, state, x, target, loss_name, optimizer_name, outputs)
    assert expected_losses[-1] < expected_losses[0]  # the run learns something
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-4, atol=1e-6)
    assert params.keys() == expected_params.keys()
    for name in params:  # near-zero entries: compared to the tensor's scale
        scale = np.abs(expected_params[name]).max()
        np.testing.assert_allclose(params[name], expected_params[name], rtol=1e-4, atol=1e-5 * scale, err_msg=name)
