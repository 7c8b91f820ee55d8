"""torch.version's names for fastgrad: the version, a debug build or not, and no GPU toolkit."""

from fastgrad import _C
from fastgrad._version import __version__

debug = _C.config()["build_type"] == "Debug"
cuda = None
hip = None

__all__ = ["__version__", "debug", "cuda", "hip"]
