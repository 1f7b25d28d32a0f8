"""The two frames a trainer handles every batch, without the table's
interpreter (_codec): BatchReady decoded and Release encoded by struct
formats made once.

The thread that issues a trainer's steps bounds a fast epoch, and the
client's work on it runs in caches the step left cold (docs/benchmarks.md,
session 20): fewer Python calls a batch cost it less. Both paths follow the
message table: at import they check that BatchReady and Release still have
the fields and wire types they were written for, and are off (None) when
not, so a table change falls back to the interpreter instead of misreading
frames (test_fastpath checks they are on). A BatchReady that the fast path
finds anything wrong with (a count over its limit, too few or too many
bytes) is decoded again by the interpreter, which raises the error Go's
decoder would; the fast path itself never raises for a frame.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable, List, Optional, Tuple

from . import _schema as S
from ._codec import Limits
from ._messages import BatchReady, MsgType

_BATCH_READY_FIELDS = (
    ("slot", "u32"), ("epoch", "u32"), ("index", "u32"), ("counts", "list:u32"), ("scalars", "list:i64"),
    ("lists", "list:list:u32"), ("ready_value", "u32"),
)
_RELEASE_FIELDS = (("slot", "u32"), ("epoch", "u32"), ("index", "u32"), ("deferred", "bool"))


def _shape(entry: S.Message) -> Tuple[Tuple[str, str], ...]:
    """(name, wire) of each field, lists written list:ELEM."""
    def wire(spec) -> str:
        return "list:" + wire(spec["elem"]) if spec["wire"] == "list" else spec["wire"]
    return tuple((f["name"], wire(f)) for f in entry.fields)


_HEAD = struct.Struct("<III")  # slot, epoch, index
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


# The formats of the short lists a batch has (its regions, scalars and
# hops), made once: a fixed set, whatever a frame says.
_SHORT = 32
_FORMATS = {(code, n): struct.Struct(f"<{n}{code}") for code in "Iq" for n in range(_SHORT)}


def _ints(payload: bytes, off: int, most: int, code: str, width: int) -> Optional[Tuple[List[int], int]]:
    """The list at off (a u16 count, then that many ints of struct code
    `code`, `width` bytes each) and the offset past it; None when the count
    is over `most` or the bytes run out (checked before anything is made)."""
    if off + 2 > len(payload):
        return None
    n = _U16.unpack_from(payload, off)[0]
    off += 2
    if n > most or off + width * n > len(payload):
        return None
    st = _FORMATS[code, n] if n < _SHORT else struct.Struct(f"<{n}{code}")
    return list(st.unpack_from(payload, off)), off + width * n


def _decode_batch_ready(payload: bytes, lim: Limits) -> Optional[BatchReady]:
    """BatchReady from its payload, or None where the interpreter must
    decode it (and raise what is wrong with it)."""
    if len(payload) < _HEAD.size:
        return None
    slot, epoch, index = _HEAD.unpack_from(payload, 0)
    most = lim.max_list
    counts = _ints(payload, _HEAD.size, most, "I", 4)
    if counts is None:
        return None
    scalars = _ints(payload, counts[1], most, "q", 8)
    if scalars is None or scalars[1] + 2 > len(payload):
        return None
    off = scalars[1]
    n = _U16.unpack_from(payload, off)[0]
    off += 2
    if n > most:
        return None
    lists: List[List[int]] = []
    for _ in range(n):
        got = _ints(payload, off, most, "I", 4)
        if got is None:
            return None
        lists.append(got[0])
        off = got[1]
    if off + 4 != len(payload):
        return None
    return BatchReady(slot, epoch, index, counts[0], scalars[0], lists, _U32.unpack_from(payload, off)[0])


_RELEASE = struct.Struct("<IHHIII?")  # the header (length, type, flags), then slot, epoch, index, deferred
_RELEASE_LEN = _RELEASE.size - 4  # the length field counts what follows it
_RELEASE_TYPE = int(MsgType.RELEASE)


def _release_frames(held: Iterable[Tuple[int, int, int, bool]]) -> bytes:
    """The Release frames of (slot, epoch, index, deferred) entries, one
    after the other; struct.error for a value that does not fit a u32."""
    pack = _RELEASE.pack
    return b"".join([pack(_RELEASE_LEN, _RELEASE_TYPE, 0, s, e, i, d) for s, e, i, d in held])


def _fits(name: str, fields: Tuple[Tuple[str, str], ...]) -> bool:
    """Whether the table's entry `name` is what a fast path was written for:
    these fields, no magic prefix, no cross-field check, 8-byte headers."""
    entry = next(m for m in S.MESSAGES if m.name == name)
    return _shape(entry) == fields and entry.prefix == b"" and not entry.checked and S.HEADER_SIZE == 8


decode_batch_ready: Optional[Callable[[bytes, Limits], Optional[BatchReady]]] = \
    _decode_batch_ready if _fits("BatchReady", _BATCH_READY_FIELDS) else None
release_frames: Optional[Callable[[Iterable[Tuple[int, int, int, bool]]], bytes]] = \
    _release_frames if _fits("Release", _RELEASE_FIELDS) else None

__all__ = ["decode_batch_ready", "release_frames"]
