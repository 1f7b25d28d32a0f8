//go:build cgo && !nocuda

package cudaext

/*
#include <string.h>
#include "cu.h"
*/
import "C"

import (
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

// WriteValue32 writes v into the 32-bit word at addr once the work queued on
// s before it is done, after a memory barrier: a reader that sees v sees
// everything that work wrote (cuStreamWriteValue32). ErrNotSupported where
// the driver has no stream memory operations.
func (s *Stream) WriteValue32(addr DevicePtr, v uint32) error {
	return check("cuStreamWriteValue32", C.gnn_cuStreamWriteValue32(s.h, C.CUdeviceptr(addr), C.uint32_t(v), 0))
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
