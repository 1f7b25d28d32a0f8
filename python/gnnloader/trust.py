"""Where a client finds loaderd, and which daemon it trusts there
(docs/protocol.md, "Who the client trusts" and "Where the socket is").

:func:`default_socket_path` is the one rule for a socket path nobody gave,
the same as the daemon's (Go ``ipc.DefaultSocketPath``); :func:`socket_path`
applies it and checks the directory it chose.

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
import stat
import struct
from typing import Iterable, List, Mapping, Optional, Tuple, Union

from .errors import LoaderError, UntrustedDaemonError

__all__ = ["SOCKET_ENV", "DAEMON_UID_ENV", "default_socket_path", "default_socket_dir", "check_socket_dir",
           "socket_path", "peer_cred", "trusted_uids", "check_daemon", "connect"]

#: Environment variable naming loaderd's socket (Go: ipc.SocketEnv).
SOCKET_ENV = "GNNLOADER_SOCKET"

#: The socket's file name in the default directories (Go: ipc.SocketName).
SOCKET_NAME = "loaderd.sock"

#: Environment variable listing, comma-separated, the uids whose daemon a
#: client trusts besides its own and root's (Go: ipc.DaemonUIDEnv).
DAEMON_UID_ENV = "GNNLOADER_DAEMON_UID"

def default_socket_path(environ: Optional[Mapping[str, str]] = None, uid: Optional[int] = None) -> str:
    """The socket loaderd listens on, and clients connect to, when no path is
    given (default: this process's environment and uid). The first that
    applies:

    1. ``$GNNLOADER_SOCKET``, if set and not empty;
    2. ``$XDG_RUNTIME_DIR/gnnloader/loaderd.sock``, if XDG_RUNTIME_DIR is set;
    3. ``/run/gnnloader/loaderd.sock`` for root;
    4. ``/tmp/gnnloader-UID/loaderd.sock`` for any other uid, in a directory
       the daemon creates 0700.

    The twin of Go's ipc.DefaultSocketPath (TestDefaultSocketPathTwin)."""
    env = os.environ if environ is None else environ
    uid = os.getuid() if uid is None else uid
    if env.get(SOCKET_ENV):
        return env[SOCKET_ENV]
    if env.get("XDG_RUNTIME_DIR"):
        p = os.path.normpath(os.path.join(env["XDG_RUNTIME_DIR"], "gnnloader", SOCKET_NAME))
        return "/" + p.lstrip("/") if p.startswith("//") else p  # as Go's filepath.Join: one leading slash
    if uid == 0:
        return "/run/gnnloader/" + SOCKET_NAME
    return f"/tmp/gnnloader-{uid}/{SOCKET_NAME}"


def default_socket_dir() -> Optional[str]:
    """The directory rules 2-4 of default_socket_path chose, or None when
    $GNNLOADER_SOCKET gives the path (the user's choice, used as it is)."""
    if os.environ.get(SOCKET_ENV):
        return None
    return os.path.dirname(default_socket_path())


def check_socket_dir(path: str) -> None:
    """Raise LoaderError (code "unsafe_socket_dir") unless the directory
    `path`, chosen by default_socket_path, is safe to find a socket in: a
    real directory (not a symbolic link), owned by this uid or root, writable
    by neither its group nor others. A missing directory passes (connecting
    then fails: no daemon there). The twin of Go's ipc.CheckSocketDir."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return

    def unsafe(why: str) -> LoaderError:
        return LoaderError(f"unsafe socket directory {path}: {why}; remove it, or give a socket path explicitly "
                           f"(socket_path=..., ${SOCKET_ENV})", code="unsafe_socket_dir")

    if not stat.S_ISDIR(st.st_mode):
        raise unsafe("it is not a directory")
    if st.st_uid not in (os.getuid(), 0):
        raise unsafe(f"it belongs to uid {st.st_uid}, not to uid {os.getuid()} or root")
    if st.st_mode & 0o022:
        raise unsafe(f"its group or others may write to it (mode {stat.S_IMODE(st.st_mode) & 0o777:#o})")


def socket_path(path: Optional[Union[str, "os.PathLike[str]"]] = None) -> str:
    """`path` if given, else default_socket_path(), its directory checked
    (check_socket_dir) when the rule rather than $GNNLOADER_SOCKET chose it."""
    if path:
        return os.fspath(path)
    d = default_socket_dir()
    if d is not None:
        check_socket_dir(d)
    return default_socket_path()


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
            what: str = "loaderd", hint: str = "") -> socket.socket:
    """A Unix stream socket connected to `path` whose peer passed
    check_daemon against `trusted` (default: trusted_uids()). Connection
    failures are LoaderError with code "connect"; `what` names the socket in
    messages, `hint` ends that of a failed connect."""
    if trusted is None:
        trusted = trusted_uids()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        try:
            s.connect(path)
        except OSError as e:
            raise LoaderError(f"cannot connect to {what} at {path}: {e.strerror or e}{hint}", code="connect") from e
        check_daemon(s, path, trusted)
    except BaseException:
        s.close()
        raise
    return s
