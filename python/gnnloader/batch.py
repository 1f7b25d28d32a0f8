"""What a Loader yields: :class:`Batch` (PyG Data's fields, when PyG is not
installed), the torch dtypes of the daemon's regions, and :func:`batch_info`
(where a batch came from, kept outside its fields)."""

from __future__ import annotations

from typing import List, NamedTuple

import torch

__all__ = ["Batch", "BatchInfo", "batch_info"]

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "float64": torch.float64,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
# Unsigned types where this torch has them (2.3 and later).
_DTYPES.update({n: getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)})



class BatchInfo(NamedTuple):
    """Where a batch came from: its epoch, its index in the epoch and the
    loaderd slot it lives in. Not a field of the batch (so that ``len(batch)``
    and ``batch.keys()`` are PyG's): read it with :func:`batch_info`."""

    epoch: int
    index: int
    slot: int


# The attribute holding a batch's BatchInfo: set past PyG Data's attribute
# store, so it is no key of the batch.
_INFO = "_gnnloader_info"


def batch_info(batch) -> BatchInfo:
    """The epoch, index and slot of a batch a :class:`Loader` yielded (a
    :class:`Batch` or a PyG ``Data``); ValueError for any other object."""
    info = getattr(batch, "__dict__", {}).get(_INFO)
    if info is None:
        raise ValueError("not a batch from a gnnloader Loader")
    return info


class _Info:
    """``epoch``, ``index`` and ``slot`` of a batch as read-only attributes
    (:func:`batch_info`), for gnnloader's own batch classes."""

    @property
    def epoch(self) -> int:
        return batch_info(self).epoch

    @property
    def index(self) -> int:
        return batch_info(self).index

    @property
    def slot(self) -> int:
        return batch_info(self).slot


class Batch(_Info):
    """One sampled mini-batch, with the fields of PyG's NeighborLoader output:
    one attribute per region of the daemon's batch layout (x, y, n_id,
    edge_index, e_id, input_id, ...), per scalar (batch_size) and per list
    (num_sampled_nodes, num_sampled_edges), as Opened declared them. As PyG's
    Data, ``len(batch)`` is the number of fields, ``batch.keys()`` their
    names and ``batch["x"]`` is ``batch.x``; ``epoch``, ``index`` and
    ``slot`` are read-only attributes outside the fields (:func:`batch_info`).

    The tensors are views of a loaderd slot (no copy): they are valid until
    the batch is released (by default when the next batch is taken). Call
    .clone() on what you want to keep longer."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    @classmethod
    def _of(cls, fields: dict, info: BatchInfo) -> "Batch":
        """A batch whose attributes are `fields` itself (no copy; the
        Loader's per-batch path), with its BatchInfo."""
        b = cls.__new__(cls)
        fields[_INFO] = info
        b.__dict__ = fields
        return b

    def keys(self) -> List[str]:
        return [k for k in self.__dict__ if k != _INFO]

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def __getitem__(self, key: str):
        if key not in self.keys():
            raise KeyError(key)
        return self.__dict__[key]

    def __iter__(self):
        for k in self.keys():
            yield k, self.__dict__[k]

    def __repr__(self) -> str:
        def show(v):
            return f"[{', '.join(map(str, v.shape))}]" if isinstance(v, torch.Tensor) else repr(v)
        return f"Batch({', '.join(f'{k}={show(getattr(self, k))}' for k in self.keys())})"

    @property
    def num_nodes(self) -> int:
        return int(self.n_id.numel())

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))
