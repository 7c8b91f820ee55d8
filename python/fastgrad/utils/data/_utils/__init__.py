"""The DataLoader's machinery, where PyTorch keeps it: collation, fetching and the worker loop."""

from . import collate, fetch, worker

__all__ = ["collate", "fetch", "worker"]
