"""NeighborLoader's disjoint and temporal sampling arguments (PyG's
``disjoint``, ``temporal_strategy``, ``time_attr`` and ``input_time``),
turned into what loaderd's Open asks for (``temporal``, ``time_attr``) and
the Seeds message's times; docs/pyg.md, "Disjoint and temporal sampling"."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

# What loaderd serves (the dataset's arrays) and PyG's strategies.
NODE_TIME, EDGE_TIME = "node_time", "edge_time"
STRATEGIES = ("uniform", "last")
DISJOINT = "disjoint"


def temporal_request(disjoint: bool, temporal_strategy: str, time_attr: Optional[str], input_time: Any,
                     data: Any) -> Tuple[str, str]:
    """Open's (temporal, time_attr) for PyG's arguments, with PyG's checks;
    ("", "") for ordinary batches. ValueError for what PyG refuses."""
    if input_time is not None and time_attr is None:
        raise ValueError("Received conflicting 'input_time' and 'time_attr' arguments: 'input_time' is set "
                         "while 'time_attr' is not set.")  # PyG's message
    if time_attr is None:
        # PyG ignores temporal_strategy without a time attribute.
        return (DISJOINT, "") if bool(disjoint) else ("", "")
    if temporal_strategy not in STRATEGIES:
        raise ValueError(f"temporal_strategy must be 'uniform' or 'last' (PyG's), not {temporal_strategy!r}")
    return temporal_strategy, served_time_attr(time_attr, data)


def served_time_attr(time_attr: str, data: Any) -> str:
    """loaderd's array for PyG's time_attr: "node_time" and "edge_time"
    name them; another name is decided, as PyG does, by the attribute of
    ``data`` it names: node-level (num_nodes entries) or edge-level."""
    if time_attr in (NODE_TIME, EDGE_TIME):
        return time_attr
    t = None
    try:
        t = getattr(data, time_attr, None)
    except Exception:
        pass
    if isinstance(t, torch.Tensor) and t.dim() >= 1:
        n = _int_attr(data, "num_nodes")
        ei = getattr(data, "edge_index", None)
        e = int(ei.size(1)) if isinstance(ei, torch.Tensor) and ei.dim() == 2 else _int_attr(data, "num_edges")
        if n is not None and t.size(0) == n:
            return NODE_TIME
        if e is not None and t.size(0) == e:
            return EDGE_TIME
        raise ValueError(f"The time attribute '{time_attr}' is neither a node-level or edge-level attribute "
                         f"({t.size(0)} entries for {n} nodes and {e} edges)")
    raise ValueError(f"time_attr {time_attr!r}: loaderd samples by its dataset's own times; pass "
                     f"time_attr='node_time' or 'edge_time', or a data object whose {time_attr!r} "
                     f"attribute shows which (node-level or edge-level)")


def _int_attr(data: Any, name: str) -> Optional[int]:
    try:
        v = getattr(data, name, None)
    except Exception:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def input_times(input_time: Any, num_seeds: int) -> torch.Tensor:
    """PyG's input_time as int64, one per input node; ValueError otherwise."""
    t = torch.as_tensor(input_time)
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise ValueError(f"input_time must hold integer times (int64, as the dataset's), not {t.dtype}")
    t = t.reshape(-1).cpu().to(torch.int64)
    if t.numel() != num_seeds:
        raise ValueError(f"input_time has {t.numel()} entries for {num_seeds} input nodes: give one per input node")
    return t


def with_seed_time(b: Any, times: torch.Tensor) -> Any:
    """A batch of a loader given input_time: PyG's seed_time, the time of
    each seed (read at the positions the daemon's input_id holds; call it
    before input_id is rewritten for masks or given ids)."""
    b.seed_time = times[b.input_id.cpu()].to(b.input_id.device)
    return b


def with_time_named(b: Any, served: str, name: str) -> Any:
    """A temporal batch with its times (loaderd's node_time or edge_time of
    the sampled nodes or edges) under PyG's name for them: time_attr's."""
    t = getattr(b, served, None)
    if t is not None:
        delattr(b, served)
        setattr(b, name, t)
    return b
