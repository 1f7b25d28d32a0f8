"""Which daemon a client trusts (docs/protocol.md, "Who the client trusts").

Every client (``Loader`` and the loaders built on it, ``connect``, the
all-reduce ``GradClient``, ``open_table``) connects through :func:`connect`:
right after ``connect(2)``, before it sends a byte, it reads the credentials
of the process listening at the socket (``SO_PEERCRED``, recorded by the
kernel when that process started listening) and goes on only if that
process runs as this trainer's own uid, as root (0), as ``daemon_uid`` or as
a uid listed in ``$GNNLOADER_DAEMON_UID`` (comma-separated). Otherwise it
raises :class:`~gnnloader.errors.UntrustedDaemonError`: a socket squatted by
another user never sees a Hello, an Open or a seed list.

Standard library only. The Go twin is ``ipc.Dial`` / ``ipc.CheckDaemon``.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Iterable, List, Optional, Tuple, Union

from .errors import LoaderError, UntrustedDaemonError

__all__ = ["DAEMON_UID_ENV", "peer_cred", "trusted_uids", "check_daemon", "connect"]

#: Environment variable listing, comma-separated, the uids whose daemon a
#: client trusts besides its own and root's (Go: ipc.DaemonUIDEnv).
DAEMON_UID_ENV = "GNNLOADER_DAEMON_UID"

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_cred(sock: socket.socket) -> Tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix
    socket (SO_PEERCRED). Tests replace this function."""
    return _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))


def trusted_uids(daemon_uid: Union[None, int, Iterable[int]] = None) -> List[int]:
    """The uids whose daemon a client accepts: its own, root's, `daemon_uid`
    (one uid or several) and those in $GNNLOADER_DAEMON_UID. A malformed
    variable is a ValueError, never ignored."""
    uids = [os.getuid(), 0]
    if daemon_uid is not None:
        uids += [int(daemon_uid)] if isinstance(daemon_uid, int) else [int(u) for u in daemon_uid]
    env = os.environ.get(DAEMON_UID_ENV, "")
    if env.strip():
        for f in env.split(","):
            f = f.strip()
            if not (f.isascii() and f.isdigit()) or int(f) >= 2 ** 32 - 1:
                raise ValueError(f"${DAEMON_UID_ENV}={env!r}: {f!r} is not a uid (want comma-separated decimal uids)")
            uids.append(int(f))
    return uids


def check_daemon(sock: socket.socket, path: str, trusted: List[int]) -> Tuple[int, int, int]:
    """Check the process behind a freshly connected `sock` and return its
    (pid, uid, gid); raise UntrustedDaemonError if its uid is not in
    `trusted`. `path` is only for the message."""
    try:
        pid, uid, gid = peer_cred(sock)
    except OSError as e:
        raise LoaderError(f"cannot read the credentials of the daemon at {path}: {e}", code="untrusted_daemon") from e
    if uid not in trusted:
        raise UntrustedDaemonError(
            f"refusing the daemon at {path}: the process listening there (pid {pid}) runs as uid {uid}, and this "
            f"client trusts only uids {sorted(set(trusted))} (its own, root, daemon_uid and ${DAEMON_UID_ENV}); "
            f"nothing was sent. If it is the loaderd you mean, pass daemon_uid={uid} or set {DAEMON_UID_ENV}={uid}",
            path=path, pid=pid, uid=uid)
    return pid, uid, gid


def connect(path: str, timeout: Optional[float] = None, trusted: Optional[List[int]] = None,
            what: str = "loaderd") -> socket.socket:
    """A Unix stream socket connected to `path` whose peer passed
    check_daemon against `trusted` (default: trusted_uids()). Connection
    failures are LoaderError with code "connect"; `what` names the socket in
    messages."""
    if trusted is None:
        trusted = trusted_uids()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        try:
            s.connect(path)
        except OSError as e:
            raise LoaderError(f"cannot connect to {what} at {path}: {e.strerror or e}", code="connect") from e
        check_daemon(s, path, trusted)
    except BaseException:
        s.close()
        raise
    return s
