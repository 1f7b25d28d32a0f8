"""The exception every gnnloader client raises for the daemon's refusals and
for a lost connection, and how a daemon's last frames become one (standard
library only, so that modules without torch can raise it too)."""

from __future__ import annotations

import socket
from typing import Optional

from . import protocol as p

__all__ = ["LoaderError", "RequestError", "UntrustedDaemonError", "REQUEST_CODES"]


class LoaderError(RuntimeError):
    """An error reported by loaderd (code and message are the daemon's), or a
    broken connection to it."""

    def __init__(self, message: str, code: str = "error"):
        super().__init__(message)
        self.code = code


class UntrustedDaemonError(LoaderError):
    """The process listening at the socket runs as a uid this client does not
    trust (code "untrusted_daemon"); nothing was sent to it. ``pid`` and
    ``uid`` are the process's, as the kernel reports them (SO_PEERCRED)."""

    def __init__(self, message: str, path: str, pid: int, uid: int):
        super().__init__(message, code="untrusted_daemon")
        self.path, self.pid, self.uid = path, pid, uid


#: The daemon's error codes that refuse the request itself (its arguments or
#: the daemon's limits), not the connection: they raise RequestError.
REQUEST_CODES = ("bad_request", "limit", "not_found")


class RequestError(LoaderError, ValueError):
    """loaderd refused the request's arguments (code "bad_request", "limit"
    or "not_found": an unknown split, fanouts or a batch size over the
    daemon's limits, ...). It is a ValueError too, as PyG raises for bad
    arguments, and a LoaderError with the daemon's code and message."""


def _last_words(msg) -> Optional[LoaderError]:
    """The LoaderError a daemon's Error or Goodbye stands for; None for any
    other message."""
    if isinstance(msg, p.Error):
        code = p._code_name(msg.code)
        cls = RequestError if code in REQUEST_CODES else LoaderError
        return cls(f"loaderd: {msg.message}", code=code)
    if isinstance(msg, p.Goodbye):
        return LoaderError(f"loaderd said goodbye: {msg.reason}", code="goodbye")
    return None


# Frames _buffered_last_words reads at most: a closed daemon's unread frames
# are a few BatchReady (one per slot), an EpochEnd and its Goodbye or Error.
_MAX_BUFFERED = 4096


def _buffered_last_words(sock: socket.socket) -> Optional[LoaderError]:
    """Reads, without waiting, the frames still buffered on a socket whose
    peer has gone, and returns the LoaderError of the first Error or Goodbye
    among them (None if there is none). Descriptors that came with them are
    closed; the socket is left blocking with its timeout as before."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        for _ in range(_MAX_BUFFERED):
            try:
                msg, fds = p.recv_msg(sock)
            except (OSError, EOFError, p.ProtocolError):
                return None  # nothing more buffered (or garbage): no last words
            p._close_fds(fds)
            last = _last_words(msg)
            if last is not None:
                return last
        return None
    finally:
        try:
            sock.settimeout(timeout)
        except OSError:
            pass
