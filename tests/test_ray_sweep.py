"""examples/ray_sweep.py: small fastgrad models trained as Ray tasks give the sequential loop's bits.
Skipped where ray is not installed (.ci/run installs it)."""

import os
import pathlib

import numpy as np
import pytest

ray = pytest.importorskip("ray")

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def ray_sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    # Ray's worker processes inherit the environment of ray.init's caller: they import the example
    # (and, in a source checkout, fastgrad) by name from the same places as this process.
    import fastgrad

    paths = [str(EXAMPLES), str(pathlib.Path(fastgrad.__file__).parent.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    import ray_sweep

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray_sweep
    ray.shutdown()


@pytest.mark.slow
def test_ray_sweep_matches_sequential_loop(ray_sweep):
    configs = ray_sweep.configs()[::2]  # 4 models, 2 workers
    parallel = ray_sweep.sweep_ray(configs, epochs=2)
    sequential = ray_sweep.sweep_sequential(configs, epochs=2)
    assert [config for config, _, _ in parallel] == configs
    for (_, loss, state), (_, expected_loss, expected_state) in zip(parallel, sequential):
        assert loss == expected_loss
        assert list(state) == list(expected_state)
        for name, value in expected_state.items():
            assert type(state[name]) is type(value)
            assert np.array_equal(state[name].numpy(), value.numpy()), name
    assert len({loss for _, loss, _ in parallel}) == len(configs)  # the configurations do differ

    config, loss, _ = ray_sweep.best(parallel)
    assert loss == min(loss for _, loss, _ in sequential)
    (x, y), (x_val, y_val) = ray_sweep.make_data()
    model = ray_sweep.rebuild((config, loss, parallel[configs.index(config)][2]))
    import fastgrad

    with fastgrad.no_grad():
        assert fastgrad.nn.functional.mse_loss(model(x_val), y_val).item() == loss

    # In the same test, not one of its own: a Ray runtime takes 3-4 s of CPU to start and stop.
    _check_tensors_through_the_object_store()


def _check_tensors_through_the_object_store():
    """Tensors put into the object store come back with their values, and views of one storage share it."""
    import fastgrad

    base = fastgrad.arange(12.0).reshape(3, 4)
    back = ray.get(ray.put({"base": base, "column": base[:, 1], "big": fastgrad.ones(100_000)}))
    assert back["base"].tolist() == base.tolist() and back["column"].tolist() == [1.0, 5.0, 9.0]
    back["base"][0, 1] = -1.0
    assert back["column"][0].item() == -1.0 and base[0, 1].item() == 1.0
    back["big"] += 1  # the store's buffer is read-only; the tensor over it must still be writable
    assert back["big"].sum().item() == 200_000
