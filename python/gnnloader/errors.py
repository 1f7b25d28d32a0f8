"""The exception every gnnloader client raises for the daemon's refusals and
for a lost connection (standard library only, so that modules without torch
can raise it too)."""

from __future__ import annotations

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
