"""A hyperparameter sweep: many small fastgrad models trained as Ray tasks, the best one kept.

Each task trains a whole model (1,600 optimizer steps, about 0.1 s): Ray's own
guidance is that tasks shorter than about 10 ms gain nothing from being distributed. A task returns
its validation loss and its state_dict; fastgrad tensors pickle with protocol 5 out-of-band buffers,
so Ray moves their data through its object store without copying it twice. The driver picks the
configuration with the lowest validation loss and rebuilds that model from its state_dict.

Every task draws its data and initial weights from fixed seeds, so a task gives the same bits
wherever it runs: the sweep's results equal a plain sequential loop's (tests/test_ray_sweep.py
checks this), and only the time differs.

`ray.init()` joins the cluster that RAY_ADDRESS names when it is set, and otherwise starts a local
Ray instance with one worker per core: the script runs unchanged on this machine and on a cluster.

    python examples/ray_sweep.py            # prints the table, the best configuration, the speed-up
"""

import itertools
import time

import fastgrad

FEATURES = 8
TRAIN_SAMPLES = 512
VALIDATION_SAMPLES = 256
BATCH = 32
DATA_SEED = 0
SWEEP = {"lr": (1e-3, 3e-3, 1e-2, 3e-2), "hidden": (16, 64)}


def make_data():
    """A fixed regression problem, y = sin(x . w) + noise: the same in every task."""
    generator = fastgrad.Generator().manual_seed(DATA_SEED)
    x = fastgrad.randn(TRAIN_SAMPLES + VALIDATION_SAMPLES, FEATURES, generator=generator)
    w = fastgrad.randn(FEATURES, 1, generator=generator) / FEATURES**0.5  # x . w ~ N(0, 1)
    y = (x @ w).sin() + 0.05 * fastgrad.randn(x.shape[0], 1, generator=generator)
    return (x[:TRAIN_SAMPLES], y[:TRAIN_SAMPLES]), (x[TRAIN_SAMPLES:], y[TRAIN_SAMPLES:])


def make_model(hidden):
    return fastgrad.nn.Sequential(
        fastgrad.nn.Linear(FEATURES, hidden), fastgrad.nn.Tanh(), fastgrad.nn.Linear(hidden, 1)
    )


def train_one(config, epochs=100):
    """Trains one model; returns (config, validation loss, state_dict). Deterministic for a config."""
    # One thread per task: the tasks, not the kernels, are what runs in parallel.
    fastgrad.set_num_threads(1)
    (x, y), (x_val, y_val) = make_data()
    fastgrad.manual_seed(config["seed"])
    model = make_model(config["hidden"])
    optimizer = fastgrad.optim.Adam(model.parameters(), lr=config["lr"])
    for _ in range(epochs):
        for batch in fastgrad.randperm(TRAIN_SAMPLES).split(BATCH):
            optimizer.zero_grad()
            fastgrad.nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
            optimizer.step()
    with fastgrad.no_grad():
        validation_loss = fastgrad.nn.functional.mse_loss(model(x_val), y_val).item()
    return config, validation_loss, model.state_dict()


def configs(seed=0):
    return [{"lr": lr, "hidden": hidden, "seed": seed} for lr, hidden in itertools.product(*SWEEP.values())]


def sweep_sequential(configs, epochs=100):
    return [train_one(config, epochs) for config in configs]


def sweep_ray(configs, epochs=100):
    """The same work as Ray tasks, one CPU each; results in the order of `configs`."""
    import ray

    if not ray.is_initialized():
        # RAY_ADDRESS set: join that cluster; otherwise a local instance with one worker per core.
        ray.init(include_dashboard=False, log_to_driver=False)
    remote_train = ray.remote(num_cpus=1)(train_one)
    return ray.get([remote_train.remote(config, epochs) for config in configs])


def best(results):
    """The result with the lowest validation loss."""
    return min(results, key=lambda result: result[1])


def rebuild(result):
    """The model of one result, from its state_dict."""
    config, _, state_dict = result
    model = make_model(config["hidden"])
    model.load_state_dict(state_dict)
    return model


def main():
    import ray

    ray.init(include_dashboard=False, log_to_driver=False)
    workers = int(ray.cluster_resources().get("CPU", 1))
    sweep = configs()
    sweep_ray(sweep[:workers], epochs=1)  # starts the workers: their start-up is not the sweep's time

    start = time.perf_counter()
    parallel = sweep_ray(sweep)
    ray_seconds = time.perf_counter() - start
    start = time.perf_counter()
    sequential = sweep_sequential(sweep)
    sequential_seconds = time.perf_counter() - start

    for config, loss, _ in parallel:
        print(f"lr {config['lr']:<6} hidden {config['hidden']:<3} validation loss {loss:.5f}")
    config, loss, _ = best(parallel)
    print(f"best: lr {config['lr']}, hidden {config['hidden']} (validation loss {loss:.5f})")
    same = all(p[1] == s[1] for p, s in zip(parallel, sequential))
    print(f"Ray results equal the sequential loop's: {same}")
    print(
        f"{len(sweep)} models: sequential {sequential_seconds:.2f} s, Ray with {workers} workers "
        f"{ray_seconds:.2f} s, speed-up {sequential_seconds / ray_seconds:.2f}x"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
