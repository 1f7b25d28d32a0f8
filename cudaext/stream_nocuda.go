//go:build !cgo || nocuda

package cudaext

import "time"

// Stream is a CUDA stream; none can be made in this build.
type Stream struct{}

// NewStream fails: no CUDA in this build.
func NewStream() (*Stream, error) { return nil, errNoCUDA }

// Handle is 0: there is no stream.
func (s *Stream) Handle() uintptr { return 0 }

// Synchronize fails: no CUDA in this build.
func (s *Stream) Synchronize() error { return errNoCUDA }

// Done fails: no CUDA in this build.
func (s *Stream) Done() (bool, error) { return false, errNoCUDA }

// WaitEvent fails: no CUDA in this build.
func (s *Stream) WaitEvent(e *Event) error { return errNoCUDA }

// Destroy has nothing to destroy.
func (s *Stream) Destroy() error { return nil }

// WriteValue32 fails: no CUDA in this build.
func (s *Stream) WriteValue32(addr DevicePtr, v uint32) error { return errNoCUDA }

// Event is a CUDA event; none can be made in this build.
type Event struct{}

// NewEvent fails: no CUDA in this build.
func NewEvent(flags EventFlags) (*Event, error) { return nil, errNoCUDA }

// Record fails: no CUDA in this build.
func (e *Event) Record(s *Stream) error { return errNoCUDA }

// Synchronize fails: no CUDA in this build.
func (e *Event) Synchronize() error { return errNoCUDA }

// Done fails: no CUDA in this build.
func (e *Event) Done() (bool, error) { return false, errNoCUDA }

// Elapsed fails: no CUDA in this build.
func Elapsed(start, end *Event) (time.Duration, error) { return 0, errNoCUDA }

// Destroy has nothing to destroy.
func (e *Event) Destroy() error { return nil }

// IPCHandle fails: no CUDA in this build.
func (e *Event) IPCHandle() (IPCEventHandle, error) { return IPCEventHandle{}, errNoCUDA }

// OpenIPCEvent fails: no CUDA in this build.
func OpenIPCEvent(h IPCEventHandle) (*Event, error) { return nil, errNoCUDA }
