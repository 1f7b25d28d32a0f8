package gather

// The pinned staging of the CUDA backend: areas reused round robin for the
// index uploads and for CopyIn, and their memory.

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/pinned"
)

// stagingAreas is how many uploads (a batch's indices, or its labels and
// structure) may be in flight: reusing an area waits for its previous
// upload only, so the CPU can prepare the next fill while the GPU still runs
// the current one. With one area, a fill's second upload waited for the
// previous fill's kernel, and the GPU then idled while the CPU prepared.
const stagingAreas = 4

// stagingArea is pinned host memory for uploads and, for indices the
// kernels read, the device memory they go to (labels and structure go from
// the host memory straight to their slots).
type stagingArea struct {
	host    []byte
	dev     cudaext.DevicePtr
	hostCap int64
	devCap  int64
	done    *cudaext.Event // recorded after the area's last upload
}

// reserve returns pinned staging space for parts of the given sizes (each
// 16-byte aligned) in the next staging area, once that area's previous upload
// has left its host memory, and, with device set, the device addresses the
// parts are uploaded to. Fill the slices, then call upload (device) or
// uploadTo. Work on the stream that reads an area's device memory comes
// before its next upload, since both are on the stream. Called with the
// context current and g.mu held.
func (g *CUDA) reserve(device bool, sizes ...int64) ([][]byte, []cudaext.DevicePtr, int64, error) {
	var need int64
	for _, n := range sizes {
		need += (n + 15) &^ 15
	}
	a := &g.areas[g.cur]
	if err := a.done.Synchronize(); err != nil {
		return nil, nil, 0, err
	}
	grow := func(n int64) int64 {
		c := max(n, 1<<20)
		return (c + c/4 + pinned.HugePage - 1) &^ (pinned.HugePage - 1)
	}
	if need > a.hostCap {
		if err := a.freeHost(); err != nil {
			return nil, nil, 0, err
		}
		c := grow(need)
		h, err := pinned.Alloc(c)
		if err != nil {
			return nil, nil, 0, err
		}
		if err := cudaext.HostRegister(h, cudaext.HostRegisterPortable); err != nil {
			pinned.Free(h)
			return nil, nil, 0, err
		}
		a.host, a.hostCap = h, c
	}
	if device && need > a.devCap {
		if err := g.stream.Synchronize(); err != nil { // the device copy may still be read
			return nil, nil, 0, err
		}
		if err := a.freeDev(); err != nil {
			return nil, nil, 0, err
		}
		c := grow(need)
		d, err := cudaext.MemAlloc(c)
		if err != nil {
			return nil, nil, 0, err
		}
		a.dev, a.devCap = d, c
	}
	host := make([][]byte, len(sizes))
	var dev []cudaext.DevicePtr
	if device {
		dev = make([]cudaext.DevicePtr, len(sizes))
	}
	var off int64
	for i, n := range sizes {
		host[i] = a.host[off : off+n]
		if device {
			dev[i] = a.dev + cudaext.DevicePtr(off)
		}
		off += (n + 15) &^ 15
	}
	return host, dev, off, nil
}

// upload copies the first n bytes of the area reserve handed out to its
// device memory on the stream (one copy for all its parts); the next reserve
// takes the next area.
func (g *CUDA) upload(n int64) error {
	a := &g.areas[g.cur]
	return g.uploadTo([][]byte{a.host[:n]}, []cudaext.DevicePtr{a.dev})
}

// uploadTo copies host[i] (the parts reserve handed out) to dsts[i] on the
// stream; the next reserve takes the next area.
func (g *CUDA) uploadTo(host [][]byte, dsts []cudaext.DevicePtr) error {
	a := &g.areas[g.cur]
	g.cur = (g.cur + 1) % stagingAreas
	for i, h := range host {
		if len(h) > 0 {
			if err := cudaext.MemcpyHtoDAsync(dsts[i], unsafe.Pointer(&h[0]), int64(len(h)), g.stream); err != nil {
				return errors.Join(err, a.done.Record(g.stream))
			}
		}
	}
	return a.done.Record(g.stream)
}

func (a *stagingArea) free() error { return errors.Join(a.freeHost(), a.freeDev()) }

func (a *stagingArea) freeHost() error {
	if a.host == nil {
		return nil
	}
	err := errors.Join(cudaext.HostUnregister(a.host), pinned.Free(a.host))
	a.host, a.hostCap = nil, 0
	return err
}

func (a *stagingArea) freeDev() error {
	if a.dev == 0 {
		return nil
	}
	err := cudaext.MemFree(a.dev)
	a.dev, a.devCap = 0, 0
	return err
}

// uint32s views 4-byte aligned bytes as uint32s.
func uint32s(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func bytesOf[T int64 | int32 | uint64 | uint32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// Copy is a host buffer to copy to device memory.
type Copy struct {
	Dst cudaext.DevicePtr
	Src []byte
}

// CopyIn enqueues copies of host buffers (a batch's labels and structure,
// say) to device memory on the backend's stream, through its pinned staging:
// the sources are copied into it, then each goes host to device straight to
// its destination. The sources may be reused when CopyIn returns.
func (g *CUDA) CopyIn(copies ...Copy) error {
	fills := make([]Fill, len(copies))
	for i, c := range copies {
		fills[i] = Fill{Dst: c.Dst, Bytes: int64(len(c.Src))}
	}
	return g.CopyInWith(fills, func(host [][]byte) error {
		for i, c := range copies {
			copy(host[i], c.Src)
		}
		return nil
	})
}

// Fill is a destination of CopyInWith: Bytes bytes to device memory at Dst.
type Fill struct {
	Dst   cudaext.DevicePtr
	Bytes int64
}

// CopyInWith is CopyIn for data the caller writes straight into the pinned
// staging, saving a copy: fill gets host[i] (16-byte aligned, fills[i].Bytes
// long) for each destination and must fill it before it returns. On an
// error from fill nothing is enqueued.
func (g *CUDA) CopyInWith(fills []Fill, fill func(host [][]byte) error) error {
	sizes := make([]int64, len(fills))
	var any bool
	for i, f := range fills {
		sizes[i] = f.Bytes
		if f.Bytes < 0 {
			return fmt.Errorf("gather: copy %d of %d bytes", i, f.Bytes)
		}
		if f.Bytes > 0 {
			if f.Dst == 0 {
				return fmt.Errorf("gather: copy %d has no destination", i)
			}
			any = true
		}
	}
	if !any {
		return nil
	}
	return g.do(func() error {
		host, _, _, err := g.reserve(false, sizes...)
		if err != nil {
			return err
		}
		if err := fill(host); err != nil {
			return err
		}
		dsts := make([]cudaext.DevicePtr, len(fills))
		for i, f := range fills {
			dsts[i] = f.Dst
		}
		return g.uploadTo(host, dsts)
	})
}
