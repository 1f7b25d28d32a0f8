"""The protocol's encoding, interpreted from the message table in _schema.py
(generated from the Go package ipc; docs/protocol.md, "Implementations").

Each field of the table compiles once, at import, into an encode and a
decode function; ``Codec`` is a message's. Decoding checks a list's count
against its limit and against the bytes left before reading it, as the Go
decoder does, and raises ``ProtocolError`` with the same code.
Standard library only.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

from . import _schema as S


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


if {c.wire_name: int(c) for c in Code} != S.CODES:
    raise ImportError("gnnloader._codec: Code differs from the error codes of ipc (_schema.CODES)")


def _code_name(code: int) -> str:
    try:
        return Code(code).wire_name
    except ValueError:
        return f"code({code})"


class ProtocolError(Exception):
    """A protocol violation; ``code`` says which Error message answers it."""

    def __init__(self, code: int, message: str):
        super().__init__(f"{_code_name(code)}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Bounds applied by a receiver; see docs/protocol.md, "Limits"."""

    max_frame: int = S.DEFAULT_LIMITS["max_frame"]  # bytes in a whole frame, length field included
    max_fanouts: int = S.DEFAULT_LIMITS["max_fanouts"]  # Open.fanouts (the sampler's most hops)
    max_batch_size: int = S.DEFAULT_LIMITS["max_batch_size"]
    max_string: int = S.DEFAULT_LIMITS["max_string"]  # bytes in any string
    max_list: int = S.DEFAULT_LIMITS["max_list"]  # entries in any other list


DEFAULT_LIMITS = Limits()


def _bad(what: str) -> ProtocolError:
    return ProtocolError(Code.BAD_MESSAGE, what)


class _Writer:
    def __init__(self) -> None:
        self.b = bytearray()

    def count(self, what: str, n: int) -> None:
        if n > 0xFFFF:
            raise ProtocolError(Code.LIMIT, f"{what}: {n} entries, at most 65535")
        self.b += _U16.pack(n)

    def str(self, what: str, s: str) -> None:
        try:
            data = s.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(f"{what}: not encodable as UTF-8") from None
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

    def take(self, n: int) -> int:
        """Advance past n bytes; return where they start."""
        off = self.off
        if len(self.b) - off < n:
            raise _bad(f"truncated payload: need {n} bytes at offset {off}, have {self.left()}")
        self.off = off + n
        return off

    def next(self, n: int) -> bytes:
        off = self.take(n)
        return self.b[off:off + n]

    def count(self, what: str, limit: int, min_elem: int) -> int:
        n = _U16.unpack_from(self.b, self.take(2))[0]
        if n > limit:
            raise ProtocolError(Code.LIMIT, f"{what}: {n} entries exceed the limit of {limit}")
        if n * min_elem > self.left():
            raise _bad(f"truncated payload: {what}: {n} entries need at least {n * min_elem} bytes, have {self.left()}")
        return n

    def str(self, what: str) -> str:
        n = self.count(what, self.lim.max_string, 1)
        try:
            return self.next(n).decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(f"{what}: invalid UTF-8") from None


_U16 = struct.Struct("<H")
_SCALARS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i32": "i", "i64": "q"}

Enc = Callable[[_Writer, Any], None]
Dec = Callable[[_Reader], Any]


def _max(spec: Dict[str, Any]) -> Callable[[Limits], int]:
    m = spec["max"]
    if isinstance(m, str):
        return lambda lim: getattr(lim, m)
    return lambda lim: m


def _compile(spec: Dict[str, Any], what: str, classes: Dict[str, type]) -> Tuple[Enc, Dec]:
    """The encode and decode functions of one field (or list entry)."""
    wire = spec["wire"]
    if wire in _SCALARS:
        return _scalar(spec, what)
    if wire == "bool":
        def enc(w: _Writer, v: bool) -> None:
            w.b.append(1 if v else 0)

        def dec(r: _Reader) -> bool:
            v = r.b[r.take(1)]
            if v > 1:
                raise _bad(f"{what}: bool byte {v}, must be 0 or 1")
            return v == 1
        return enc, dec
    if wire == "str":
        return (lambda w, v: w.str(what, v)), (lambda r: r.str(what))
    if wire == "bytes":
        return _bytes(spec, what)
    if wire == "fixed":
        n = spec["n"]

        def enc(w: _Writer, v: bytes) -> None:
            if len(v) != n:
                raise _bad(f"{what}: {len(v)} bytes, want {n}")
            w.b += v
        return enc, (lambda r: bytes(r.next(n)))
    if wire == "struct":
        return _struct(classes[spec["struct"]], S.STRUCTS[spec["struct"]], what + ".", classes)
    if wire == "list":
        return _list(spec, what, classes)
    raise ImportError(f"gnnloader._codec: {what}: unknown wire type {wire!r}")


def _scalar(spec: Dict[str, Any], what: str) -> Tuple[Enc, Dec]:
    st = struct.Struct("<" + _SCALARS[spec["wire"]])
    atleast, limit = spec.get("atleast"), spec.get("limit")

    def enc(w: _Writer, v: int) -> None:
        if atleast is not None and v < atleast:
            raise _bad(f"{what} {v}, must be >= {atleast}")
        w.b += st.pack(v)

    def dec(r: _Reader) -> int:
        v = st.unpack_from(r.b, r.take(st.size))[0]
        if atleast is not None and v < atleast:
            raise _bad(f"{what} {v}, must be >= {atleast}")
        if limit is not None and v > getattr(r.lim, limit):
            raise ProtocolError(Code.LIMIT, f"{what} {v} exceeds the limit of {getattr(r.lim, limit)}")
        return v
    return enc, dec


def _bytes(spec: Dict[str, Any], what: str) -> Tuple[Enc, Dec]:
    lens, most = spec.get("lens"), _max(spec)
    const = spec["max"] if isinstance(spec["max"], int) else None

    def enc(w: _Writer, v: bytes) -> None:
        if lens is not None and len(v) not in lens:
            raise _bad(f"{what} of {len(v)} bytes, want one of {list(lens)}")
        if const is not None and len(v) > const:
            raise ProtocolError(Code.LIMIT, f"{what}: {len(v)} entries, at most {const}")
        w.count(what, len(v))
        w.b += v

    def dec(r: _Reader) -> bytes:
        n = r.count(what, most(r.lim), 1)
        if n and lens is not None and n not in lens:
            raise _bad(f"{what} of {n} bytes, want one of {list(lens)}")
        return bytes(r.next(n))
    return enc, dec


def _list(spec: Dict[str, Any], what: str, classes: Dict[str, type]) -> Tuple[Enc, Dec]:
    elem, most, min_wire = spec["elem"], _max(spec), spec["min_wire"]
    const = spec["max"] if isinstance(spec["max"], int) else None
    atleast = elem.get("atleast")

    def count(w: _Writer, n: int) -> None:
        if const is not None and n > const:
            raise ProtocolError(Code.LIMIT, f"{what}: {n} entries, at most {const}")
        w.count(what, n)

    if elem["wire"] in _SCALARS:  # the whole list in one struct call
        c, size = _SCALARS[elem["wire"]], struct.calcsize("<" + _SCALARS[elem["wire"]])

        def enc(w: _Writer, v: List[int]) -> None:
            count(w, len(v))
            if atleast is not None and v and min(v) < atleast:
                raise _bad(f"{what} {min(v)}, must be >= {atleast}")
            w.b += struct.pack(f"<{len(v)}{c}", *v)

        def dec(r: _Reader) -> List[int]:
            n = r.count(what, most(r.lim), min_wire)
            v = list(struct.unpack_from(f"<{n}{c}", r.b, r.take(n * size)))
            if atleast is not None and v and min(v) < atleast:
                raise _bad(f"{what} {min(v)}, must be >= {atleast}")
            return v
        return enc, dec

    e_enc, e_dec = _compile(elem, what, classes)

    def enc(w: _Writer, v: List[Any]) -> None:
        count(w, len(v))
        for x in v:
            e_enc(w, x)

    def dec(r: _Reader) -> List[Any]:
        return [e_dec(r) for _ in range(r.count(what, most(r.lim), min_wire))]
    return enc, dec


def _struct(cls: type, fields: Tuple[Dict[str, Any], ...], prefix: str,
            classes: Dict[str, type]) -> Tuple[Enc, Dec]:
    names = [f["name"] for f in fields]
    fns = [_compile(f, prefix + f["name"], classes) for f in fields]
    pairs = list(zip(names, [e for e, _ in fns]))
    decs = [d for _, d in fns]

    def enc(w: _Writer, v: Any) -> None:
        for name, e in pairs:
            e(w, getattr(v, name))

    def dec(r: _Reader) -> Any:
        return cls(*[d(r) for d in decs])
    return enc, dec


class Codec:
    """One message type's encoding, from its entry of the table."""

    def __init__(self, entry: S.Message, cls: type, classes: Dict[str, type]) -> None:
        self.entry = entry
        self.prefix = entry.prefix
        self._enc, self._dec = _struct(cls, entry.fields, "", classes)
        self._check = entry.checked

    def encode(self, w: _Writer, msg: Any) -> None:
        w.b += self.prefix
        self._enc(w, msg)
        if self._check:
            msg._check()

    def decode(self, r: _Reader) -> Any:
        if self.prefix:
            p = r.next(len(self.prefix))
            if p != self.prefix:
                raise ProtocolError(Code.UNSUPPORTED_VERSION, f"magic {bytes(p)!r}, want {self.prefix!r}")
        m = self._dec(r)
        if self._check:
            m._check()
        return m
