//go:build !cgo || nocuda

package cudaext

import "unsafe"

// MemAlloc fails: no CUDA in this build.
func MemAlloc(n int64) (DevicePtr, error) { return 0, errNoCUDA }

// MemFree fails: no CUDA in this build.
func MemFree(p DevicePtr) error { return errNoCUDA }

// MemGetInfo fails: no CUDA in this build.
func MemGetInfo() (free, total int64, err error) { return 0, 0, errNoCUDA }

// MemsetD8Async fails: no CUDA in this build.
func MemsetD8Async(p DevicePtr, v byte, n int64, s *Stream) error { return errNoCUDA }

// MemsetD32Async fails: no CUDA in this build.
func MemsetD32Async(p DevicePtr, v uint32, n int64, s *Stream) error { return errNoCUDA }

// MemcpyHtoDAsync fails: no CUDA in this build.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n int64, s *Stream) error { return errNoCUDA }

// MemcpyDtoHAsync fails: no CUDA in this build.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n int64, s *Stream) error { return errNoCUDA }

// MemcpyDtoDAsync fails: no CUDA in this build.
func MemcpyDtoDAsync(dst, src DevicePtr, n int64, s *Stream) error { return errNoCUDA }

// MemcpyPeerAsync fails: no CUDA in this build.
func MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s *Stream) error {
	return errNoCUDA
}

// HostRegister fails: no CUDA in this build.
func HostRegister(b []byte, flags HostRegisterFlags) error { return errNoCUDA }

// HostUnregister fails: no CUDA in this build.
func HostUnregister(b []byte) error { return errNoCUDA }

// HostDevicePointer fails: no CUDA in this build.
func HostDevicePointer(b []byte) (DevicePtr, error) { return 0, errNoCUDA }

// IPCMemHandleOf fails: no CUDA in this build.
func IPCMemHandleOf(p DevicePtr) (IPCMemHandle, error) { return IPCMemHandle{}, errNoCUDA }

// OpenIPCMem fails: no CUDA in this build.
func OpenIPCMem(h IPCMemHandle) (DevicePtr, error) { return 0, errNoCUDA }

// CloseIPCMem fails: no CUDA in this build.
func CloseIPCMem(p DevicePtr) error { return errNoCUDA }
