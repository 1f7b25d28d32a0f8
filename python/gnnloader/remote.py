"""What a loaderd serves, asked without opening a batch stream:
``gnnloader.connect(socket)`` returns a :class:`Remote`, which stands in for
PyG's ``data`` (docs/pyg.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import protocol as p
from . import trust
from .errors import LoaderError

__all__ = ["Remote", "connect"]


@dataclass
class Remote:
    """Facts of the dataset a loaderd serves; stands in for PyG's ``data``.

    ``gnnloader.connect(socket)`` returns one. It has the attributes a PyG
    script usually reads from ``data`` to build its model (``num_nodes``,
    ``num_features``, ``num_classes``, ``num_edges``) and the split sizes.
    For a heterogeneous dataset it also has ``node_types``, ``edge_types``
    and ``metadata()``, as PyG's HeteroData, and ``types``: per node type
    its facts (``num_nodes``, ``feature_dim``, ``feature_dtype``,
    ``num_classes``, ``splits``)."""

    socket: str
    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    feature_dtype: str
    splits: Dict[str, int]
    daemon_version: str = ""
    node_types: List[str] = field(default_factory=list)
    edge_types: List[Tuple[str, str, str]] = field(default_factory=list)
    types: Dict[str, Any] = field(default_factory=dict)

    @property
    def num_node_features(self) -> int:
        return self.num_features

    def metadata(self) -> Tuple[List[str], List[Tuple[str, str, str]]]:
        """(node_types, edge_types) of a heterogeneous dataset, as PyG's
        HeteroData.metadata() (what to_hetero takes); ([], []) otherwise."""
        return list(self.node_types), list(self.edge_types)


def connect(socket: Optional[str] = None, timeout: Optional[float] = 30.0,
            daemon_uid: Optional[int] = None) -> Remote:
    """Ask loaderd at ``socket`` (default ``$GNNLOADER_SOCKET``, else the
    daemon's default path, see :class:`gnnloader.Loader`) what it serves.

    The connection is closed again; pass the returned :class:`Remote` as the
    first argument of :class:`NeighborLoader`. As every client, it first
    checks who listens at the socket (``daemon_uid``: see
    :class:`gnnloader.Loader`)."""
    path = _socket_path(socket)
    hint = "" if socket else f" (the default socket: start loaderd, or pass a socket path or set ${trust.SOCKET_ENV})"
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
                  splits={sp.name: sp.size for sp in d.splits}, daemon_version=msg.daemon_version,
                  node_types=[t.name for t in d.node_types], edge_types=[(e.src, e.rel, e.dst) for e in d.edge_types],
                  types={t.name: t for t in d.node_types})


def _socket_path(socket: Optional[str]) -> str:
    """`socket`, else the default (gnnloader.trust.socket_path:
    $GNNLOADER_SOCKET, else the daemon's default path)."""
    return trust.socket_path(socket)
