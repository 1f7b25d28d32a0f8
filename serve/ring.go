package serve

import (
	"context"
	"fmt"
	"runtime"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// slotRing is where one trainer's batches go: shared memory filled by the
// CPU (shmRing), or GPU memory filled by CUDA kernels (cudaRing). The
// pipeline drives it: Acquire free slots, Fill them, Publish them to the
// trainer, and Release them when the trainer says so; a slot is never
// acquired while published. What a batch holds is the sampling mode's
// (package batch): a ring gathers the regions the layout says come from a
// feature table and lets the batch write the rest.
type slotRing interface {
	// Acquire waits for a free slot.
	Acquire(ctx context.Context) (int, error)
	// AwaitReleased waits until the trainer's last use of each of slots
	// is done: on a GPU, until its kernels that read the slot have ended
	// (the slots' released events: pingpong.CUDARing.AwaitReleased); in
	// shared memory a released slot is done at once.
	AwaitReleased(ctx context.Context, slots []int) error
	// Fill writes batch bs[j] into slot slots[j], at most SweepWidth of
	// them; the caller has waited for them with AwaitReleased. When it
	// returns, the slots' contents are ready for the trainer (or, on a GPU,
	// ordered before each slot's "ready" event).
	Fill(ctx context.Context, slots []int, bs []batch.Batch) error
	// SweepWidth is the most batches one Fill may take: above 1 when the
	// ring gathers several batches in one pass over the table (the GPU
	// path: a sorted sweep reads each row the batches share once, and the
	// union of sparse batches is read faster than each alone).
	SweepWidth() int
	// Busy reports whether earlier fills are still running: while they
	// are, the pipeline may gather more batches into the next Fill.
	Busy() bool
	// SweepAhead: while the trainer holds more than this many announced,
	// unreleased batches, the pipeline gathers more batches into the next
	// Fill even when the ring is not busy (negative: never).
	SweepAhead() int
	// ReadyValue is what BatchReady.ReadyValue says for the latest fill of
	// slot: on a GPU whose ring has ready words, the value the slot's word
	// takes when that fill is done; 0 otherwise.
	ReadyValue(slot int) uint32
	// Publish hands a filled slot to the trainer.
	Publish(slot int, tag pingpong.Tag)
	// Abandon returns an acquired slot that was not published.
	Abandon(slot int)
	// Release takes a published slot back; the tag must match. Deferred
	// (ipc.Release), the slot is free only once a release that is not
	// deferred follows, whose released event covers it.
	Release(slot int, tag pingpong.Tag, deferred bool) error
	// Describe fills the memory fields of Opened and returns the file
	// descriptors to send with it (owned by the ring).
	Describe(o *ipc.Opened) []int
	// Close frees the ring's memory.
	Close() error
}

// newRing makes the slot ring a trainer asked for, for batches of layout
// (placed in slots as in sl).
func (s *Server) newRing(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
	if req.device >= 0 {
		if s.newCUDARing == nil {
			return nil, perrf(ipc.CodeBadRequest, "device \"cuda:%d\": this daemon serves the CPU path only (no GPU backend: %s)", req.device, s.gpuUnavailable)
		}
		return s.newCUDARing(req, layout, sl)
	}
	r, err := pingpong.NewShmRing(fmt.Sprintf("gnnloader-rank%d", req.rank()), req.slots, sl)
	if err != nil {
		return nil, perrf(ipc.CodeInternal, "%v", err)
	}
	return &shmRing{ShmRing: r, layout: layout, tables: s.cpuTables(), workers: s.fillWorkers()}, nil
}

// cpuTables are the tables a CPU fill gathers from, by name: the source's
// feature tables (node and edge features) and its labels.
func (s *Server) cpuTables() map[string]gather.Backend {
	t := map[string]gather.Backend{}
	for name, tab := range s.src.tables() {
		t[name] = gather.NewCPUBackend(tab, s.cfg.SamplerThreads)
	}
	for name, of := range s.src.labelTables() {
		t[name] = gather.Labels{Of: of}
	}
	return t
}

// fillWorkers is the goroutines one fill may use to write a batch's
// structure.
func (s *Server) fillWorkers() int {
	if s.cfg.SamplerThreads > 0 {
		return s.cfg.SamplerThreads
	}
	return runtime.GOMAXPROCS(0)
}

// shmRing is the CPU path: slots in a memfd the trainer maps, features
// gathered by the CPU (in address order), one batch per fill.
type shmRing struct {
	*pingpong.ShmRing
	layout  *batch.Layout
	tables  map[string]gather.Backend
	workers int
}

func (r *shmRing) Describe(o *ipc.Opened) []int {
	o.Memory = ipc.MemoryShm
	return []int{r.FD()}
}

func (r *shmRing) SweepWidth() int { return 1 }

func (r *shmRing) AwaitReleased(context.Context, []int) error { return nil }
func (r *shmRing) Busy() bool                                 { return false }
func (r *shmRing) SweepAhead() int                            { return -1 }
func (r *shmRing) ReadyValue(int) uint32                      { return 0 }

// Fill writes each batch into its slot: the gathered regions from their
// tables, then the structure.
func (r *shmRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	for j, slot := range slots {
		b := bs[j]
		for k, reg := range r.layout.Regions {
			if reg.Table == "" {
				continue
			}
			ids, order := b.Rows(k)
			if err := r.tables[reg.Table].Gather(ctx, gather.Dest{Host: r.RegionAt(slot, k)}, ids, order); err != nil {
				return err
			}
		}
		b.WriteStructure(func(k int) []byte { return r.RegionAt(slot, k) }, r.workers)
	}
	return nil
}
