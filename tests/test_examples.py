"""The example programs (examples/), PyTorch scripts, run unchanged with python -m fastgrad.run and
print what they print under PyTorch. Their random draws are pinned: a wrapper replaces multinomial
with an inverse-CDF draw over a fixed sequence of uniforms and F.dropout with a mask from an integer
hash, the same under every library (the libraries' own random streams differ), so that the sampled
tokens and the dropout masks must agree too."""

import os

import pytest

from semantics_helpers import assert_same_output, printed_by_each

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

PINNED = """
import os, runpy, sys
import torch

_draws = iter([(i * 0.6180339887498949) % 1.0 for i in range(1, 100000)])


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    cdf = input.double().cumsum(-1)
    rows = (cdf / cdf[..., -1:]).reshape(-1, cdf.size(-1))
    picks = [[int((row < next(_draws)).sum()) for _ in range(num_samples)] for row in rows]
    return torch.tensor(picks).reshape(*input.shape[:-1], num_samples)


_dropout_calls = iter(range(1, 100000))


def dropout(input, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return input
    hashed = (torch.arange(input.numel()) + 7919 * next(_dropout_calls)) * 2654435761 % 4096
    return input * (hashed >= int(p * 4096)).reshape(input.shape) / (1 - p)


torch.multinomial = multinomial
torch.nn.functional.dropout = dropout  # nn.Dropout calls it
for script in sys.argv[1:]:  # each in turn, after a line with its name
    print("=== " + os.path.basename(script), flush=True)
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")
"""


def run_all(tmp_path, examples, *command):
    """What each example prints, run one after another in one process: {example: its output}."""
    return printed_by_each(tmp_path, PINNED, (os.path.join(EXAMPLES, example) for example in examples), *command)


def run(tmp_path, example, *command):
    return run_all(tmp_path, [example], *command)[example]


@pytest.fixture(scope="module")
def pytorch_prints(tmp_path_factory, torch):
    """What each example prints under PyTorch, run once per example."""
    printed = {}

    def of(example):
        if example not in printed:
            printed[example] = run(tmp_path_factory.mktemp("torch"), example)
        return printed[example]

    return of


@pytest.mark.parametrize("example", ["gpt_sampling.py", "bigram_names.py"])
@pytest.mark.parametrize("backend", [[], ["--reference"]], ids=["fastgrad", "reference"])
def test_example_prints_what_pytorch_prints(tmp_path, pytorch_prints, example, backend):
    ours = run(tmp_path, example, "-m", "fastgrad.run", *backend)
    assert_same_output(ours.replace("fastgrad.", "torch."), pytorch_prints(example))


# Re-creations of public programs' training flows (their own docstrings say which): each prints its
# losses step by step from the same initial weights, which must be PyTorch's to float32 rounding.
# One test, so that each library runs them all in one process (one import of torch). On fastgrad
# only: the reference would take 2-6 s each for what the two above check already.
TRAINING_PROGRAMS = [
    "vae.py",
    "dqn_step.py",
    "transformer_copy.py",
    "makemore_mlp.py",
    "mingpt_trainer.py",
    "mnist_cnn.py",
    "lenet_batchnorm.py",
    "dcgan_step.py",
    "word_language_model.py",
    "time_sequence_prediction.py",
    "seq2seq_attention.py",
    "nanogpt_char.py",
]
# SGD at d2l's learning rate 1.0 through batch norm doubles float32's rounding differences (sums taken
# in another order) about every epoch: 2e-5 apart after 12 steps.
# The word language model's SGD at the example's learning rate 20 does the same over its 42 steps.
RELATIVE_TOLERANCE = {"lenet_batchnorm.py": 1e-4, "word_language_model.py": 1e-4}


@pytest.mark.slow
def test_training_programs_match_pytorch_step_by_step(tmp_path, torch):
    theirs = run_all(tmp_path, TRAINING_PROGRAMS)
    ours = run_all(tmp_path, TRAINING_PROGRAMS, "-m", "fastgrad.run")
    assert list(ours) == TRAINING_PROGRAMS
    for example in TRAINING_PROGRAMS:
        assert_same_output(ours[example], theirs[example], RELATIVE_TOLERANCE.get(example, 1e-5))
