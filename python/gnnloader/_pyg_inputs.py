"""NeighborLoader's helpers for its inputs and outputs: the input nodes as
PyG's ``loader.dataset``, seeds from masks and ids, input_id, the checks of
``data`` against the daemon's dataset, and split names with PyG's aliases."""

from __future__ import annotations

import os
from collections import abc
from typing import TYPE_CHECKING, Any, Callable, Tuple

import torch

from . import protocol as p
from ._hetero_args import check_hetero_data, node_types_of, splits_of
from .batch import Batch
from .hetero import copy_batch, is_hetero
from .loader import Loader, LoaderError
from .remote import Remote

if TYPE_CHECKING:
    from .pyg import NeighborLoader

_SPLIT_ALIASES = {"val": "valid", "validation": "valid"}

#: The reserved ``Open.split`` that means "the seeds of the preceding Seeds
#: message" (docs/protocol.md).
CUSTOM_SPLIT = p.CUSTOM_SPLIT if hasattr(p, "CUSTOM_SPLIT") else "custom"


class InputNodes(abc.Sequence):
    """A NeighborLoader's input nodes, as PyG's ``loader.dataset``: ``len()``
    is their number and item ``i`` is position ``i`` (PyG's dataset is
    ``range(len(input_nodes))``). Other attributes are the daemon's facts
    (``num_nodes``, ``feature_dim``, ``splits``, ...)."""

    def __init__(self, nl: NeighborLoader):
        self._nl = nl

    def __len__(self) -> int:
        nl = self._nl
        if nl._ids is not None:
            return int(nl._ids.numel())
        req = nl._loader._request
        sizes = {s.name: s.size for s in splits_of(nl.facts, req.input_type)}
        name = nl._loader.opened_split
        return int(sizes[name])

    def __getitem__(self, i):
        return range(len(self))[i]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._nl.facts, name)

    def __repr__(self) -> str:
        return f"InputNodes({len(self)})"


def _seed_store(b: Any, input_type: str = "") -> Any:
    """Where a batch keeps its seeds' input_id and batch_size: the input
    type's store of a heterogeneous batch, the batch itself otherwise."""
    return b[input_type] if input_type else b


def _ids_as_input_id(b: Any, input_type: str = "") -> Any:
    """A batch over a mask: its input_id is its seeds' node ids (PyG's
    input_id for a boolean input_nodes), a view of n_id."""
    s = _seed_store(b, input_type)
    s.input_id = s.n_id[:s.batch_size]
    return b


def _given_input_id(b: Any, given: torch.Tensor, input_type: str = "") -> Any:
    """A batch of a loader given PyG's input_id argument: the given ids of
    its seeds (a small new tensor; the daemon's positions pick them)."""
    s = _seed_store(b, input_type)
    s.input_id = given[s.input_id.cpu()].to(s.input_id.device)
    return b


def _plain(v: Any) -> Any:
    """An enum's value (PyG's SubgraphType), else v."""
    return getattr(v, "value", v)


def _items(batch: Any):
    """A batch's fields as (name, value) pairs (Batch or PyG Data, whose
    keys was a property before PyG 2.4)."""
    keys = batch.keys() if callable(batch.keys) else batch.keys
    return [(k, batch[k]) for k in keys]


def _check_data(data: Any, loader: Loader) -> bool:
    """Checks a PyG-like ``data`` against what the daemon serves, where PyG
    reads it (num_nodes, x); returns whether data.x is one-dimensional (the
    batches' x then is too). ValueError on a mismatch."""
    if isinstance(data, (str, os.PathLike, Remote)) or data is None:
        return False
    ds = loader.dataset
    where = f"loaderd at {loader.socket_path} serves {ds.name}"
    if is_hetero(ds):
        check_hetero_data(data, ds, getattr(loader, "_regions", {}), where)
        return False
    n = _attr(data, "num_nodes")
    if isinstance(n, int) and n != ds.num_nodes:
        raise ValueError(f"data has {n} nodes but {where} with {ds.num_nodes}: wrong daemon or dataset?")
    x = _attr(data, "x")
    if not isinstance(x, torch.Tensor):
        return False
    served = loader.opened.regions if hasattr(loader, "opened") else []
    xr = next((r for r in served if r.name == "x"), None)
    if xr is None:
        return False  # the daemon serves no features (feature_dtype "none")
    dtype = str(x.dtype).replace("torch.", "")
    width = 1 if x.dim() == 1 else (int(x.size(1)) if x.dim() == 2 else -1)
    if x.dim() not in (1, 2) or (x.size(0) != ds.num_nodes):
        raise ValueError(f"data.x has shape {tuple(x.shape)}; {where}, {ds.num_nodes} nodes with "
                         f"{ds.feature_dim} features each")
    if dtype != xr.dtype or width != ds.feature_dim:
        raise ValueError(f"data.x is {dtype} of shape {tuple(x.shape)} but {where} with {xr.dtype} features "
                         f"of width {ds.feature_dim}: batches would not match data.x (re-import the dataset "
                         f"from the same features)")
    return x.dim() == 1


def _input_type(data: Any, input_nodes: Any) -> Tuple[str, Any]:
    """(input node type, nodes) from PyG's input_nodes: ``(node_type,
    nodes)``, a node type alone (all its nodes) when ``data`` knows its node
    types, else ("", input_nodes)."""
    if isinstance(input_nodes, tuple):
        if len(input_nodes) != 2 or not isinstance(input_nodes[0], str):
            raise ValueError(f"input_nodes as a tuple is (node_type, nodes) of a heterogeneous graph, "
                             f"not {input_nodes!r}")
        return input_nodes[0], input_nodes[1]
    if isinstance(input_nodes, str) and input_nodes in node_types_of(data):
        return input_nodes, None
    return "", input_nodes


def _data_device(data: Any) -> str:
    """Where PyG's batches would be: the CUDA device of ``data.x`` (of any
    node type's x for a HeteroData), else "cpu"."""
    if isinstance(data, (str, os.PathLike, Remote)) or data is None:
        return "cpu"
    xs = [_attr(data, "x")]
    if node_types_of(data):
        xs = [_attr(data[t], "x") for t in node_types_of(data)]
    cuda = [x.device for x in xs if isinstance(x, torch.Tensor) and x.device.type == "cuda"]
    return str(cuda[0]) if cuda else "cpu"


def _attr(data: Any, name: str) -> Any:
    """data.name, None when absent (PyG's Data raises AttributeError)."""
    try:
        return getattr(data, name, None)
    except Exception:
        return None


class _SplitLoader(Loader):
    """A Loader over a named split, with PyG's aliases (``val``) resolved
    against the daemon's split names."""

    def __init__(self, socket_path: str, split: str, **kw: Any):
        self._want_split = split
        super().__init__(socket_path, split=split, **kw)

    def _open(self, req: p.Open) -> p.Opened:
        names = {s.name for s in splits_of(self.dataset, req.input_type)}
        if req.split not in names and _SPLIT_ALIASES.get(req.split) in names:
            req.split = _SPLIT_ALIASES[req.split]
        self.opened_split = req.split
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


class _Facade:
    """What gnnloader's PyG loaders share: the Loader underneath, its length,
    epochs and closing. Subclasses set ``_loader``, ``_path`` and
    ``_common`` (the Loader's arguments)."""

    _loader: Loader

    @property
    def loader(self) -> Loader:
        """The :class:`gnnloader.Loader` doing the work."""
        return self._loader

    def __len__(self) -> int:
        return len(self._loader)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run this epoch (as DistributedSampler.set_epoch)."""
        self._loader.set_epoch(epoch)

    def close(self) -> None:
        """Disconnect from loaderd."""
        self._loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _one_batch(self, make: Any, size: int) -> Any:
        """One batch of ``size`` seeds from a second connection, ``make(**kw)``
        a Loader over them; returns copies (not slot views), as a PyG
        ``Data`` when PyG is importable."""
        kw = dict(self._common, batch_size=int(size), shuffle=False, rank=0, world_size=1, drop_last=False,
                  slots=1, start_epoch=0, start_batch=0)
        kw.pop("reconnect", None)
        with make(**kw) as one:
            one._shape_x = self._loader._shape_x
            b = next(iter(one))
            if one._hetero is not None:
                return copy_batch(b)
            fields = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in _items(b)}
            cls = one._data_cls
        return cls(**fields) if cls is not None else Batch(**fields)


class _SeedsLoader(Loader):
    """A Loader whose seeds are a tensor of node ids sent with a Seeds message
    (memfd) just before Open; ``times_fn`` adds their times (PyG's
    input_time) after the ids."""

    _times_fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None  # (subclasses may skip __init__)

    def __init__(self, socket_path: str, seeds_fn: Callable[[Any], torch.Tensor],
                 times_fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None, **kw: Any):
        self._seeds_fn, self._times_fn = seeds_fn, times_fn
        super().__init__(socket_path, split=CUSTOM_SPLIT, **kw)

    def _open(self, req: p.Open) -> p.Opened:
        if not hasattr(p, "Seeds"):
            raise LoaderError("this gnnloader's protocol module has no Seeds message: input_nodes must be a split name")
        ids = self._seeds_fn(self.dataset).to(torch.int64).contiguous()
        times = None if self._times_fn is None else self._times_fn(ids).to(torch.int64).contiguous()
        fd = os.memfd_create("gnnloader-seeds", os.MFD_CLOEXEC)
        try:
            data = ids.numpy().astype("<i8", copy=False).tobytes()
            if times is not None:
                data += times.numpy().astype("<i8", copy=False).tobytes()
            os.ftruncate(fd, len(data))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            seeds = p.Seeds(count=ids.numel(), times=True) if times is not None else p.Seeds(count=ids.numel())
            self._send(seeds, fds=[fd])
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
