//go:build cgo && !nocuda

package cudaext

/*
#include <string.h>
#include "cu.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MemAlloc allocates n bytes of device memory in the current context.
func MemAlloc(n int64) (DevicePtr, error) {
	var p C.CUdeviceptr
	if err := check("cuMemAlloc", C.gnn_cuMemAlloc(&p, C.size_t(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// MemFree frees memory from MemAlloc.
func MemFree(p DevicePtr) error {
	return check("cuMemFree", C.gnn_cuMemFree(C.CUdeviceptr(p)))
}

// MemGetInfo reports free and total memory of the current context's device.
func MemGetInfo() (free, total int64, err error) {
	var f, t C.size_t
	if err := check("cuMemGetInfo", C.gnn_cuMemGetInfo(&f, &t)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// MemsetD8Async sets n bytes at p to v on s.
func MemsetD8Async(p DevicePtr, v byte, n int64, s *Stream) error {
	return check("cuMemsetD8Async", C.gnn_cuMemsetD8Async(C.CUdeviceptr(p), C.uchar(v), C.size_t(n), s.h))
}

// MemsetD32Async sets n 32-bit words at p to v on s.
func MemsetD32Async(p DevicePtr, v uint32, n int64, s *Stream) error {
	return check("cuMemsetD32Async", C.gnn_cuMemsetD32Async(C.CUdeviceptr(p), C.uint(v), C.size_t(n), s.h))
}

// MemcpyHtoDAsync copies src to dst on s. src must stay valid and unchanged
// until the copy completes; it is asynchronous only for page-locked memory
// (registered or from the driver), and must not be Go heap memory then.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n int64, s *Stream) error {
	return check("cuMemcpyHtoDAsync", C.gnn_cuMemcpyHtoDAsync(C.CUdeviceptr(dst), src, C.size_t(n), s.h))
}

// MemcpyDtoHAsync copies n bytes from src to dst on s; see MemcpyHtoDAsync.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n int64, s *Stream) error {
	return check("cuMemcpyDtoHAsync", C.gnn_cuMemcpyDtoHAsync(dst, C.CUdeviceptr(src), C.size_t(n), s.h))
}

// MemcpyDtoDAsync copies device memory on s.
func MemcpyDtoDAsync(dst, src DevicePtr, n int64, s *Stream) error {
	return check("cuMemcpyDtoDAsync", C.gnn_cuMemcpyDtoDAsync(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), s.h))
}

// MemcpyPeerAsync copies between the memories of two contexts on s.
func MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s *Stream) error {
	return check("cuMemcpyPeerAsync", C.gnn_cuMemcpyPeerAsync(C.CUdeviceptr(dst), dstCtx.h, C.CUdeviceptr(src), srcCtx.h, C.size_t(n), s.h))
}

// HostRegister page-locks b (which must be mmap'd memory, not the Go heap)
// and, with HostRegisterDeviceMap, maps it for zero-copy device access.
// It needs a current context.
func HostRegister(b []byte, flags HostRegisterFlags) error {
	if len(b) == 0 {
		return fmt.Errorf("cudaext: HostRegister of an empty range")
	}
	return check("cuMemHostRegister", C.gnn_cuMemHostRegister(unsafe.Pointer(&b[0]), C.size_t(len(b)), C.uint(flags)))
}

// HostUnregister undoes HostRegister of the range starting at b[0].
func HostUnregister(b []byte) error {
	return check("cuMemHostUnregister", C.gnn_cuMemHostUnregister(unsafe.Pointer(&b[0])))
}

// HostDevicePointer is the device address of registered host memory at b[0].
func HostDevicePointer(b []byte) (DevicePtr, error) {
	var d C.CUdeviceptr
	if err := check("cuMemHostGetDevicePointer", C.gnn_cuMemHostGetDevicePointer(&d, unsafe.Pointer(&b[0]), 0)); err != nil {
		return 0, err
	}
	return DevicePtr(d), nil
}

// IPCMemHandleOf returns a handle for memory from MemAlloc.
func IPCMemHandleOf(p DevicePtr) (IPCMemHandle, error) {
	var h C.CUipcMemHandle
	var out IPCMemHandle
	if err := check("cuIpcGetMemHandle", C.gnn_cuIpcGetMemHandle(&h, C.CUdeviceptr(p))); err != nil {
		return out, err
	}
	C.memcpy(unsafe.Pointer(&out[0]), unsafe.Pointer(&h), 64)
	return out, nil
}

const ipcLazyEnablePeerAccess = 0x1

// OpenIPCMem maps another process's allocation into the current context.
func OpenIPCMem(h IPCMemHandle) (DevicePtr, error) {
	var ch C.CUipcMemHandle
	C.memcpy(unsafe.Pointer(&ch), unsafe.Pointer(&h[0]), 64)
	var p C.CUdeviceptr
	if err := check("cuIpcOpenMemHandle", C.gnn_cuIpcOpenMemHandle(&p, &ch, ipcLazyEnablePeerAccess)); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// CloseIPCMem unmaps memory from OpenIPCMem.
func CloseIPCMem(p DevicePtr) error {
	return check("cuIpcCloseMemHandle", C.gnn_cuIpcCloseMemHandle(C.CUdeviceptr(p)))
}
