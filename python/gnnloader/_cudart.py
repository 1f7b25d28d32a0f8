"""The CUDA calls the client makes, with ctypes on the CUDA runtime PyTorch
has already loaded (libcudart), or on the driver (libcuda) where torch links
the runtime statically: IPC handles opened and closed, events waited on and
recorded, and the driver's stream memory operations (ready words). No
extra dependency; cuda.CudaSlots is what uses them."""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import List, Optional

import torch

_IPC_LAZY_ENABLE_PEER_ACCESS = 1


class CudaRuntimeError(RuntimeError):
    """The CUDA runtime cannot be found or a CUDA IPC call failed."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _handle(b: bytes) -> _Handle:
    if len(b) != 64:
        raise CudaRuntimeError(f"CUDA IPC handle of {len(b)} bytes, want 64")
    h = _Handle()
    ctypes.memmove(ctypes.addressof(h), b, 64)
    return h


class _Runtime:
    """The few CUDA calls the client needs, through the runtime (libcudart)
    or, when torch links the runtime statically, the driver (libcuda)."""

    def __init__(self, path: str, driver: bool):
        self.path, self.driver = path, driver
        lib = ctypes.CDLL(path)
        vp, u = ctypes.c_void_p, ctypes.c_uint
        if driver:
            self._open_mem = lib.cuIpcOpenMemHandle_v2
            self._open_mem.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, u]
            self._close_mem = lib.cuIpcCloseMemHandle
            self._close_mem.argtypes = [ctypes.c_uint64]
            self._open_event = lib.cuIpcOpenEventHandle
            self._wait = lib.cuStreamWaitEvent
            self._record = lib.cuEventRecord
            self._destroy = lib.cuEventDestroy_v2
            self._err = lib.cuGetErrorName
            self._err.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        else:
            self._open_mem = lib.cudaIpcOpenMemHandle
            self._open_mem.argtypes = [ctypes.POINTER(ctypes.c_void_p), _Handle, u]
            self._close_mem = lib.cudaIpcCloseMemHandle
            self._close_mem.argtypes = [vp]
            self._open_event = lib.cudaIpcOpenEventHandle
            self._wait = lib.cudaStreamWaitEvent
            self._record = lib.cudaEventRecord
            self._destroy = lib.cudaEventDestroy
            self._err = lib.cudaGetErrorName
            self._err.argtypes = [ctypes.c_int]
            self._err.restype = ctypes.c_char_p
        self._open_event.argtypes = [ctypes.POINTER(vp), _Handle]
        self._wait.argtypes = [vp, vp, u]
        self._record.argtypes = [vp, vp]
        self._destroy.argtypes = [vp]
        for f in (self._open_mem, self._close_mem, self._open_event, self._wait, self._record, self._destroy):
            f.restype = ctypes.c_int
        (self._wait_value, self._driver_err, self._address_range,
         self._write_value, self._stream_create, self._stream_sync, self._stream_destroy,
         self._memset_async, self._copy_dtoh_async) = _driver_calls(lib if driver else None)

    def _check(self, op: str, r: int) -> None:
        if r == 0:
            return
        if self.driver:
            s = ctypes.c_char_p()
            self._err(r, ctypes.byref(s))
            name = s.value
        else:
            name = self._err(r)
        raise CudaRuntimeError(f"{op}: {(name or b'error').decode()} ({r}) [{self.path}]")

    def open_mem(self, handle: bytes) -> int:
        if self.driver:
            p = ctypes.c_uint64()
        else:
            p = ctypes.c_void_p()
        self._check("cudaIpcOpenMemHandle", self._open_mem(ctypes.byref(p), _handle(handle), _IPC_LAZY_ENABLE_PEER_ACCESS))
        return int(p.value or 0)

    def close_mem(self, ptr: int) -> None:
        self._check("cudaIpcCloseMemHandle", self._close_mem(ptr))

    def open_event(self, handle: bytes) -> int:
        e = ctypes.c_void_p()
        self._check("cudaIpcOpenEventHandle", self._open_event(ctypes.byref(e), _handle(handle)))
        return int(e.value or 0)

    def destroy_event(self, e: int) -> None:
        self._destroy(e)

    def wait(self, stream: int, event: int) -> None:
        self._check("cudaStreamWaitEvent", self._wait(stream, event, 0))

    def record(self, event: int, stream: int) -> None:
        self._check("cudaEventRecord", self._record(event, stream))

    @property
    def can_wait_value(self) -> bool:
        """Whether the driver has cuStreamWaitValue32 (stream memory operations)."""
        return self._wait_value is not None

    def _driver_check(self, op: str, r: int) -> None:
        if r != 0:
            s = ctypes.c_char_p()
            self._driver_err(r, ctypes.byref(s))
            raise CudaRuntimeError(f"{op}: {(s.value or b'error').decode()} ({r})")

    def wait_value(self, stream: int, addr: int, value: int) -> None:
        """Make later work on `stream` wait until the u32 at device address
        `addr` reaches `value` (CU_STREAM_WAIT_VALUE_GEQ: a wrap-around
        comparison)."""
        self._driver_check("cuStreamWaitValue32", self._wait_value(stream, addr, value, _WAIT_VALUE_GEQ))

    @property
    def can_unblock(self) -> bool:
        """Whether the driver has what own_stream, read_words, zero and
        write_value need."""
        return None not in (self._write_value, self._stream_create, self._stream_sync, self._stream_destroy,
                            self._memset_async, self._copy_dtoh_async)

    @contextlib.contextmanager
    def own_stream(self):
        """A non-blocking stream of this client's own (it waits for no other
        stream, torch's legacy default one included), synchronised and
        destroyed at the end of the block."""
        s = ctypes.c_void_p()
        self._driver_check("cuStreamCreate", self._stream_create(ctypes.byref(s), _STREAM_NON_BLOCKING))
        try:
            yield s.value
            self._driver_check("cuStreamSynchronize", self._stream_sync(s))
        finally:
            self._stream_destroy(s)

    def read_words(self, stream: int, addr: int, n: int) -> List[int]:
        """The n u32 words at device address addr, read on `stream`."""
        buf = (ctypes.c_uint32 * n)()
        self._driver_check("cuMemcpyDtoHAsync", self._copy_dtoh_async(buf, addr, 4 * n, stream))
        self._driver_check("cuStreamSynchronize", self._stream_sync(stream))
        return list(buf)

    def zero(self, stream: int, addr: int, n: int) -> None:
        self._driver_check("cuMemsetD8Async", self._memset_async(addr, 0, n, stream))

    def write_value(self, stream: int, addr: int, value: int) -> None:
        """Write the u32 `value` at `addr` once the stream's earlier work is done."""
        self._driver_check("cuStreamWriteValue32", self._write_value(stream, addr, value, 0))

    def allocation_size(self, ptr: int) -> Optional[int]:
        """The bytes from `ptr` to the end of the device allocation it lies
        in (cuMemGetAddressRange); None when the driver cannot say."""
        if self._address_range is None:
            return None
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        if self._address_range(ctypes.byref(base), ctypes.byref(size), ptr) != 0:
            return None
        return base.value + size.value - ptr


_WAIT_VALUE_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ
_STREAM_NON_BLOCKING = 0x1  # CU_STREAM_NON_BLOCKING


def _driver_calls(lib):
    """cuStreamWaitValue32 (the _v2 entry point where the driver has it),
    cuGetErrorName, cuMemGetAddressRange_v2, cuStreamWriteValue32,
    cuStreamCreate, cuStreamSynchronize, cuStreamDestroy_v2,
    cuMemsetD8Async and cuMemcpyDtoHAsync_v2 from the driver `lib`, or
    libcuda.so.1 when None; None for each the driver lacks."""
    try:
        if lib is None:
            lib = ctypes.CDLL("libcuda.so.1")
        err = lib.cuGetErrorName
    except (OSError, AttributeError):
        return (None,) * 9
    err.argtypes, err.restype = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int
    wait = getattr(lib, "cuStreamWaitValue32_v2", None) or getattr(lib, "cuStreamWaitValue32", None)
    if wait is not None:
        wait.argtypes, wait.restype = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint], ctypes.c_int
    rng = getattr(lib, "cuMemGetAddressRange_v2", None)
    if rng is not None:
        rng.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        rng.restype = ctypes.c_int
    vp, u64, u = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint
    calls = []
    for names, argtypes in [(("cuStreamWriteValue32_v2", "cuStreamWriteValue32"), [vp, u64, ctypes.c_uint32, u]),
                            (("cuStreamCreate",), [ctypes.POINTER(vp), u]),
                            (("cuStreamSynchronize",), [vp]),
                            (("cuStreamDestroy_v2", "cuStreamDestroy"), [vp]),
                            (("cuMemsetD8Async",), [u64, ctypes.c_ubyte, ctypes.c_size_t, vp]),
                            (("cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync"), [vp, u64, ctypes.c_size_t, vp])]:
        f = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
        if f is not None:
            f.argtypes, f.restype = argtypes, ctypes.c_int
        calls.append(f)
    return (wait, err, rng, *calls)


_runtime: Optional[_Runtime] = None


def find_runtime() -> _Runtime:
    """The CUDA runtime this process (PyTorch) has loaded, found in
    /proc/self/maps after CUDA is initialised; the driver (libcuda.so.1) when
    no runtime library is mapped. CudaRuntimeError when neither is found."""
    global _runtime
    if _runtime is not None:
        return _runtime
    if not torch.cuda.is_available():
        raise CudaRuntimeError("CUDA is not available to PyTorch in this process (torch.cuda.is_available() is False)")
    torch.cuda.init()
    maps: List[str] = []
    try:
        with open("/proc/self/maps") as f:
            maps = [line.split()[-1] for line in f if "/" in line]
    except OSError:
        pass
    forced = os.environ.get("GNNLOADER_CUDART")
    runtime = [forced] if forced else sorted({m for m in maps if os.path.basename(m).startswith("libcudart.so")})
    driver = sorted({m for m in maps if os.path.basename(m).startswith("libcuda.so")})
    errors = []
    for path, is_driver in [(p, False) for p in runtime] + [(p, True) for p in driver] + [("libcuda.so.1", True)]:
        try:
            _runtime = _Runtime(path, is_driver)
            return _runtime
        except (OSError, AttributeError) as e:
            errors.append(f"{path}: {e}")
    raise CudaRuntimeError("cannot find the CUDA runtime PyTorch loaded (no libcudart or libcuda in /proc/self/maps): "
                           + "; ".join(errors))
