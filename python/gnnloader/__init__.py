"""gnnloader: the PyTorch client of loaderd, the GNN mini-batch loading daemon.

Only torch and numpy are needed. Two entry points:

* ``NeighborLoader`` and ``LinkNeighborLoader``: PyG's arguments and
  batches, so a PyG script switches with one line (docs/pyg.md);
* ``Loader``: the protocol's own vocabulary (split, fanouts, rank, slots).

``gnnloader.allreduce(tensor)`` sums gradients through loaderd's ring
all-reduce (after ``gnnloader.allreduce.init(...)``; ``ddp_comm_hook`` for
DistributedDataParallel).

``connect(socket)`` returns the served dataset's facts (a ``Remote``), which
can stand in for PyG's ``data``.

Every client checks who listens at the socket before sending anything: a
loaderd running as this process's uid, root, ``daemon_uid=`` or a uid in
``$GNNLOADER_DAEMON_UID`` (``gnnloader.trust``); any other is refused with
``UntrustedDaemonError``."""

from . import allreduce  # gnnloader.allreduce(tensor); gnnloader.allreduce.init(...), .ddp_comm_hook
from .errors import UntrustedDaemonError
from .errors import RequestError
from .loader import Batch, BatchInfo, Loader, LoaderError, batch_info
from .pyg import NeighborLoader, Remote, connect
from .link import LinkNeighborLoader, NegativeSampling

__all__ = ["Loader", "Batch", "BatchInfo", "batch_info", "LoaderError", "RequestError", "UntrustedDaemonError",
           "NeighborLoader", "LinkNeighborLoader", "NegativeSampling", "Remote", "connect", "allreduce"]
__version__ = "0.1.0"
