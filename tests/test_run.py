"""python -m fastgrad.run runs an unmodified PyTorch script on fastgrad (or fastgrad.reference): the
same printed numbers as under PyTorch, and errors that name the PyTorch API fastgrad lacks. Each run
is a subprocess: the alias is process-wide and would hide the real torch from the other tests."""

import os
import subprocess
import sys

import pytest

# A training flow as PyTorch tutorials write it: submodule imports, nn.Sequential, F.cross_entropy,
# optim.SGD, no_grad; weights set from linspace so that no random stream is involved.
SCRIPT = """
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

print(sys.argv[1:], __name__)
x = torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10
y = torch.tensor([0, 2, 1, 2])
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 3))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
opt = optim.SGD(model.parameters(), lr=0.5)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
print(isinstance(x, torch.Tensor), torch.nn.Module is nn.Module, isinstance(model, torch.nn.Module))
"""
# What programs ask before they train, through the submodule imports they use.
SETUP = """
import torch
import torch.backends.cudnn as cudnn
from torch.cuda.amp import GradScaler

cudnn.benchmark = True
device = "cuda" if torch.cuda.is_available() else "cpu"
print(device, cudnn.benchmark, torch.backends.cudnn is cudnn, GradScaler(enabled=False).is_enabled())
"""


def run(tmp_path, source, *command):
    script = tmp_path / "script.py"
    script.write_text(source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    command = [sys.executable, *command, str(script), "--lr", "0.5"]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)


def printed(result):
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    return lines[0], [float(line) for line in lines[1:-1]], lines[-1]


@pytest.fixture(scope="module")
def under_pytorch(tmp_path_factory, torch):
    return printed(run(tmp_path_factory.mktemp("torch"), SCRIPT))


@pytest.mark.parametrize("backend", [[], ["--reference"]], ids=["fastgrad", "reference"])
def test_script_runs_as_under_pytorch(tmp_path, backend, under_pytorch):
    head, losses, checks = printed(run(tmp_path, SCRIPT, "-m", "fastgrad.run", *backend))
    torch_head, torch_losses, torch_checks = under_pytorch
    assert (head, checks) == (torch_head, torch_checks) == ("['--lr', '0.5'] __main__", "True True True")
    assert losses == pytest.approx(torch_losses, rel=1e-5)


@pytest.mark.parametrize(
    "source, error",
    [
        ("import torch\ntorch.nn.Conv3d\n", "AttributeError: torch.nn.Conv3d is not provided by fastgrad"),
        ("import torch.nn.functional as F\nF.conv3d\n", "AttributeError: torch.nn.functional.conv3d is not"),
        ("import torch\ntorch.ones(2).stft\n", "AttributeError: torch.Tensor.stft is not provided by fastgrad"),
        ("import torch.distributed\n", "ModuleNotFoundError: torch.distributed is not provided by fastgrad"),
        ("from torch import nn\nnn.Linear(2, 2).no_such_thing\n", "AttributeError: 'Linear' object has no attribute"),
    ],
)
def test_missing_api_is_named_as_pytorch_names_it(tmp_path, source, error):
    result = run(tmp_path, source, "-m", "fastgrad.run")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(error)


@pytest.mark.parametrize("backend", [[], ["--reference"]], ids=["fastgrad", "reference"])
def test_device_setup_through_submodules(tmp_path, backend):
    result = run(tmp_path, SETUP, "-m", "fastgrad.run", *backend)
    assert (result.returncode, result.stdout) == (0, "cpu True True False\n"), result.stderr


def test_alias_torch_in_a_program(tmp_path):
    source = (
        "import fastgrad\nfastgrad.alias_torch()\nimport torch.nn\n"
        "print(torch.Tensor is fastgrad.Tensor, torch.nn.Linear is fastgrad.nn.Linear, fastgrad.nn.__name__)\n"
    )
    result = run(tmp_path, source)  # fastgrad's own modules are left as they are
    assert (result.returncode, result.stdout) == (0, "True True fastgrad.nn\n"), result.stderr
    late = "import fastgrad, sys\nsys.modules['torch'] = sys\nfastgrad.alias_torch()\n"
    assert "alias_torch() must run before torch is imported" in run(tmp_path, late).stderr
