package gather

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/pinned"
)

// CUDAOptions tune the CUDA backend. Nil means the defaults.
type CUDAOptions struct {
	// MaxSMs caps the SMs a gather uses, so training can run beside it: the
	// grid is MaxSMs blocks of 1024 threads (one block per SM). 0 means
	// DefaultSMs; a negative value means every SM, at full occupancy with
	// blocks of 256 threads.
	MaxSMs int

	// Labels is a device copy of the labels (int32 per table row) for
	// sweeps planned on the GPU that assemble a batch's y (SweepOnDevice);
	// 0 means none. The caller owns it.
	Labels cudaext.DevicePtr
	// Cache, when not nil, holds rows in device memory that sweeps planned
	// on the GPU copy from there instead of reading them over PCIe. The
	// caller owns it.
	Cache *DeviceCache
	// Timing times the phases of sweeps planned on the GPU with events
	// (PlanStats' times), for benchmarks.
	Timing bool

	// For benchmarks: force the any-size kernels, and read whole 128-byte
	// lines there (mode 1) rather than only the chunks a row overlaps.
	forceAny, fullLines bool
}

// CUDA gathers rows from a pinned, registered table into device memory with
// zero-copy kernels on its own non-blocking stream. Rows are read in the order
// Gather's order argument gives (ascending addresses with the sampler's
// permutation) and written in hop order. Gather and Sweep only enqueue work:
// the results are ready after Sync, or after an event recorded on Stream. A
// CUDA may be used by several goroutines; calls are serialised.
type CUDA struct {
	mu     sync.Mutex
	ctx    *cudaext.Context
	tab    Table
	dev    cudaext.DevicePtr // device address of the table's row 0
	stream *cudaext.Stream
	mod    *cudaext.Module
	fn     map[string]*cudaext.Function
	grid   map[string]int // blocks per launch at full size
	block  int
	sms    int
	opts   CUDAOptions
	areas  [stagingAreas]stagingArea
	cur    int // the area reserve hands out next
	closed bool

	planMod *cudaext.Module // plan.fatbin, loaded at the first SweepOnDevice
	plan    planBuffers
	timing  struct {
		cur           sweepEvents
		free, pending []sweepEvents
	}
	timed struct {
		n                    uint64
		plan, read, assemble time.Duration
	}
}

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

// DefaultSMs is the gather's default grid: this many blocks of 1024 threads.
// Fewer rows in flight keep the reads within a narrower window of the table,
// which is what sparse passes over large tables need: on an H200 (PCIe Gen5),
// a sorted sweep of 3 batches (2.1 M rows) over a 111 M-row table ran at
// 50.3 GB/s on 16 SMs, 47.6 on 32, 43.4 on 64 and 42.9 on all 132; on a 16 M-row
// table 16 SMs were as fast as all of them (bench: gather.RunBench).
const DefaultSMs = 16

// defaultAnySMs is the default grid of the any-size kernels, which keep one
// row a warp in flight: on 254-byte rows 32 SMs ran at 42.3 GB/s against
// 38.7 on 16 (H200).
const defaultAnySMs = 32

var kernelNames = []string{"gnn_gather16", "gnn_gather_any", "gnn_sweep16", "gnn_sweep_any"}

// NewCUDA makes a CUDA backend in ctx over store, which must be registered.
func NewCUDA(ctx *cudaext.Context, store *pinned.Store, o *CUDAOptions) (g *CUDA, err error) {
	if !store.Registered() {
		return nil, fmt.Errorf("gather: the table is not registered with the CUDA driver")
	}
	if store.NumRows > 1<<32 {
		return nil, fmt.Errorf("gather: the CUDA backend takes tables of at most 2^32 rows, not %d", store.NumRows)
	}
	if store.DevicePtr%16 != 0 {
		return nil, fmt.Errorf("gather: table device address %#x is not 16-byte aligned", store.DevicePtr)
	}
	g = &CUDA{ctx: ctx, tab: TableOf(store), dev: store.DevicePtr, fn: map[string]*cudaext.Function{}, grid: map[string]int{}, block: 256}
	if o != nil {
		g.opts = *o
	}
	if g.opts.MaxSMs == 0 {
		g.opts.MaxSMs = DefaultSMs
	}
	if g.opts.MaxSMs > 0 {
		g.block = 1024
	}
	err = ctx.Do(func() error {
		img, err := cudaext.GatherImage()
		if err != nil {
			return err
		}
		if g.mod, err = cudaext.LoadModule(img); err != nil {
			return err
		}
		if g.sms, err = ctx.Device.Attribute(cudaext.AttrMultiprocessorCount); err != nil {
			return err
		}
		for _, name := range kernelNames {
			f, err := g.mod.Function(name)
			if err != nil {
				return err
			}
			g.fn[name] = f
			occ, err := f.MaxActiveBlocksPerSM(g.block, g.shared(name))
			if err != nil {
				return err
			}
			if occ < 1 {
				return fmt.Errorf("gather: kernel %s cannot run with %d threads a block", name, g.block)
			}
			if g.opts.MaxSMs > 0 {
				sms := g.opts.MaxSMs
				if o == nil || o.MaxSMs == 0 {
					if name == "gnn_gather_any" || name == "gnn_sweep_any" {
						sms = defaultAnySMs
					}
				}
				g.grid[name] = min(sms, g.sms)
			} else {
				g.grid[name] = occ * g.sms
			}
		}
		if g.stream, err = cudaext.NewStream(); err != nil {
			return err
		}
		for i := range g.areas {
			if g.areas[i].done, err = cudaext.NewEvent(cudaext.EventDisableTiming); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *CUDA) shared(name string) int {
	if name == "gnn_gather_any" || name == "gnn_sweep_any" {
		return g.block / 32 * 512
	}
	return 0
}

// Table is the backend's table.
func (g *CUDA) Table() Table { return g.tab }

// Stream is the backend's non-blocking stream: record events on it, or
// enqueue the batch's other copies (labels, structure) so they order with the gather.
func (g *CUDA) Stream() *cudaext.Stream { return g.stream }

// Context is the context the backend works in.
func (g *CUDA) Context() *cudaext.Context { return g.ctx }

// SMs is the number of SMs of the device.
func (g *CUDA) SMs() int { return g.sms }

// Sync waits for everything enqueued so far.
func (g *CUDA) Sync() error {
	return g.ctx.Do(g.stream.Synchronize)
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

// shape picks the kernel family for rows of rb bytes written at addresses
// with alignment align: the 16-byte kernels with 1<<shift lanes a row, or the
// any-size kernels with 1<<shift-byte stores.
func (g *CUDA) shape(rb int64, align uint64) (wide bool, shift int) {
	if rb%16 == 0 && align%16 == 0 && !g.opts.forceAny {
		chunks := rb / 16
		if chunks >= 32 {
			return true, 5
		}
		return true, bits.Len64(uint64(chunks - 1))
	}
	a := uint64(rb) | align | 8
	return false, min(bits.TrailingZeros64(a), 3)
}

func (g *CUDA) blocks(name string, n int64, shift int, wide bool) uint32 {
	lanes := int64(32)
	if wide {
		lanes = 1 << shift
	}
	need := (n*lanes + int64(g.block) - 1) / int64(g.block)
	return uint32(max(1, min(int64(g.grid[name]), need)))
}

func (g *CUDA) checkDest(dst Dest, rows int) error {
	if dst.Device == 0 {
		return fmt.Errorf("gather: the CUDA backend needs a device destination")
	}
	if dst.DeviceBytes != 0 && dst.DeviceBytes < int64(rows)*int64(g.tab.RowBytes) {
		return fmt.Errorf("gather: destination holds %d bytes, want %d rows x %d bytes", dst.DeviceBytes, rows, g.tab.RowBytes)
	}
	return nil
}

// Gather enqueues the gather of rows nid into dst.Device on the backend's
// stream (see Backend). Ids are checked on the CPU first; on an error nothing
// is enqueued.
func (g *CUDA) Gather(ctx context.Context, dst Dest, nid []int64, order []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if order != nil && len(order) != len(nid) {
		return fmt.Errorf("gather: order has %d entries for %d rows", len(order), len(nid))
	}
	if err := g.checkDest(dst, len(nid)); err != nil {
		return err
	}
	for i, v := range nid {
		if v < 0 || v >= g.tab.NumRows {
			return fmt.Errorf("gather: row id nid[%d] = %d out of range [0, %d)", i, v, g.tab.NumRows)
		}
	}
	if len(nid) == 0 {
		return nil
	}
	return g.do(func() error {
		ix, err := g.prepareGather(nid, order)
		if err != nil {
			return err
		}
		return g.launchGather(dst, ix)
	})
}

// staged is a batch's indices on the device. With nDev set, n is a
// capacity and the kernels read the count from device memory.
type staged struct {
	rows, pos, first, extras cudaext.DevicePtr
	nDev                     cudaext.DevicePtr
	n                        int64
}

// prepareGather uploads the batch's rows in reading order (uint32) and, with
// an order, their positions. Context current, g.mu held.
func (g *CUDA) prepareGather(nid []int64, order []int32) (staged, error) {
	n := int64(len(nid))
	sizes := []int64{4 * n}
	if order != nil {
		sizes = append(sizes, 4*n)
	}
	host, dev, total, err := g.reserve(true, sizes...)
	if err != nil {
		return staged{}, err
	}
	rows := unsafe.Slice((*uint32)(unsafe.Pointer(&host[0][0])), n)
	ix := staged{rows: dev[0], n: n}
	if order != nil {
		for k, i := range order {
			rows[k] = uint32(nid[i])
		}
		copy(host[1], bytesOf(order))
		ix.pos = dev[1]
	} else {
		for k, v := range nid {
			rows[k] = uint32(v)
		}
	}
	return ix, g.upload(total)
}

func (g *CUDA) mode() int32 {
	if g.opts.fullLines {
		return 1
	}
	return 0
}

// launchGather enqueues the gather kernel over staged indices.
func (g *CUDA) launchGather(dst Dest, ix staged) error {
	rb := int64(g.tab.RowBytes)
	wide, shift := g.shape(rb, uint64(dst.Device))
	block := cudaext.Dim3{X: uint32(g.block)}
	if wide {
		const name = "gnn_gather16"
		return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide)}, block, 0, g.stream,
			g.dev, rb, ix.rows, ix.pos, ix.n, ix.nDev, dst.Device, int32(shift))
	}
	const name = "gnn_gather_any"
	return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide)}, block, g.shared(name), g.stream,
		g.dev, rb, ix.rows, ix.pos, ix.n, ix.nDev, dst.Device, int32(shift), g.mode())
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

// Sweep enqueues one sorted pass over the union of the parts' rows: each
// distinct row is read once and written to every part and position that needs
// it. It returns the plan it ran (its Unique and Delivered counts).
func (g *CUDA) Sweep(ctx context.Context, parts []SweepPart) (*SweepPlan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pl, err := PlanSweep(parts, g.tab.NumRows)
	if err != nil {
		return nil, err
	}
	return pl, g.SweepPlanned(ctx, parts, pl)
}

// SweepPlanned is Sweep with a plan made beforehand by PlanSweep (in the
// sampler stage, say), so only the upload and the kernel are left.
func (g *CUDA) SweepPlanned(ctx context.Context, parts []SweepPart, pl *SweepPlan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	align := uint64(0)
	for k, p := range parts {
		if err := g.checkDest(p.Dst, len(p.Nid)); err != nil {
			return fmt.Errorf("sweep part %d: %w", k, err)
		}
		align |= uint64(p.Dst.Device)
	}
	if pl.Unique() == 0 {
		return nil
	}
	if len(parts) > MaxSweepParts {
		return fmt.Errorf("gather: a sweep covers at most %d batches", MaxSweepParts)
	}
	return g.do(func() error {
		ix, err := g.prepareSweep(pl)
		if err != nil {
			return err
		}
		return g.launchSweep(parts, align, ix)
	})
}

// prepareSweep uploads the plan's compact arrays. Context current, g.mu held.
func (g *CUDA) prepareSweep(pl *SweepPlan) (staged, error) {
	n := pl.Unique()
	host, dev, total, err := g.reserve(true, 4*n, 4*n, 4*pl.extras())
	if err != nil {
		return staged{}, err
	}
	pl.compact(uint32s(host[0]), uint32s(host[1]), uint32s(host[2]))
	return staged{rows: dev[0], first: dev[1], extras: dev[2], n: n}, g.upload(total)
}

// launchSweep enqueues the sweep kernel over staged indices.
func (g *CUDA) launchSweep(parts []SweepPart, align uint64, ix staged) error {
	var bases [8]uint64
	for k, p := range parts {
		bases[k] = uint64(p.Dst.Device)
	}
	rb := int64(g.tab.RowBytes)
	wide, shift := g.shape(rb, align)
	block := cudaext.Dim3{X: uint32(g.block)}
	if wide {
		const name = "gnn_sweep16"
		return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide)}, block, 0, g.stream,
			g.dev, rb, ix.rows, ix.n, ix.first, ix.extras, bases, int32(shift))
	}
	const name = "gnn_sweep_any"
	return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide)}, block, g.shared(name), g.stream,
		g.dev, rb, ix.rows, ix.n, ix.first, ix.extras, bases, int32(shift), g.mode())
}

// do runs fn with the backend's lock held and its context current, unless
// the backend is closed.
func (g *CUDA) do(fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("gather: CUDA backend is closed")
	}
	return g.ctx.Do(fn)
}

// Close waits for pending work and frees the stream, module and staging.
func (g *CUDA) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.ctx.Do(func() error {
		var errs []error
		if g.stream != nil {
			errs = append(errs, g.stream.Synchronize())
		}
		for i := range g.areas {
			errs = append(errs, g.areas[i].free(), g.areas[i].done.Destroy())
		}
		g.harvest(true)
		for _, set := range g.timing.free {
			for _, e := range set {
				errs = append(errs, e.Destroy())
			}
		}
		errs = append(errs, g.plan.free(), g.stream.Destroy(), g.mod.Unload())
		if g.planMod != nil {
			errs = append(errs, g.planMod.Unload())
		}
		return errors.Join(errs...)
	})
}
