package cudaext

/*
#include <stdlib.h>
#include <string.h>
#include "cu.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Stream is a non-blocking CUDA stream (it never synchronises with the legacy
// default stream). Calls that take it work in its context, which must be
// current on the calling thread.
type Stream struct{ h C.CUstream }

const streamNonBlocking = 0x1

// NewStream creates a non-blocking stream in the current context.
func NewStream() (*Stream, error) {
	var s C.CUstream
	if err := check("cuStreamCreate", C.gnn_cuStreamCreate(&s, streamNonBlocking)); err != nil {
		return nil, err
	}
	return &Stream{h: s}, nil
}

// Handle is the raw CUstream, for code that hands it to other libraries.
func (s *Stream) Handle() uintptr { return uintptr(unsafe.Pointer(s.h)) }

// Synchronize waits until all work on s has finished.
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", C.gnn_cuStreamSynchronize(s.h))
}

// Done reports whether all work on s has finished, without waiting.
func (s *Stream) Done() (bool, error) {
	r := C.gnn_cuStreamQuery(s.h)
	if r == codeNotReady {
		return false, nil
	}
	return r == codeSuccess, check("cuStreamQuery", r)
}

// WaitEvent makes later work on s wait for the last record of e (GPU side).
func (s *Stream) WaitEvent(e *Event) error {
	return check("cuStreamWaitEvent", C.gnn_cuStreamWaitEvent(s.h, e.h, 0))
}

// Destroy destroys the stream; pending work still completes.
func (s *Stream) Destroy() error {
	if s == nil || s.h == nil {
		return nil
	}
	err := check("cuStreamDestroy", C.gnn_cuStreamDestroy(s.h))
	s.h = nil
	return err
}

// EventFlags are cuEventCreate's flags.
type EventFlags uint

const (
	EventDefault       EventFlags = 0x0
	EventBlockingSync  EventFlags = 0x1
	EventDisableTiming EventFlags = 0x2
	// EventInterprocess needs EventDisableTiming too.
	EventInterprocess EventFlags = 0x4
)

// Event is a CUDA event.
type Event struct{ h C.CUevent }

// NewEvent creates an event in the current context.
func NewEvent(flags EventFlags) (*Event, error) {
	var e C.CUevent
	if err := check("cuEventCreate", C.gnn_cuEventCreate(&e, C.uint(flags))); err != nil {
		return nil, err
	}
	return &Event{h: e}, nil
}

// Record enqueues the event on s.
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", C.gnn_cuEventRecord(e.h, s.h))
}

// Synchronize waits for the last record of e.
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", C.gnn_cuEventSynchronize(e.h))
}

// Done reports whether the last record of e has completed.
func (e *Event) Done() (bool, error) {
	r := C.gnn_cuEventQuery(e.h)
	if r == codeNotReady {
		return false, nil
	}
	return r == codeSuccess, check("cuEventQuery", r)
}

// Elapsed is the GPU time between two completed records (start before end).
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms C.float
	if err := check("cuEventElapsedTime", C.gnn_cuEventElapsedTime(&ms, start.h, end.h)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	if e == nil || e.h == nil {
		return nil
	}
	err := check("cuEventDestroy", C.gnn_cuEventDestroy(e.h))
	e.h = nil
	return err
}

// IPCEventHandle is the 64-byte handle another process opens an event with.
type IPCEventHandle [64]byte

// IPCHandle returns a handle for an event made with EventInterprocess|EventDisableTiming.
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	var h C.CUipcEventHandle
	var out IPCEventHandle
	if err := check("cuIpcGetEventHandle", C.gnn_cuIpcGetEventHandle(&h, e.h)); err != nil {
		return out, err
	}
	C.memcpy(unsafe.Pointer(&out[0]), unsafe.Pointer(&h), 64)
	return out, nil
}

// OpenIPCEvent opens another process's event in the current context.
func OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	var ch C.CUipcEventHandle
	C.memcpy(unsafe.Pointer(&ch), unsafe.Pointer(&h[0]), 64)
	var e C.CUevent
	if err := check("cuIpcOpenEventHandle", C.gnn_cuIpcOpenEventHandle(&e, &ch)); err != nil {
		return nil, err
	}
	return &Event{h: e}, nil
}

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

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

// CopyToHost copies device memory into a Go slice and waits (for tests and
// small reads). b may be Go heap memory.
func CopyToHost(b []byte, src DevicePtr, s *Stream) error {
	if len(b) == 0 {
		return nil
	}
	if err := MemcpyDtoHAsync(unsafe.Pointer(&b[0]), src, int64(len(b)), s); err != nil {
		return err
	}
	return s.Synchronize()
}

// CopyFromHost copies a Go slice to device memory and waits.
func CopyFromHost(dst DevicePtr, b []byte, s *Stream) error {
	if len(b) == 0 {
		return nil
	}
	if err := MemcpyHtoDAsync(dst, unsafe.Pointer(&b[0]), int64(len(b)), s); err != nil {
		return err
	}
	return s.Synchronize()
}

// HostRegisterFlags are cuMemHostRegister's flags.
type HostRegisterFlags uint

const (
	HostRegisterPortable  HostRegisterFlags = 0x1 // visible to every context
	HostRegisterDeviceMap HostRegisterFlags = 0x2 // mapped into the device address space
	HostRegisterReadOnly  HostRegisterFlags = 0x8
)

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

// IPCMemHandle is the 64-byte handle another process opens an allocation with.
type IPCMemHandle [64]byte

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

// Module is a loaded fatbin, cubin or PTX image.
type Module struct{ h C.CUmodule }

// LoadModule loads an image into the current context. The image is copied
// into C memory for the call, so it may be Go memory.
func LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cudaext: empty module image")
	}
	img := C.CBytes(append(image[:len(image):len(image)], 0))
	defer C.free(img)
	var m C.CUmodule
	if err := check("cuModuleLoadData", C.gnn_cuModuleLoadData(&m, img)); err != nil {
		return nil, err
	}
	return &Module{h: m}, nil
}

// Function looks a kernel up by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	if err := check("cuModuleGetFunction("+name+")", C.gnn_cuModuleGetFunction(&f, m.h, cs)); err != nil {
		return nil, err
	}
	return &Function{h: f, Name: name}, nil
}

// Unload unloads the module.
func (m *Module) Unload() error {
	if m == nil || m.h == nil {
		return nil
	}
	err := check("cuModuleUnload", C.gnn_cuModuleUnload(m.h))
	m.h = nil
	return err
}

// Function is a kernel in a loaded module.
type Function struct {
	h    C.CUfunction
	Name string
}

// Dim3 is a grid or block shape; zero fields count as 1.
type Dim3 struct{ X, Y, Z uint32 }

func one(v uint32) C.uint {
	if v == 0 {
		return 1
	}
	return C.uint(v)
}

// Launch enqueues the kernel on s. Each argument must be a value the kernel
// takes by value: int32, uint32, int64, uint64, float32, float64, uintptr,
// DevicePtr (pointers are passed as DevicePtr) or [8]uint64 (a struct of
// eight 64-bit fields).
func (f *Function) Launch(grid, block Dim3, sharedMem int, s *Stream, args ...any) error {
	if s == nil || s.h == nil {
		return fmt.Errorf("cudaext: %s launched without a stream (the legacy default stream is never used)", f.Name)
	}
	n := len(args)
	// One C block: n pointers, then each argument in an 8-byte aligned slot.
	size := 8 * (n + 1)
	for _, a := range args {
		if _, ok := a.([8]uint64); ok {
			size += 64
		} else {
			size += 8
		}
	}
	mem := C.malloc(C.size_t(size))
	defer C.free(mem)
	ptrs := unsafe.Slice((*unsafe.Pointer)(mem), n+1)
	off := 8 * (n + 1)
	for i, a := range args {
		slot := unsafe.Add(mem, off)
		off += 8
		switch v := a.(type) {
		case int32:
			*(*int32)(slot) = v
		case uint32:
			*(*uint32)(slot) = v
		case int64:
			*(*int64)(slot) = v
		case uint64:
			*(*uint64)(slot) = v
		case DevicePtr:
			*(*uint64)(slot) = uint64(v)
		case uintptr:
			*(*uint64)(slot) = uint64(v)
		case float32:
			*(*float32)(slot) = v
		case float64:
			*(*float64)(slot) = v
		case [8]uint64:
			*(*[8]uint64)(slot) = v
			off += 56
		default:
			return fmt.Errorf("cudaext: %s argument %d has unsupported type %T", f.Name, i, a)
		}
		ptrs[i] = slot
	}
	var pp *unsafe.Pointer
	if n > 0 {
		pp = &ptrs[0]
	}
	return check("cuLaunchKernel("+f.Name+")", C.gnn_cuLaunchKernel(f.h,
		one(grid.X), one(grid.Y), one(grid.Z), one(block.X), one(block.Y), one(block.Z),
		C.uint(sharedMem), s.h, pp, nil))
}

// MaxActiveBlocksPerSM is the occupancy of f at this block size.
func (f *Function) MaxActiveBlocksPerSM(blockSize, sharedMem int) (int, error) {
	var n C.int
	if err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
		C.gnn_cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f.h, C.int(blockSize), C.size_t(sharedMem))); err != nil {
		return 0, err
	}
	return int(n), nil
}
