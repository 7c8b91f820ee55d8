"""fastgrad.viz under the reference's name: drawing reads any backend's graph through the public API."""

from fastgrad.viz import *  # noqa: F401,F403
