"""Runs an unmodified PyTorch script on fastgrad: `import torch` and its submodules resolve to fastgrad.

    python -m fastgrad.run [--reference] script.py [args...]

The script runs as `__main__` with sys.argv = [script.py, args...] and its folder first on sys.path,
as `python script.py args...` would run it. --reference runs it on fastgrad.reference instead.
Where the script reaches an API that fastgrad lacks, the error names it as PyTorch would:
"torch.nn.Conv3d is not provided by fastgrad".
"""

import argparse
import os
import runpy
import sys

from ._alias import alias_torch


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fastgrad.run", description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true", help="run on fastgrad.reference (pure Python)")
    parser.add_argument("script", help="the PyTorch program to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its command-line arguments")
    options = parser.parse_args(argv)
    alias_torch(reference=options.reference)
    sys.argv = [options.script, *options.args]
    sys.path[0] = os.path.dirname(os.path.abspath(options.script))  # as `python script.py` sets it
    runpy.run_path(options.script, run_name="__main__")


if __name__ == "__main__":
    main()
