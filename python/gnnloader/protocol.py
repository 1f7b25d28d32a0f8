"""gnnloader protocol v1: the Python twin of the Go package ``ipc``.

docs/protocol.md is the specification. This module needs only the standard
library. It provides:

* one dataclass per message (Hello ... Goodbye) and ``marshal``/``unmarshal``
  between a message and one complete frame, with the same limits and checks
  as the Go decoder (``Limits``);
* ``send_msg(sock, msg, fds=())`` and ``recv_msg(sock) -> (msg, fds)`` over a
  SOCK_STREAM Unix socket, passing file descriptors with SCM_RIGHTS;
* ``State``, the per-connection message-order checker;
* ``ProtocolError(code, message)`` for every violation, ``code`` a ``Code``.

Both implementations are tested against the frames in ipc/testdata/.
"""

from __future__ import annotations

import array
import enum
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import ClassVar, List, Sequence, Tuple

__all__ = [
    "MAGIC", "VERSION", "HEADER_SIZE", "MAX_DIMS", "HANDLE_SIZE", "REGION_ALIGN", "MAX_FDS",
    "MEMORY_SHM", "MEMORY_CUDA",
    "Code", "MsgType", "ProtocolError", "Limits", "DEFAULT_LIMITS",
    "Hello", "Welcome", "Dataset", "Split", "Open", "Opened", "Region", "EventIPC",
    "StartEpoch", "BatchReady", "Release", "EpochEnd", "Error", "Goodbye", "Seeds", "CUSTOM_SPLIT",
    "marshal", "unmarshal", "fds_for", "send_msg", "recv_msg", "parse_device",
    "Dir", "Phase", "State",
]

MAGIC = b"GNNL"
VERSION = 2
HEADER_SIZE = 8  # u32 length | u16 type | u16 flags
MAX_DIMS = 8
HANDLE_SIZE = 64
REGION_ALIGN = 128
MAX_FDS = 4
MEMORY_SHM = "shm"
MEMORY_CUDA = "cuda"
CUSTOM_SPLIT = "custom"  # Open.split naming the seeds of the preceding Seeds message

_HEADER = struct.Struct("<IHH")


class Code(enum.IntEnum):
    """Error codes (u16), as in docs/protocol.md."""

    BAD_FRAME = 1
    BAD_MESSAGE = 2
    UNSUPPORTED_VERSION = 3
    OUT_OF_ORDER = 4
    BAD_REQUEST = 5
    LIMIT = 6
    DENIED = 7
    INTERNAL = 8
    SHUTTING_DOWN = 9
    NOT_FOUND = 10
    BUSY = 11

    @property
    def wire_name(self) -> str:
        return self.name.lower()


def _code_name(code: int) -> str:
    try:
        return Code(code).wire_name
    except ValueError:
        return f"code({code})"


class MsgType(enum.IntEnum):
    HELLO = 1
    WELCOME = 2
    OPEN = 3
    OPENED = 4
    START_EPOCH = 5
    BATCH_READY = 6
    RELEASE = 7
    EPOCH_END = 8
    ERROR = 9
    GOODBYE = 10
    SEEDS = 11


class ProtocolError(Exception):
    """A protocol violation; ``code`` says which Error message answers it."""

    def __init__(self, code: int, message: str):
        super().__init__(f"{_code_name(code)}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Bounds applied by a receiver; see docs/protocol.md, "Limits"."""

    max_frame: int = 1 << 20  # bytes in a whole frame, length field included
    max_fanouts: int = 8  # Open.fanouts (the sampler's most hops)
    max_batch_size: int = 1 << 20
    max_string: int = 4096  # bytes in any string
    max_list: int = 1024  # entries in any other list


DEFAULT_LIMITS = Limits()


# ---------------------------------------------------------------- codec core


class _Writer:
    def __init__(self) -> None:
        self.b = bytearray()

    def u8(self, v: int) -> None:
        self.b += struct.pack("<B", v)

    def u16(self, v: int) -> None:
        self.b += struct.pack("<H", v)

    def u32(self, v: int) -> None:
        self.b += struct.pack("<I", v)

    def u64(self, v: int) -> None:
        self.b += struct.pack("<Q", v)

    def i32(self, v: int) -> None:
        self.b += struct.pack("<i", v)

    def bool(self, v: bool) -> None:
        self.u8(1 if v else 0)

    def count(self, what: str, n: int) -> None:
        if n > 0xFFFF:
            raise ProtocolError(Code.LIMIT, f"{what}: {n} entries, at most 65535")
        self.u16(n)

    def str(self, what: str, s: str) -> None:
        try:
            data = s.encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError(Code.BAD_MESSAGE, f"{what}: not encodable as UTF-8") from None
        self.count(what, len(data))
        self.b += data

    def raw(self, data: bytes) -> None:
        self.b += data


class _Reader:
    def __init__(self, payload: bytes, lim: Limits) -> None:
        self.b = payload
        self.off = 0
        self.lim = lim

    def left(self) -> int:
        return len(self.b) - self.off

    def next(self, n: int) -> bytes:
        if self.left() < n:
            raise ProtocolError(
                Code.BAD_MESSAGE,
                f"truncated payload: need {n} bytes at offset {self.off}, have {self.left()}")
        p = self.b[self.off:self.off + n]
        self.off += n
        return p

    def _unpack(self, fmt: str, n: int) -> int:
        return struct.unpack(fmt, self.next(n))[0]

    def u8(self) -> int:
        return self._unpack("<B", 1)

    def u16(self) -> int:
        return self._unpack("<H", 2)

    def u32(self) -> int:
        return self._unpack("<I", 4)

    def u64(self) -> int:
        return self._unpack("<Q", 8)

    def i32(self) -> int:
        return self._unpack("<i", 4)

    def bool(self, what: str) -> bool:
        v = self.u8()
        if v > 1:
            raise ProtocolError(Code.BAD_MESSAGE, f"{what}: bool byte {v}, must be 0 or 1")
        return v == 1

    def count(self, what: str, limit: int, min_elem: int) -> int:
        n = self.u16()
        if n > limit:
            raise ProtocolError(Code.LIMIT, f"{what}: {n} entries exceed the limit of {limit}")
        if n * min_elem > self.left():
            raise ProtocolError(
                Code.BAD_MESSAGE,
                f"truncated payload: {what}: {n} entries need at least {n * min_elem} bytes, have {self.left()}")
        return n

    def str(self, what: str) -> str:
        n = self.count(what, self.lim.max_string, 1)
        try:
            return self.next(n).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(Code.BAD_MESSAGE, f"{what}: invalid UTF-8") from None

    def u32s(self, what: str, limit: int) -> List[int]:
        n = self.count(what, limit, 4)
        return list(struct.unpack(f"<{n}I", self.next(4 * n)))


# ------------------------------------------------------------------ messages


class _Msg:
    TYPE: ClassVar[MsgType]

    def _encode(self, w: _Writer) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def _decode(cls, r: _Reader):  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class Hello(_Msg):
    """Client -> daemon: opens the handshake (magic "GNNL" on the wire)."""

    TYPE: ClassVar[MsgType] = MsgType.HELLO
    version: int = VERSION
    pid: int = 0
    name: str = ""

    def _encode(self, w: _Writer) -> None:
        w.raw(MAGIC)
        w.u16(self.version)
        w.u32(self.pid)
        w.str("name", self.name)

    @classmethod
    def _decode(cls, r: _Reader) -> "Hello":
        magic = r.next(4)
        if magic != MAGIC:
            raise ProtocolError(Code.UNSUPPORTED_VERSION, f"magic {magic!r}, want {MAGIC!r}")
        return cls(version=r.u16(), pid=r.u32(), name=r.str("name"))


@dataclass
class Split:
    name: str = ""
    size: int = 0


@dataclass
class Dataset:
    name: str = ""
    num_nodes: int = 0
    num_edges: int = 0
    feature_dim: int = 0
    feature_dtype: str = ""
    num_classes: int = 0
    splits: List[Split] = field(default_factory=list)


@dataclass
class Welcome(_Msg):
    """Daemon -> client: answers Hello with the daemon's and dataset's facts."""

    TYPE: ClassVar[MsgType] = MsgType.WELCOME
    version: int = VERSION
    daemon_version: str = ""
    dataset: Dataset = field(default_factory=Dataset)

    def _encode(self, w: _Writer) -> None:
        d = self.dataset
        w.u16(self.version)
        w.str("daemon_version", self.daemon_version)
        w.str("dataset.name", d.name)
        w.u64(d.num_nodes)
        w.u64(d.num_edges)
        w.u32(d.feature_dim)
        w.str("dataset.feature_dtype", d.feature_dtype)
        w.u32(d.num_classes)
        w.count("splits", len(d.splits))
        for s in d.splits:
            w.str("split.name", s.name)
            w.u64(s.size)

    @classmethod
    def _decode(cls, r: _Reader) -> "Welcome":
        version = r.u16()
        daemon_version = r.str("daemon_version")
        d = Dataset(name=r.str("dataset.name"), num_nodes=r.u64(), num_edges=r.u64(),
                    feature_dim=r.u32(), feature_dtype=r.str("dataset.feature_dtype"),
                    num_classes=r.u32())
        n = r.count("splits", r.lim.max_list, 2 + 8)
        d.splits = [Split(name=r.str("split.name"), size=r.u64()) for _ in range(n)]
        return cls(version=version, daemon_version=daemon_version, dataset=d)


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
class Open(_Msg):
    """Client -> daemon: the batch stream wanted. Sent once per connection."""

    TYPE: ClassVar[MsgType] = MsgType.OPEN
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

    def _encode(self, w: _Writer) -> None:
        w.str("job", self.job)
        w.str("split", self.split)
        w.u32(self.batch_size)
        w.count("fanouts", len(self.fanouts))
        for f in self.fanouts:
            if f < -1:
                raise ProtocolError(Code.BAD_MESSAGE, f"fanout {f}, must be >= -1")
            w.i32(f)
        w.bool(self.shuffle)
        w.u64(self.seed)
        w.u32(self.rank)
        w.u32(self.world_size)
        w.bool(self.drop_last)
        w.str("device", self.device)
        w.str("feature_dtype", self.feature_dtype)
        w.u32(self.slots)
        w.u32(self.start_epoch)
        w.u32(self.start_batch)

    @classmethod
    def _decode(cls, r: _Reader) -> "Open":
        m = cls(job=r.str("job"), split=r.str("split"), batch_size=r.u32())
        if m.batch_size > r.lim.max_batch_size:
            raise ProtocolError(Code.LIMIT, f"batch_size {m.batch_size} exceeds the limit of {r.lim.max_batch_size}")
        n = r.count("fanouts", r.lim.max_fanouts, 4)
        m.fanouts = list(struct.unpack(f"<{n}i", r.next(4 * n)))
        for f in m.fanouts:
            if f < -1:
                raise ProtocolError(Code.BAD_MESSAGE, f"fanout {f}, must be >= -1")
        m.shuffle = r.bool("shuffle")
        m.seed = r.u64()
        m.rank = r.u32()
        m.world_size = r.u32()
        m.drop_last = r.bool("drop_last")
        m.device = r.str("device")
        m.feature_dtype = r.str("feature_dtype")
        m.slots = r.u32()
        m.start_epoch = r.u32()
        m.start_batch = r.u32()
        return m

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

    ready: bytes = bytes(HANDLE_SIZE)
    released: bytes = bytes(HANDLE_SIZE)


@dataclass
class Opened(_Msg):
    """Daemon -> client: the slot ring. With memory "shm" the frame carries one
    memfd of slots*slot_bytes bytes (slot i at i*slot_bytes). Regions, scalars
    and lists say what every batch holds: each BatchReady carries a count per
    region and a value per scalar and per list, in this order."""

    TYPE: ClassVar[MsgType] = MsgType.OPENED
    num_batches: int = 0
    slots: int = 0
    slot_bytes: int = 0
    memory: str = MEMORY_SHM
    regions: List[Region] = field(default_factory=list)
    scalars: List[str] = field(default_factory=list)  # e.g. "batch_size"
    lists: List[str] = field(default_factory=list)  # e.g. "num_sampled_nodes"
    cuda_device: int = 0
    mem_handle: bytes = b""  # empty or HANDLE_SIZE bytes
    events: List[EventIPC] = field(default_factory=list)  # empty or `slots` entries

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

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
        for r, n in zip(self.regions, b.counts):
            if n > r.shape[r.count_axis]:
                raise ProtocolError(Code.BAD_MESSAGE, f"BatchReady: region {r.name!r} counts {n}, "
                                    f"its capacity is {r.shape[r.count_axis]}")

    def _check(self) -> None:
        def bad(msg: str) -> ProtocolError:
            return ProtocolError(Code.BAD_MESSAGE, msg)
        if self.slots == 0:
            raise bad("slots is 0")
        if self.slot_bytes % REGION_ALIGN:
            raise bad(f"slot_bytes {self.slot_bytes} is not a multiple of {REGION_ALIGN}")
        for r in self.regions:
            if r.offset % REGION_ALIGN:
                raise bad(f"region {r.name!r}: offset {r.offset} is not a multiple of {REGION_ALIGN}")
            if r.offset > self.slot_bytes or r.bytes > self.slot_bytes - r.offset:
                raise bad(f"region {r.name!r}: [{r.offset}, +{r.bytes}) outside the {self.slot_bytes}-byte slot")
            if not r.shape or r.count_axis >= len(r.shape):
                raise bad(f"region {r.name!r}: count axis {r.count_axis} of a {len(r.shape)}-dimensional shape")
        if self.memory == MEMORY_SHM:
            if self.cuda_device != 0 or self.mem_handle or self.events:
                raise bad("shm memory with CUDA handles")
        elif self.memory == MEMORY_CUDA:
            if len(self.mem_handle) != HANDLE_SIZE:
                raise bad(f"mem_handle of {len(self.mem_handle)} bytes, want {HANDLE_SIZE}")
            if len(self.events) != self.slots:
                raise bad(f"{len(self.events)} event pairs for {self.slots} slots")
        else:
            raise bad(f"memory kind {self.memory!r}, want 'shm' or 'cuda'")

    def _encode(self, w: _Writer) -> None:
        w.u32(self.num_batches)
        w.u32(self.slots)
        w.u64(self.slot_bytes)
        w.str("memory", self.memory)
        w.count("regions", len(self.regions))
        for r in self.regions:
            w.str("region.name", r.name)
            w.u64(r.offset)
            w.u64(r.bytes)
            w.str("region.dtype", r.dtype)
            if len(r.shape) > MAX_DIMS:
                raise ProtocolError(Code.LIMIT, f"region {r.name!r}: {len(r.shape)} dims, at most {MAX_DIMS}")
            w.count("region.shape", len(r.shape))
            for s in r.shape:
                w.u64(s)
            w.u8(r.count_axis)
        for what, names in (("scalars", self.scalars), ("lists", self.lists)):
            w.count(what, len(names))
            for name in names:
                w.str(what, name)
        w.u32(self.cuda_device)
        w.count("mem_handle", len(self.mem_handle))
        w.raw(bytes(self.mem_handle))
        w.count("events", len(self.events))
        for e in self.events:
            if len(e.ready) != HANDLE_SIZE or len(e.released) != HANDLE_SIZE:
                raise ProtocolError(Code.BAD_MESSAGE, f"event handles must be {HANDLE_SIZE} bytes")
            w.raw(bytes(e.ready))
            w.raw(bytes(e.released))
        self._check()

    @classmethod
    def _decode(cls, r: _Reader) -> "Opened":
        m = cls(num_batches=r.u32(), slots=r.u32(), slot_bytes=r.u64(), memory=r.str("memory"))
        n = r.count("regions", r.lim.max_list, 2 + 8 + 8 + 2 + 2 + 1)
        for _ in range(n):
            reg = Region(name=r.str("region.name"), offset=r.u64(), bytes=r.u64(), dtype=r.str("region.dtype"))
            k = r.count("region.shape", MAX_DIMS, 8)
            reg.shape = list(struct.unpack(f"<{k}Q", r.next(8 * k)))
            reg.count_axis = r.u8()
            m.regions.append(reg)
        for what in ("scalars", "lists"):
            n = r.count(what, r.lim.max_list, 2)
            setattr(m, what, [r.str(what) for _ in range(n)])
        m.cuda_device = r.u32()
        n = r.count("mem_handle", r.lim.max_list, 1)
        m.mem_handle = bytes(r.next(n))
        n = r.count("events", r.lim.max_list, 2 * HANDLE_SIZE)
        m.events = [EventIPC(ready=bytes(r.next(HANDLE_SIZE)), released=bytes(r.next(HANDLE_SIZE)))
                    for _ in range(n)]
        m._check()
        return m


@dataclass
class StartEpoch(_Msg):
    """Client -> daemon: stream epoch `epoch`."""

    TYPE: ClassVar[MsgType] = MsgType.START_EPOCH
    epoch: int = 0

    def _encode(self, w: _Writer) -> None:
        w.u32(self.epoch)

    @classmethod
    def _decode(cls, r: _Reader) -> "StartEpoch":
        return cls(epoch=r.u32())


@dataclass
class BatchReady(_Msg):
    """Daemon -> client: slot `slot` holds batch `index` of `epoch`. counts,
    scalars and lists follow Opened.regions, Opened.scalars and Opened.lists,
    entry for entry."""

    TYPE: ClassVar[MsgType] = MsgType.BATCH_READY
    slot: int = 0
    epoch: int = 0
    index: int = 0
    counts: List[int] = field(default_factory=list)  # per region, its length along its count axis
    scalars: List[int] = field(default_factory=list)  # int64 each
    lists: List[List[int]] = field(default_factory=list)

    def _encode(self, w: _Writer) -> None:
        for v in (self.slot, self.epoch, self.index):
            w.u32(v)
        w.count("counts", len(self.counts))
        for v in self.counts:
            w.u32(v)
        w.count("scalars", len(self.scalars))
        for v in self.scalars:
            w.raw(struct.pack("<q", v))
        w.count("lists", len(self.lists))
        for lst in self.lists:
            w.count("list", len(lst))
            for v in lst:
                w.u32(v)

    @classmethod
    def _decode(cls, r: _Reader) -> "BatchReady":
        m = cls(slot=r.u32(), epoch=r.u32(), index=r.u32())
        m.counts = r.u32s("counts", r.lim.max_list)
        n = r.count("scalars", r.lim.max_list, 8)
        m.scalars = list(struct.unpack(f"<{n}q", r.next(8 * n)))
        n = r.count("lists", r.lim.max_list, 2)
        m.lists = [r.u32s("list", r.lim.max_list) for _ in range(n)]
        return m


@dataclass
class Release(_Msg):
    """Client -> daemon: done with `slot`, which held batch `index` of `epoch`."""

    TYPE: ClassVar[MsgType] = MsgType.RELEASE
    slot: int = 0
    epoch: int = 0
    index: int = 0

    def _encode(self, w: _Writer) -> None:
        w.u32(self.slot)
        w.u32(self.epoch)
        w.u32(self.index)

    @classmethod
    def _decode(cls, r: _Reader) -> "Release":
        return cls(slot=r.u32(), epoch=r.u32(), index=r.u32())


@dataclass
class EpochEnd(_Msg):
    """Daemon -> client: all `num_batches` batches of `epoch` were sent."""

    TYPE: ClassVar[MsgType] = MsgType.EPOCH_END
    epoch: int = 0
    num_batches: int = 0

    def _encode(self, w: _Writer) -> None:
        w.u32(self.epoch)
        w.u32(self.num_batches)

    @classmethod
    def _decode(cls, r: _Reader) -> "EpochEnd":
        return cls(epoch=r.u32(), num_batches=r.u32())


@dataclass
class Error(_Msg):
    """Either side: why the sender is closing. `code` is any u16 (see Code)."""

    TYPE: ClassVar[MsgType] = MsgType.ERROR
    code: int = Code.INTERNAL
    message: str = ""

    def _encode(self, w: _Writer) -> None:
        w.u16(int(self.code))
        w.str("message", self.message)

    @classmethod
    def _decode(cls, r: _Reader) -> "Error":
        code = r.u16()
        try:
            code = Code(code)
        except ValueError:
            pass
        return cls(code=code, message=r.str("message"))

    def as_exception(self) -> ProtocolError:
        return ProtocolError(self.code, "peer: " + self.message)


@dataclass
class Goodbye(_Msg):
    """Either side: clean close."""

    TYPE: ClassVar[MsgType] = MsgType.GOODBYE
    reason: str = ""

    def _encode(self, w: _Writer) -> None:
        w.str("reason", self.reason)

    @classmethod
    def _decode(cls, r: _Reader) -> "Goodbye":
        return cls(reason=r.str("reason"))


@dataclass
class Seeds(_Msg):
    """Client -> daemon, after Welcome and before an Open naming CUSTOM_SPLIT:
    `count` node ids (little-endian int64) in the memfd sent with the frame."""

    TYPE: ClassVar[MsgType] = MsgType.SEEDS
    count: int = 0

    def _encode(self, w: _Writer) -> None:
        w.u64(self.count)

    @classmethod
    def _decode(cls, r: _Reader) -> "Seeds":
        return cls(count=r.u64())


_BY_TYPE = {cls.TYPE: cls for cls in (Hello, Welcome, Open, Opened, StartEpoch, BatchReady,
                                      Release, EpochEnd, Error, Goodbye, Seeds)}


# -------------------------------------------------------------------- frames


def marshal(msg: _Msg) -> bytes:
    """Encode `msg` as one complete frame. Raises ProtocolError for a value that
    cannot be represented; limits are the receiver's business."""
    w = _Writer()
    try:
        msg._encode(w)
    except struct.error as e:
        raise ProtocolError(Code.BAD_MESSAGE, f"{type(msg).__name__}: value out of range: {e}") from None
    return _HEADER.pack(len(w.b) + 4, int(msg.TYPE), 0) + bytes(w.b)


def _parse_header(h: bytes, lim: Limits) -> Tuple[int, int]:
    """Check a header; return (type, payload size). Checks MaxFrame first."""
    n, typ, flags = _HEADER.unpack(h)
    if n < 4:
        raise ProtocolError(Code.BAD_FRAME, f"length {n} is shorter than type and flags")
    if n + 4 > lim.max_frame:
        raise ProtocolError(Code.LIMIT, f"frame of {n + 4} bytes exceeds the limit of {lim.max_frame}")
    if flags != 0:
        raise ProtocolError(Code.BAD_FRAME, f"flags 0x{flags:04x}, must be 0")
    return typ, n - 4


def _decode_payload(typ: int, payload: bytes, lim: Limits) -> _Msg:
    cls = _BY_TYPE.get(typ)
    if cls is None:
        raise ProtocolError(Code.BAD_MESSAGE, f"unknown message type {typ}")
    r = _Reader(payload, lim)
    try:
        m = cls._decode(r)
        if r.left():
            raise ProtocolError(Code.BAD_MESSAGE, f"{r.left()} trailing bytes")
    except ProtocolError as e:
        raise ProtocolError(e.code, f"{cls.__name__}: {e.message}") from None
    return m


def unmarshal(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> _Msg:
    """Decode one complete frame (header and payload, nothing more)."""
    frame = bytes(frame)
    if len(frame) < HEADER_SIZE:
        raise ProtocolError(Code.BAD_FRAME, f"frame of {len(frame)} bytes is shorter than the header")
    typ, size = _parse_header(frame[:HEADER_SIZE], limits)
    if HEADER_SIZE + size != len(frame):
        raise ProtocolError(Code.BAD_FRAME, f"length field says {size + HEADER_SIZE} bytes, frame has {len(frame)}")
    return _decode_payload(typ, frame[HEADER_SIZE:], limits)


def fds_for(msg: _Msg) -> int:
    """Descriptors a frame carrying `msg` must carry: 1 for a shm Opened and
    for Seeds, else 0."""
    if isinstance(msg, Seeds):
        return 1
    return 1 if isinstance(msg, Opened) and msg.memory == MEMORY_SHM else 0


# ------------------------------------------------------------------- sockets


def send_msg(sock: socket.socket, msg: _Msg, fds: Sequence[int] = ()) -> None:
    """Send `msg` as one frame, `fds` attached to its first byte (SCM_RIGHTS).
    The descriptors stay the caller's."""
    if len(fds) != fds_for(msg):
        raise ProtocolError(Code.INTERNAL, f"{type(msg).__name__} needs {fds_for(msg)} descriptors, got {len(fds)}")
    frame = marshal(msg)
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        n = sock.sendmsg([frame], anc)
        if n < len(frame):
            sock.sendall(frame[n:])
    else:
        sock.sendall(frame)


_ANC_SIZE = socket.CMSG_SPACE(MAX_FDS * 4)
_RECV_FLAGS = getattr(socket, "MSG_CMSG_CLOEXEC", 0)


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _read_exact(sock: socket.socket, n: int, fds: List[int], at_start: bool) -> bytes:
    """Read exactly n bytes, never past them, collecting SCM_RIGHTS descriptors."""
    buf = bytearray()
    while len(buf) < n:
        data, anc, flags, _ = sock.recvmsg(n - len(buf), _ANC_SIZE, _RECV_FLAGS)
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
                fds.extend(a)
        if flags & getattr(socket, "MSG_CTRUNC", 0):
            raise ProtocolError(Code.BAD_FRAME, f"control data truncated: more than {MAX_FDS} descriptors")
        if len(fds) > MAX_FDS:
            raise ProtocolError(Code.BAD_FRAME, f"{len(fds)} descriptors, at most {MAX_FDS}")
        if not data:
            if at_start and not buf and not fds:
                raise EOFError("connection closed")
            raise ProtocolError(Code.BAD_FRAME, "truncated frame")
        buf += data
    return bytes(buf)


def recv_msg(sock: socket.socket, limits: Limits = DEFAULT_LIMITS) -> Tuple[_Msg, List[int]]:
    """Read one frame; return (message, descriptors that came with it). The
    caller owns the descriptors. Raises EOFError on a clean close at a frame
    boundary and ProtocolError for anything the peer got wrong; on any error no
    received descriptor is left open."""
    fds: List[int] = []
    try:
        header = _read_exact(sock, HEADER_SIZE, fds, True)
        typ, size = _parse_header(header, limits)
        payload = _read_exact(sock, size, fds, False)
        msg = _decode_payload(typ, payload, limits)
        if len(fds) != fds_for(msg):
            raise ProtocolError(Code.BAD_FRAME, f"{type(msg).__name__} came with {len(fds)} descriptors, want {fds_for(msg)}")
        return msg, fds
    except BaseException:
        _close_fds(fds)
        raise


# ------------------------------------------------------------- state machine


class Dir(enum.IntEnum):
    CLIENT = 0  # client (trainer) to daemon
    DAEMON = 1  # daemon to client


class Phase(enum.IntEnum):
    HELLO = 0
    WELCOME = 1
    OPEN = 2
    OPENED = 3
    IDLE = 4
    EPOCH = 5
    CLOSED = 6


_T = MsgType
_TRANSITIONS = {
    (Phase.HELLO, Dir.CLIENT, _T.HELLO): Phase.WELCOME,
    (Phase.WELCOME, Dir.DAEMON, _T.WELCOME): Phase.OPEN,
    (Phase.OPEN, Dir.CLIENT, _T.SEEDS): Phase.OPEN,  # custom seeds come before their Open
    (Phase.OPEN, Dir.CLIENT, _T.OPEN): Phase.OPENED,
    (Phase.OPENED, Dir.DAEMON, _T.OPENED): Phase.IDLE,
    (Phase.IDLE, Dir.CLIENT, _T.START_EPOCH): Phase.EPOCH,
    (Phase.IDLE, Dir.CLIENT, _T.RELEASE): Phase.IDLE,  # late releases after EpochEnd
    (Phase.EPOCH, Dir.CLIENT, _T.RELEASE): Phase.EPOCH,
    (Phase.EPOCH, Dir.DAEMON, _T.BATCH_READY): Phase.EPOCH,
    (Phase.EPOCH, Dir.DAEMON, _T.EPOCH_END): Phase.IDLE,
}


class State:
    """Message-order checker for one connection (docs/protocol.md, "State
    machine"). Feed it every message sent or received, in order."""

    def __init__(self) -> None:
        self.phase = Phase.HELLO

    def next(self, direction: Dir, msg_type: int) -> None:
        """Record a message; ProtocolError(OUT_OF_ORDER) if not allowed (state unchanged)."""
        if self.phase != Phase.CLOSED and msg_type in (_T.ERROR, _T.GOODBYE):
            self.phase = Phase.CLOSED
            return
        nxt = _TRANSITIONS.get((self.phase, direction, msg_type))
        if nxt is None:
            try:
                name = MsgType(msg_type).name
            except ValueError:
                name = f"type {msg_type}"
            raise ProtocolError(Code.OUT_OF_ORDER,
                                f"{name} from the {Dir(direction).name.lower()} in phase {self.phase.name.lower()}")
        self.phase = nxt
