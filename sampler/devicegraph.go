package sampler

// A graph's CSR in one device's memory, shared by every GPU sampler on that
// device (gpu.go).

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/datasets"
)

// DeviceGraph is a graph's CSR in one device's memory.
type DeviceGraph struct {
	Indptr, Indices    cudaext.DevicePtr
	NumNodes, NumEdges int64
	Wide               bool // indices are int64 (else int32)
	Bytes              int64
}

// DeviceGraphBytes is the device memory NewDeviceGraph takes for g.
func DeviceGraphBytes(g *datasets.Graph) int64 {
	w := int64(4)
	if g.Indices64 != nil {
		w = 8
	}
	return 8*(g.NumNodes+1) + w*g.NumEdges()
}

// NewDeviceGraph copies g's CSR to the current context's device.
func NewDeviceGraph(g *datasets.Graph) (_ *DeviceGraph, err error) {
	d := &DeviceGraph{NumNodes: g.NumNodes, NumEdges: g.NumEdges(), Wide: g.Indices64 != nil, Bytes: DeviceGraphBytes(g)}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	st, err := cudaext.NewStream()
	if err != nil {
		return nil, err
	}
	defer st.Destroy()
	up := func(b []byte) (cudaext.DevicePtr, error) {
		p, err := cudaext.MemAlloc(max(int64(len(b)), 16))
		if err != nil {
			return 0, err
		}
		return p, cudaext.CopyFromHost(p, b, st)
	}
	if d.Indptr, err = up(bytesOf(g.Indptr)); err != nil {
		return nil, fmt.Errorf("sampler: the graph's indptr on the device: %w", err)
	}
	idx := bytesOf(g.Indices32)
	if d.Wide {
		idx = bytesOf(g.Indices64)
	}
	if d.Indices, err = up(idx); err != nil {
		return nil, fmt.Errorf("sampler: the graph's indices on the device: %w", err)
	}
	return d, nil
}

// Close frees the device copy.
func (d *DeviceGraph) Close() error {
	var errs []error
	for _, p := range []*cudaext.DevicePtr{&d.Indptr, &d.Indices} {
		if *p != 0 {
			errs = append(errs, cudaext.MemFree(*p))
			*p = 0
		}
	}
	return errors.Join(errs...)
}

func bytesOf[T int64 | int32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}
