"""A drop-in for PyG's ``torch_geometric.loader.NeighborLoader`` served by loaderd.

Switching a PyG training script is a one-line change::

    from torch_geometric.loader import NeighborLoader   # before
    from gnnloader import NeighborLoader                # after (loaderd on its default socket)

The arguments keep PyG's names and meanings (``data``, ``num_neighbors``,
``input_nodes``, ``batch_size``, ``shuffle``, ``drop_last``); the batches keep
PyG's fields (``x``, ``y``, ``edge_index``, ``batch_size``, ``n_id``,
``num_sampled_nodes``, ``num_sampled_edges``) and are ``torch_geometric``
``Data`` objects when PyG is importable. What differs is where the graph
lives: loaderd holds it, so the first argument only names the daemon (see
:class:`NeighborLoader`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from . import protocol as p
from . import trust
from .loader import Loader, LoaderError

__all__ = ["NeighborLoader", "Remote", "connect", "SOCKET_ENV", "CUSTOM_SPLIT"]

#: Environment variable naming loaderd's socket when ``data`` does not.
SOCKET_ENV = trust.SOCKET_ENV

#: The reserved ``Open.split`` that means "the seeds of the preceding Seeds
#: message" (docs/protocol.md).
CUSTOM_SPLIT = p.CUSTOM_SPLIT if hasattr(p, "CUSTOM_SPLIT") else "custom"

# PyG DataLoader options that have no meaning here: loaderd samples in its own
# threads and hands over shared-memory (or GPU) slots, so there is nothing for
# worker processes, prefetching or pinning to do. Accepted, ignored, warned.
_IGNORED = {
    "num_workers": "loaderd samples in its own threads; trainer-side workers would add nothing",
    "persistent_workers": "there are no trainer-side workers",
    "prefetch_factor": "loaderd already runs ahead of the trainer (its --prefetch flag)",
    "pin_memory": "batches are already in shared (CPU path) or device (GPU path) memory",
    "worker_init_fn": "there are no trainer-side workers",
    "multiprocessing_context": "there are no trainer-side workers",
    "generator": "shuffling is seeded by the seed argument, not a torch.Generator",
    "filter_per_worker": "there are no trainer-side workers",
    "directed": "deprecated in PyG; sampled subgraphs are directional as PyG's default",
    "is_sorted": "loaderd's CSR is always sorted",
}
# PyG options whose non-default values loaderd does not implement (default).
_UNSUPPORTED_UNLESS = {
    "replace": False,
    "disjoint": False,
    "subgraph_type": "directional",
    "temporal_strategy": "uniform",
    "time_attr": None,
    "weight_attr": None,
    "collate_fn": None,
    "sampler": None,
    "batch_sampler": None,
    "neighbor_sampler": None,
    "transform_sampler_output": None,
}
_SPLIT_ALIASES = {"val": "valid", "validation": "valid"}


@dataclass
class Remote:
    """Facts of the dataset a loaderd serves; stands in for PyG's ``data``.

    ``gnnloader.connect(socket)`` returns one. It has the attributes a PyG
    script usually reads from ``data`` to build its model (``num_nodes``,
    ``num_features``, ``num_classes``, ``num_edges``) and the split sizes."""

    socket: str
    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    feature_dtype: str
    splits: Dict[str, int]
    daemon_version: str = ""

    @property
    def num_node_features(self) -> int:
        return self.num_features


def connect(socket: Optional[str] = None, timeout: Optional[float] = 30.0,
            daemon_uid: Optional[int] = None) -> Remote:
    """Ask loaderd at ``socket`` (default ``$GNNLOADER_SOCKET``, else the
    daemon's default path, see :class:`gnnloader.Loader`) what it serves.

    The connection is closed again; pass the returned :class:`Remote` as the
    first argument of :class:`NeighborLoader`. As every client, it first
    checks who listens at the socket (``daemon_uid``: see
    :class:`gnnloader.Loader`)."""
    path = _socket_path(socket)
    hint = "" if socket else f" (the default socket: start loaderd, or pass a socket path or set ${SOCKET_ENV})"
    s = trust.connect(path, timeout, trust.trusted_uids(daemon_uid), hint=hint)
    try:
        p.send_msg(s, p.Hello(pid=os.getpid(), name="gnnloader.connect"))
        msg, fds = p.recv_msg(s)
        p._close_fds(fds)
        if isinstance(msg, p.Error):
            raise LoaderError(f"loaderd: {msg.message}", code=p._code_name(msg.code))
        if not isinstance(msg, p.Welcome):
            raise LoaderError(f"daemon answered Hello with {type(msg).__name__}")
        try:
            p.send_msg(s, p.Goodbye(reason="connect: facts only"))
        except OSError:
            pass
    finally:
        s.close()
    d = msg.dataset
    return Remote(socket=path, name=d.name, num_nodes=d.num_nodes, num_edges=d.num_edges,
                  num_features=d.feature_dim, num_classes=d.num_classes, feature_dtype=d.feature_dtype,
                  splits={sp.name: sp.size for sp in d.splits}, daemon_version=msg.daemon_version)


def _socket_path(socket: Optional[str]) -> str:
    """`socket`, else the default (gnnloader.trust.socket_path:
    $GNNLOADER_SOCKET, else the daemon's default path)."""
    return trust.socket_path(socket)


def _dist_rank_world() -> tuple:
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # pragma: no cover - depends on the build
        pass
    return 0, 1


class _SeedsLoader(Loader):
    """A Loader whose seeds are a tensor of node ids sent with a Seeds message
    (memfd) just before Open."""

    def __init__(self, socket_path: str, seeds_fn: Callable[[Any], torch.Tensor], **kw: Any):
        self._seeds_fn = seeds_fn
        super().__init__(socket_path, split=CUSTOM_SPLIT, **kw)

    def _open(self, req: p.Open) -> p.Opened:
        if not hasattr(p, "Seeds"):
            raise LoaderError("this gnnloader's protocol module has no Seeds message: input_nodes must be a split name")
        ids = self._seeds_fn(self.dataset).to(torch.int64).contiguous()
        fd = os.memfd_create("gnnloader-seeds", os.MFD_CLOEXEC)
        try:
            data = ids.numpy().astype("<i8", copy=False).tobytes()
            os.ftruncate(fd, len(data))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            self._send(p.Seeds(count=ids.numel()), fds=[fd])
        finally:
            os.close(fd)
        try:
            return super()._open(req)
        except LoaderError as e:
            if e.code not in ("error", "closed"):
                raise
            # Sending Open failed: the daemon refused Seeds and closed. Its
            # Error frame, if any, says why (e.g. an older loaderd).
            try:
                self._sock.settimeout(2.0)
                self._recv()
            except LoaderError as why:
                if why.code not in ("error", "closed"):
                    raise why from None
            raise


class NeighborLoader:
    """PyG's NeighborLoader, with the sampling and feature gathering done by loaderd.

    Args:
        data: which loaderd to use, standing in for PyG's ``data``: a socket
            path (``str`` or ``os.PathLike``), a :class:`Remote` from
            :func:`connect`, or any other object (e.g. your PyG ``Data``),
            in which case the socket comes from ``socket=``, else
            ``$GNNLOADER_SOCKET``, else the daemon's default path (see
            :class:`gnnloader.Loader`); if that object has ``num_nodes`` it must
            match the daemon's dataset (a guard against training on the
            wrong graph). The object's tensors are not read: loaderd serves
            its own copy of the dataset.
        num_neighbors: neighbours sampled per hop, outermost first; ``-1``
            takes all (PyG's meaning). A dict (heterogeneous graphs) is not
            supported.
        input_nodes: the seed nodes: ``None`` (every node), a split name
            (``"train"``, ``"valid"``/``"val"``, ``"test"``), a boolean mask
            of length ``num_nodes`` (e.g. ``data.train_mask``) or a tensor of
            node ids. Tensors travel to loaderd once, in a memfd.
        input_time: PyG's temporal seed times; only None is supported.
        batch_size: seeds per batch. This and every later argument is
            keyword-only, as in PyG (where they reach DataLoader through
            ``**kwargs``).
        shuffle: reshuffle the seeds every epoch.
        drop_last: drop the last incomplete batch.
        socket: the loaderd socket when ``data`` does not name it
            (default: ``$GNNLOADER_SOCKET``, else the daemon's default).
        device: where batches land: ``"cpu"`` (shared memory, zero-copy) or
            ``"cuda:N"``.
        seed: shuffle and sampling seed. Default: ``torch.initial_seed()``
            with one process, 0 when ranks must agree (``world_size > 1``).
        rank, world_size: split the seeds between trainers. Default for a
            split name: from ``torch.distributed`` when it is initialised.
            Default for a tensor or mask: one process, as PyG (which never
            shards; pass this rank's seeds, or set rank/world_size and give
            every rank the same tensor).
        transform: applied to every batch, as in PyG.
        **kwargs: PyG/DataLoader options. Those that have no meaning here
            (``num_workers``, ``persistent_workers``, ``pin_memory``,
            ``prefetch_factor``, ...) are ignored with a warning: loaderd
            samples in its own threads, runs ahead of the trainer and hands
            over batches already in shared or device memory. Options whose
            non-default values loaderd does not implement (``replace=True``,
            ``disjoint=True``, temporal sampling, ...) raise ValueError.
        Other keyword arguments of :class:`gnnloader.Loader` (``slots``,
        ``job``, ``release``, ``start_epoch``, ``start_batch``, ``pyg``,
        ``timeout`` in seconds on the socket, ``reconnect``, ``daemon_uid``)
        pass through; on
        a reconnect custom seeds are sent again.

    Iterating runs one epoch; ``len()`` is the number of batches per epoch.
    Batch tensors are views of a loaderd slot that is reused once the next
    batch is taken: ``.clone()`` what you keep. Batches have no ``input_id``
    and no ``e_id``, and carry no other node attributes of ``data`` (masks):
    everything about the seeds is in the first ``batch_size`` rows.
    """

    def __init__(self, data: Any, num_neighbors: Union[Sequence[int], Dict[Any, Any]],
                 input_nodes: Union[None, str, torch.Tensor, Sequence[int]] = None, input_time: Any = None,
                 *, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, socket: Optional[str] = None,
                 device: Union[str, torch.device] = "cpu", seed: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 transform: Optional[Callable[[Any], Any]] = None, **kwargs: Any):
        loader_kw = {k: kwargs.pop(k) for k in ("slots", "job", "release", "start_epoch", "start_batch", "pyg",
                                                     "timeout", "reconnect", "daemon_uid")
                     if k in kwargs}
        for k, v in kwargs.items():
            if k in _IGNORED:
                warnings.warn(f"gnnloader.NeighborLoader ignores {k}={v!r}: {_IGNORED[k]}", stacklevel=2)
            elif k in _UNSUPPORTED_UNLESS:
                if v != _UNSUPPORTED_UNLESS[k]:
                    raise ValueError(f"gnnloader.NeighborLoader does not support {k}={v!r} "
                                     f"(loaderd samples uniformly without replacement, homogeneous graphs)")
            else:
                raise TypeError(f"gnnloader.NeighborLoader got an unexpected keyword argument {k!r}")
        if input_time is not None:
            raise ValueError("gnnloader.NeighborLoader does not support input_time (temporal sampling)")
        if isinstance(num_neighbors, dict):
            raise ValueError("num_neighbors as a dict (heterogeneous graphs) is not supported by loaderd")
        fanouts = [int(f) for f in num_neighbors]
        if isinstance(input_nodes, tuple):
            raise ValueError("input_nodes as (node_type, nodes) is for heterogeneous graphs, which loaderd does not serve")

        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
        elif isinstance(data, Remote):
            path = socket or data.socket
        else:
            path = socket  # None: the Loader applies the default (and says so if nothing listens)
        self.data = data
        self.num_neighbors = fanouts
        self.input_nodes = input_nodes
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.transform = transform

        split: Optional[str] = None
        if isinstance(input_nodes, str):
            split = input_nodes
        explicit_rank = rank is not None or world_size is not None
        if split is not None and not explicit_rank:
            rank, world_size = _dist_rank_world()
        rank = 0 if rank is None else int(rank)
        world_size = 1 if world_size is None else int(world_size)
        if seed is None:
            seed = (torch.initial_seed() & (2 ** 63 - 1)) if world_size == 1 else 0
        common = dict(batch_size=batch_size, fanouts=fanouts, shuffle=shuffle, seed=int(seed), rank=rank,
                      world_size=world_size, device=str(device), drop_last=drop_last)
        common.update(loader_kw)
        self.rank, self.world_size, self.seed = rank, world_size, int(seed)

        expected_nodes = getattr(data, "num_nodes", None) if not isinstance(data, (str, os.PathLike)) else None
        if split is not None:
            self._loader: Loader = _SplitLoader(path, split, **common)
        else:
            self._loader = _SeedsLoader(path, lambda ds: _seed_ids(input_nodes, ds.num_nodes), **common)
        if isinstance(expected_nodes, int) and expected_nodes != self._loader.dataset.num_nodes:
            n = self._loader.dataset.num_nodes
            self._loader.close()
            raise ValueError(f"data has {expected_nodes} nodes but loaderd at {self._loader.socket_path} serves "
                             f"{self._loader.dataset.name} with {n}: wrong daemon or dataset?")

    # -- the Loader underneath -------------------------------------------------

    @property
    def loader(self) -> Loader:
        """The :class:`gnnloader.Loader` doing the work."""
        return self._loader

    @property
    def dataset(self) -> p.Dataset:
        """The facts loaderd announced (num_nodes, feature_dim, num_classes, splits)."""
        return self._loader.dataset

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        it = iter(self._loader)
        if self.transform is None:
            return it
        return (self.transform(b) for b in it)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run this epoch (as DistributedSampler.set_epoch)."""
        self._loader.set_epoch(epoch)

    def close(self) -> None:
        """Disconnect from loaderd."""
        self._loader.close()

    def __enter__(self) -> "NeighborLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"gnnloader.NeighborLoader({self._loader.socket_path!r}, num_neighbors={self.num_neighbors})"


class _SplitLoader(Loader):
    """A Loader over a named split, with PyG's aliases (``val``) resolved
    against the daemon's split names."""

    def __init__(self, socket_path: str, split: str, **kw: Any):
        self._want_split = split
        super().__init__(socket_path, split=split, **kw)

    def _open(self, req: p.Open) -> p.Opened:
        names = {s.name for s in self.dataset.splits}
        if req.split not in names and _SPLIT_ALIASES.get(req.split) in names:
            req.split = _SPLIT_ALIASES[req.split]
        return super()._open(req)


def _seed_ids(input_nodes: Any, num_nodes: int) -> torch.Tensor:
    """Node ids from input_nodes (None, a bool mask or ids), checked against num_nodes."""
    if input_nodes is None:
        return torch.arange(num_nodes, dtype=torch.int64)
    t = torch.as_tensor(input_nodes)
    if t.dim() != 1:
        raise ValueError(f"input_nodes must be one-dimensional, not of shape {tuple(t.shape)}")
    t = t.cpu()
    if t.dtype == torch.bool:
        if t.numel() != num_nodes:
            raise ValueError(f"input_nodes is a mask of {t.numel()} entries but the dataset has {num_nodes} nodes")
        t = t.nonzero().view(-1)
    elif t.dtype.is_floating_point or t.dtype.is_complex:
        raise ValueError(f"input_nodes must hold node ids (integers) or be a boolean mask, not {t.dtype}")
    t = t.to(torch.int64)
    if t.numel() == 0:
        raise ValueError("input_nodes selects no node")
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= num_nodes:
        raise ValueError(f"input_nodes holds node id {lo if lo < 0 else hi}, outside [0, {num_nodes})")
    return t
