"""gnnloader: the PyTorch client of loaderd, the GNN mini-batch loading daemon.

Only torch and numpy are needed. See Loader."""

from .loader import Batch, Loader, LoaderError

__all__ = ["Loader", "Batch", "LoaderError"]
__version__ = "0.1.0"
