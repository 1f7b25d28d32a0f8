"""A drop-in for PyG's ``torch_geometric.loader.NeighborLoader`` served by loaderd.

Switching a PyG training script is a one-line change::

    from torch_geometric.loader import NeighborLoader   # before
    from gnnloader import NeighborLoader                # after (loaderd on its default socket)

The arguments keep PyG's names, order and meanings (``data``,
``num_neighbors``, ``input_nodes``, ..., ``batch_size``, ``shuffle``,
``drop_last``); the batches keep PyG's fields (``x``, ``y``, ``edge_index``,
``e_id``, ``input_id``, ``batch_size``, ``n_id``, ``num_sampled_nodes``,
``num_sampled_edges``) and are ``torch_geometric`` ``Data`` objects when PyG
is importable. What differs is where the graph lives: loaderd holds it, so
the first argument names the daemon and is only checked against it (see
:class:`NeighborLoader` and docs/pyg.md).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Union

import torch

from . import protocol as p
from . import trust
from .loader import Loader, LoaderError  # noqa: F401 (gnnloader.pyg.LoaderError)
from ._hetero_args import FanoutSpec, node_type_info
from .remote import Remote, _socket_path, connect  # noqa: F401 (gnnloader.pyg.Remote, .connect)
from ._pyg_inputs import (_SPLIT_ALIASES, CUSTOM_SPLIT, InputNodes, _Facade, _attr, _check_data,  # noqa: F401
                          _data_device, _given_input_id, _ids_as_input_id, _input_type, _plain, _seed_ids, _seed_store,
                          _SeedsLoader, _SplitLoader)
from .hetero import is_hetero
from ._pyg_temporal import input_times, temporal_request, with_seed_time, with_time_named

__all__ = ["NeighborLoader", "InputNodes", "Remote", "connect", "SOCKET_ENV", "CUSTOM_SPLIT"]

#: Environment variable naming loaderd's socket when ``data`` does not.
SOCKET_ENV = trust.SOCKET_ENV

# PyG DataLoader options that have no meaning here: loaderd samples in its own
# threads and hands over shared-memory (or GPU) slots, so there is nothing for
# worker processes, prefetching or pinning to do. Accepted and ignored; a
# value other than the DataLoader's default warns.
_IGNORED = {
    "num_workers": (0, "loaderd samples in its own threads; trainer-side workers would add nothing"),
    "persistent_workers": (False, "there are no trainer-side workers"),
    "prefetch_factor": (None, "loaderd already runs ahead of the trainer (its --prefetch flag)"),
    "pin_memory": (False, "batches are already in shared (CPU path) or device (GPU path) memory"),
    "pin_memory_device": ("", "batches are already in shared (CPU path) or device (GPU path) memory"),
    "worker_init_fn": (None, "there are no trainer-side workers"),
    "multiprocessing_context": (None, "there are no trainer-side workers"),
    "generator": (None, "shuffling is seeded by the seed argument, not a torch.Generator"),
    "in_order": (True, "batches always come in order"),
}
# PyG NeighborLoader arguments that change nothing here, whatever their value.
_NO_EFFECT = {
    "is_sorted": "loaderd's CSR is always sorted",
    "filter_per_worker": "there are no trainer-side workers",
}
# Loader's own keyword arguments, which the PyG-style loaders pass through.
_LOADER_KWARGS = ("slots", "job", "release", "start_epoch", "start_batch", "pyg", "timeout", "reconnect", "daemon_uid")


def _check_pyg_kwargs(loader: str, kwargs: Dict[str, Any], pyg_args: Dict[str, Any], unsupported: Dict[str, Any],
                      why: str) -> Dict[str, Any]:
    """Takes Loader's own keyword arguments out of kwargs and returns them, and checks every other PyG
    argument (kwargs and pyg_args): a DataLoader option in _IGNORED with a value other than its default
    warns, one in _NO_EFFECT passes, one in unsupported with a value other than the one given there
    raises ValueError (why says what loaderd does instead), and anything else raises TypeError, as
    an unexpected keyword argument does. `loader` names the class in the messages."""
    loader_kw = {k: kwargs.pop(k) for k in _LOADER_KWARGS if k in kwargs}
    for k in ("dataset", "collate_fn"):  # PyTorch Lightning passes these back; PyG drops them
        if k == "dataset" or kwargs.get(k) is None:
            kwargs.pop(k, None)
    for k, v in list(kwargs.items()) + list(pyg_args.items()):
        if k in _IGNORED:
            default, reason = _IGNORED[k]
            if v != default:
                warnings.warn(f"gnnloader.{loader} ignores {k}={v!r}: {reason}", stacklevel=3)
        elif k in _NO_EFFECT:
            continue
        elif k in unsupported:
            if _plain(v) != unsupported[k]:
                raise ValueError(f"gnnloader.{loader} does not support {k}={_plain(v)!r} ({why})")
        else:
            raise TypeError(f"gnnloader.{loader} got an unexpected keyword argument {k!r}")
    return loader_kw


# PyG options whose non-default values loaderd does not implement (default).
_UNSUPPORTED_UNLESS = {
    "replace": False,
    "subgraph_type": "directional",
    "weight_attr": None,
    "transform_sampler_output": None,
    "neighbor_sampler": None,
    "directed": True,
    "collate_fn": None,
    "sampler": None,
    "batch_sampler": None,
}


def _dist_rank_world() -> tuple:
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # pragma: no cover - depends on the build
        pass
    return 0, 1


class NeighborLoader(_Facade):
    """PyG's NeighborLoader, with the sampling and feature gathering done by loaderd.

    The positional arguments are PyG's, in PyG's order (``data``,
    ``num_neighbors``, ``input_nodes``, ``input_time``, ``replace``,
    ``subgraph_type``, ``disjoint``, ``temporal_strategy``, ``time_attr``,
    ``weight_attr``, ``transform``, ``transform_sampler_output``,
    ``is_sorted``, ``filter_per_worker``, ``neighbor_sampler``, ``directed``);
    the DataLoader's (``batch_size``, ``shuffle``, ``drop_last``, ...) and
    gnnloader's own are keywords.

    Args:
        data: which loaderd to use, standing in for PyG's ``data``: a socket
            path (``str`` or ``os.PathLike``), a :class:`Remote` from
            :func:`connect`, or any other object (e.g. your PyG ``Data``),
            in which case the socket comes from ``socket=``, else
            ``$GNNLOADER_SOCKET``, else the daemon's default path (see
            :class:`gnnloader.Loader`). Such an object is checked against
            the daemon's dataset where PyG reads it: ``num_nodes`` must
            match, and ``x``, when it is a tensor, must have the served
            features' dtype and width (``[N, F]``, or ``[N]`` when the
            daemon serves one feature: batches then have a one-dimensional
            ``x`` too); a mismatch is a ValueError. Its tensors are not
            otherwise read: loaderd serves its own copy of the dataset.
        num_neighbors: neighbours sampled per hop, outermost first; ``-1``
            takes all and ``0`` none (PyG's meanings). Heterogeneous
            graphs: a list applies to every edge type; a dict
            ``{(src, rel, dst): list}`` (or PyG's NumNeighbors with a
            default) gives each edge type its own, as PyG.
        input_nodes: the seed nodes: ``None`` (every node), a split name
            (``"train"``, ``"valid"``/``"val"``, ``"test"``), a boolean mask
            of length ``num_nodes`` (e.g. ``data.train_mask``) or a tensor of
            node ids. Tensors travel to loaderd once, in a memfd.
            Heterogeneous graphs: ``(node_type, any of those)`` (a mask
            over that type's nodes), or the node type alone when ``data``
            knows its node types; batches are then PyG HeteroData
            (gnnloader.hetero.HeteroBatch without PyG).
        input_time: the seeds' times (PyG's; int64, one per input node, which
            must then be a tensor or mask); needs ``time_attr``. Default:
            each seed's own ``node_time``. Batches then have ``seed_time``.
        disjoint: one subgraph per seed (PyG's): batches have ``batch``,
            each node's subgraph, and ``n_id`` may repeat a node.
        time_attr: temporal sampling (PyG's; always disjoint): the served
            dataset's ``"node_time"`` or ``"edge_time"`` (another name is
            matched, as PyG does, by ``data``'s attribute of that name:
            node- or edge-level). Every node of a seed's subgraph only
            reaches neighbours (edges) no later than the seed's time.
        temporal_strategy: ``"uniform"`` or ``"last"`` (the most recent
            eligible neighbours), as PyG. Disjoint and temporal batches are
            served for homogeneous graphs, on any device (sampled by the
            CPU).
        replace, subgraph_type, weight_attr, transform_sampler_output,
            neighbor_sampler, directed: PyG's; only their defaults are
            supported (anything else raises ValueError).
        transform: applied to every batch, as in PyG.
        is_sorted, filter_per_worker: accepted; they change nothing here.
        input_id: PyG's (NodeLoader's) ids for the input nodes, one each:
            batches then report these in ``input_id``.
        batch_size: seeds per batch (keyword, as in PyG where it reaches
            DataLoader through ``**kwargs``).
        shuffle: reshuffle the seeds every epoch.
        drop_last: drop the last incomplete batch.
        socket: the loaderd socket when ``data`` does not name it
            (default: ``$GNNLOADER_SOCKET``, else the daemon's default).
        device: where batches land: ``"cpu"`` (shared memory, zero-copy) or
            ``"cuda:N"``. Default: where ``data.x`` is when that is a CUDA
            tensor (as PyG's batches), else ``"cpu"``.
        seed: shuffle and sampling seed. Default: ``torch.initial_seed()``
            with one process, 0 when ranks must agree (``world_size > 1``).
        rank, world_size: split the seeds between trainers. Default for a
            split name: from ``torch.distributed`` when it is initialised.
            Default for a tensor or mask: one process, as PyG (which never
            shards; pass this rank's seeds, or set rank/world_size and give
            every rank the same tensor).
        **kwargs: DataLoader options. Those that have no meaning here
            (``num_workers``, ``persistent_workers``, ``pin_memory``,
            ``prefetch_factor``, ...) are ignored, with a warning when not
            the DataLoader's default: loaderd samples in its own threads,
            runs ahead of the trainer and hands over batches already in
            shared or device memory. ``timeout`` (seconds; 0 or None: no
            timeout, as DataLoader's 0) and the other keyword arguments of
            :class:`gnnloader.Loader` (``slots``, ``job``, ``release``,
            ``start_epoch``, ``start_batch``, ``pyg``, ``reconnect``,
            ``daemon_uid``) pass through; on a reconnect custom seeds are
            sent again.

    Iterating runs one epoch; ``len()`` is the number of batches per epoch;
    ``loader.dataset`` is the input nodes (``len`` of it is their number, as
    PyG's); ``loader(index)`` samples one batch for the seeds at those
    positions of the input nodes (PyG's ``__call__``). Batch tensors are
    views of a loaderd slot that is reused once the next batch is taken:
    ``.clone()`` what you keep. Bad arguments, and requests beyond the
    daemon's limits, raise ValueError (:class:`gnnloader.errors.RequestError`
    for the daemon's refusals, also a LoaderError).
    """

    def __init__(self, data: Any, num_neighbors: Union[Sequence[int], Dict[Any, Any]],
                 input_nodes: Union[None, str, torch.Tensor, Sequence[int]] = None, input_time: Any = None,
                 replace: bool = False, subgraph_type: Any = "directional", disjoint: bool = False,
                 temporal_strategy: str = "uniform", time_attr: Optional[str] = None,
                 weight_attr: Optional[str] = None, transform: Optional[Callable[[Any], Any]] = None,
                 transform_sampler_output: Optional[Callable[[Any], Any]] = None, is_sorted: bool = False,
                 filter_per_worker: Optional[bool] = None, neighbor_sampler: Any = None, directed: bool = True,
                 *, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, socket: Optional[str] = None,
                 device: Union[None, str, torch.device] = None, seed: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None, **kwargs: Any):
        pyg_args = dict(replace=replace, subgraph_type=subgraph_type, weight_attr=weight_attr,
                        transform_sampler_output=transform_sampler_output, neighbor_sampler=neighbor_sampler,
                        directed=directed)
        given_ids = kwargs.pop("input_id", None)  # PyG's NodeLoader argument
        loader_kw = _check_pyg_kwargs("NeighborLoader", kwargs, pyg_args, _UNSUPPORTED_UNLESS,
                                      "loaderd samples uniformly without replacement")
        temporal, served_time = temporal_request(disjoint, temporal_strategy, time_attr, input_time, data)
        fanouts = FanoutSpec.of(num_neighbors)  # ValueError for a bad list or dict
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer, not {batch_size!r}")
        input_type, input_nodes = _input_type(data, input_nodes)
        if input_type and temporal:
            raise ValueError("disjoint and temporal sampling of heterogeneous graphs is not supported by loaderd")
        if input_time is not None and isinstance(input_nodes, str):
            raise ValueError(f"input_time needs input_nodes as a tensor of ids or a mask, not the split name "
                             f"{input_nodes!r} (loaderd keeps a split's ids, so times cannot be matched to them)")

        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
        elif isinstance(data, Remote):
            path = socket or data.socket
        else:
            path = socket  # None: the Loader applies the default (and says so if nothing listens)
        self.data = data
        self.num_neighbors = num_neighbors
        self.input_nodes = (input_type, input_nodes) if input_type else input_nodes
        self.input_type = input_type or None
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.transform = transform
        self.replace, self.subgraph_type, self.disjoint = replace, _plain(subgraph_type), bool(disjoint) or bool(temporal)
        self.time_attr, self.weight_attr, self.directed = time_attr, weight_attr, directed
        self.temporal_strategy, self.input_time = temporal_strategy, input_time
        self.is_sorted, self.filter_per_worker = is_sorted, filter_per_worker
        self.neighbor_sampler = neighbor_sampler

        split: Optional[str] = None
        if isinstance(input_nodes, str):
            if input_nodes.startswith("link:"):
                raise ValueError(f"input_nodes {input_nodes!r} names a link split: use gnnloader.LinkNeighborLoader "
                                 f"(edge_label_index={input_nodes[5:]!r})")
            split = input_nodes
        explicit_rank = rank is not None or world_size is not None
        if split is not None and not explicit_rank:
            rank, world_size = _dist_rank_world()
        rank = 0 if rank is None else int(rank)
        world_size = 1 if world_size is None else int(world_size)
        if seed is None:
            seed = (torch.initial_seed() & (2 ** 63 - 1)) if world_size == 1 else 0
        if device is None:  # PyG's batches are where data.x is
            device = _data_device(data)
        common = dict(batch_size=batch_size, fanouts=fanouts, shuffle=shuffle, seed=int(seed), rank=rank,
                      world_size=world_size, device=str(device), drop_last=drop_last, input_type=input_type,
                      temporal=temporal, time_attr=served_time)
        common.update(loader_kw)
        self.rank, self.world_size, self.seed = rank, world_size, int(seed)
        self._path, self._common = path, common

        # The batches' times are served as node_time or edge_time; PyG names
        # them after time_attr.
        self._time_names = (served_time, time_attr) if served_time and time_attr != served_time else None
        self._ids: Optional[torch.Tensor] = None  # the input nodes' ids, when not a split name
        self._times: Optional[torch.Tensor] = None  # their times (input_time), when given
        # PyG's input_id is the position in input_nodes, but the node id for a mask.
        self._by_mask = isinstance(input_nodes, torch.Tensor) and input_nodes.dtype == torch.bool
        # PyG's input_id argument: the ids batches report for the input nodes, one each.
        self._given_ids = None if given_ids is None else torch.as_tensor(given_ids).view(-1)
        if split is not None:
            self._loader: Loader = _SplitLoader(path, split, **common)
        else:
            def seeds(ds: p.Dataset) -> torch.Tensor:
                n = node_type_info(ds, input_type).num_nodes if input_type and is_hetero(ds) else ds.num_nodes
                self._ids = _seed_ids(input_nodes, n)
                return self._ids

            def times(ids: torch.Tensor) -> torch.Tensor:
                if self._times is None:
                    self._times = input_times(input_time, ids.numel())
                return self._times
            self._loader = _SeedsLoader(path, seeds, times if input_time is not None else None, **common)
        try:
            self._x_1d = _check_data(data, self._loader)
        except ValueError:
            self._loader.close()
            raise
        self._loader._shape_x = "1d" if self._x_1d else None
        if self._given_ids is not None and self._given_ids.numel() != len(self.dataset):
            n = self._given_ids.numel()
            self._loader.close()
            raise ValueError(f"input_id has {n} entries for {len(self.dataset)} input nodes: give one per input node")

    # -- the Loader underneath -------------------------------------------------

    @property
    def facts(self) -> p.Dataset:
        """The facts loaderd announced about its dataset (name, num_nodes,
        feature_dim, feature_dtype, num_classes, splits)."""
        return self._loader.dataset

    @property
    def dataset(self) -> "InputNodes":
        """The input nodes, as PyG's ``loader.dataset``: ``len()`` is their
        number (the whole split or tensor, before any sharding between
        ranks). It also answers the daemon's facts (``num_nodes``,
        ``feature_dim``, ...; see :attr:`facts`)."""
        return InputNodes(self)

    def __iter__(self):
        it, t = iter(self._loader), self.input_type or ""
        if self._times is not None:
            it = (with_seed_time(b, self._times) for b in it)
        if self._time_names is not None:
            it = (with_time_named(b, *self._time_names) for b in it)
        if self._given_ids is not None:
            it = (_given_input_id(b, self._given_ids, t) for b in it)
        elif self._by_mask:
            it = (_ids_as_input_id(b, t) for b in it)
        if self.transform is None:
            return it
        return (self.transform(b) for b in it)

    def __call__(self, index: Union[torch.Tensor, Sequence[int]]):
        """One batch for the seeds at positions ``index`` of the input nodes
        (PyG's ``NeighborLoader.__call__``): ``n_id[:batch_size]`` are
        those nodes and ``input_id`` is ``index`` (for a mask, as PyG, the
        nodes' ids). It opens a second
        connection to loaderd for the call and returns tensors of its own
        (copies, not slot views); ``transform`` applies. Sampling uses the
        loader's seed; the call is not part of any epoch. A loader over a
        split name cannot be called (ValueError): loaderd keeps the split's
        ids, so positions in it mean nothing here; pass the split as a mask
        or a tensor of ids instead."""
        if self._ids is None:
            raise ValueError("loader(index) takes positions in input_nodes, whose ids loaderd keeps for a split "
                             "name: pass input_nodes as a mask or a tensor of ids (or None) to call the loader")
        pos = torch.as_tensor(index).view(-1)
        if pos.dtype == torch.bool:
            pos = pos.nonzero().view(-1)
        if pos.numel() == 0 or pos.dtype.is_floating_point or pos.dtype.is_complex:
            raise ValueError(f"loader(index) takes a non-empty list or tensor of positions, not {index!r}")
        pos = pos.to(torch.int64)
        n = self._ids.numel()
        if int(pos.min()) < -n or int(pos.max()) >= n:
            raise ValueError(f"loader(index): position outside the {n} input nodes")
        pos = pos % n
        ids = self._ids[pos]
        times = None if self._times is None else self._times[pos]
        out = self._one_batch(lambda **kw: _SeedsLoader(self._path, lambda ds: ids,
                                                        None if times is None else (lambda _: times), **kw), ids.numel())
        if times is not None:
            out.seed_time = times.to(out.n_id.device)
        if self._time_names is not None:
            out = with_time_named(out, *self._time_names)
        input_id = self._given_ids[pos] if self._given_ids is not None else ids if self._by_mask else pos
        store = _seed_store(out, self.input_type or "")
        store.input_id = input_id.to(store.n_id.device)
        return out if self.transform is None else self.transform(out)

    def __repr__(self) -> str:
        return "NeighborLoader()"  # as PyG's
