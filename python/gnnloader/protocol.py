"""gnnloader protocol v2: the Python twin of the Go package ``ipc``.

docs/protocol.md is the specification. This module needs only the standard
library. It provides:

* one dataclass per message (Hello ... Goodbye, Seeds and the gradient
  exchange's RegisterGrad ... AllReduceDone) and ``marshal``/``unmarshal``
  between a message and one complete frame, with the same limits and checks
  as the Go decoder (``Limits``);
* ``send_msg(sock, msg, fds=())`` and ``recv_msg(sock) -> (msg, fds)`` over a
  SOCK_STREAM Unix socket, passing file descriptors with SCM_RIGHTS;
* ``State``, the per-connection message-order checker;
* ``ProtocolError(code, message)`` for every violation, ``code`` a ``Code``.

The messages and their encoding come from ipc's message table: _schema.py is
generated from it (go generate ./ipc), _codec.py interprets it and
_messages.py holds the dataclasses bound to it. This module keeps frames,
sockets and the state machine. Both implementations are tested against the
frames in ipc/testdata/.
"""

from __future__ import annotations

import array
import enum
import os
import socket
import struct
import weakref
from typing import List, Sequence, Tuple

from . import _schema
from ._codec import DEFAULT_LIMITS, Code, Limits, ProtocolError, _code_name, _Reader, _Writer
from ._fastpath import decode_batch_ready as _fast_batch_ready
from ._fastpath import release_frames as _fast_release_frames
from ._messages import (BY_TYPE, TEMPORAL_DISJOINT, TEMPORAL_LAST, TEMPORAL_UNIFORM, TIME_ATTR_EDGE, TIME_ATTR_NODE, AllReduce,
                        AllReduceDone, BatchReady, Dataset, EdgeTypeInfo, EpochEnd, Error, EventIPC, Goodbye,
                        GradRegistered, Hello, MsgType, NodeTypeInfo, Open, Opened, Region, RegisterGrad, Release,
                        Seeds, Split, StartEpoch, Welcome, _Msg, parse_device)
from ._schema import (CUSTOM_SPLIT, HANDLE_SIZE, HEADER_SIZE, MAGIC, MAX_DIMS, MAX_FDS, MEMORY_CUDA, MEMORY_SHM,
                      REGION_ALIGN, VERSION)

__all__ = [
    "MAGIC", "VERSION", "HEADER_SIZE", "MAX_DIMS", "HANDLE_SIZE", "REGION_ALIGN", "MAX_FDS",
    "MEMORY_SHM", "MEMORY_CUDA",
    "Code", "MsgType", "ProtocolError", "Limits", "DEFAULT_LIMITS",
    "Hello", "Welcome", "Dataset", "Split", "NodeTypeInfo", "EdgeTypeInfo", "Open", "Opened", "Region", "EventIPC",
    "StartEpoch", "BatchReady", "Release", "EpochEnd", "Error", "Goodbye", "Seeds", "CUSTOM_SPLIT",
    "RegisterGrad", "GradRegistered", "AllReduce", "AllReduceDone",
    "TEMPORAL_UNIFORM", "TEMPORAL_LAST", "TEMPORAL_DISJOINT", "TIME_ATTR_NODE", "TIME_ATTR_EDGE",
    "marshal", "unmarshal", "release_frames", "fds_for", "send_msg", "recv_msg", "parse_device",
    "Dir", "Phase", "State",
]

# Names the rest of the client and the tests use from here.
_ = (_code_name, _Reader, _Writer)

_HEADER = struct.Struct("<IHH")
_BATCH_READY = int(MsgType.BATCH_READY)


# -------------------------------------------------------------------- frames


def marshal(msg: _Msg) -> bytes:
    """Encode `msg` as one complete frame. Raises ProtocolError for a value that
    cannot be represented; limits are the receiver's business."""
    w = _Writer()
    try:
        msg._CODEC.encode(w, msg)
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
    if typ == _BATCH_READY and _fast_batch_ready is not None:
        m = _fast_batch_ready(payload, lim)
        if m is not None:
            return m  # else the interpreter decodes it, and says what is wrong
    cls = BY_TYPE.get(typ)
    if cls is None:
        raise ProtocolError(Code.BAD_MESSAGE, f"unknown message type {typ}")
    r = _Reader(payload, lim)
    try:
        m = cls._CODEC.decode(r)
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


def release_frames(held: Sequence[Tuple[int, int, int, bool]]) -> bytes:
    """The frames of Release(slot, epoch, index, deferred) for each entry of held,
    one after the other, as marshal would make them (the client sends a few
    together). ProtocolError(BAD_MESSAGE) for a value out of range."""
    if _fast_release_frames is not None:
        try:
            return _fast_release_frames(held)
        except struct.error:
            pass  # marshal names the value
    return b"".join(marshal(Release(slot=s, epoch=e, index=i, deferred=d)) for s, e, i, d in held)


def fds_for(msg: _Msg) -> int:
    """Descriptors a frame carrying `msg` must carry, by the table's rule for
    its type: 1 for Seeds and for a shm Opened or GradRegistered, else 0."""
    rule = msg._CODEC.entry.fds
    if rule == "one":
        return 1
    return 1 if rule == "shm" and msg.memory == MEMORY_SHM else 0


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


_RECV_FLAGS = getattr(socket, "MSG_CMSG_CLOEXEC", 0)


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def recv_with_fds(sock: socket.socket, n: int, max_fds: int) -> Tuple[bytes, List[int], bool]:
    """One recvmsg of at most n bytes with room for max_fds descriptors,
    received close-on-exec: the data, the SCM_RIGHTS descriptors, and
    whether the control data was truncated (more descriptors than room; the
    caller closes those it got and refuses the message)."""
    data, anc, flags, _ = sock.recvmsg(n, socket.CMSG_SPACE(max_fds * 4), _RECV_FLAGS)
    fds: List[int] = []
    for level, kind, cdata in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
            fds.extend(a)
    return data, fds, bool(flags & getattr(socket, "MSG_CTRUNC", 0))


class IdleTimeout(TimeoutError):
    """The socket's timeout passed before a frame's first byte: nothing was
    read, so the connection is as it was (a TimeoutError like any other to
    callers that do not tell them apart)."""


def recv_msg(sock: socket.socket, limits: Limits = DEFAULT_LIMITS, read_ahead: bool = False) -> Tuple[_Msg, List[int]]:
    """Read one frame; return (message, descriptors that came with it). The
    caller owns the descriptors. Raises EOFError on a clean close at a frame
    boundary and ProtocolError for anything the peer got wrong; on any error no
    received descriptor is left open.

    read_ahead: one recvmsg takes up to READ_AHEAD bytes, every frame the
    peer has sent so far, and later calls on this socket return the frames
    kept from it before they read again (a trainer taking a BatchReady a
    batch makes about one system call for many, not two for each). Without
    it, reads stop at the frame's end; frames a read ahead kept are still
    returned first."""
    buffered = _read_ahead.get(sock)
    if buffered is None:
        buffered = _ReadAhead()  # reading exactly, it keeps nothing past the frame: no need to keep it
        if read_ahead:
            _read_ahead[sock] = buffered
    return buffered.recv(sock, limits, read_ahead)


def frame_kept(sock: socket.socket) -> bool:
    """Whether a read ahead on sock kept a whole frame (or a header that
    recv_msg refuses): the next recv_msg returns without waiting."""
    buffered = _read_ahead.get(sock)
    if buffered is None or len(buffered.buf) < HEADER_SIZE:
        return False
    n = _HEADER.unpack_from(buffered.buf)[0]  # the bytes after the length field
    return len(buffered.buf) >= 4 + n


# Bytes a read-ahead recvmsg asks for: a few hundred BatchReady frames.
READ_AHEAD = 1 << 16


class _ReadAhead:
    """A socket's frames as recv_msg reads them: exactly (nothing kept past
    the frame), or ahead. What read-ahead receives took beyond the frames
    returned so far: the bytes, from stream offset `start` on, and the descriptors of
    each read with the stream offset just past that read's last byte. They
    belong to the frame that holds that byte: the kernel ends a read of a
    Unix stream socket with the message whose descriptors it delivers, and
    a peer sends a frame and its descriptors in one sendmsg."""

    __slots__ = ("buf", "start", "fds")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.start = 0
        self.fds: List[Tuple[int, List[int]]] = []

    def recv(self, sock: socket.socket, limits: Limits, read_ahead: bool) -> Tuple[_Msg, List[int]]:
        fds: List[int] = []
        try:
            self._fill(sock, HEADER_SIZE, read_ahead, True)
            typ, size = _parse_header(bytes(self.buf[:HEADER_SIZE]), limits)
            n = HEADER_SIZE + size
            self._fill(sock, n, read_ahead, False)
            end = self.start + n
            while self.fds and self.fds[0][0] <= end:
                fds.extend(self.fds.pop(0)[1])
            payload = bytes(self.buf[HEADER_SIZE:n])
            del self.buf[:n]
            self.start = end
            if len(fds) > MAX_FDS:
                raise ProtocolError(Code.BAD_FRAME, f"{len(fds)} descriptors, at most {MAX_FDS}")
            msg = _decode_payload(typ, payload, limits)
            if len(fds) != fds_for(msg):
                raise ProtocolError(Code.BAD_FRAME, f"{type(msg).__name__} came with {len(fds)} descriptors, want {fds_for(msg)}")
            return msg, fds
        except IdleTimeout:
            raise  # nothing was read: the stream is as it was
        except BaseException:
            # The stream is broken at this frame: close every descriptor
            # received on it, this frame's and those of frames not returned.
            _close_fds(fds)
            for _, got in self.fds:
                _close_fds(got)
            self.fds = []
            raise

    def _fill(self, sock: socket.socket, n: int, read_ahead: bool, at_start: bool) -> None:
        """Receive until at least n bytes are kept (read ahead: as many as
        READ_AHEAD allows; else never past the n-th)."""
        while len(self.buf) < n:
            want = n - len(self.buf)
            try:
                data, got, truncated = recv_with_fds(sock, max(want, READ_AHEAD) if read_ahead else want, MAX_FDS)
            except TimeoutError:
                if at_start and not self.buf:
                    raise IdleTimeout("timed out") from None
                raise
            if got:
                self.fds.append((self.start + len(self.buf) + len(data), got))
            if truncated:
                raise ProtocolError(Code.BAD_FRAME, f"control data truncated: more than {MAX_FDS} descriptors")
            if not data:
                if at_start and not self.buf and not got:
                    raise EOFError("connection closed")
                raise ProtocolError(Code.BAD_FRAME, "truncated frame")
            self.buf += data


# The read-ahead state of each socket read with read_ahead (it goes with its socket).
_read_ahead: "weakref.WeakKeyDictionary[socket.socket, _ReadAhead]" = weakref.WeakKeyDictionary()


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


if tuple(p.name.lower() for p in Phase) != _schema.PHASES:
    raise ImportError(f"gnnloader.protocol: Phase {[p.name for p in Phase]} differs from ipc's phases {_schema.PHASES}")
# (phase, direction, message type) -> next phase, from ipc's state machine
# (ipc/state.go, generated into _schema.py); Error and Goodbye are handled
# apart.
_TRANSITIONS = {(Phase[f.upper()], Dir[d.upper()], t): Phase[to.upper()] for f, d, t, to in _schema.TRANSITIONS}
_T = MsgType


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
