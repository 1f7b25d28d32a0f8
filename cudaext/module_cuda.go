//go:build cgo && !nocuda

package cudaext

/*
#include <stdlib.h>
#include "cu.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

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

func one(v uint32) C.uint {
	if v == 0 {
		return 1
	}
	return C.uint(v)
}

// Launch enqueues the kernel on s. Each argument must be a value the kernel
// takes by value: int32, uint32, int64, uint64, float32, float64, uintptr,
// DevicePtr (pointers are passed as DevicePtr), [8]uint64, [16]uint64 or
// [32]uint64 (a struct of eight, sixteen or thirty-two 64-bit fields).
func (f *Function) Launch(grid, block Dim3, sharedMem int, s *Stream, args ...any) error {
	if s == nil || s.h == nil {
		return fmt.Errorf("cudaext: %s launched without a stream (the legacy default stream is never used)", f.Name)
	}
	n := len(args)
	// One C block: n pointers, then each argument in an 8-byte aligned slot.
	size := 8 * (n + 1)
	for _, a := range args {
		switch a.(type) {
		case [8]uint64:
			size += 64
		case [16]uint64:
			size += 128
		case [32]uint64:
			size += 256
		default:
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
		case [16]uint64:
			*(*[16]uint64)(slot) = v
			off += 120
		case [32]uint64:
			*(*[32]uint64)(slot) = v
			off += 248
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
