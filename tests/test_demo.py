"""python -m fastgrad.demo: the README's main command trains, reports and compares backends."""

import numpy as np
import pytest

import fastgrad
import fastgrad.reference
from fastgrad import demo
from semantics_helpers import run_python


def test_demo_learns_the_spiral(capsys):
    accuracy, losses = demo.main(["--epochs", "8", "--compare-steps", "2"])
    out = capsys.readouterr().out
    assert accuracy > 0.9
    assert losses[-1] < losses[0] / 2 and all(b < a for a, b in zip(losses, losses[1:4]))
    assert "epoch   8/8" in out and "training accuracy" in out
    assert "fastgrad.reference" in out and "x faster" in out


def test_demo_cnn_learns_the_bars(capsys):
    accuracy, losses = demo.main(["--model", "cnn", "--epochs", "5", "--compare-steps", "0"])
    out = capsys.readouterr().out
    assert accuracy > 0.95 and losses[-1] < losses[0] / 10
    assert "CNN conv 8-pool-conv 16-pool-64-3" in out and "epoch   5/5" in out and "x faster" not in out


def test_cnn_training_runs_the_same_on_the_reference():
    x, y = demo.bars(images_per_class=10, seed=1)
    assert x.shape == (30, 1, 12, 12) and np.bincount(y).tolist() == [10, 10, 10]
    results = [
        demo.train(m, x, y, epochs=1, hidden=8, seed=3, model="cnn", batch_size=10)[1]
        for m in (fastgrad, fastgrad.reference)
    ]
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4)


def test_training_runs_the_same_on_the_reference():
    x, y = demo.spiral(points_per_class=100, seed=1)
    results = [demo.train(m, x, y, epochs=2, hidden=8, seed=3)[1] for m in (fastgrad, fastgrad.reference)]
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4)


def test_spiral_is_deterministic():
    x1, y1 = demo.spiral(seed=5)
    x2, y2 = demo.spiral(seed=5)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2) and x1.dtype == np.float32
    assert np.bincount(y1).tolist() == [1000, 1000, 1000]


def test_command_line_prints_plain_lines_when_not_a_terminal(tmp_path):
    run = run_python(
        "from fastgrad import demo; demo.main(['--epochs', '2', '--hidden', '16', '--compare-steps', "
        f"'0', '--plot', {str(tmp_path / 'demo.png')!r}])"
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "\r" not in run.stdout and any(line.startswith("epoch   2/2") for line in lines)
    assert (tmp_path / "demo.png").exists() or "matplotlib is not installed" in run.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--epochs", "0"],
        ["--backend", "numpy"],
        ["--hidden", "-3"],
        ["--model", "rnn"],
        ["--model", "cnn", "--plot", "x"],
    ],
)
def test_bad_options_are_refused(args):
    with pytest.raises(SystemExit) as e:
        demo.main(args)
    assert e.value.code == 2
