"""A connection's frames received on a thread of its own (Loader's
receive_thread=True).

The thread that issues a trainer's steps bounds a fast epoch (session 16,
docs/benchmarks.md: a GraphSAGE step's kernels take 2.9 ms, issuing it 3.1
to 5 ms). Receiving and decoding each BatchReady on that thread adds to
every step. A receiver thread does it instead, mostly while the training
thread waits for autograd's backward pass with the GIL released; the
training thread then takes the decoded messages from a queue, each
BatchReady with its batch already built (its tensors, views of the slot,
and its Batch or PyG Data: _connection._receiver_recv). Sends (Release) and
the CUDA stream waits stay on the thread that consumes the batches: they
belong on that thread's stream, in its order.
"""

from __future__ import annotations

import collections
import socket
import threading
from typing import Callable, Optional

from .errors import LoaderError
from .protocol import IdleTimeout


class Receiver:
    """Calls `recv` (which returns one message or raises) in a loop on a
    daemon thread until it raises, queueing each message; the exception
    that ends the loop is raised by `get` once the messages before it are
    taken. `recv` may raise IdleTimeout (protocol) when no frame began
    within the socket's timeout: the loop then keeps waiting, since only
    the consumer's `get` decides how long is too long.

    At most `limit` messages wait in the queue: with that many, the thread
    stops reading until one is taken, so the socket's buffer pushes back on
    the daemon as it does without the thread, and a daemon that sends
    without end cannot grow the trainer's memory. (loaderd has at most one
    BatchReady a slot unreleased, plus EpochEnd and its last words.)"""

    def __init__(self, recv: Callable[[], object], limit: int):
        if limit < 1:
            raise ValueError(f"a receiver's queue of {limit} messages")
        self._recv = recv
        self._limit = limit
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="gnnloader-receiver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: len(self._items) < self._limit or self._stopping)
                if self._stopping:
                    return
            try:
                msg = self._recv()
            except IdleTimeout:
                continue
            except BaseException as e:  # the connection's end, whatever it was
                with self._cond:
                    self.error = e
                    self._cond.notify_all()
                return
            with self._cond:
                self._items.append(msg)
                self._cond.notify_all()

    def get(self, timeout: Optional[float]):
        """The next message; the loop's ending exception once none is left;
        a LoaderError (code "closed", as a socket's timeout gives) when
        nothing came within `timeout` seconds (None: wait as long as it
        takes)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self.error is not None, timeout):
                raise LoaderError("connection to loaderd lost: timed out", code="closed")
            if self._items:
                if len(self._items) >= self._limit:
                    self._cond.notify_all()  # room for the thread again (it waits only when full)
                return self._items.popleft()
            raise self.error

    def ready(self) -> bool:
        """Whether get would return at once (a message or the loop's end)."""
        return bool(self._items) or self.error is not None

    def final_error(self, wait: float) -> Optional[BaseException]:
        """The exception that ended the loop, waiting up to `wait` seconds
        for it (None if it is still running)."""
        self._thread.join(wait)
        with self._cond:
            return self.error

    def stop(self, sock: Optional[socket.socket], wait: float = 2.0) -> None:
        """Wake the thread by shutting the socket down (closing it would not
        interrupt a blocked recvmsg), or out of its wait for room in the
        queue, and wait up to `wait` seconds for it."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not threading.current_thread():
            self._thread.join(wait)
