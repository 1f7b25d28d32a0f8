package gather

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/pinned"
)

// CUDAOptions tune the CUDA backend. Nil means the defaults.
type CUDAOptions struct {
	// MaxSMs caps the SMs a gather uses, so training can run beside it: the
	// grid is MaxSMs blocks (one block per SM) of up to 1024 threads (fewer
	// for rows of whole 128-byte lines; see shape). 0 means DefaultSMs; a
	// negative value means every SM, at full occupancy with blocks of 256
	// threads.
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
	// Stream, when not nil, is the stream the backend enqueues on instead
	// of a stream of its own: several tables gathered into one slot (node
	// features, edge features) then order with each other and with the
	// slot's other copies. The caller owns it and keeps it until Close.
	Stream *cudaext.Stream

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
	mu       sync.Mutex
	ctx      *cudaext.Context
	tab      Table
	dev      cudaext.DevicePtr // device address of the table's row 0
	stream   *cudaext.Stream
	borrowed bool // stream is CUDAOptions.Stream, not the backend's own
	mod      *cudaext.Module
	fn       map[string]*cudaext.Function
	grid     map[string]int // blocks per launch at full size
	sms      int
	opts     CUDAOptions
	areas    [stagingAreas]stagingArea
	cur      int // the area reserve hands out next
	closed   bool

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

// DefaultSMs is the gather's default grid: this many blocks (see shape).
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
	g = &CUDA{ctx: ctx, tab: TableOf(store), dev: store.DevicePtr, fn: map[string]*cudaext.Function{}, grid: map[string]int{}}
	if o != nil {
		g.opts = *o
	}
	if g.opts.MaxSMs == 0 {
		g.opts.MaxSMs = DefaultSMs
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
			anySize := name == "gnn_gather_any" || name == "gnn_sweep_any"
			shared := 0
			if anySize {
				shared = g.shared(g.maxBlock())
			}
			occ, err := f.MaxActiveBlocksPerSM(g.maxBlock(), shared)
			if err != nil {
				return err
			}
			if occ < 1 {
				return fmt.Errorf("gather: kernel %s cannot run with %d threads a block", name, g.maxBlock())
			}
			if g.opts.MaxSMs > 0 {
				sms := g.opts.MaxSMs
				if anySize && (o == nil || o.MaxSMs == 0) {
					sms = defaultAnySMs
				}
				g.grid[name] = min(sms, g.sms)
			} else {
				g.grid[name] = occ * g.sms
			}
		}
		if g.opts.Stream != nil {
			g.stream, g.borrowed = g.opts.Stream, true
		} else if g.stream, err = cudaext.NewStream(); err != nil {
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

// shared is the dynamic shared memory of an any-size kernel's block of
// block threads: a 512-byte piece a warp.
func (*CUDA) shared(block int) int { return block / 32 * 512 }

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
		errs = append(errs, g.plan.free(), g.mod.Unload())
		// The table's memory is the caller's and may be unmapped next: keep
		// no slice of it (see serve.Source.Close).
		g.tab.Rows = nil
		if g.stream != nil && !g.borrowed {
			errs = append(errs, g.stream.Destroy())
		}
		if g.planMod != nil {
			errs = append(errs, g.planMod.Unload())
		}
		return errors.Join(errs...)
	})
}
