"""The connection under a Loader: the handshake, Open and the slot memory it
maps (shared memory or CUDA slots), frames sent and received, reconnecting
and shutting down. Loader (gnnloader.loader) derives from _Connection and
sets its state in Loader.__init__."""

from __future__ import annotations

import dataclasses
import mmap
import os
import socket
import threading
import time
import weakref
from typing import List, Optional, Sequence

from . import protocol as p
from . import trust
from ._hetero_args import resolve_open
from ._receiver import Receiver
from .errors import LoaderError, _buffered_last_words, _last_words
from .hetero import HeteroLayout, is_hetero

# Error codes after which a loader with reconnect > 0 tries again: the
# connection broke, could not be made, or the daemon is shutting down.
_RECONNECTABLE = ("closed", "connect", "goodbye", "shutting_down")

# Messages decoded ahead of the one taken, from frames already read
# (_Connection._take_kept_batches).
BATCHES_AHEAD = 8

# Seconds close() waits for another thread's send before it leaves the
# Goodbye out.
GOODBYE_WAIT = 1.0


class _Connection:
    """Loader's connection to loaderd (see Loader for the attributes it uses)."""

    def _connect(self, req: p.Open) -> None:
        """Connect, handshake and open the slot ring."""
        if self._default_dir is not None:
            trust.check_socket_dir(self._default_dir)  # again: it may have changed since
        hint = "" if self._default_dir is None else \
            f" (the default socket: start loaderd, or pass a socket path or set ${trust.SOCKET_ENV})"
        self._sock = trust.connect(self.socket_path, self._timeout, self._trusted, hint=hint)
        self._daemon_pid = trust.peer_cred(self._sock)[0]
        self._send(p.Hello(pid=os.getpid(), name=f"gnnloader rank {req.rank}"))
        welcome = self._recv()
        if not isinstance(welcome, p.Welcome):
            raise LoaderError(f"daemon answered Hello with {type(welcome).__name__}")
        self.dataset = welcome.dataset
        self.daemon_version = welcome.daemon_version
        self.opened = self._open(resolve_open(req, self.dataset, self._fanouts))
        if self._receive_thread:
            self._rx = Receiver(_receiver_recv(self._sock, _weak_build(self)), self.opened.slots + 2)

    def _reconnect(self, epoch: int, next_index: int) -> None:
        """Re-establish the connection and resume `epoch` at `next_index`."""
        self._drop_connection()
        deadline = time.monotonic() + self._reconnect_for
        backoff = 0.02
        req = dataclasses.replace(self._request, start_epoch=epoch, start_batch=next_index)
        while True:
            try:
                self._connect(req)
                self.reconnects += 1
                return
            except LoaderError as e:
                self._drop_connection()
                if e.code not in _RECONNECTABLE or time.monotonic() + backoff > deadline:
                    raise LoaderError(f"lost loaderd and could not reconnect within {self._reconnect_for:g} s: {e}",
                                      code=e.code) from e
                time.sleep(backoff)
                backoff = min(2 * backoff, 1.0)

    def _close_cuda(self):
        """Close the CUDA slots' handles and events, if any (best effort:
        the connection they belong to is gone or going)."""
        if self._cuda is not None:
            pid = getattr(self, "_daemon_pid", 0)
            try:
                self._cuda.close(daemon_gone=lambda: _process_gone(pid))
            except Exception:
                pass
            self._cuda = None

    def _drop_connection(self) -> None:
        """Forget the connection and its slots. The shared-memory mapping is
        dropped, not closed: torch.frombuffer keeps the mmap object alive but
        not a buffer export, so mmap.close() would unmap memory that batches
        still view (a later read of one crashed the process). Dropped, it
        goes with the last tensor that views it."""
        self._held.clear()
        self._clear_ahead()  # frames of a connection that is gone
        self._releases = []  # for the slots of a connection that is gone
        self._stop_receiver()
        self._flat = {}
        self._built = {}
        if self._sock is not None:
            try:  # wakes another thread's send blocked on it (close alone would not)
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        self._close_cuda()
        self._mem = None

    # -- connection ---------------------------------------------------------

    def _send(self, msg, fds: Sequence[int] = ()) -> None:
        self._send_releases()  # before anything after them: the daemon reads in order
        self._send_now(msg, fds)

    def _send_now(self, msg, fds: Sequence[int] = ()) -> None:
        try:
            with self._send_lock:  # one frame's bytes never split by another thread's
                p.send_msg(self._sock, msg, fds)
        except OSError as e:
            raise self._lost(e) from e

    def _hold_release(self, slot: int, epoch: int, index: int, stream: Optional[int] = None) -> None:
        """Release the slot that holds batch `index` of `epoch`, used on CUDA
        stream `stream` (None: no CUDA): its frame is sent with the next few
        (one system call for several on the thread that issues the training
        steps), at most _release_hold of them held, and all of them before
        anything else is sent or a receive would wait (so a held release
        never keeps the daemon from the slot it needs). The frames are made
        when they are sent, together: made one a batch, each costs that
        thread several times more, in caches the training step left cold
        (session 20).

        On CUDA only the last release of those sent together, and the last
        before the stream changes, has its slot's released event recorded;
        the others go out deferred (ipc.Release), covered by that event,
        recorded on the same stream after their work: one driver call for
        several batches, not one each."""
        # Another thread's release (manual mode) goes at once: the iterating
        # thread may be waiting in a read for that very slot.
        if self._release_hold > 1 and threading.get_ident() == self._iter_thread:
            with self._send_lock:
                held = self._releases
                if held and stream is not None and not held[-1][4] and held[-1][3] != stream:
                    self._record(held[-1])  # the stream changed: the one before covers its run
                held.append([slot, epoch, index, stream, stream is None])
                if len(held) < self._release_hold:
                    return
            self._send_releases()
        else:
            if stream is not None:
                self._cuda.record_released(slot, stream)
            self._send_now(p.Release(slot=slot, epoch=epoch, index=index))

    def _record(self, entry: list) -> None:
        """Records the released event of a held release (on the stream it
        was used on) and marks it so."""
        self._cuda.record_released(entry[0], entry[3])
        entry[4] = True

    def _send_releases(self) -> None:
        """Sends the held releases, the last one's released event recorded
        first where it was not (it covers those deferred before it). Under
        the send lock, as every send: a release held while another thread
        sends is neither lost nor sent twice, and no frame is split by
        another's bytes (a partial write when the socket's buffer is
        full)."""
        if not self._releases:
            return
        try:
            with self._send_lock:
                held = self._releases
                if held and not held[-1][4]:
                    self._record(held[-1])  # first: where it fails, the releases stay held
                self._releases = []
                if held:
                    self._sock.sendall(p.release_frames([(s, e, i, not r) for s, e, i, _, r in held]))
        except OSError as e:
            raise self._lost(e) from e

    def _recv(self):
        if self._ahead:
            return self._take_ahead()
        # Held releases go out before a receive that may wait (the daemon
        # may need their slots for the message waited for), not before one
        # that is already here.
        rx = self._rx  # read once: a close on another thread sets it to None
        if self._releases and not (rx.ready() if rx is not None else p.frame_kept(self._sock)):
            self._send_releases()
        if rx is not None:
            msg, batch = rx.get(self._timeout)
            if batch is not None:  # built by the receiver: _view takes it
                self._built[msg.slot] = (msg.epoch, msg.index, batch)
            return msg
        msg, fds = _recv_from(self._sock)
        if isinstance(msg, p.BatchReady) and self._batches_ahead > 0:
            # Queued first: an interrupt (Ctrl-C) while the others are
            # built leaves it to the next _recv, not lost.
            self._ahead.append((msg, fds))
            self._take_kept_batches()
            return self._take_ahead()
        if fds:
            self._fds = fds
        return msg

    def _take_kept_batches(self) -> None:
        """Decode the frames after a BatchReady that a read ahead already
        holds (no wait), up to _batches_ahead behind the one queued first,
        and build their batches now. Each batch's work on the thread that
        issues the training steps runs in caches that the step before left
        cold (session 20: 2.6-5x its time in a loop); a few batches' work
        together pays that once. Messages are taken in order (_take_ahead);
        an error is raised where its frame comes; a batch that fails to
        build is built again, and fails, when it is taken."""
        build = self._cuda is not None or self.device.type == "cpu"  # else its copy belongs to the consumer's stream
        while len(self._ahead) <= self._batches_ahead and p.frame_kept(self._sock):
            try:
                msg, fds = _recv_from(self._sock)
            except Exception as e:  # the connection's last words, or a bad frame
                self._ahead.append(e)
                return
            self._ahead.append((msg, fds))
            if not isinstance(msg, p.BatchReady):
                return
            if build:
                try:
                    self._built[msg.slot] = (msg.epoch, msg.index, self._build(msg))
                except Exception:
                    pass

    def _clear_ahead(self) -> None:
        for item in self._ahead:
            if not isinstance(item, Exception):
                p._close_fds(item[1])
        self._ahead.clear()

    def _take_ahead(self):
        item = self._ahead.popleft()
        if isinstance(item, Exception):
            raise item
        msg, fds = item
        if fds:
            self._fds = fds
        return msg

    def _lost(self, cause: OSError) -> LoaderError:
        """The error for a send that failed with `cause` (_lost_on). With a
        Receiver, that thread reads the frames the daemon left: the send
        takes the error the thread's loop ended with. The daemon's last
        words already decoded ahead (_take_kept_batches) are the error too."""
        if not isinstance(cause, (BrokenPipeError, ConnectionResetError)):
            return _lost_on(self._sock, cause)
        for item in self._ahead:
            if isinstance(item, LoaderError) and item.code != "closed":
                return item
        if self._rx is None:
            return _lost_on(self._sock, cause)
        last = self._rx.final_error(0.5)
        if isinstance(last, LoaderError) and last.code != "closed":
            return last
        return LoaderError(f"connection to loaderd lost: {cause}", code="closed")

    def _stop_receiver(self) -> None:
        if self._rx is not None:
            self._rx.stop(self._sock)
            self._rx = None

    def _open(self, req: p.Open) -> p.Opened:
        self._fds: List[int] = []
        self._send(req)
        opened = self._recv()
        if not isinstance(opened, p.Opened):
            raise LoaderError(f"daemon answered Open with {type(opened).__name__}")
        # Release frames held to be sent together (_hold_release): none below
        # 32 slots, where the daemon may need every one back at once; an
        # eighth of the slots above (one system call and, on CUDA, one event
        # record for that many batches).
        self._release_hold = opened.slots // 8 if opened.slots >= 32 else 0
        self._batches_ahead = BATCHES_AHEAD
        self._regions = {r.name: r for r in opened.regions}
        self._hetero = HeteroLayout(self.dataset, req.input_type, len(req.fanouts), self._hetero_cls) \
            if is_hetero(self.dataset) else None
        if opened.memory == p.MEMORY_CUDA:
            from .cuda import CudaRuntimeError, CudaSlots
            try:
                self._cuda = CudaSlots(opened, self.device)
            except CudaRuntimeError as e:
                raise LoaderError(f"CUDA slots on cuda:{opened.cuda_device}: {e}", code="cuda") from e
            return opened
        if opened.memory != p.MEMORY_SHM:
            raise LoaderError(f"slot memory {opened.memory!r} is not supported by this client")
        fd = self._fds[0]
        try:
            self._mem = mmap.mmap(fd, opened.slots * opened.slot_bytes, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._regions = {r.name: r for r in opened.regions}
        return opened

    # -- lifetime -----------------------------------------------------------

    def _shutdown(self, goodbye: bool) -> None:
        self._closed = True
        if self._sock is None:
            return
        # The Goodbye is a courtesy: when another thread's send holds the
        # lock (a daemon that stopped reading, no timeout), close goes on
        # without it, and closing the socket ends that send.
        if goodbye and self._send_lock.acquire(timeout=GOODBYE_WAIT):
            try:
                p.send_msg(self._sock, p.Goodbye(reason="client closed"))
            except OSError:
                pass
            finally:
                self._send_lock.release()
        self._drop_connection()


def _recv_from(sock, idle_ok: bool = False):
    """One message from sock and the descriptors that came with it; the
    daemon's Goodbye or Error raised as its LoaderError, a malformed frame
    as LoaderError "bad_message", a failed receive as _lost_on's. idle_ok:
    an IdleTimeout (no frame began) is raised as it is, for the Receiver,
    which waits on."""
    try:
        msg, fds = p.recv_msg(sock, read_ahead=True)
    except EOFError:
        raise LoaderError("loaderd closed the connection", code="closed") from None
    except p.ProtocolError as e:
        raise LoaderError(f"loaderd sent a bad frame: {e}", code="bad_message") from e
    except OSError as e:
        if idle_ok and isinstance(e, p.IdleTimeout):
            raise
        raise _lost_on(sock, e) from e
    last = _last_words(msg)
    if last is not None:
        raise last
    return msg, fds


def _receiver_recv(sock, build):
    """What a Receiver's thread calls: one message from sock and, for a
    BatchReady, the batch build(msg) made of it (None when it made none).
    It closes over the socket and `build` (not the loader, which stays
    collectable: _weak_build), and closes any descriptors a message
    brings: none is due once the slots are open."""
    def recv():
        msg, fds = _recv_from(sock, idle_ok=True)
        p._close_fds(fds)
        return msg, build(msg) if isinstance(msg, p.BatchReady) else None
    return recv


def _weak_build(loader):
    """Loader._build for the receiver thread, through a weak reference (a
    dropped loader is still collected). None where the consumer must build
    the batch itself: the loader is gone or on another connection, its
    batches are copied to another device (that copy belongs on the
    consumer's stream), or building failed (the consumer's own attempt
    raises the error where it is due)."""
    ref = weakref.ref(loader)
    sock = loader._sock  # this connection's: a receiver outliving it builds nothing for the next

    def build(msg):
        ld = ref()
        if ld is None or ld._sock is not sock or (ld._cuda is None and ld.device.type != "cpu"):
            return None
        try:
            return ld._build(msg)
        except Exception:
            return None
    return build


def _process_gone(pid: int) -> bool:
    """Whether process `pid` has exited (no such process, or a zombie: its
    CUDA context is gone either way). False when pid is unknown (0: a peer
    in another PID namespace) or cannot be read."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        state, flags = fields[0], int(fields[6])
    except FileNotFoundError:
        return True
    except (OSError, IndexError, ValueError):
        return False
    # PF_EXITING (0x4): in do_exit, where its GPU context's teardown may wait
    # for the streams that use its memory, ours included.
    return state in ("Z", "X") or bool(flags & 0x4)


def _lost_on(sock, cause: OSError) -> LoaderError:
    """The error for a send or receive on sock that failed with `cause`. When
    the daemon closed the connection (EPIPE, ECONNRESET) its last frames may
    still wait, unread, in the socket's receive buffer: a daemon that stops
    sends Goodbye and closes, and a Release written meanwhile meets the
    closed socket before the Goodbye is read. The daemon's Goodbye or Error
    found there is the error; otherwise the broken connection is."""
    if isinstance(cause, (BrokenPipeError, ConnectionResetError)) and sock is not None:
        last = _buffered_last_words(sock)
        if last is not None:
            return last
    return LoaderError(f"connection to loaderd lost: {cause}", code="closed")
