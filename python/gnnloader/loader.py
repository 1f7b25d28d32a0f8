"""The trainer side of gnnloader: a Loader that yields sampled mini-batches
served by loaderd, as zero-copy views of the daemon's slots."""

from __future__ import annotations

import collections
import mmap
import os
import threading
import time
from typing import Iterator, Mapping, Optional, Sequence, Union

import torch

from . import protocol as p
from . import trust
from ._connection import _RECONNECTABLE, _Connection
from ._hetero_args import FanoutSpec
from .batch import _DTYPES, _INFO, Batch, BatchInfo, batch_info
from .errors import LoaderError, RequestError  # noqa: F401 (RequestError)
from .hetero import HeteroLayout, pyg_hetero_data

__all__ = ["Loader", "Batch", "BatchInfo", "batch_info", "LoaderError"]


def _pyg_data():
    try:
        from torch_geometric.data import Data  # type: ignore
        return Data
    except Exception:
        return None


def _contiguous_strides(shape: list) -> list:
    """The strides, in elements, of a contiguous tensor of this shape."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    strides.reverse()
    return strides


class Loader(_Connection):
    """Iterates over the mini-batches loaderd samples for one trainer.

    >>> with Loader(split="train", batch_size=1024,  # the default socket
    ...             fanouts=[15, 10, 5]) as loader:
    ...     for epoch in range(10):
    ...         for batch in loader:
    ...             train_step(batch.x, batch.edge_index, batch.y[:batch.batch_size])

    Each `iter(loader)` runs one epoch (epochs count from `start_epoch` up;
    `set_epoch` picks one, as with DistributedSampler). `len(loader)` is the
    number of batches per epoch for this rank. With `release="auto"` a batch is
    released when the next one is taken or the epoch ends; with "manual" call
    `loader.release(batch)` yourself (the daemon reuses a slot only after its
    release, so hold at most slots-1 batches at once).

    Batches are torch_geometric.data.Data objects when PyG is importable and
    `Batch` objects otherwise; both have the same fields.
    """

    def __init__(self, socket_path: Optional[str] = None, split: str = "train", batch_size: int = 1024,
                 fanouts: Union[Sequence[int], Mapping] = (15, 10, 5), shuffle: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1, device: str = "cpu", drop_last: bool = False,
                 slots: int = 0, job: str = "", release: str = "auto", start_epoch: int = 0,
                 start_batch: int = 0, pyg: Optional[bool] = None, timeout: Optional[float] = None,
                 reconnect: float = 0.0, daemon_uid: Optional[int] = None, input_type: str = "",
                 temporal: str = "", time_attr: str = "", receive_thread: Optional[bool] = None):
        """`reconnect` > 0: when the connection to loaderd is lost (the daemon
        restarted, crashed or said goodbye), keep trying to reconnect for that
        many seconds, with exponential backoff, and resume the epoch after the
        last batch this loader yielded: over an epoch every batch of this
        rank's share is yielded exactly once. `start_epoch`/`start_batch` start
        elsewhere (e.g. a trainer restarting from a checkpoint).

        `socket_path`: loaderd's socket; omitted (None), the default of
        gnnloader.trust.default_socket_path, the daemon's own default:
        $GNNLOADER_SOCKET, else $XDG_RUNTIME_DIR/gnnloader/loaderd.sock, else
        /run/gnnloader/loaderd.sock for root, else
        /tmp/gnnloader-UID/loaderd.sock (a directory the loader checks is
        this user's or root's and writable by no one else).

        `daemon_uid`: a uid, besides this process's own and root's, whose
        loaderd this loader trusts (as does $GNNLOADER_DAEMON_UID). On every
        connect the loader checks who listens at the socket (SO_PEERCRED)
        before sending anything, and refuses any other uid with an
        UntrustedDaemonError (a LoaderError with code "untrusted_daemon").

        `timeout`: seconds any one wait on the socket may take (connecting,
        the handshake, the next batch) before a LoaderError; None or 0 waits
        as long as it takes (0 as PyG's DataLoader, whose timeout=0 means no
        timeout). Negative: ValueError.

        Heterogeneous datasets: `input_type` names the seeds' node type (the
        split is one of its splits) and `fanouts` is a list for every edge
        type or a dict {(src, rel, dst): list} (PyG's num_neighbors); the
        batches are PyG HeteroData or gnnloader.hetero.HeteroBatch.

        `temporal`, `time_attr`: disjoint and temporal sampling (protocol
        3, docs/protocol.md "Disjoint and temporal batches"): temporal
        "disjoint" (one subgraph per seed, time_attr ""), or "uniform" /
        "last" with time_attr "node_time" or "edge_time"; "" (default):
        ordinary batches.

        `receive_thread`: receive and decode the daemon's messages, and
        build each batch's tensors and object, on a thread of this loader's
        own, ahead of the batches taken, so the thread that iterates (and
        issues the training steps, which bound a fast epoch on a GPU) does
        less a batch; that work mostly runs while the iterating thread
        waits for backward with the GIL released. The batches, their order
        and every error are the same, and `timeout` bounds the wait for
        each batch and each send as without it. None (the default): on when
        the environment's GNNLOADER_RECEIVE_THREAD is set to anything but
        "" or "0".

        Arguments the daemon refuses (an unknown split, fanouts or a batch
        size beyond its limits) raise RequestError, a ValueError and a
        LoaderError."""
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be non-negative (0 or None: no timeout), not {timeout!r}")
        if release not in ("auto", "manual"):
            raise ValueError(f'release must be "auto" or "manual", not {release!r}')
        self._default_dir = None if socket_path else trust.default_socket_dir()
        self.socket_path = trust.socket_path(socket_path)
        self.device = torch.device(device)
        self._release_mode = release
        self._epoch = start_epoch
        self._start_batch = start_batch
        self._in_epoch = False
        self._held: dict = {}  # slot -> (epoch, index)
        self._releases: list = []  # [slot, epoch, index, stream, recorded] of releases not sent yet (_hold_release)
        # Every send, and the held releases, under one lock: releases may come
        # from threads other than the iterating one (release="manual").
        self._send_lock = threading.Lock()
        self._release_hold = 0
        self._batches_ahead = 0  # messages decoded ahead at most (_take_kept_batches; set by _open)
        self._iter_thread = None  # the thread that last began iterating (_batches)
        self._flat: dict = {}  # slot -> its regions' whole-capacity tensors (_slot_views)
        self._built: dict = {}  # slot -> (epoch, index, batch) built ahead, by the receiver thread or _take_kept_batches (_view)
        self._ahead: collections.deque = collections.deque()  # (message, fds) or an exception, decoded ahead (_recv)
        if receive_thread is None:
            receive_thread = os.environ.get("GNNLOADER_RECEIVE_THREAD", "") not in ("", "0")
        self._receive_thread = receive_thread
        self._rx = None  # the connection's Receiver (receive_thread)
        self._mem: Optional[mmap.mmap] = None
        self._cuda = None  # cuda.CudaSlots when the daemon placed the slots on a GPU
        self._closed = False
        self._timeout = timeout or None  # 0 would make the socket non-blocking
        self._reconnect_for = reconnect
        self._trusted = trust.trusted_uids(daemon_uid)
        self.reconnects = 0  # how often the connection was re-established
        data_cls = _pyg_data() if pyg in (None, True) else None
        if pyg and data_cls is None:
            raise ImportError("pyg=True but torch_geometric is not importable")
        self._data_cls = data_cls
        self._hetero_cls = pyg_hetero_data() if data_cls is not None else None
        self._hetero: Optional[HeteroLayout] = None  # set by _open for a heterogeneous dataset
        self._fanouts = FanoutSpec(hops=list(fanouts)) if isinstance(fanouts, Sequence) else FanoutSpec.of(fanouts)
        self._shape_x = None  # "1d": x is served [N, 1] and yielded [N] (set by gnnloader.NeighborLoader)
        self._request = p.Open(job=job, split=split, batch_size=batch_size, fanouts=list(self._fanouts.hops or []),
                               shuffle=shuffle, seed=seed, rank=rank, world_size=world_size,
                               drop_last=drop_last, device=str(device), slots=slots,
                               start_epoch=start_epoch, start_batch=start_batch, input_type=input_type,
                               temporal=temporal, time_attr=time_attr)
        self._sock = None
        deadline = time.monotonic() + reconnect
        while True:
            try:
                self._connect(self._request)
                return
            except LoaderError as e:
                self._shutdown(goodbye=False)
                if not (e.code in _RECONNECTABLE and time.monotonic() < deadline):
                    raise
                self._closed = False
                time.sleep(0.05)

    # -- iteration ----------------------------------------------------------

    def __len__(self) -> int:
        return self.opened.num_batches

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run this epoch (shuffle and sampling depend on it)."""
        self._epoch = epoch

    def __iter__(self) -> Iterator:
        if self._closed:
            raise LoaderError("loader is closed")
        if self._in_epoch:
            self._drain()
        epoch = self._epoch
        self._epoch += 1
        self._send(p.StartEpoch(epoch=epoch))
        self._in_epoch = True
        return self._batches(epoch)

    def _batches(self, epoch: int) -> Iterator:
        self._iter_thread = threading.get_ident()  # the thread whose releases may be held (_hold_release)
        last = None
        next_index = self._start_batch if epoch == self._request.start_epoch else 0
        self._start_batch = 0
        while True:
            try:
                # Release the previous batch before waiting for the next: the
                # daemon may need that very slot (with one slot, it always does).
                if self._release_mode == "auto" and last is not None:
                    self._release_slot(last)
                    last = None
                msg = self._recv()
                if isinstance(msg, p.EpochEnd):
                    self._send_releases()  # no slot held back between epochs
            except LoaderError as e:
                if not (self._reconnect_for > 0 and e.code in _RECONNECTABLE):
                    raise
                last = None
                self._reconnect(epoch, next_index)
                self._send(p.StartEpoch(epoch=epoch))
                continue
            if isinstance(msg, p.EpochEnd):
                self._in_epoch = False
                return
            if not isinstance(msg, p.BatchReady):
                raise LoaderError(f"unexpected {type(msg).__name__} inside an epoch")
            self._held[msg.slot] = (msg.epoch, msg.index)
            if self._release_mode == "auto":
                last = msg.slot
            next_index = msg.index + 1
            yield self._view(msg)

    def _drain(self) -> None:
        """Finish an abandoned epoch: release everything and read to its end."""
        for slot in list(self._held):
            self._release_slot(slot)
        while self._in_epoch:
            msg = self._recv()
            if isinstance(msg, p.BatchReady):
                self._built.pop(msg.slot, None)  # never yielded
                self._held[msg.slot] = (msg.epoch, msg.index)
                self._release_slot(msg.slot)
            elif isinstance(msg, p.EpochEnd):
                self._in_epoch = False

    def release(self, batch) -> None:
        """Give a batch's slot back to loaderd (release="manual"). The batch's
        tensors must not be used afterwards."""
        epoch, index, slot = batch_info(batch)
        if self._closed:
            raise LoaderError("loader is closed", code="closed")
        if slot not in self._held or self._held[slot] != (epoch, index):
            raise ValueError("this batch is not held by this loader (already released?)")
        self._release_slot(slot)

    def _release_slot(self, slot: int) -> None:
        epoch, index = self._held.pop(slot)
        # On CUDA the slot's released event is recorded before its Release
        # goes out (loaderd waits for it before a refill), or that of a later
        # release on the same stream, which covers it (_hold_release).
        self._hold_release(slot, epoch, index, self._cuda.current_stream() if self._cuda is not None else None)

    def _slot_views(self, slot: int, flats: dict) -> list:
        """Slot `slot`'s regions as flat tensors of their whole capacity, made
        on the slot's first batch of a connection: a batch's tensors are
        slices of these, which costs the trainer's thread far less each batch
        than a new view of the memory would (the thread that issues the
        training steps is what bounds a fast epoch)."""
        # per region: (name, tensor of its whole capacity: flat, or in its shape when the count is its first axis;
        # the shape to cut a batch from the flat tensor, None where slicing the first count rows does; count axis)
        views = []
        base = slot * self.opened.slot_bytes
        for r in self.opened.regions:
            dtype = _DTYPES.get(r.dtype)
            if dtype is None:
                raise LoaderError(f"region {r.name!r} has dtype {r.dtype!r}, which this client does not know",
                                  code="bad_message")
            cap = 1
            for d in r.shape:
                cap *= d
            size = torch.empty(0, dtype=dtype).element_size()
            if cap * size > r.bytes:
                raise LoaderError(f"region {r.name!r}: its capacity shape {list(r.shape)} of {r.dtype} needs "
                                  f"{cap * size} bytes, the region has {r.bytes}", code="bad_message")
            if self._cuda is not None:
                t = self._cuda.view(slot, r.offset, cap, dtype)
            elif cap == 0:
                t = torch.empty(0, dtype=dtype)
            else:
                t = torch.frombuffer(self._mem, dtype=dtype, count=cap, offset=base + r.offset)
            shape = list(r.shape)
            rows = len(shape) == 1 or r.count_axis == 0  # a batch is the first count rows
            if rows and len(shape) > 1:
                t = t.view(shape)
            views.append((r.name, t, None if rows else shape, r.count_axis))
        flats[slot] = views  # the dict _build read: a build that outlives its connection writes no other
        return views

    def _view(self, m: p.BatchReady):
        """The batch in slot m.slot (_build, or what the receiver thread built
        of m), its slot waited for on the current CUDA stream."""
        built = self._built.pop(m.slot, None)
        if built is not None and built[:2] == (m.epoch, m.index):
            b = built[2]
        else:
            b = self._build(m)
        if self._cuda is not None:
            self._cuda.wait_ready(m.slot, m.ready_value)  # the current stream reads the slot after its fill
        return b

    def _build(self, m: p.BatchReady):
        """The batch in slot m.slot, built from what Opened declared: a tensor
        per region (its capacity shape with the count axis cut to the batch's
        count; the region's first elements, contiguous), then the scalars and
        lists. No GPU work: the receiver thread calls it too."""
        try:
            self.opened.check_batch(m)
        except p.ProtocolError as e:
            raise LoaderError(f"loaderd sent a batch that does not match its slots: {e.message}", code="bad_message") from e
        flats = self._flat  # read once: a reconnect replaces it
        flat = flats.get(m.slot)
        if flat is None:
            flat = self._slot_views(m.slot, flats)
        fields = {}
        # One tensor op a region (each costs the thread microseconds on CUDA).
        for (name, t, shape, axis), count in zip(flat, m.counts):
            if shape is None:  # one-dimensional, or shaped with the count first: its first count rows
                fields[name] = t[:count]
            else:  # the region's first elements, contiguous in the batch's shape
                shape = shape.copy()
                shape[axis] = count
                fields[name] = t.as_strided(shape, _contiguous_strides(shape))
        if self._cuda is None and self.device.type != "cpu":
            fields = {k: t.to(self.device) for k, t in fields.items()}
        # The message's own ints and lists (decoded for this batch alone).
        fields.update(zip(self.opened.scalars, m.scalars))
        fields.update(zip(self.opened.lists, m.lists))
        info = BatchInfo(m.epoch, m.index, m.slot)
        if self._hetero is not None:
            b = self._hetero.batch(fields)
        else:
            if self._shape_x is not None and "x" in fields:
                fields["x"] = fields["x"].view(-1)  # data.x is one-dimensional (NeighborLoader)
            if self._data_cls is None:
                return Batch._of(fields, info)
            b = self._data_cls(**fields)
        # Past PyG Data's __setattr__, which would make it a field.
        object.__setattr__(b, _INFO, info)
        return b

    # -- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Say goodbye and drop the connection. Batches still held must not be
        used afterwards."""
        if not self._closed:
            self._shutdown(goodbye=True)

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self._shutdown(goodbye=False)
        except Exception:
            pass
