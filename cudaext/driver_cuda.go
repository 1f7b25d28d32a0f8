//go:build cgo && !nocuda

package cudaext

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cu.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

var (
	initOnce sync.Once
	initErr  error
	loaded   bool
)

// Init loads the driver (dlopen of libcuda.so.1, every symbol resolved at
// once) and calls cuInit. It runs once; later calls return the first result.
// Without a usable driver the error wraps ErrNoDriver and names the library or
// the missing symbol; with no device it wraps ErrNoDevice. Safe for concurrent use.
func Init() error {
	initOnce.Do(func() {
		var buf [512]C.char
		path := C.CString(Library)
		defer C.free(unsafe.Pointer(path))
		if C.gnn_cu_load(path, &buf[0], C.size_t(len(buf))) != 0 {
			initErr = fmt.Errorf("cudaext: %s: %w", C.GoString(&buf[0]), ErrNoDriver)
			return
		}
		loaded = true
		if err := check("cuInit", C.gnn_cuInit(0)); err != nil {
			initErr = err
		}
	})
	return initErr
}

// probe opens path and resolves the symbols like Init, without keeping
// anything on failure (for tests: a library lacking a symbol).
func probe(path string) error {
	var buf [512]C.char
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	if C.gnn_cu_load(cp, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("cudaext: %s: %w", C.GoString(&buf[0]), ErrNoDriver)
	}
	return nil
}

// check turns a status into nil or an *Error.
func check(op string, r C.CUresult) error {
	if r == codeSuccess {
		return nil
	}
	return newError(op, int(r))
}

func newError(op string, code int) *Error {
	e := &Error{Op: op, Code: code, Name: knownNames[code]}
	if loaded {
		var s *C.char
		if C.gnn_cuGetErrorName(C.CUresult(code), &s) == codeSuccess && s != nil {
			e.Name = C.GoString(s)
		}
	}
	if e.Name == "" {
		e.Name = "CUDA_ERROR_UNKNOWN_CODE"
	}
	return e
}

// knownNames covers codes seen before the driver can name them.
var knownNames = map[int]string{
	codeInvalidValue:         "CUDA_ERROR_INVALID_VALUE",
	codeOutOfMemory:          "CUDA_ERROR_OUT_OF_MEMORY",
	codeNotInitialized:       "CUDA_ERROR_NOT_INITIALIZED",
	codeStubLibrary:          "CUDA_ERROR_STUB_LIBRARY",
	codeInsufficientDriver:   "CUDA_ERROR_INSUFFICIENT_DRIVER",
	codeNoDevice:             "CUDA_ERROR_NO_DEVICE",
	codeInvalidDevice:        "CUDA_ERROR_INVALID_DEVICE",
	codeNotReady:             "CUDA_ERROR_NOT_READY",
	codeHostMemAlreadyReg:    "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	codeHostMemNotRegistered: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	codePeerAlreadyEnabled:   "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	codeSystemDriverMismatch: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
}

// DriverVersion is the CUDA version the driver supports, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.gnn_cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount is the number of CUDA devices.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.gnn_cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device is a CUDA device handle (cuDeviceGet).
type Device struct {
	Ordinal int
	h       C.CUdevice
}

// GetDevice returns device ordinal.
func GetDevice(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return Device{}, err
	}
	var d C.CUdevice
	if err := check("cuDeviceGet", C.gnn_cuDeviceGet(&d, C.int(ordinal))); err != nil {
		return Device{}, err
	}
	return Device{Ordinal: ordinal, h: d}, nil
}

// Attribute reads a device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	var v C.int
	if err := check("cuDeviceGetAttribute", C.gnn_cuDeviceGetAttribute(&v, C.int(a), d.h)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Name is the device's product name.
func (d Device) Name() (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.gnn_cuDeviceGetName(&buf[0], C.int(len(buf)), d.h)); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// PCIBusID is the device's PCI address, e.g. "0000:18:00.0".
func (d Device) PCIBusID() (string, error) {
	var buf [64]C.char
	if err := check("cuDeviceGetPCIBusId", C.gnn_cuDeviceGetPCIBusId(&buf[0], C.int(len(buf)), d.h)); err != nil {
		return "", err
	}
	return strings.ToLower(C.GoString(&buf[0])), nil
}

// TotalMem is the device's memory in bytes.
func (d Device) TotalMem() (int64, error) {
	var n C.size_t
	if err := check("cuDeviceTotalMem", C.gnn_cuDeviceTotalMem(&n, d.h)); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// CanAccessPeer reports whether d can map peer's memory.
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	var v C.int
	if err := check("cuDeviceCanAccessPeer", C.gnn_cuDeviceCanAccessPeer(&v, d.h, peer.h)); err != nil {
		return false, err
	}
	return v != 0, nil
}

// Context is a retained primary context. It is current per OS thread: call
// Do, or lock the goroutine to its thread and call SetCurrent, before any
// call that works in the current context.
type Context struct {
	Device Device
	h      C.CUcontext
	mu     sync.Mutex
	rel    bool
}

// RetainPrimaryContext retains d's primary context (the one the CUDA runtime,
// and so PyTorch, uses too). Release it once when done.
func (d Device) RetainPrimaryContext() (*Context, error) {
	var c C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.gnn_cuDevicePrimaryCtxRetain(&c, d.h)); err != nil {
		return nil, err
	}
	return &Context{Device: d, h: c}, nil
}

// Release drops the retain; later calls do nothing.
func (c *Context) Release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rel {
		return nil
	}
	c.rel = true
	return check("cuDevicePrimaryCtxRelease", C.gnn_cuDevicePrimaryCtxRelease(c.Device.h))
}

// SetCurrent makes c current on the calling OS thread. The goroutine should
// be locked to its thread (runtime.LockOSThread) for as long as it relies on it.
func (c *Context) SetCurrent() error {
	return check("cuCtxSetCurrent", C.gnn_cuCtxSetCurrent(c.h))
}

// Synchronize waits for all work in the current context (cuCtxSynchronize).
func Synchronize() error {
	return check("cuCtxSynchronize", C.gnn_cuCtxSynchronize())
}

// EnablePeerAccess lets the current context access peer's memory. Enabling
// it twice is not an error.
func EnablePeerAccess(peer *Context) error {
	r := C.gnn_cuCtxEnablePeerAccess(peer.h, 0)
	if r == codePeerAlreadyEnabled {
		return nil
	}
	return check("cuCtxEnablePeerAccess", r)
}
