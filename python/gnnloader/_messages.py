"""One dataclass per message of the protocol, bound to its entry of the
message table (_schema.py, generated from the Go package ipc): the fields
must be the table's, in its order, or this module fails to import. Defaults,
docs and checks beyond the encoding (``Open.validate``, ``Opened._check``)
live here. Standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from typing import ClassVar, Dict, List

from . import _schema as S
from ._codec import Code, Codec, ProtocolError

MsgType = enum.IntEnum("MsgType", [(m.const, m.type) for m in S.MESSAGES])
MsgType.__doc__ = "Message types (u16), from the message table."


class _Msg:
    TYPE: ClassVar[MsgType]
    _CODEC: ClassVar[Codec]


TEMPORAL_UNIFORM = "uniform"
TEMPORAL_LAST = "last"
TEMPORAL_DISJOINT = "disjoint"  # disjoint subgraphs without times (PyG's disjoint=True)
TIME_ATTR_NODE = "node_time"
TIME_ATTR_EDGE = "edge_time"


def parse_device(s: str) -> int:
    """Parse "cpu" (-> -1) or "cuda:N" (-> N); ProtocolError(BAD_REQUEST) otherwise."""
    if s == "cpu":
        return -1
    if s.startswith("cuda:"):
        rest = s[5:]
        if rest.isascii() and rest.isdigit() and (rest == "0" or rest[0] != "0") and int(rest) <= 0xFFFF:
            return int(rest)
    raise ProtocolError(Code.BAD_REQUEST, f'device {s!r}: want "cpu" or "cuda:N"')


@dataclass
class Hello(_Msg):
    """Client -> daemon: opens the handshake (magic "GNNL" on the wire)."""

    version: int = S.VERSION
    pid: int = 0
    name: str = ""


@dataclass
class Split:
    name: str = ""
    size: int = 0


@dataclass
class NodeTypeInfo:
    """One node type of a heterogeneous dataset (feature_dim 0: no features;
    num_classes 0: no labels)."""

    name: str = ""
    num_nodes: int = 0
    feature_dim: int = 0
    feature_dtype: str = ""
    num_classes: int = 0
    splits: List[Split] = field(default_factory=list)


@dataclass
class EdgeTypeInfo:
    """One edge type (src, rel, dst) of a heterogeneous dataset; batches name
    it "src__rel__dst"."""

    src: str = ""
    rel: str = ""
    dst: str = ""
    num_edges: int = 0


@dataclass
class Dataset:
    """The served dataset. A heterogeneous one lists node_types and edge_types
    (num_nodes and num_edges are then totals; features, classes and splits
    are the node types')."""

    name: str = ""
    num_nodes: int = 0
    num_edges: int = 0
    feature_dim: int = 0
    feature_dtype: str = ""
    num_classes: int = 0
    splits: List[Split] = field(default_factory=list)
    node_types: List[NodeTypeInfo] = field(default_factory=list)
    edge_types: List[EdgeTypeInfo] = field(default_factory=list)  # the order Open.edge_fanouts uses
    node_time: bool = False
    edge_time: bool = False


@dataclass
class Welcome(_Msg):
    """Daemon -> client: answers Hello with the daemon's and dataset's facts."""

    version: int = S.VERSION
    daemon_version: str = ""
    dataset: Dataset = field(default_factory=Dataset)


@dataclass
class Open(_Msg):
    """Client -> daemon: the batch stream wanted. Sent once per connection."""

    job: str = ""
    split: str = ""
    batch_size: int = 0
    fanouts: List[int] = field(default_factory=list)  # -1 = all neighbours
    shuffle: bool = False
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False
    device: str = "cpu"
    feature_dtype: str = ""  # "" = the dataset's
    slots: int = 0  # 0 = daemon default
    start_epoch: int = 0
    start_batch: int = 0
    input_type: str = ""  # heterogeneous dataset: node type of the seeds
    edge_fanouts: List[int] = field(default_factory=list)  # hops x edge types, hop-major; [] = fanouts per edge type
    temporal: str = ""  # "", "uniform" or "last", or "disjoint" (no times)
    time_attr: str = ""  # "node_time" or "edge_time" with temporal

    def validate(self) -> None:
        """Semantic checks beyond decoding; ProtocolError(BAD_REQUEST) on failure."""
        if self.batch_size == 0:
            raise ProtocolError(Code.BAD_REQUEST, "Open: batch_size is 0")
        if not self.fanouts:
            raise ProtocolError(Code.BAD_REQUEST, "Open: no fanouts")
        if self.world_size == 0:
            raise ProtocolError(Code.BAD_REQUEST, "Open: world_size is 0")
        if self.rank >= self.world_size:
            raise ProtocolError(Code.BAD_REQUEST, f"Open: rank {self.rank} >= world_size {self.world_size}")
        if not self.split:
            raise ProtocolError(Code.BAD_REQUEST, "Open: empty split")
        if self.edge_fanouts and not self.input_type:
            raise ProtocolError(Code.BAD_REQUEST, "Open: edge_fanouts without input_type "
                                "(per-edge-type fanouts are for heterogeneous datasets)")
        if len(self.edge_fanouts) % len(self.fanouts):
            raise ProtocolError(Code.BAD_REQUEST, f"Open: {len(self.edge_fanouts)} edge_fanouts for "
                                f"{len(self.fanouts)} hops: want hops x edge types, hop-major")
        if self.temporal not in ("", TEMPORAL_UNIFORM, TEMPORAL_LAST, TEMPORAL_DISJOINT):
            raise ProtocolError(Code.BAD_REQUEST, f"Open: temporal {self.temporal!r}: want "
                                f"{TEMPORAL_UNIFORM!r}, {TEMPORAL_LAST!r}, {TEMPORAL_DISJOINT!r} or ''")
        if self.temporal in (TEMPORAL_UNIFORM, TEMPORAL_LAST) and self.time_attr not in (TIME_ATTR_NODE, TIME_ATTR_EDGE):
            raise ProtocolError(Code.BAD_REQUEST, f"Open: time_attr {self.time_attr!r}: temporal sampling "
                                f"needs {TIME_ATTR_NODE!r} or {TIME_ATTR_EDGE!r}")
        if self.temporal in ("", TEMPORAL_DISJOINT) and self.time_attr:
            raise ProtocolError(Code.BAD_REQUEST, f"Open: time_attr {self.time_attr!r} without temporal sampling "
                                f"(temporal {self.temporal!r})")
        parse_device(self.device)


@dataclass
class Region:
    """One array inside a slot (same offset in every slot). A batch's data is
    the contiguous array of `shape` with shape[count_axis] replaced by the
    batch's count for the region (BatchReady.counts), at `offset`."""

    name: str = ""
    offset: int = 0  # from the slot start, multiple of REGION_ALIGN
    bytes: int = 0  # capacity; offset + bytes <= slot_bytes
    dtype: str = ""
    shape: List[int] = field(default_factory=list)  # capacity shape, 1..MAX_DIMS dims
    count_axis: int = 0  # the axis whose length varies per batch


@dataclass
class EventIPC:
    """A slot's two cudaIpcEventHandle_t (64 bytes each)."""

    ready: bytes = bytes(S.HANDLE_SIZE)
    released: bytes = bytes(S.HANDLE_SIZE)


@dataclass
class Opened(_Msg):
    """Daemon -> client: the slot ring. With memory "shm" the frame carries one
    memfd of slots*slot_bytes bytes (slot i at i*slot_bytes). Regions, scalars
    and lists say what every batch holds: each BatchReady carries a count per
    region and a value per scalar and per list, in this order."""

    num_batches: int = 0
    slots: int = 0
    slot_bytes: int = 0
    memory: str = S.MEMORY_SHM
    regions: List[Region] = field(default_factory=list)
    scalars: List[str] = field(default_factory=list)  # e.g. "batch_size"
    lists: List[str] = field(default_factory=list)  # e.g. "num_sampled_nodes"
    cuda_device: int = 0
    mem_handle: bytes = b""  # empty or HANDLE_SIZE bytes
    events: List[EventIPC] = field(default_factory=list)  # empty or `slots` entries
    ready_words: int = 0  # cuda: offset in the allocation of a u32 ready word per slot, past the slots; 0: none

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

    @functools.cached_property
    def _capacities(self) -> List[int]:
        """Each region's capacity along its count axis (worked out once: an
        Opened is not changed once decoded)."""
        return [r.shape[r.count_axis] for r in self.regions]

    def check_batch(self, b: "BatchReady") -> None:
        """Raise ProtocolError(BAD_MESSAGE) unless `b` has what every batch of
        this ring has: a slot of the ring, a count per region within its
        capacity, a value per scalar and per list."""
        if b.slot >= self.slots:
            raise ProtocolError(Code.BAD_MESSAGE, f"BatchReady for slot {b.slot} of {self.slots}")
        if (len(b.counts), len(b.scalars), len(b.lists)) != (len(self.regions), len(self.scalars), len(self.lists)):
            raise ProtocolError(
                Code.BAD_MESSAGE,
                f"BatchReady with {len(b.counts)} counts, {len(b.scalars)} scalars and {len(b.lists)} lists; "
                f"Opened has {len(self.regions)} regions, {len(self.scalars)} scalars and {len(self.lists)} lists")
        caps = self._capacities
        if any(map(int.__gt__, b.counts, caps)):
            for r, n, cap in zip(self.regions, b.counts, caps):
                if n > cap:
                    raise ProtocolError(Code.BAD_MESSAGE, f"BatchReady: region {r.name!r} counts {n}, "
                                        f"its capacity is {cap}")

    def _check(self) -> None:
        """The cross-field rules (ipc's (*Opened).check), run by the codec
        after encoding and after decoding."""
        def bad(msg: str) -> ProtocolError:
            return ProtocolError(Code.BAD_MESSAGE, msg)
        align = S.REGION_ALIGN
        if self.slots == 0:
            raise bad("slots is 0")
        if self.slot_bytes % align:
            raise bad(f"slot_bytes {self.slot_bytes} is not a multiple of {align}")
        for r in self.regions:
            if r.offset % align:
                raise bad(f"region {r.name!r}: offset {r.offset} is not a multiple of {align}")
            if r.offset > self.slot_bytes or r.bytes > self.slot_bytes - r.offset:
                raise bad(f"region {r.name!r}: [{r.offset}, +{r.bytes}) outside the {self.slot_bytes}-byte slot")
            if not r.shape or r.count_axis >= len(r.shape):
                raise bad(f"region {r.name!r}: count axis {r.count_axis} of a {len(r.shape)}-dimensional shape")
        if self.memory == S.MEMORY_SHM:
            if self.cuda_device != 0 or self.mem_handle or self.events or self.ready_words:
                raise bad("shm memory with CUDA handles")
        elif self.memory == S.MEMORY_CUDA:
            if len(self.mem_handle) != S.HANDLE_SIZE:
                raise bad(f"mem_handle of {len(self.mem_handle)} bytes, want {S.HANDLE_SIZE}")
            if len(self.events) != self.slots:
                raise bad(f"{len(self.events)} event pairs for {self.slots} slots")
            w = self.ready_words
            if w and (w % 4 or self.slot_bytes > w // self.slots or w > 2**64 - 1 - 4 * self.slots):
                raise bad(f"ready_words at {w}: not a multiple of 4 past the {self.slots} slots of {self.slot_bytes} bytes")
        else:
            raise bad(f"memory kind {self.memory!r}, want 'shm' or 'cuda'")


@dataclass
class StartEpoch(_Msg):
    """Client -> daemon: stream epoch `epoch`."""

    epoch: int = 0


@dataclass
class BatchReady(_Msg):
    """Daemon -> client: slot `slot` holds batch `index` of `epoch`. counts,
    scalars and lists follow Opened.regions, Opened.scalars and Opened.lists,
    entry for entry."""

    slot: int = 0
    epoch: int = 0
    index: int = 0
    counts: List[int] = field(default_factory=list)  # per region, its length along its count axis
    scalars: List[int] = field(default_factory=list)  # int64 each
    lists: List[List[int]] = field(default_factory=list)
    # With Opened.ready_words: the slot's word once this fill is done; 0: use the event. One value for
    # every slot of a fill, rising fill by fill: a stream that waited for v need not wait for any value
    # at or below it (wrap-around order).
    ready_value: int = 0


@dataclass
class Release(_Msg):
    """Client -> daemon: done with `slot`, which held batch `index` of `epoch`.
    On CUDA the slot's released event is recorded first, unless `deferred`:
    then the next release that is not deferred (its event recorded on the
    same stream, after this one's work) covers it."""

    slot: int = 0
    epoch: int = 0
    index: int = 0
    deferred: bool = False


@dataclass
class EpochEnd(_Msg):
    """Daemon -> client: all `num_batches` batches of `epoch` were sent."""

    epoch: int = 0
    num_batches: int = 0


@dataclass
class Error(_Msg):
    """Either side: why the sender is closing. `code` is any u16 (a Code when known)."""

    code: int = Code.INTERNAL
    message: str = ""

    def __post_init__(self) -> None:
        try:
            self.code = Code(self.code)
        except ValueError:
            pass

    def as_exception(self) -> ProtocolError:
        return ProtocolError(self.code, "peer: " + self.message)


@dataclass
class Goodbye(_Msg):
    """Either side: clean close."""

    reason: str = ""


@dataclass
class Seeds(_Msg):
    """Client -> daemon, after Welcome and before an Open naming CUSTOM_SPLIT:
    `count` node ids (little-endian int64) in the memfd sent with the frame,
    followed by `count` seed times (int64) when `times` is set."""

    count: int = 0
    times: bool = False


@dataclass
class RegisterGrad(_Msg):
    """Client -> daemon on a gradient connection: join the job's ring."""

    job: str = ""
    rank: int = 0
    world_size: int = 1
    device: str = "cpu"
    bytes: int = 0


@dataclass
class GradRegistered(_Msg):
    """Daemon -> client: the gradient buffer (a memfd with the frame for
    "shm"; CUDA IPC handles for "cuda")."""

    memory: str = ""
    bytes: int = 0
    cuda_device: int = 0
    mem_handle: bytes = b""
    ready: bytes = b""
    done: bytes = b""
    links: List[str] = field(default_factory=list)


@dataclass
class AllReduce(_Msg):
    """Client -> daemon: all-reduce the first `count` elements of the buffer."""

    seq: int = 0
    count: int = 0
    dtype: str = "float32"
    op: str = "sum"


@dataclass
class AllReduceDone(_Msg):
    """Daemon -> client: the result of request `seq` is in the buffer."""

    seq: int = 0


STRUCT_CLASSES: Dict[str, type] = {"Split": Split, "NodeTypeInfo": NodeTypeInfo, "EdgeTypeInfo": EdgeTypeInfo,
                                   "Dataset": Dataset, "Region": Region, "EventIPC": EventIPC}
BY_TYPE: Dict[int, type] = {}


def _bind() -> None:
    """Bind every class to its entry of the table; fail on any difference."""
    classes = dict(STRUCT_CLASSES)
    for m in S.MESSAGES:
        cls = globals().get(m.name)
        if cls is None:
            raise ImportError(f"gnnloader._messages: no class for message {m.name} of the table")
        classes[m.name] = cls
    for name, fields in list(S.STRUCTS.items()) + [(m.name, m.fields) for m in S.MESSAGES]:
        have = [f.name for f in dataclasses.fields(classes[name])]
        want = [f["name"] for f in fields]
        if have != want:
            raise ImportError(f"gnnloader._messages: {name} has fields {have}, the table {want}")
    for m in S.MESSAGES:
        cls = classes[m.name]
        cls.TYPE = MsgType(m.type)
        cls._CODEC = Codec(m, cls, classes)
        BY_TYPE[m.type] = cls


_bind()
