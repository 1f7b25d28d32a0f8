"""The arguments of a heterogeneous request, checked as PyG checks them:
``num_neighbors`` as a list or a dict of edge types (PyG's NumNeighbors),
resolved against the daemon's edge types into Open's ``fanouts`` and
``edge_fanouts``; the input node type; a HeteroData ``data`` checked against
what loaderd serves."""

from __future__ import annotations

import dataclasses
import numbers
from collections import abc
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from .errors import RequestError
from .hetero import EdgeType, is_hetero


def _hops(v: Any, what: str) -> List[int]:
    """A list of fanouts, one per hop, each an integer >= -1."""
    if isinstance(v, (str, bytes)) or not isinstance(v, abc.Iterable):
        raise ValueError(f"{what} must be a list of integers >= -1 (-1: all neighbours, 0: none), not {v!r}")
    out = list(v)
    if not out or any(not _integer(f) or int(f) < -1 for f in out):
        raise ValueError(f"{what} must be a non-empty list of integers >= -1 (-1: all neighbours, 0: none), "
                         f"not {out!r}")
    return [int(f) for f in out]


def _integer(f: Any) -> bool:
    if isinstance(f, torch.Tensor):
        return f.numel() == 1 and not (f.dtype.is_floating_point or f.dtype.is_complex or f.dtype == torch.bool)
    return isinstance(f, numbers.Integral) and not isinstance(f, bool)


def _edge_type(key: Any) -> EdgeType:
    """A num_neighbors key: (src, rel, dst) or "src__rel__dst" (PyG's EdgeTypeStr)."""
    parts = key.split("__") if isinstance(key, str) else list(key) if isinstance(key, (tuple, list)) else []
    if len(parts) != 3 or not all(isinstance(s, str) and s for s in parts):
        raise ValueError(f"num_neighbors key {key!r} is not an edge type: give (src, rel, dst) tuples "
                         f"(or 'src__rel__dst' strings)")
    return tuple(parts)  # type: ignore[return-value]


@dataclasses.dataclass
class FanoutSpec:
    """num_neighbors as given: ``hops`` (one list for every edge type), or
    ``per_type`` (a list per edge type) with an optional ``default`` for the
    edge types it leaves out (PyG's NumNeighbors(values, default))."""

    hops: Optional[List[int]] = None
    per_type: Optional[Dict[EdgeType, List[int]]] = None
    default: Optional[List[int]] = None

    @classmethod
    def of(cls, num_neighbors: Any) -> "FanoutSpec":
        """Checks the form of num_neighbors: a list of integers >= -1, a dict
        {edge type: list}, or PyG's NumNeighbors; ValueError otherwise."""
        if isinstance(num_neighbors, FanoutSpec):
            return num_neighbors
        values, default = num_neighbors, None
        plain = isinstance(num_neighbors, (abc.Mapping, abc.Sequence, torch.Tensor))
        if not plain and hasattr(num_neighbors, "values"):  # PyG's NumNeighbors(values, default)
            values, default = num_neighbors.values, getattr(num_neighbors, "default", None)
        if not isinstance(values, abc.Mapping):
            if default is not None:
                raise ValueError("num_neighbors: a default is only meaningful with a dict of edge types (as PyG)")
            return cls(hops=_hops(values, "num_neighbors"))
        per_type = {}
        for k, v in values.items():
            et = _edge_type(k)
            per_type[et] = _hops(v, f"num_neighbors[{et!r}]")
        spec = cls(per_type=per_type, default=None if default is None else _hops(default, "the default num_neighbors"))
        lengths = {len(v) for v in per_type.values()} | ({len(spec.default)} if spec.default else set())
        if len(lengths) > 1:
            raise ValueError(f"Number of hops must be the same across all edge types in num_neighbors "
                             f"(got {sorted(lengths)})")
        if not per_type and spec.default is None:
            raise ValueError("num_neighbors is an empty dict: give a list per edge type")
        return spec

    def num_hops(self) -> int:
        if self.hops is not None:
            return len(self.hops)
        return len(next(iter(self.per_type.values()))) if self.per_type else len(self.default or [])

    def resolve(self, edge_types: Sequence[EdgeType]) -> Tuple[List[int], List[int]]:
        """(fanouts, edge_fanouts) for Open, on a dataset with these edge
        types (Welcome's order): a list gives its fanouts and no
        edge_fanouts; a dict gives edge_fanouts hop-major and, as fanouts,
        the largest per hop (-1 when any type takes all). ValueError, as
        PyG, for an edge type the dataset lacks or one left out without a
        default."""
        if self.hops is not None:
            return list(self.hops), []
        known = [tuple(e) for e in edge_types]
        unknown = [e for e in self.per_type if e not in known]
        if unknown:
            raise RequestError(f"Not all edge types specified in 'num_neighbors' exist in the graph: "
                               f"{unknown} are not among {known}", code="bad_request")
        table = []
        for e in known:
            if e in self.per_type:
                table.append(self.per_type[e])
            elif self.default is not None:
                table.append(self.default)
            else:
                raise RequestError(f"Missing number of neighbors for edge type {e!r} in num_neighbors (give a list "
                                   f"for every edge type, or a list for all of them)", code="bad_request")
        hops = self.num_hops()
        edge_fanouts = [table[i][h] for h in range(hops) for i in range(len(known))]
        fanouts = [-1 if any(row[h] == -1 for row in table) else max(row[h] for row in table) for h in range(hops)]
        return fanouts, edge_fanouts


def node_type_info(ds: Any, name: str) -> Any:
    """The Welcome NodeTypeInfo of node type ``name``; RequestError when the
    dataset has no such type."""
    for t in ds.node_types:
        if t.name == name:
            return t
    raise RequestError(f"unknown node type {name!r}: loaderd serves {ds.name} with node types "
                       f"{[t.name for t in ds.node_types]}", code="bad_request")


def splits_of(ds: Any, input_type: str = "") -> List[Any]:
    """The splits seeds can come from: the input type's on a heterogeneous
    dataset, the dataset's otherwise."""
    return list(node_type_info(ds, input_type).splits) if input_type else list(ds.splits)


def resolve_open(req: Any, ds: Any, spec: FanoutSpec) -> Any:
    """A copy of the Open request ``req`` completed for the dataset of the
    Welcome: fanouts and edge_fanouts from ``spec``, the input type checked.
    RequestError (a ValueError) for a hetero argument on a homogeneous
    dataset and the other way round."""
    if not is_hetero(ds):
        if req.input_type or spec.per_type is not None:
            what = "input_nodes as (node_type, nodes)" if req.input_type else "num_neighbors as a dict of edge types"
            raise RequestError(f"{what} is for heterogeneous graphs, but loaderd serves {ds.name}, a homogeneous "
                               f"dataset: give input_nodes as ids, a mask or a split name and num_neighbors as a list",
                               code="bad_request")
        return dataclasses.replace(req, fanouts=list(spec.hops))
    if not req.input_type:
        types = [t.name for t in ds.node_types]
        raise RequestError(f"loaderd serves {ds.name}, a heterogeneous dataset (node types {types}): name the seed "
                           f"node type, e.g. input_nodes=({types[0]!r}, 'train') (Loader: input_type=...)",
                           code="bad_request")
    node_type_info(ds, req.input_type)
    fanouts, edge_fanouts = spec.resolve([(e.src, e.rel, e.dst) for e in ds.edge_types])
    return dataclasses.replace(req, fanouts=fanouts, edge_fanouts=edge_fanouts)


def _type_names(data: Any) -> Optional[Tuple[List[str], List[EdgeType]]]:
    """(node types, edge types) of a HeteroData-like ``data``, else None."""
    try:
        nt, et = data.node_types, data.edge_types
    except Exception:
        return None
    if isinstance(nt, abc.Sequence) and isinstance(et, abc.Sequence) and not isinstance(nt, str):
        return [str(t) for t in nt], [tuple(e) for e in et]
    return None


def check_hetero_data(data: Any, ds: Any, regions: Dict[str, Any], where: str) -> None:
    """Checks a HeteroData ``data`` against the served dataset ``ds``: the
    same node and edge types, and per node type the number of nodes and
    x's dtype and width where data has them. ValueError on a mismatch."""
    names = _type_names(data)
    if names is None:
        return
    served_nodes = [t.name for t in ds.node_types]
    served_edges = [(e.src, e.rel, e.dst) for e in ds.edge_types]
    if set(names[0]) != set(served_nodes) or set(names[1]) != set(served_edges):
        raise ValueError(f"data has node types {names[0]} and edge types {names[1]}, but {where} with node types "
                         f"{served_nodes} and edge types {served_edges}: wrong daemon or dataset? (loaderd "
                         f"samples only the edge types it serves; import reverse edges with --undirected)")
    for t in ds.node_types:
        store = data[t.name]
        keys = store.keys() if callable(getattr(store, "keys", None)) else []
        x = store["x"] if "x" in keys else None
        n = store["num_nodes"] if "num_nodes" in keys else (x.size(0) if isinstance(x, torch.Tensor) else None)
        if isinstance(n, int) and n != t.num_nodes:
            raise ValueError(f"data[{t.name!r}] has {n} nodes but {where} with {t.num_nodes} of them: "
                             f"wrong daemon or dataset?")
        xr = regions.get(f"{t.name}/x")
        if isinstance(x, torch.Tensor) and xr is not None:
            dtype = str(x.dtype).replace("torch.", "")
            width = int(x.size(1)) if x.dim() == 2 else -1
            if dtype != xr.dtype or width != t.feature_dim:
                raise ValueError(f"data[{t.name!r}].x is {dtype} of shape {tuple(x.shape)} but {where} with "
                                 f"{xr.dtype} features of width {t.feature_dim} for {t.name!r}: batches would not "
                                 f"match data (re-import the dataset from the same features)")


def node_types_of(data: Any) -> List[str]:
    """The node types of a HeteroData-like ``data`` (or a Remote of a
    heterogeneous dataset); [] for anything else."""
    names = _type_names(data)
    return names[0] if names else []
