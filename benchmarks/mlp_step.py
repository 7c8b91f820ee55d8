"""The MLP training-step rows of fastgrad's benchmark suite (64-128-10 and 784-256-10, raw tensors
and nn.Linear + optim.SGD), on fastgrad, PyTorch, numpy and fastgrad.reference in one run.

    python benchmarks/mlp_step.py [--quick]    # = python -m fastgrad.bench --only mlp
"""

import sys

from fastgrad.bench import main

if __name__ == "__main__":
    main(["--only", "mlp", *sys.argv[1:]])
