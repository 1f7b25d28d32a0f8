"""The feature table shared read-only by loaderd, and batches without
features: what a trainer needs to run its own feature path (a CPU gather with
index_select, or the whole table in GPU memory) over loaderd's sampler, with
no second copy of the table in host memory.

Start the daemon with ``loaderd serve --table-socket PATH``; then

    table = open_table(PATH)             # SharedTable: .x is a [rows, dim] CPU view
    loader = StructLoader(SOCKET, ...)   # Loader whose batches have no x

``open_table`` receives the table's memfd over the socket (SCM_RIGHTS) and
maps it read-only (MAP_SHARED): the view costs no memory beyond page tables.
``StructLoader`` opens its slots with feature_dtype "none": loaderd samples
exactly as for any trainer with the same arguments and seeds, and fills y,
n_id and edge_index only (batch.x is an empty view, never written).
"""

from __future__ import annotations

import json
import mmap
import os
import warnings
from dataclasses import dataclass
from typing import Optional

import torch

from . import protocol as p
from . import trust
from .loader import Loader, LoaderError

__all__ = ["SharedTable", "open_table", "StructLoader", "NO_FEATURES"]

NO_FEATURES = "none"

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class SharedTable:
    """The daemon's feature table, mapped read-only. ``x`` is a zero-copy
    [num_rows, feature_dim] tensor over the mapping (do not write to it)."""

    x: torch.Tensor
    info: dict
    _mem: Optional[mmap.mmap] = None

    @property
    def nbytes(self) -> int:
        return int(self.info["bytes"])

    def close(self) -> None:
        self.x = None  # type: ignore[assignment]
        if self._mem is not None:
            try:
                self._mem.close()
            except BufferError:
                pass  # views still alive: unmapped when they are freed
            self._mem = None


def open_table(path: str, timeout: Optional[float] = 30.0, populate: bool = False,
               daemon_uid: Optional[int] = None) -> SharedTable:
    """Connect to loaderd's table socket and map the feature table it sends.
    populate=True pre-faults the mapping (MAP_POPULATE) so the first pass over
    it does not pay page faults. The process listening at `path` must run as
    this process's uid, root, `daemon_uid` or one in $GNNLOADER_DAEMON_UID
    (else UntrustedDaemonError, gnnloader.trust)."""
    s = trust.connect(path, timeout, trust.trusted_uids(daemon_uid), what="loaderd's table socket")
    try:
        # Close-on-exec from the start (a fork of this process keeps no
        # copy of the table's descriptor), as protocol.py receives them.
        data, fds, truncated = p.recv_with_fds(s, 1 << 16, 4)
        if truncated:
            p._close_fds(fds)
            raise LoaderError(f"loaderd's table socket {path} sent more descriptors than one (control data truncated)")
        if not fds:
            raise LoaderError(f"loaderd's table socket {path} sent no file descriptor (refused?)")
    finally:
        s.close()
    fd = fds[0]
    p._close_fds(fds[1:])
    bad = f"loaderd's table socket {path} sent a bad table description"
    try:
        try:
            info = json.loads(data.decode().strip())
            dtype = _DTYPES.get(info["feature_dtype"])
            nbytes, rows, dim = int(info["bytes"]), int(info["num_rows"]), int(info["feature_dim"])
            offset = int(info.get("offset", 0))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise LoaderError(f"{bad} ({e!r}): {bytes(data[:200])!r}") from None
        if dtype is None:
            raise LoaderError(f"feature dtype {info['feature_dtype']!r} is not supported")
        elem = torch.tensor([], dtype=dtype).element_size()
        if min(nbytes, rows, dim, offset) < 0 or rows * dim * elem > nbytes:
            raise LoaderError(f"{bad}: {rows} x {dim} rows of {elem} bytes in {nbytes} bytes at offset {offset}")
        flags = mmap.MAP_SHARED
        if populate and hasattr(mmap, "MAP_POPULATE"):
            flags |= mmap.MAP_POPULATE
        try:
            mem = mmap.mmap(fd, nbytes, flags, mmap.PROT_READ, offset=offset)
        except (OSError, ValueError) as e:
            raise LoaderError(f"{bad}: mapping {nbytes} bytes at offset {offset} of its descriptor: {e}") from None
    finally:
        os.close(fd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # frombuffer warns that the buffer is not writable
        x = torch.frombuffer(mem, dtype=dtype, count=rows * dim)
    x = x.view(rows, dim)
    return SharedTable(x=x, info=info, _mem=mem)


class StructLoader(Loader):
    """A Loader whose batches carry y, n_id and edge_index but no features
    (slots in host shared memory; device must be "cpu"). Same arguments,
    sampler and order as Loader."""

    def __init__(self, *args, **kwargs):
        if str(kwargs.get("device", "cpu")) != "cpu":
            raise ValueError('StructLoader serves host slots: device must be "cpu"')
        super().__init__(*args, **kwargs)

    def _open(self, req):
        req.feature_dtype = NO_FEATURES
        return super()._open(req)

    def slot_memory(self):
        """(address, bytes) of the slot memory, e.g. to cudaHostRegister it so
        copies out of the slots run at DMA speed."""
        import ctypes
        buf = (ctypes.c_char * len(self._mem)).from_buffer(self._mem)
        return ctypes.addressof(buf), len(self._mem)
