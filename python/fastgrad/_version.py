"""fastgrad's version, in this one place: pyproject.toml reads it from here (scikit-build-core's regex
metadata provider), fastgrad.__version__ and fastgrad.version import it."""

__version__ = "0.1.0"
