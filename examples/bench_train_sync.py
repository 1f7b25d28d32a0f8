"""bench_train.py's loader_* variants: the client's per-batch CUDA
signalling replaced on one loader's CudaSlots (no wait, the ready event
instead of the ready word, a host wait, no released record...), to see which
part of it slows the daemon's reads under MPS."""
from __future__ import annotations


def _event_fn(rt, name):
    """cudaEvent<name> or cuEvent<name> of the client's runtime (ctypes)."""
    import ctypes
    lib = ctypes.CDLL(rt.path)
    f = getattr(lib, ("cuEvent" if rt.driver else "cudaEvent") + name)
    f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_int
    return f


def _no_wait(cs):
    cs.wait_ready = lambda slot, value=0: None


def _event_wait(cs):
    """The wait before ready words (protocol 4): on the ready event."""
    gpu_wait = cs.wait_ready
    cs.wait_ready = lambda slot, value=0: gpu_wait(slot)


def _no_record(cs):
    cs.record_released = lambda slot, stream=None: None


def _host_wait(cs):
    sync = _event_fn(cs.rt, "Synchronize")

    def wait(slot, value=0):
        if sync(cs.ready[slot]) != 0:
            raise RuntimeError("event synchronize failed")
    cs.wait_ready = wait


def _query_wait(cs):
    query, gpu_wait = _event_fn(cs.rt, "Query"), cs.wait_ready

    def wait(slot, value=0):
        if query(cs.ready[slot]) != 0:  # still pending (or an error, which the wait reports)
            gpu_wait(slot)  # on the event
    cs.wait_ready = wait


SYNC_MODES = {
    "loader_eventwait": _event_wait,
    "loader_nowait": _no_wait,
    "loader_norecord": _no_record,
    "loader_none": lambda cs: (_no_wait(cs), _no_record(cs)),
    "loader_hostwait": _host_wait,
    "loader_querywait": _query_wait,
}
