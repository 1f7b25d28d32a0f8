"""CUDA slots on the trainer side: the daemon's ring of GPU slots opened by
its CUDA IPC handles, with ctypes on the CUDA runtime PyTorch has already
loaded (no extra dependency), and zero-copy tensor views of the slots.

Per batch: the current stream waits for the slot's fill before anything reads
the views: for the slot's ready word in the ring's memory to reach the
batch's value (cuStreamWaitValue32, a wait on device memory), or, where the
daemon or the driver has no words, on the slot's "ready" event (recorded by
loaderd after the gather). Under MPS a pending wait on an interprocess event
slows loaderd's reads; one on device memory does not. Every slot of one fill
takes the same value, rising fill by fill (protocol 5), so a stream that has
waited for a value need not wait again for the other batches of that fill or
of earlier ones: the client makes one wait a fill, not one a batch.

When a batch is released, the slot's "released" event is recorded on the
stream that used it, then the Release message goes out; loaderd waits until
that event is done before it writes the slot again, so kernels still reading
the slot are safe. The client sends a few releases together, and records the
event of the last one only (the others go out deferred: that event, recorded
on the same stream after their work, covers them; Loader._hold_release).
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, List, Optional, Tuple

import torch

from ._cudart import CudaRuntimeError, _driver_calls, _Runtime, find_runtime  # noqa: F401 (this module's names too)

__all__ = ["CudaSlots", "CudaRuntimeError", "find_runtime"]

def ring_fits(opened, mapped: Optional[int]) -> bool:
    """Whether the daemon's ring fits the `mapped` bytes of the allocation
    its memory handle opened (None: unknown, trusted). Raises
    CudaRuntimeError when the slots do not fit; False when only the ready
    words do not (then the events are used)."""
    if mapped is None:
        return True
    if opened.slots * opened.slot_bytes > mapped:
        raise CudaRuntimeError(f"the daemon's {opened.slots} slots of {opened.slot_bytes} bytes do not fit "
                               f"the {mapped}-byte allocation its memory handle opened")
    return not opened.ready_words or opened.ready_words + 4 * opened.slots <= mapped


class _CudaArray:
    """An object exposing __cuda_array_interface__ (v3) for torch.as_tensor."""

    def __init__(self, ptr: int, shape: Tuple[int, ...], typestr: str):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 3}


# Element types by their bytes: views are made as integers of the same size
# and reinterpreted, so bfloat16 (which has no typestr) works too.
_AS_INT = {1: ("|u1", torch.uint8), 2: ("<i2", torch.int16), 4: ("<i4", torch.int32), 8: ("<i8", torch.int64)}


# torch's own getters of the current stream's handle and the current device,
# where this torch has them: a batch calls them twice, and the public
# torch.cuda.current_stream(device) makes a Stream object each time (tens
# of microseconds of the thread that issues the training steps).
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_GET_DEVICE = getattr(torch._C, "_cuda_getDevice", None)


def _current_stream(index: int) -> Tuple[int, int]:
    """(the handle of device `index`'s current stream, the current device)."""
    if _RAW_STREAM is not None and _GET_DEVICE is not None:
        return _RAW_STREAM(index), _GET_DEVICE()
    return torch.cuda.current_stream(index).cuda_stream, torch.cuda.current_device()


class CudaSlots:
    """The daemon's ring of GPU slots, opened in this process."""

    def __init__(self, opened, device: torch.device):
        if device.index is not None and device.index != opened.cuda_device:
            raise CudaRuntimeError(f"daemon placed the slots on cuda:{opened.cuda_device}, not {device}")
        self.device = torch.device("cuda", opened.cuda_device)
        self.rt = find_runtime()
        self.slot_bytes = opened.slot_bytes
        self.size = opened.slots * opened.slot_bytes
        self.ptr = 0
        self.ready: List[int] = []
        self.released: List[int] = []
        self.words = 0  # device address of slot 0's ready word; 0: wait on the events
        self.waited: dict = {}  # slot -> the last ready value a stream was made to wait for (or had waited for)
        self.last_wait = (None, 0)  # (stream handle, ready value) of the last wait on a word
        with torch.cuda.device(self.device):
            self.ptr = self.rt.open_mem(bytes(opened.mem_handle))
            try:
                words_fit = ring_fits(opened, self.rt.allocation_size(self.ptr))
            except BaseException:
                self.close()
                raise
            if opened.ready_words and words_fit and self.rt.can_wait_value:
                self.words = self.ptr + opened.ready_words
            try:
                for ev in opened.events:
                    self.ready.append(self.rt.open_event(bytes(ev.ready)))
                    self.released.append(self.rt.open_event(bytes(ev.released)))
            except BaseException:
                self.close()
                raise

    def slot_range(self, slot: int) -> Tuple[int, int]:
        """Device addresses [start, end) of a slot."""
        start = self.ptr + slot * self.slot_bytes
        return start, start + self.slot_bytes

    def wait_ready(self, slot: int, value: int = 0) -> None:
        """Make the current stream wait (on the GPU) for the slot's fill:
        for its ready word to reach `value` (BatchReady.ready_value) where
        the ring has words and value is set, else on its ready event."""
        self._on_device(self._wait_on, slot, value)

    def _on_device(self, op, *args, stream: Optional[int] = None) -> None:
        """op(stream's handle, default the current stream's, *args) with the
        slots' device current: switched to only when it is not (no switch a
        batch)."""
        index = self.device.index
        current_stream, current = _current_stream(index)
        if stream is None:
            stream = current_stream
        if current == index:
            op(stream, *args)
            return
        with torch.cuda.device(self.device):
            op(stream, *args)

    def _wait_on(self, stream: int, slot: int, value: int) -> None:
        if value and self.words:
            last_stream, last_value = self.last_wait
            if stream == last_stream and (last_value - value) & 0xFFFFFFFF < 0x80000000:
                # This stream last waited for this fill or a later one: the
                # slot's data came before that word (one ring stream).
                self.waited[slot] = value
                return
            try:
                self.rt.wait_value(stream, self.words + 4 * slot, value)
                self.waited[slot] = value
                self.last_wait = (stream, value)
                return
            except CudaRuntimeError as e:
                # The daemon records the ready event too: wait on it from now on.
                warnings.warn(f"gnnloader: waiting on ready events instead of ready words: {e}", RuntimeWarning)
                self.words = 0
        self.rt.wait(stream, self.ready[slot])

    def record_released(self, slot: int, stream: Optional[int] = None) -> None:
        """Record the slot's released event on `stream` (a handle from
        current_stream; default the current stream): loaderd writes the slot
        again, and any released deferred before it on that stream, only
        after the work queued there so far is done."""
        self._on_device(self._record_released, slot, stream=stream)

    def _record_released(self, stream: int, slot: int) -> None:
        self.rt.record(self.released[slot], stream)

    def current_stream(self) -> int:
        """The handle of the current stream on the slots' device."""
        return _current_stream(self.device.index)[0]

    def unblock_waits(self, daemon_gone: Callable[[], bool], wait: float = 5.0) -> List[int]:
        """The slots whose ready word is below the value a stream waits for
        (their fills still running, or dead): once daemon_gone() says the
        daemon is gone (asked until `wait` seconds pass; its words are then
        final), those are zeroed and their words written, on a stream of
        this client's own. The steps queued on those batches then read
        zeros (every index 0), not a half-written slot, and finish. Returns
        the slots so ended; none when the words catch up or the daemon
        stays (its fills will write them). Without words nothing can be
        done here: a wait on an event the dead daemon never recorded is
        the driver's."""
        pending = self.waited
        self.waited, self.last_wait = {}, (None, 0)
        if not (self.words and pending and self.rt.can_unblock):
            return []
        with self.rt.own_stream() as s:
            deadline = time.monotonic() + wait
            while True:
                words = self.rt.read_words(s, self.words, max(pending) + 1)
                cut = [(slot, value) for slot, value in sorted(pending.items())
                       if (words[slot] - value) & 0x80000000]  # word < value, as the wait compares (wrap-around)
                if not cut:
                    return []
                if daemon_gone():
                    break
                if time.monotonic() > deadline:
                    return []
                time.sleep(0.01)
            # Every slot cut is zeroed before any word is written: a stream
            # that waited for one slot's word reads the other slots of its
            # fill too (one wait a fill).
            for slot, _ in cut:
                self.rt.zero(s, self.ptr + slot * self.slot_bytes, self.slot_bytes)
            for slot, value in cut:
                self.rt.write_value(s, self.words + 4 * slot, value)
        return [slot for slot, _ in cut]

    def view(self, slot: int, offset: int, count: int, dtype: torch.dtype) -> torch.Tensor:
        """A zero-copy tensor of count elements at offset in the slot."""
        if count == 0:
            return torch.empty(0, dtype=dtype, device=self.device)
        size = torch.empty(0, dtype=dtype).element_size()
        typestr, as_int = _AS_INT[size]
        ptr = self.ptr + slot * self.slot_bytes + offset
        if ptr + count * size > self.ptr + (slot + 1) * self.slot_bytes:
            raise CudaRuntimeError("view outside its slot")
        t = torch.as_tensor(_CudaArray(ptr, (count,), typestr), device=self.device)
        return t if as_int == dtype else t.view(dtype)

    def close(self, daemon_gone: Optional[Callable[[], bool]] = None) -> None:
        """Close the events and the memory handle, after the device's work
        (which may still read the slots) is done. Views must not be
        used afterwards.

        daemon_gone: whether the daemon has died (SIGKILL, the OOM killer,
        a crash), and with its context the fills it had queued. A stream
        made to wait for a ready word such a fill was to write would wait
        for ever, the steps queued behind it and this close with it:
        unblock_waits ends those waits first."""
        if self.ptr == 0 and not self.ready:
            return
        with torch.cuda.device(self.device):
            for e in self.ready + self.released:
                self.rt.destroy_event(e)
            self.ready, self.released = [], []
            if self.ptr and daemon_gone is not None:
                self.unblock_waits(daemon_gone)
            if self.ptr:
                # Every stream of this process, not only the current one: close
                # may run on another thread (a loader collected on its
                # receiver), and the steps may run on streams of their own.
                torch.cuda.synchronize(self.device)
                ptr, self.ptr = self.ptr, 0
                self.rt.close_mem(ptr)
