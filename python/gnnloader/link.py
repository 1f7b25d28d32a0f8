"""A drop-in for PyG's ``torch_geometric.loader.LinkNeighborLoader`` served by loaderd.

Switching a PyG link-prediction script is a one-line change::

    from torch_geometric.loader import LinkNeighborLoader   # before
    from gnnloader import LinkNeighborLoader                # after

loaderd samples the batches (docs/pyg.md, "LinkNeighborLoader"): the
positive pairs come from a link split of the served dataset (``"train"``,
``"valid"``, ``"test"``) or from a tensor sent once; negatives are drawn by
the daemon, uniformly, deterministic per (seed, epoch, batch).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Optional, Sequence, Union

import torch

from . import protocol as p
from ._pyg_inputs import _Facade
from .loader import Loader
from .pyg import (CUSTOM_SPLIT, Remote, _SPLIT_ALIASES, _SeedsLoader, _attr, _check_data, _check_pyg_kwargs,
                  _dist_rank_world, _plain)

__all__ = ["LinkNeighborLoader", "NegativeSampling", "LINK_PREFIX"]

#: The prefix of an ``Open.split`` that asks loaderd for link batches
#: (docs/protocol.md, "Link batches").
LINK_PREFIX = "link:"

_UNSUPPORTED_UNLESS = {
    "replace": False,
    "subgraph_type": "directional",
    "disjoint": False,
    "temporal_strategy": "uniform",
    "time_attr": None,
    "weight_attr": None,
    "transform_sampler_output": None,
    "neighbor_sampler": None,
    "directed": True,
    "collate_fn": None,
    "sampler": None,
    "batch_sampler": None,
    "num_src_nodes": None,
    "num_dst_nodes": None,
}


class NegativeSampling:
    """PyG's ``torch_geometric.sampler.NegativeSampling`` for scripts without
    PyG (PyG's own is accepted too): ``mode`` ``"binary"`` or
    ``"triplet"``, ``amount`` the ratio (binary) or the negatives per pair
    (triplet, an integer). Weighted sampling is not supported."""

    def __init__(self, mode: str, amount: Union[int, float] = 1):
        self.mode, self.amount = _neg_sampling((_plain(mode), amount), None)

    @classmethod
    def cast(cls, v: Any) -> Optional["NegativeSampling"]:
        if v is None or isinstance(v, cls):
            return v
        mode, amount = _neg_sampling(v, None)
        return cls(mode, amount)

    def is_binary(self) -> bool:
        return self.mode == "binary"

    def is_triplet(self) -> bool:
        return self.mode == "triplet"

    def __repr__(self) -> str:
        return f"NegativeSampling(mode={self.mode!r}, amount={self.amount!r})"


def _neg_sampling(neg_sampling: Any, neg_sampling_ratio: Any) -> Optional[tuple]:
    """(mode, amount) from PyG's neg_sampling / neg_sampling_ratio, or None."""
    if neg_sampling_ratio is not None and neg_sampling_ratio != 0.0:
        neg_sampling = ("binary", neg_sampling_ratio)  # PyG: the ratio wins
    if neg_sampling is None:
        return None
    if isinstance(neg_sampling, tuple):
        mode, amount = neg_sampling
    elif isinstance(neg_sampling, NegativeSampling):
        mode, amount = neg_sampling.mode, neg_sampling.amount
    elif isinstance(neg_sampling, str):
        mode, amount = neg_sampling, 1
    elif isinstance(neg_sampling, dict):
        extra = set(neg_sampling) - {"mode", "amount", "weight", "src_weight", "dst_weight"}
        if extra or "mode" not in neg_sampling:
            raise ValueError(f"neg_sampling as a dict takes mode and amount, not {sorted(neg_sampling)}")
        for w in ("weight", "src_weight", "dst_weight"):
            if neg_sampling.get(w) is not None:
                raise ValueError(f"neg_sampling {w}: weighted negative sampling is not supported by loaderd")
        mode, amount = neg_sampling["mode"], neg_sampling.get("amount", 1)
    else:  # PyG's NegativeSampling, or anything with its attributes
        for w in ("weight", "src_weight", "dst_weight"):
            if getattr(neg_sampling, w, None) is not None:
                raise ValueError(f"neg_sampling {w}: weighted negative sampling is not supported by loaderd")
        mode, amount = getattr(neg_sampling, "mode", None), getattr(neg_sampling, "amount", 1)
    mode = _plain(mode)
    if mode not in ("binary", "triplet"):
        raise ValueError(f"neg_sampling mode must be 'binary' or 'triplet', not {mode!r}")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount > 0 or math.isinf(amount):
        raise ValueError(f"The attribute 'amount' needs to be positive (got {amount!r})")
    if mode == "triplet" and amount != math.ceil(amount):
        raise ValueError(f"The attribute 'amount' needs to be an integer for triplet negative sampling (got {amount})")
    return mode, amount


def _split_name(split: str, mode_amount: Optional[tuple]) -> str:
    """The Open.split of a link request."""
    name = LINK_PREFIX + split
    if mode_amount is not None:
        mode, amount = mode_amount
        name += f":{mode}:{int(amount) if mode == 'triplet' else repr(float(amount))}"
    return name


class _LinkLoader(Loader):
    """A Loader over a link split (its name resolved against the daemon's
    link splits, PyG's aliases included) or, with ``pairs``, over the pairs
    of a tensor sent as a Seeds message (the sources, then the
    destinations)."""

    def __init__(self, socket_path: Optional[str], split: str, mode_amount: Optional[tuple], **kw: Any):
        self.link_split, self._mode_amount = split, mode_amount
        super().__init__(socket_path, split=_split_name(split, mode_amount), **kw)

    def _open(self, req: p.Open) -> p.Opened:
        names = {s.name for s in self.dataset.splits}
        alias = _SPLIT_ALIASES.get(self.link_split)
        if LINK_PREFIX + self.link_split not in names and alias and LINK_PREFIX + alias in names:
            self.link_split = alias
            req.split = _split_name(alias, self._mode_amount)
        return super()._open(req)

    @property
    def num_pairs(self) -> Optional[int]:
        """The split's pairs, as the daemon announced them."""
        return next((s.size for s in self.dataset.splits if s.name == LINK_PREFIX + self.link_split), None)


class _LinkPairsLoader(_SeedsLoader):
    """A Loader over the pairs of a tensor, sent as a Seeds message (the
    sources, then the destinations; the daemon checks the ids)."""

    def __init__(self, socket_path: Optional[str], pairs: torch.Tensor, mode_amount: Optional[tuple], **kw: Any):
        self._seeds_fn = lambda ds: pairs.reshape(-1)
        Loader.__init__(self, socket_path, split=_split_name(CUSTOM_SPLIT, mode_amount), **kw)


class LinkNeighborLoader(_Facade):
    """PyG's LinkNeighborLoader, with the sampling, the negatives and the
    feature gathering done by loaderd.

    The positional arguments are PyG's, in PyG's order (``data``,
    ``num_neighbors``, ``edge_label_index``, ``edge_label``,
    ``edge_label_time``, ``replace``, ``subgraph_type``, ``disjoint``,
    ``temporal_strategy``, ``neg_sampling``, ``neg_sampling_ratio``,
    ``time_attr``, ``weight_attr``, ``transform``,
    ``transform_sampler_output``, ``is_sorted``, ``filter_per_worker``,
    ``neighbor_sampler``, ``directed``); the DataLoader's (``batch_size``,
    ``shuffle``, ``drop_last``, ...) and gnnloader's own are keywords, as for
    :class:`gnnloader.NeighborLoader` (``socket``, ``device``, ``seed``,
    ``rank``, ``world_size``, ``slots``, ``timeout``, ...).

    Args:
        data: which loaderd to use (a socket path, a :class:`Remote`, or a
            PyG-like object checked against the daemon), as for
            :class:`gnnloader.NeighborLoader`.
        num_neighbors: neighbours sampled per hop from the batch's seed
            nodes (the unique ends of its pairs, negatives included).
        edge_label_index: the positive pairs: a link split name of the
            served dataset (``"train"``, ``"valid"``/``"val"``,
            ``"test"``), a ``[2, E]`` tensor of node ids (sent once), or
            ``None``: ``data.edge_index`` when ``data`` has one.
        edge_label: labels of the pairs (one per pair). For a split, the
            split's own labels are served when it has them.
        edge_label_time: temporal sampling: only None is supported.
        neg_sampling: ``None``, PyG's ``NegativeSampling`` (or an object with
            its ``mode`` and ``amount``), a dict ``dict(mode=..., amount=...)``
            or a mode name: ``"binary"`` draws ceil(amount × B) random pairs
            (label 0), ``"triplet"`` ``amount`` random destinations per pair.
            Weighted negative sampling raises ValueError.
        neg_sampling_ratio: PyG's deprecated form of binary negative
            sampling (it wins over ``neg_sampling`` when not 0, as in PyG).
        replace, subgraph_type, disjoint, temporal_strategy, time_attr,
            weight_attr, transform_sampler_output, neighbor_sampler,
            directed: only their defaults are supported (else ValueError).
        transform: applied to every batch.

    Batches hold PyG's fields: ``x``, ``y``, ``edge_index``, ``n_id``,
    ``e_id``, ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id``
    (each positive pair's position in ``edge_label_index``), and
    ``edge_label_index`` (local ids) with ``edge_label`` (binary or no
    negative sampling), or ``src_index``, ``dst_pos_index`` and
    ``dst_neg_index`` (triplet). Labels follow PyG's rule: 1.0 and 0.0
    (float) without given labels under binary sampling; given labels
    (their dtype), plus one when the smallest is 0, and 0 for negatives.
    Tensors are views of a loaderd slot, reused once the next batch is
    taken: ``.clone()`` what you keep.
    """

    def __init__(self, data: Any, num_neighbors: Sequence[int],
                 edge_label_index: Union[None, str, torch.Tensor] = None, edge_label: Optional[torch.Tensor] = None,
                 edge_label_time: Optional[torch.Tensor] = None, replace: bool = False,
                 subgraph_type: Any = "directional", disjoint: bool = False, temporal_strategy: str = "uniform",
                 neg_sampling: Any = None, neg_sampling_ratio: Optional[Union[int, float]] = None,
                 time_attr: Optional[str] = None, weight_attr: Optional[str] = None,
                 transform: Optional[Callable[[Any], Any]] = None,
                 transform_sampler_output: Optional[Callable[[Any], Any]] = None, is_sorted: bool = False,
                 filter_per_worker: Optional[bool] = None, neighbor_sampler: Any = None, directed: bool = True,
                 *, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 socket: Optional[str] = None, device: Union[None, str, torch.device] = None,
                 seed: Optional[int] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
                 **kwargs: Any):
        pyg_args = dict(replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                        temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                        transform_sampler_output=transform_sampler_output, neighbor_sampler=neighbor_sampler,
                        directed=directed)
        loader_kw = _check_pyg_kwargs("LinkNeighborLoader", kwargs, pyg_args, _UNSUPPORTED_UNLESS,
                                      "loaderd samples uniformly without replacement, homogeneous graphs")
        if edge_label_time is not None:
            raise ValueError("gnnloader.LinkNeighborLoader does not support edge_label_time (temporal sampling)")
        if isinstance(num_neighbors, dict):
            raise ValueError("num_neighbors as a dict (heterogeneous graphs) is not supported by loaderd")
        fanouts = [int(f) for f in num_neighbors]
        if not fanouts or any(f < -1 for f in fanouts):
            raise ValueError(f"num_neighbors must be a non-empty list of integers >= -1, not {list(num_neighbors)!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer, not {batch_size!r}")
        if isinstance(edge_label_index, tuple):
            raise ValueError("edge_label_index as (edge_type, edges) is for heterogeneous graphs, "
                             "which loaderd does not serve")
        mode_amount = _neg_sampling(neg_sampling, neg_sampling_ratio)
        if mode_amount is not None and mode_amount[0] == "triplet" and edge_label is not None:
            raise ValueError("'edge_label' needs to be undefined for 'triplet'-based negative sampling")

        if isinstance(data, (str, os.PathLike)):
            path: Optional[str] = os.fspath(data)
        elif isinstance(data, Remote):
            path = socket or data.socket
        else:
            path = socket
        if edge_label_index is None:
            edge_label_index = _attr(data, "edge_index")
            if not isinstance(edge_label_index, torch.Tensor):
                raise ValueError("edge_label_index=None takes data.edge_index, which data lacks: pass a link split "
                                 "name (e.g. 'train') or a [2, E] tensor")
        split = edge_label_index if isinstance(edge_label_index, str) else None
        pairs = None
        if split is None:
            pairs = torch.as_tensor(edge_label_index).cpu()
            if pairs.dim() != 2 or pairs.size(0) != 2 or pairs.size(1) == 0:
                raise ValueError(f"edge_label_index must be a non-empty [2, E] tensor, not of shape {tuple(pairs.shape)}")
            if pairs.dtype.is_floating_point or pairs.dtype.is_complex or pairs.dtype == torch.bool:
                raise ValueError(f"edge_label_index must hold node ids (integers), not {pairs.dtype}")
            pairs = pairs.to(torch.int64).contiguous()
        self._labels: Optional[torch.Tensor] = None
        if edge_label is not None:
            lab = torch.as_tensor(edge_label).cpu()
            if mode_amount is not None and lab.numel() and int(lab.min()) == 0:
                lab = lab + 1  # PyG: 0 now means "negative"
            self._labels = lab

        explicit_rank = rank is not None or world_size is not None
        if split is not None and not explicit_rank:
            rank, world_size = _dist_rank_world()
        rank = 0 if rank is None else int(rank)
        world_size = 1 if world_size is None else int(world_size)
        if seed is None:
            seed = (torch.initial_seed() & (2 ** 63 - 1)) if world_size == 1 else 0
        if device is None:
            x = _attr(data, "x") if not isinstance(data, (str, os.PathLike, Remote)) else None
            device = x.device if isinstance(x, torch.Tensor) and x.device.type == "cuda" else "cpu"
        common = dict(batch_size=batch_size, fanouts=fanouts, shuffle=shuffle, seed=int(seed), rank=rank,
                      world_size=world_size, device=str(device), drop_last=drop_last)
        common.update(loader_kw)
        self._path, self._common = path, common

        self.data, self.num_neighbors, self.edge_label_index = data, fanouts, edge_label_index
        self.edge_label, self.batch_size, self.shuffle, self.drop_last = edge_label, batch_size, shuffle, drop_last
        self.transform, self.rank, self.world_size, self.seed = transform, rank, world_size, int(seed)
        self.neg_sampling = None if mode_amount is None else dict(mode=mode_amount[0], amount=mode_amount[1])
        self._mode_amount, self._pairs = mode_amount, (pairs if split is None else None)
        if split is not None:
            link = _LinkLoader(path, split, mode_amount, **common)
            self._loader: Loader = link
            self._num_pairs = link.num_pairs
        else:
            self._loader = _LinkPairsLoader(path, pairs, mode_amount, **common)
            self._num_pairs = int(pairs.size(1))
        try:
            x_1d = _check_data(data, self._loader)
            if self._labels is not None and self._num_pairs is not None and self._labels.size(0) != self._num_pairs:
                raise ValueError(f"edge_label has {self._labels.size(0)} rows for {self._num_pairs} pairs")
        except ValueError:
            self._loader.close()
            raise
        self._loader._shape_x = "1d" if x_1d else None
        self._squeeze = mode_amount is not None and mode_amount[0] == "triplet" and int(mode_amount[1]) == 1

    @property
    def dataset(self) -> range:
        """The positions of the positive pairs (PyG's ``range(E)``)."""
        return range(self._num_pairs or 0)

    def __iter__(self):
        it = (self._finish(b) for b in self._loader)
        if self.transform is None:
            return it
        return (self.transform(b) for b in it)

    def _finish(self, b: Any) -> Any:
        if self._squeeze:
            b.dst_neg_index = b.dst_neg_index.view(-1)
        if self._labels is not None:
            pos = b.input_id.cpu()
            n = b.edge_label_index.size(1)
            lab = torch.zeros((n,) + tuple(self._labels.shape[1:]), dtype=self._labels.dtype)
            lab[:pos.numel()] = self._labels[pos]
            b.edge_label = lab.to(b.input_id.device)
        return b

    def __call__(self, index: Union[torch.Tensor, Sequence[int]]) -> Any:
        """One batch for the pairs at positions ``index`` of the loader's
        ``edge_label_index``, as PyG's ``LinkLoader.__call__``: the loader's
        negative sampling and ``edge_label`` apply, ``input_id`` is ``index``
        and ``transform`` runs. It opens a second connection to loaderd for
        the call and returns tensors of its own (copies, not slot views).
        Sampling uses the loader's seed; the call is not part of any epoch.
        A loader over a split name keeps the split's pairs in loaderd, so it
        has no positions to take here (ValueError)."""
        if self._pairs is None:
            raise ValueError("loader(index) needs the pairs on this side: build the LinkNeighborLoader from an "
                             "edge_label_index tensor (a split name's pairs stay in loaderd)")
        idx = torch.as_tensor(index).cpu().view(-1)
        if idx.numel() == 0 or idx.dtype.is_floating_point or idx.dtype == torch.bool:
            raise ValueError(f"loader(index) takes non-empty integer positions into edge_label_index, not {index!r}")
        idx = idx.to(torch.int64)
        n = self._pairs.size(1)
        if int(idx.min()) < 0 or int(idx.max()) >= n:
            raise ValueError(f"loader(index): position {int(idx.min()) if int(idx.min()) < 0 else int(idx.max())} "
                             f"outside [0, {n})")
        pairs = self._pairs[:, idx].contiguous()
        out = self._one_batch(lambda **kw: _LinkPairsLoader(self._path, pairs, self._mode_amount, **kw), idx.numel())
        out.input_id = idx.to(out.input_id.device)[out.input_id]  # positions in this loader's pairs
        out = self._finish(out)
        return self.transform(out) if self.transform is not None else out

    def __repr__(self) -> str:
        return "LinkNeighborLoader()"
