"""The two frames a trainer handles every batch, without the table's
interpreter (_codec): BatchReady decoded and Release encoded by struct
formats made once.

The thread that issues a trainer's steps bounds a fast epoch, and the
client's work on it runs in caches the step left cold (docs/benchmarks.md,
session 20): fewer Python calls a batch cost it less. Both paths follow the
message table: at import they check that BatchReady and Release still have
the fields and wire types they were written for, and are off (None) when
not, so a table change falls back to the interpreter instead of misreading
frames (test_protocol checks they are on). A BatchReady that the fast path
finds anything wrong with (a count over its limit, too few or too many
bytes) is decoded again by the interpreter, which raises the error Go's
decoder would; the fast path itself never raises for a frame.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from . import _schema as S
from ._codec import Limits
from ._messages import BatchReady, MsgType

_BATCH_READY_FIELDS = (
    ("slot", "u32"), ("epoch", "u32"), ("index", "u32"), ("counts", "list:u32"), ("scalars", "list:i64"),
    ("lists", "list:list:u32"), ("ready_value", "u32"),
)
_RELEASE_FIELDS = (("slot", "u32"), ("epoch", "u32"), ("index", "u32"))


def _shape(entry: S.Message) -> Tuple[Tuple[str, str], ...]:
    """(name, wire) of each field, lists written list:ELEM."""
    def wire(spec) -> str:
        return "list:" + wire(spec["elem"]) if spec["wire"] == "list" else spec["wire"]
    return tuple((f["name"], wire(f)) for f in entry.fields)


def _entry(name: str) -> S.Message:
    return next(m for m in S.MESSAGES if m.name == name)


_HEAD = struct.Struct("<IIIH")  # slot, epoch, index, the number of counts
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U32S: Dict[int, struct.Struct] = {}
_I64S: Dict[int, struct.Struct] = {}


def _many(cache: Dict[int, struct.Struct], code: str, n: int) -> struct.Struct:
    st = cache.get(n)
    if st is None:
        st = cache[n] = struct.Struct(f"<{n}{code}")
    return st


def _decode_batch_ready(payload: bytes, lim: Limits) -> Optional[BatchReady]:
    """BatchReady from its payload, or None where the interpreter must
    decode it (and raise what is wrong with it)."""
    size = len(payload)
    if size < _HEAD.size:
        return None
    slot, epoch, index, n = _HEAD.unpack_from(payload, 0)
    most = lim.max_list
    off = _HEAD.size
    if n > most or off + 4 * n + 2 > size:
        return None
    counts = list(_many(_U32S, "I", n).unpack_from(payload, off))
    off += 4 * n
    n = _U16.unpack_from(payload, off)[0]
    off += 2
    if n > most or off + 8 * n + 2 > size:
        return None
    scalars = list(_many(_I64S, "q", n).unpack_from(payload, off))
    off += 8 * n
    n = _U16.unpack_from(payload, off)[0]
    off += 2
    if n > most:
        return None
    lists: List[List[int]] = []
    for _ in range(n):
        if off + 2 > size:
            return None
        k = _U16.unpack_from(payload, off)[0]
        off += 2
        if k > most or off + 4 * k > size:
            return None
        lists.append(list(_many(_U32S, "I", k).unpack_from(payload, off)))
        off += 4 * k
    if off + 4 != size:
        return None
    return BatchReady(slot, epoch, index, counts, scalars, lists, _U32.unpack_from(payload, off)[0])


_RELEASE = struct.Struct("<IHHIII")  # the header (length, type, flags), then slot, epoch, index
_RELEASE_LEN = _RELEASE.size - 4  # the length field counts what follows it
_RELEASE_TYPE = int(MsgType.RELEASE)


def _release_frames(held: Iterable[Tuple[int, int, int]]) -> bytes:
    """The Release frames of (slot, epoch, index) entries, one after the
    other; struct.error for a value that does not fit a u32."""
    pack = _RELEASE.pack
    return b"".join([pack(_RELEASE_LEN, _RELEASE_TYPE, 0, s, e, i) for s, e, i in held])


decode_batch_ready: Optional[Callable[[bytes, Limits], Optional[BatchReady]]] = \
    _decode_batch_ready if _shape(_entry("BatchReady")) == _BATCH_READY_FIELDS and \
    _entry("BatchReady").prefix == b"" and not _entry("BatchReady").checked else None
release_frames: Optional[Callable[[Iterable[Tuple[int, int, int]]], bytes]] = \
    _release_frames if _shape(_entry("Release")) == _RELEASE_FIELDS and _entry("Release").prefix == b"" and \
    not _entry("Release").checked and S.HEADER_SIZE == 8 else None

__all__ = ["decode_batch_ready", "release_frames"]
