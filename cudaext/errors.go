package cudaext

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is. A *Error whose code means the same thing matches
// them, and so does the error Init returns when the driver cannot be loaded.
var (
	// ErrNoDriver: libcuda.so.1 is missing, lacks a symbol gnnloader needs,
	// or is too old or a stub.
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrNoDevice: the driver is there but sees no CUDA device.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrOutOfMemory: an allocation or registration failed for lack of memory.
	ErrOutOfMemory = errors.New("cuda: out of memory")
	// ErrNotSupported: the driver or device lacks the operation (e.g.
	// stream memory operations).
	ErrNotSupported = errors.New("cuda: not supported")
)

// CUDA driver status codes that gnnloader names itself (cuda.h's CUresult).
const (
	codeSuccess              = 0
	codeInvalidValue         = 1
	codeOutOfMemory          = 2
	codeNotInitialized       = 3
	codeStubLibrary          = 34
	codeInsufficientDriver   = 35
	codeNoDevice             = 100
	codeInvalidDevice        = 101
	codeNotReady             = 600
	codeHostMemAlreadyReg    = 712
	codeHostMemNotRegistered = 713
	codePeerAlreadyEnabled   = 704
	codeNotSupported         = 801
	codeSystemDriverMismatch = 803
)

// Error is a CUDA driver call that returned a status other than success.
type Error struct {
	Op   string // the driver function, e.g. "cuMemAlloc"
	Code int    // the CUresult
	Name string // the driver's name for Code, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Op, e.Name, e.Code)
}

// Is matches the package's sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoDevice:
		return e.Code == codeNoDevice || e.Code == codeInvalidDevice
	case ErrOutOfMemory:
		return e.Code == codeOutOfMemory
	case ErrNotSupported:
		return e.Code == codeNotSupported
	case ErrNoDriver:
		return e.Code == codeStubLibrary || e.Code == codeInsufficientDriver || e.Code == codeSystemDriverMismatch
	}
	return false
}
