"""`python -m fastgrad.demo`: train a small classifier, then measure what the C++ core buys.

The data is a 3-class spiral for the MLP (--model mlp, the default) or 12x12 images of bars in
three orientations for the CNN (--model cnn: two Conv2d/ReLU/MaxPool2d stages and two Linear
layers), both deterministic, from numpy; the model, loss and optimizer are written as for PyTorch
(nn.Sequential, nn.CrossEntropyLoss, optim.Adam). After training, the same training steps run on
fastgrad.reference, the pure-Python implementation, and the speed ratio is printed.

    python -m fastgrad.demo [--model mlp|cnn] [--epochs N] [--hidden H] [--seed S]
                            [--backend fastgrad|reference] [--compare-steps N] [--plot PATH]
"""

import argparse
import importlib
import statistics
import sys
import time

import numpy as np

BACKENDS = {"fastgrad": "fastgrad", "reference": "fastgrad.reference"}
CLASSES = 3


def spiral(points_per_class=1000, seed=0):
    """Three interleaved spiral arms in the plane, with a little noise: (x float32 (n, 2), y int64 (n,))."""
    rng = np.random.default_rng(seed)
    radius = np.tile(np.linspace(0.05, 1.0, points_per_class), CLASSES)
    arm = np.repeat(np.arange(CLASSES), points_per_class)
    angle = radius * 10.0 + arm * (2 * np.pi / CLASSES) + rng.normal(0, 0.2, radius.size)
    x = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return x.astype(np.float32), arm.astype(np.int64)


def bars(images_per_class=300, seed=0, side=12):
    """Noisy side x side images of one bar, horizontal, vertical or diagonal (the class), at a random
    place: (x float32 (n, 1, side, side), y int64 (n,))."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(CLASSES), images_per_class)
    rows, cols = np.mgrid[:side, :side]
    offset = rng.integers(-side // 3, side // 3 + 1, y.size)[:, None, None]
    along = [rows - side // 2, cols - side // 2, rows - cols]  # zero on the bar through the centre
    distance = np.stack([along[label] for label in y]) - offset
    x = np.exp(-(distance**2) / 1.5) + rng.normal(0, 0.5, distance.shape)
    return x[:, None].astype(np.float32), y.astype(np.int64)


DATA = {"mlp": spiral, "cnn": bars}


def make_model(torch, hidden, model="mlp"):
    nn = torch.nn
    if model == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(16 * 3 * 3, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES),
        )  # fmt: skip
    return nn.Sequential(
        nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES)
    )


class Progress:
    """One line per epoch; on a terminal, a bar redrawn in place."""

    def __init__(self, total, out=None):
        self.total, self.out = total, out or sys.stdout
        self.live = self.out.isatty()

    def update(self, epoch, loss, accuracy, steps_per_s):
        text = f"epoch {epoch:>3}/{self.total}  loss {loss:.4f}  accuracy {accuracy:6.1%}  {steps_per_s:,.0f} steps/s"
        if self.live:
            done = round(20 * epoch / self.total)
            self.out.write(f"\r[{'#' * done}{'.' * (20 - done)}] {text}")
            if epoch == self.total:
                self.out.write("\n")
        else:
            self.out.write(text + "\n")
        self.out.flush()


def train(torch, x, y, *, epochs, hidden, seed, model="mlp", batch_size=100, progress=None):
    """Trains on (x, y) with minibatches; returns (model, losses per epoch, seconds per step)."""
    torch.manual_seed(seed)
    model = make_model(torch, hidden, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs, targets = torch.from_numpy(x), torch.from_numpy(y)
    order = np.random.default_rng(seed)
    losses, step_times = [], []
    for epoch in range(1, epochs + 1):
        batches = torch.from_numpy(order.permutation(len(y)))
        total, started = 0.0, time.perf_counter()
        for start in range(0, len(y), batch_size):
            index = batches[start : start + batch_size]
            t0 = time.perf_counter()
            loss = loss_fn(model(inputs[index]), targets[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step_times.append(time.perf_counter() - t0)
            total += loss.item() * len(index)
        losses.append(total / len(y))
        if progress:
            steps = -(-len(y) // batch_size)
            progress.update(epoch, losses[-1], accuracy(torch, model, x, y), steps / (time.perf_counter() - started))
    return model, losses, statistics.median(step_times)


def accuracy(torch, model, x, y):
    with torch.no_grad():
        predicted = model(torch.from_numpy(x)).argmax(1).numpy()
    return float((predicted == y).mean())


def seconds_per_step(torch, x, y, hidden, seed, steps, model="mlp"):
    """Median time of `steps` training steps (batch 100) on a backend."""
    return train(torch, x[: steps * 100], y[: steps * 100], epochs=1, hidden=hidden, seed=seed, model=model)[2]


def plot(path, torch, model, x, y, losses):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"--plot: matplotlib is not installed (pip install matplotlib); no picture written to {path}")
        return
    grid = np.stack(np.meshgrid(np.linspace(-1.2, 1.2, 300), np.linspace(-1.2, 1.2, 300)), -1).reshape(-1, 2)
    with torch.no_grad():
        regions = model(torch.from_numpy(grid.astype(np.float32))).argmax(1).numpy().reshape(300, 300)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    left.contourf(grid[:, 0].reshape(300, 300), grid[:, 1].reshape(300, 300), regions, alpha=0.3, levels=2)
    left.scatter(x[:, 0], x[:, 1], c=y, s=3)
    left.set_title("decision regions")
    right.plot(range(1, len(losses) + 1), losses)
    right.set(title="training loss", xlabel="epoch", yscale="log")
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fastgrad.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(DATA), default="mlp", help="the spiral MLP or the bars CNN")
    parser.add_argument("--epochs", type=int, help="default: 40 for the MLP, 8 for the CNN")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="fastgrad")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of the decision regions and the loss curve")
    parser.add_argument(
        "--compare-steps",
        type=int,
        help="training steps timed on the other backend for the speed ratio (0: skip; default: 20 for "
        "the MLP, 2 for the CNN, whose pure-Python convolutions take seconds a step)",
    )
    args = parser.parse_args(argv)
    cnn = args.model == "cnn"
    args.epochs = (8 if cnn else 40) if args.epochs is None else args.epochs
    args.compare_steps = (2 if cnn else 20) if args.compare_steps is None else args.compare_steps
    if cnn and args.plot:
        parser.error("--plot draws the spiral's decision regions: it needs --model mlp")
    if args.epochs < 1 or args.hidden < 1 or args.compare_steps < 0:
        parser.error("--epochs and --hidden must be positive, --compare-steps not negative")

    torch = importlib.import_module(BACKENDS[args.backend])
    x, y = DATA[args.model](seed=args.seed)
    task = (
        f"3 kinds of bars, {len(y)} 12x12 images; CNN conv 8-pool-conv 16-pool-{args.hidden}-3"
        if cnn
        else f"3-class spiral, {len(y)} points; MLP 2-{args.hidden}-{args.hidden}-3"
    )
    print(f"{BACKENDS[args.backend]}: {task}, Adam, batch 100, {args.epochs} epochs")
    started = time.perf_counter()
    model, losses, step_time = train(
        torch,
        x,
        y,
        epochs=args.epochs,
        hidden=args.hidden,
        seed=args.seed,
        model=args.model,
        progress=Progress(args.epochs),
    )
    final = accuracy(torch, model, x, y)
    print(
        f"trained in {time.perf_counter() - started:.1f} s: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"training accuracy {final:.1%}"
    )
    if args.compare_steps:
        other_name = "reference" if args.backend == "fastgrad" else "fastgrad"
        other = importlib.import_module(BACKENDS[other_name])
        other_time = seconds_per_step(other, x, y, args.hidden, args.seed, args.compare_steps, args.model)
        fast, slow = sorted([(step_time, BACKENDS[args.backend]), (other_time, BACKENDS[other_name])])
        print(
            f"median training step: {BACKENDS[args.backend]} {step_time * 1e6:,.0f} µs, "
            f"{BACKENDS[other_name]} {other_time * 1e6:,.0f} µs ({args.compare_steps} steps): "
            f"{fast[1]} is {slow[0] / fast[0]:,.0f}x faster"
        )
    if args.plot:
        plot(args.plot, torch, model, x, y, losses)
    return final, losses


if __name__ == "__main__":
    main()
