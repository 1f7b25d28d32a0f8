"""Gradients summed by loaderd's ring all-reduce (docs/protocol.md,
"Gradient exchange"; docs/ring.md).

A trainer opens a gradient connection once::

    import gnnloader.allreduce as ar
    ar.init(None, job="sage", rank=rank, world_size=world,     # None: the default socket
            nbytes=100 << 20, device=f"cuda:{rank}")   # or device="cpu"
    ar.allreduce(tensor)              # in place, sum; op="avg" averages
    ddp.register_comm_hook(None, ar.ddp_comm_hook)   # DDP's buckets through loaderd

loaderd allocates each rank's buffer (shared memory for "cpu", GPU memory
shared by a CUDA IPC handle for "cuda:N": the trainer never exports its own
memory). ``allreduce`` copies the tensor into the buffer, asks for the
all-reduce and copies the result back. On CUDA everything stays on the GPU and
on the current stream: the copy in is followed by an IPC event loaderd waits
on, and the copy out waits on loaderd's completion event; the call returns
once loaderd has enqueued the ring (the socket round trip), not when the GPU
has finished. Every rank gets the same bytes. float32, bfloat16 and float16.

The four messages are ``gnnloader.protocol``'s (from ipc's message table);
``encode`` and ``decode`` are its ``marshal`` and ``unmarshal``.
"""

from __future__ import annotations

import mmap
import os
import socket
import threading
from typing import Optional

from . import protocol as P
from . import trust

__all__ = [
    "TYPE_REGISTER_GRAD", "TYPE_GRAD_REGISTERED", "TYPE_ALL_REDUCE", "TYPE_ALL_REDUCE_DONE",
    "RegisterGrad", "GradRegistered", "AllReduce", "AllReduceDone", "encode", "decode",
    "GradClient", "init", "allreduce", "ddp_comm_hook", "AllReduceError",
]

TYPE_REGISTER_GRAD = P.MsgType.REGISTER_GRAD
TYPE_GRAD_REGISTERED = P.MsgType.GRAD_REGISTERED
TYPE_ALL_REDUCE = P.MsgType.ALL_REDUCE
TYPE_ALL_REDUCE_DONE = P.MsgType.ALL_REDUCE_DONE

_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


class AllReduceError(RuntimeError):
    """The daemon refused or broke the gradient exchange (its Error message)."""


RegisterGrad = P.RegisterGrad
GradRegistered = P.GradRegistered
AllReduce = P.AllReduce
AllReduceDone = P.AllReduceDone


def encode(m) -> bytes:
    """One complete frame for m (u32 length | u16 type | u16 flags | payload)."""
    return P.marshal(m)


def decode(frame: bytes, limits: P.Limits = P.DEFAULT_LIMITS):
    """The message of one complete frame: a gradient message, or any
    ``gnnloader.protocol`` message (Welcome, Error, Goodbye)."""
    return P.unmarshal(frame, limits)


class GradClient:
    """One rank's gradient connection to loaderd."""

    def __init__(self, socket_path: Optional[str], job: str, rank: int, world_size: int, nbytes: int,
                 device: str = "cpu", timeout: Optional[float] = None, name: str = "",
                 daemon_uid: Optional[int] = None) -> None:
        """Connects (`socket_path` None: the default socket, as for
        gnnloader.Loader), checks who listens at the socket before sending
        anything (gnnloader.trust: this process's uid, root, `daemon_uid` or
        $GNNLOADER_DAEMON_UID, else UntrustedDaemonError), and registers."""
        self.device = device
        self.rank, self.world_size = rank, world_size
        # One allreduce at a time, and close waits for it. Re-entrant: a
        # signal handler that closes runs on the thread it interrupted,
        # maybe inside an allreduce (_owner says so).
        self._lock = threading.RLock()
        self._owner: Optional[int] = None  # the thread inside an allreduce
        self._closed = self._released = False
        self._seq = 0
        self.sock = trust.connect(trust.socket_path(socket_path), timeout, trust.trusted_uids(daemon_uid))
        try:
            self._register(job, rank, world_size, nbytes, device, name)
        except BaseException:
            self.sock.close()
            raise

    def _register(self, job: str, rank: int, world_size: int, nbytes: int, device: str, name: str) -> None:
        P.send_msg(self.sock, P.Hello(version=P.VERSION, pid=os.getpid(), name=name or f"allreduce rank {rank}"))
        m, fds = P.recv_msg(self.sock)
        for fd in fds:
            os.close(fd)
        if not isinstance(m, P.Welcome):
            raise AllReduceError(f"expected Welcome, got {m}")
        self.sock.sendall(encode(RegisterGrad(job, rank, world_size, device, nbytes)))
        reg, fds = self._recv()
        if not isinstance(reg, GradRegistered):
            for fd in fds:
                os.close(fd)
            raise AllReduceError(f"expected GradRegistered, got {reg}")
        self.registered = reg
        self.links = list(reg.links)
        self.nbytes = reg.bytes
        if reg.memory == P.MEMORY_SHM:
            if len(fds) != 1:
                raise AllReduceError(f"GradRegistered came with {len(fds)} fds")
            try:
                self._mem = mmap.mmap(fds[0], reg.bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fds[0])
            self._cuda = None
        else:
            import torch

            from .cuda import _CudaArray, find_runtime  # the runtime calls the CUDA slots use

            for fd in fds:
                os.close(fd)
            self._rt = find_runtime()
            dev = torch.device("cuda", reg.cuda_device)
            with torch.cuda.device(dev):
                self._ptr = self._rt.open_mem(bytes(reg.mem_handle))
                self._ready = self._rt.open_event(bytes(reg.ready))
                self._done = self._rt.open_event(bytes(reg.done))
                self._cuda = torch.as_tensor(_CudaArray(self._ptr, (reg.bytes,), "|u1"), device=dev)
            self._mem = None

    def _recv(self):
        # The client's frame reader: limits before allocating, close-on-exec
        # descriptors, none left open on an error, the count the message
        # carries checked.
        try:
            m, fds = P.recv_msg(self.sock)
        except EOFError:
            raise EOFError("loaderd closed the gradient connection") from None
        if isinstance(m, P.Error):
            for fd in fds:
                os.close(fd)
            raise AllReduceError(f"loaderd: {m.message} ({m.code})")
        return m, fds

    def allreduce(self, tensor, op: str = "sum"):
        """All-reduce ``tensor`` in place across the job's ranks (sum or avg)
        and return it. It must fit the buffer (``nbytes``)."""
        import torch

        dtype = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(tensor.dtype)
        if dtype is None:
            raise TypeError(f"allreduce: dtype {tensor.dtype} (want float32, bfloat16 or float16)")
        n = tensor.numel()
        nbytes = n * tensor.element_size()
        if nbytes > self.nbytes:
            raise ValueError(f"allreduce: {nbytes} bytes, the buffer has {self.nbytes}")
        with self._lock:
            if self._closed:
                raise AllReduceError("allreduce: the gradient connection is closed")
            self._owner = threading.get_ident()
            try:
                return self._allreduce(tensor, op, dtype, n, nbytes)
            finally:
                self._owner = None
                if self._closed:
                    self._release()  # closed by a signal handler on this thread, mid-allreduce

    def _allreduce(self, tensor, op: str, dtype: str, n: int, nbytes: int):
        """allreduce's round, self._lock held."""
        import torch

        flat = tensor.reshape(-1) if tensor.is_contiguous() else tensor.contiguous().reshape(-1)
        if self._cuda is not None:
            buf = self._cuda[:nbytes].view(tensor.dtype)
            stream = torch.cuda.current_stream(self._cuda.device)
            buf.copy_(flat)
            with torch.cuda.device(self._cuda.device):
                self._rt.record(self._ready, stream.cuda_stream)
        else:
            buf = torch.frombuffer(self._mem, dtype=tensor.dtype, count=n)
            buf.copy_(flat.detach().cpu())
        seq = self._seq
        try:
            self.sock.sendall(encode(AllReduce(seq, n, dtype, op)))
        except (BrokenPipeError, ConnectionResetError) as e:
            # The daemon broke the job's ring between rounds (a rank
            # left or did not come in time), told this rank why and
            # closed: that Error is still to be read.
            try:
                self._recv()
            except AllReduceError:
                raise
            except (EOFError, OSError):
                pass
            raise AllReduceError(f"loaderd closed the gradient connection: {e}") from None
        m, fds = self._recv()
        for fd in fds:
            os.close(fd)
        if not isinstance(m, AllReduceDone) or m.seq != seq:
            raise AllReduceError(f"expected AllReduceDone({seq}), got {m}")
        self._seq += 1
        if self._cuda is not None:
            with torch.cuda.device(self._cuda.device):
                self._rt.wait(stream.cuda_stream, self._done)
        if flat.data_ptr() == tensor.data_ptr() and tensor.is_contiguous():
            flat.copy_(buf)
        else:
            tensor.copy_(buf.view(tensor.shape))
        return tensor

    def close(self) -> None:
        """Say goodbye and release the buffer. From another thread while an
        allreduce waits on the daemon, the connection is shut first (that
        allreduce ends with an error) and the buffer is released once it has
        left it; a later allreduce raises AllReduceError."""
        if not self._lock.acquire(blocking=False):
            # Another thread's allreduce is in flight: end its wait, then
            # wait for it.
            self._shutdown()
            self._lock.acquire()
        try:
            if self._closed:
                return
            self._closed = True
            if self._owner == threading.get_ident():
                # A signal handler inside this thread's allreduce: its wait
                # ends with an error, and it releases the buffer as it leaves.
                self._shutdown()
                return
            self._release()
        finally:
            self._lock.release()

    def _shutdown(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _release(self) -> None:
        """Goodbye, the socket, the buffer, once (self._lock held). Close
        the loaders of the device first where loaderd may have died: this
        waits for every stream of the device."""
        if self._released:
            return
        self._released = True
        try:
            P.send_msg(self.sock, P.Goodbye(reason="done"))
        except OSError:
            pass
        self.sock.close()
        if self._cuda is not None:
            import torch

            with torch.cuda.device(self._cuda.device):
                # Every stream of the device: an allreduce's copies may have
                # been queued on another thread's stream.
                torch.cuda.synchronize(self._cuda.device)
                self._rt.destroy_event(self._ready)
                self._rt.destroy_event(self._done)
                self._cuda = None
                self._rt.close_mem(self._ptr)
        if self._mem is not None:
            try:
                self._mem.close()
            except BufferError:
                pass  # a tensor still views it; the mapping goes with it


_default: Optional[GradClient] = None


def init(socket_path: Optional[str], job: str, rank: int, world_size: int, nbytes: int, device: str = "cpu",
         timeout: Optional[float] = None, daemon_uid: Optional[int] = None) -> GradClient:
    """Opens this process's gradient connection (what ``allreduce`` uses)."""
    global _default
    _default = GradClient(socket_path, job, rank, world_size, nbytes, device, timeout, daemon_uid=daemon_uid)
    return _default


def allreduce(tensor, op: str = "sum", client: Optional[GradClient] = None):
    """``gnnloader.allreduce(tensor)``: all-reduce in place through loaderd."""
    c = client or _default
    if c is None:
        raise AllReduceError("gnnloader.allreduce: call gnnloader.allreduce.init(...) first")
    return c.allreduce(tensor, op)


def ddp_comm_hook(state, bucket):
    """A ``DistributedDataParallel.register_comm_hook`` hook: averages the
    bucket's gradients through loaderd (``state``: a GradClient, or None for
    the one ``init`` opened)."""
    import torch

    t = bucket.buffer()
    allreduce(t, op="avg", client=state)
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


class _CallableModule(type(os)):
    """``gnnloader.allreduce(tensor)`` calls ``allreduce`` of this module."""

    def __call__(self, tensor, op: str = "sum", client: Optional[GradClient] = None):
        return allreduce(tensor, op, client)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule
