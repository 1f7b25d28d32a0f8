"""Heterogeneous batches: what a Loader yields for a dataset with node and
edge types (protocol v3, docs/protocol.md; docs/pyg.md for the PyG side).

loaderd names the regions of a heterogeneous batch "<store>/<attr>": the
store is a node type ("paper/x", "paper/n_id") or an edge type written
``src__rel__dst`` ("author__writes__paper/edge_index"); its lists are
"num_sampled_nodes/<node type>" and "num_sampled_edges/<src__rel__dst>",
and its scalar "batch_size" belongs to the input (seed) node type.
:class:`HeteroLayout` turns one batch's flat fields into a
``torch_geometric.data.HeteroData`` when PyG is importable, else into a
:class:`HeteroBatch` with the same access: ``batch["paper"].x``,
``batch["author", "writes", "paper"].edge_index``, ``batch["writes"]`` (a
relation name that is unique), ``batch.x_dict``, ``batch.edge_index_dict``,
``batch.num_sampled_nodes_dict`` (PyG keeps the per-hop counts on each type's
store and collects them with ``_dict``).

The tensors are the Loader's views of the slot (no copy). Every node and
edge type of the dataset has a store in every batch, as in PyG's batches;
a type the daemon sent nothing for gets empty tensors."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from .batch import _DTYPES, _Info

__all__ = ["HeteroBatch", "NodeStore", "EdgeStore", "HeteroLayout", "EdgeType", "edge_type_str"]

EdgeType = Tuple[str, str, str]


def edge_type_str(et: Sequence[str]) -> str:
    """The store name loaderd gives an edge type: ``src__rel__dst``."""
    return "__".join(et)


def _apply(v: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(v, torch.Tensor):
        return fn(v)
    return list(v) if isinstance(v, list) else v


class _Store:
    """One type's attributes, as PyG's NodeStorage/EdgeStorage: ``store.x``
    and ``store["x"]``, ``keys()``, ``items()``, ``len()``, ``in``."""

    def __init__(self, key: Union[str, EdgeType], **attrs: Any):
        object.__setattr__(self, "_key", key)
        self.__dict__.update(attrs)

    def keys(self) -> List[str]:
        return [k for k in self.__dict__ if not k.startswith("_")]

    def items(self) -> List[Tuple[str, Any]]:
        return [(k, self.__dict__[k]) for k in self.keys()]

    def values(self) -> List[Any]:
        return [self.__dict__[k] for k in self.keys()]

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __getattr__(self, name: str) -> Any:  # only for names that are not set
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('_key')!r} has no attribute {name!r}")

    def __repr__(self) -> str:
        def show(v):
            return f"[{', '.join(map(str, v.shape))}]" if isinstance(v, torch.Tensor) else repr(v)
        return f"{{ {', '.join(f'{k}={show(v)}' for k, v in self.items())} }}"

    def _mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "_Store":
        return type(self)(self._key, **{k: _apply(v, fn) for k, v in self.items()})


class NodeStore(_Store):
    """One node type's attributes (x, y, n_id, num_sampled_nodes; for the
    input type also input_id and batch_size)."""

    @property
    def num_nodes(self) -> int:
        for k in ("n_id", "x", "y"):
            if k in self.keys():
                return int(self.__dict__[k].size(0))
        return 0


class EdgeStore(_Store):
    """One edge type's attributes (edge_index, e_id, num_sampled_edges)."""

    @property
    def num_edges(self) -> int:
        ei = self.__dict__.get("edge_index")
        return 0 if ei is None else int(ei.size(1))


class HeteroBatch(_Info):
    """A heterogeneous mini-batch, when PyG is not installed: the access
    patterns of PyG's HeteroData. ``batch[node_type]`` and
    ``batch[src, rel, dst]`` (also ``batch[rel]`` and ``batch[src, dst]``
    where they name one edge type) are the stores; ``batch.<attr>_dict``
    collects an attribute over all types (``x_dict``, ``edge_index_dict``,
    ``num_sampled_nodes_dict``, ...); ``node_types``, ``edge_types``,
    ``metadata()``, ``keys()`` (attribute names over all stores), ``len()``,
    ``to(device)``, ``clone()``. Unknown types raise KeyError (PyG would
    create an empty store).

    The tensors are views of a loaderd slot, valid until the batch is
    released (by default when the next one is taken): clone what you keep."""

    def __init__(self, node_types: Sequence[str] = (), edge_types: Sequence[EdgeType] = ()):
        self.__dict__["_nodes"] = {t: NodeStore(t) for t in node_types}
        self.__dict__["_edges"] = {tuple(e): EdgeStore(tuple(e)) for e in edge_types}
        self.__dict__["_global"] = {}

    # -- types and stores ----------------------------------------------------

    @property
    def node_types(self) -> List[str]:
        return list(self._nodes)

    @property
    def edge_types(self) -> List[EdgeType]:
        return list(self._edges)

    @property
    def node_stores(self) -> List[NodeStore]:
        return list(self._nodes.values())

    @property
    def edge_stores(self) -> List[EdgeStore]:
        return list(self._edges.values())

    def node_items(self) -> List[Tuple[str, NodeStore]]:
        return list(self._nodes.items())

    def edge_items(self) -> List[Tuple[EdgeType, EdgeStore]]:
        return list(self._edges.items())

    def metadata(self) -> Tuple[List[str], List[EdgeType]]:
        """(node_types, edge_types), as PyG's (what to_hetero takes)."""
        return self.node_types, self.edge_types

    def _canonical(self, key: Any) -> Union[str, EdgeType]:
        if isinstance(key, str):
            if key in self._nodes:
                return key
            by_rel = [e for e in self._edges if e[1] == key]
            if len(by_rel) == 1:
                return by_rel[0]
            why = "is no node type" + (f" and names {len(by_rel)} edge types" if by_rel else " or relation")
            raise KeyError(f"{key!r} {why} of this batch (node types {self.node_types}, edge types {self.edge_types})")
        key = tuple(key)
        if len(key) == 3 and key in self._edges:
            return key
        ends = [e for e in self._edges if (e[0], e[2]) == key] if len(key) == 2 else []
        if len(ends) == 1:
            return ends[0]
        why = f"joins {len(ends)} edge types" if ends else "is no edge type"
        raise KeyError(f"{key!r} {why} of this batch (edge types {self.edge_types})")

    def __getitem__(self, *key: Any) -> _Store:
        k = self._canonical(key[0] if len(key) == 1 else key)
        return self._nodes[k] if isinstance(k, str) else self._edges[k]

    def __getattr__(self, name: str) -> Any:
        g = self.__dict__.get("_global", {})
        if name in g:
            return g[name]
        if name.endswith("_dict") and not name.startswith("_") and "_nodes" in self.__dict__:
            return self.collect(name[:-5])
        raise AttributeError(f"'HeteroBatch' has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._nodes or name in {e[1] for e in self._edges}:
            raise AttributeError(f"{name!r} is a type of this batch: set batch[{name!r}].<attribute> instead")
        self._global[name] = value

    def collect(self, key: str, allow_empty: bool = False) -> Dict[Any, Any]:
        """``{type: store.<key>}`` over the node then edge types that have it
        (``batch.x_dict`` is ``batch.collect("x")``). KeyError when no type
        has it, unless allow_empty."""
        out = {t: s.__dict__[key] for t, s in list(self._nodes.items()) + list(self._edges.items())
               if key in s.keys()}
        if not out and not allow_empty:
            raise KeyError(f"no node or edge type of this batch has {key!r}")
        return out

    # -- PyG Data's container methods ---------------------------------------

    @property
    def stores(self) -> List[_Store]:
        return self.node_stores + self.edge_stores

    def keys(self) -> List[str]:
        """The attribute names over the batch and all its stores, once each."""
        seen: Dict[str, None] = dict.fromkeys(self._global)
        for s in self.stores:
            seen.update(dict.fromkeys(s.keys()))
        return list(seen)

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        yield from self._global.items()
        for s in self.stores:
            yield from s.items()

    @property
    def num_nodes(self) -> int:
        return sum(s.num_nodes for s in self.node_stores)

    @property
    def num_edges(self) -> int:
        return sum(s.num_edges for s in self.edge_stores)

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "HeteroBatch":
        """A new batch with fn applied to every tensor (lists copied)."""
        out = HeteroBatch()
        out.__dict__["_nodes"] = {t: s._mapped(fn) for t, s in self._nodes.items()}
        out.__dict__["_edges"] = {t: s._mapped(fn) for t, s in self._edges.items()}
        out.__dict__["_global"] = {k: _apply(v, fn) for k, v in self._global.items()}
        return out

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "HeteroBatch":
        return self.apply(lambda t: t.to(device, non_blocking=non_blocking))

    def cpu(self) -> "HeteroBatch":
        return self.to("cpu")

    def cuda(self, device: Union[None, int, str, torch.device] = None) -> "HeteroBatch":
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device)
                       if isinstance(device, int) else device)

    def clone(self) -> "HeteroBatch":
        """A copy owning its tensors (not slot views)."""
        return self.apply(lambda t: t.clone())

    def __repr__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self._global.items()]
        parts += [f"{t}={s!r}" for t, s in self._nodes.items()]
        parts += [f"({', '.join(e)})={s!r}" for e, s in self._edges.items()]
        return "HeteroBatch(\n  " + ",\n  ".join(parts) + "\n)"


def pyg_hetero_data() -> Optional[type]:
    """torch_geometric's HeteroData, None without PyG."""
    try:
        from torch_geometric.data import HeteroData  # type: ignore
        return HeteroData
    except Exception:
        return None


def is_hetero(dataset: Any) -> bool:
    """Whether a Welcome's dataset has node types (protocol v3)."""
    return bool(getattr(dataset, "node_types", None))


class HeteroLayout:
    """How the batches of one Open on a heterogeneous dataset are put
    together: the dataset's node and edge types (Welcome's order), the input
    type, the hop count and the class to build (PyG's HeteroData or None for
    :class:`HeteroBatch`)."""

    def __init__(self, dataset: Any, input_type: str, hops: int, data_cls: Optional[type]):
        self.node_types = [t.name for t in dataset.node_types]
        self.edge_types: List[EdgeType] = [(e.src, e.rel, e.dst) for e in dataset.edge_types]
        self.info = {t.name: t for t in dataset.node_types}
        self.input_type, self.hops, self.data_cls = input_type, hops, data_cls
        self._by_str = {edge_type_str(e): e for e in self.edge_types}

    def _key(self, store: str) -> Union[str, EdgeType]:
        if store in self.info:
            return store
        if store in self._by_str:
            return self._by_str[store]
        raise ValueError(f"batch field for {store!r}, which is neither a node type {self.node_types} nor an "
                         f"edge type {list(self._by_str)} of the dataset")

    def split(self, fields: Dict[str, Any]) -> Tuple[Dict[str, Dict[str, Any]], Dict[EdgeType, Dict[str, Any]],
                                                     Dict[str, Any]]:
        """The flat fields of one batch (region, scalar and list names to
        values) as per node type, per edge type and global attributes, every
        type of the dataset present (empty when the batch has none)."""
        nodes: Dict[str, Dict[str, Any]] = {t: {} for t in self.node_types}
        edges: Dict[EdgeType, Dict[str, Any]] = {e: {} for e in self.edge_types}
        glob: Dict[str, Any] = {}
        device = next((v.device for v in fields.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
        for name, v in fields.items():
            if name == "batch_size":
                nodes[self.input_type]["batch_size"] = v
                continue
            if "/" not in name:
                glob[name] = v
                continue
            store, attr = name.split("/", 1)
            if store in ("num_sampled_nodes", "num_sampled_edges"):
                store, attr = attr, store
            key = self._key(store)
            (nodes[key] if isinstance(key, str) else edges[key])[attr] = v
        for t, attrs in nodes.items():
            info = self.info[t]
            attrs.setdefault("n_id", torch.empty(0, dtype=torch.int64, device=device))
            dt = _DTYPES.get(info.feature_dtype)
            if info.feature_dim > 0 and dt is not None:
                attrs.setdefault("x", torch.empty(0, info.feature_dim, dtype=dt, device=device))
            if info.num_classes > 0:
                attrs.setdefault("y", torch.empty(0, dtype=torch.int64, device=device))
            attrs.setdefault("num_sampled_nodes", [0] * (self.hops + 1))
        for attrs in edges.values():
            attrs.setdefault("edge_index", torch.empty(2, 0, dtype=torch.int64, device=device))
            attrs.setdefault("e_id", torch.empty(0, dtype=torch.int64, device=device))
            attrs.setdefault("num_sampled_edges", [0] * self.hops)
        return nodes, edges, glob

    def batch(self, fields: Dict[str, Any]) -> Any:
        """One batch from its flat fields: a HeteroData (data_cls) or a
        HeteroBatch."""
        return build(*self.split(fields), data_cls=self.data_cls)


def build(nodes: Dict[str, Dict[str, Any]], edges: Dict[EdgeType, Dict[str, Any]], glob: Dict[str, Any],
          data_cls: Optional[type] = None) -> Any:
    """A HeteroData (``data_cls``, PyG's class) or HeteroBatch holding these
    attributes, node types first (so that a relation named like a node type
    cannot shadow it)."""
    out = data_cls() if data_cls is not None else HeteroBatch(list(nodes), list(edges))
    for t, attrs in nodes.items():
        store = out[t]
        for k, v in attrs.items():
            store[k] = v
    for e, attrs in edges.items():
        store = out[tuple(e)]
        for k, v in attrs.items():
            store[k] = v
    for k, v in glob.items():
        setattr(out, k, v)
    return out


def copy_batch(b: Any) -> Any:
    """A copy of a heterogeneous batch (HeteroData or HeteroBatch) owning its
    tensors, of the same class."""
    if isinstance(b, HeteroBatch):
        return b.clone()
    nodes = {t: {k: _apply(v, torch.clone) for k, v in s.items()} for t, s in b.node_items()}
    edges = {e: {k: _apply(v, torch.clone) for k, v in s.items()} for e, s in b.edge_items()}
    return build(nodes, edges, {}, data_cls=type(b))
