package serve

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/sampler"
)

// slotRing is where one trainer's batches go: shared memory filled by the
// CPU (shmRing), or GPU memory filled by CUDA kernels. The session drives it:
// Acquire a free slot, Fill it, Publish it to the trainer, and Release it
// when the trainer says so; a slot is never acquired while published.
type slotRing interface {
	// Acquire waits for a free slot.
	Acquire(ctx context.Context) (int, error)
	// Fill writes batch b into slot (features, labels, n_id, edge_index).
	// When it returns, the slot's contents are ready for the trainer (or,
	// on a GPU, ordered before the slot's "ready" event).
	Fill(slot int, b *sampler.Batch) error
	// Publish hands a filled slot to the trainer.
	Publish(slot int, tag pingpong.Tag)
	// Abandon returns an acquired slot that was not published.
	Abandon(slot int)
	// Release takes a published slot back; the tag must match.
	Release(slot int, tag pingpong.Tag) error
	// Describe fills the memory fields of Opened and returns the file
	// descriptors to send with it (owned by the ring).
	Describe(o *ipc.Opened) []int
	// Close frees the ring's memory.
	Close() error
}

// sweepRing is a slotRing that can fill several slots in one pass over the
// table (the GPU path: a sorted sweep reads each row the batches share once,
// and the union of several sparse batches is read faster than each alone).
type sweepRing interface {
	slotRing
	// FillSweep fills slots[j] with bs[j], like Fill for each.
	FillSweep(slots []int, bs []*sampler.Batch) error
	// SweepWidth is the most batches one FillSweep may take.
	SweepWidth() int
	// Busy reports whether earlier fills are still running: while they
	// are, the session may gather more batches into the next sweep.
	Busy() bool
}

// newRing makes the slot ring a trainer asked for.
func (s *Server) newRing(m *ipc.Open, slots int, l pingpong.Layout) (slotRing, error) {
	dev, err := ipc.ParseDevice(m.Device)
	if err != nil {
		return nil, err
	}
	if dev >= 0 {
		if s.newCUDARing == nil {
			return nil, perrf(ipc.CodeBadRequest, "device %q: this daemon serves the CPU path only (no GPU backend: %s)", m.Device, s.gpuUnavailable)
		}
		return s.newCUDARing(dev, m, slots, l)
	}
	r, err := pingpong.NewShmRing(fmt.Sprintf("gnnloader-rank%d", m.Rank), slots, l)
	if err != nil {
		return nil, perrf(ipc.CodeInternal, "%v", err)
	}
	return &shmRing{ShmRing: r, src: s.src, gather: gather.CPU{Workers: s.cfg.SamplerThreads}}, nil
}

// shmRing is the CPU path: slots in a memfd the trainer maps, filled by the
// CPU gather.
type shmRing struct {
	*pingpong.ShmRing
	src    *Source
	gather gather.CPU
}

func (r *shmRing) Describe(o *ipc.Opened) []int {
	o.Memory = ipc.MemoryShm
	return []int{r.FD()}
}

// Fill writes a sampled batch into a slot: feature rows (read in address
// order), labels, global ids and edge_index.
func (r *shmRing) Fill(slot int, b *sampler.Batch) error {
	if err := r.gather.Gather(r.Region(slot, "x"), r.src.Table, b.NID, b.Order); err != nil {
		return err
	}
	r.fillStructure(slot, b)
	return nil
}

// fillStructure writes a batch's labels, global ids and edge_index.
func (r *shmRing) fillStructure(slot int, b *sampler.Batch) {
	labels := r.src.Data.Labels
	y := int64s(r.Region(slot, "y"))
	for i, v := range b.NID {
		y[i] = int64(labels[v])
	}
	copy(int64s(r.Region(slot, "n_id")), b.NID)
	ei := int64s(r.Region(slot, "edge_index"))
	e := len(b.Src)
	for j := 0; j < e; j++ {
		ei[j] = int64(b.Src[j])
		ei[e+j] = int64(b.Dst[j])
	}
}

// int64s views 8-byte aligned bytes as int64s.
func int64s(b []byte) []int64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}
