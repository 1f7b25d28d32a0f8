package serve

import (
	"context"
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/ring"
)

// gradCUDA is the GPU path of the gradient exchange: per rank a buffer on its
// GPU (allocated here, shared as an IPC handle: the trainer never exports its
// own memory), a "ready" event the trainer records after writing a bucket and
// a "done" event recorded here once the ring has put the result in place;
// the ring (ring.GPU) runs over the ranks' contexts, in the order the
// topology suggests (ring.Order over peer access).
type gradCUDA struct {
	ctxs  []*cudaext.Context // by rank
	bufs  []cudaext.DevicePtr
	ready []*cudaext.Event
	done  []*cudaext.Event
	pos   []int // ring position -> rank
	ring  *ring.GPU
}

func newGradCUDA(devs []int, bytes int64) (gradBackend, error) {
	n := len(devs)
	g := &gradCUDA{ctxs: make([]*cudaext.Context, n), bufs: make([]cudaext.DevicePtr, n),
		ready: make([]*cudaext.Event, n), done: make([]*cudaext.Event, n)}
	fail := func(err error) (gradBackend, error) { g.close(); return nil, err }
	for r, dev := range devs {
		d, err := cudaext.GetDevice(dev)
		if err != nil {
			return fail(err)
		}
		c, err := d.RetainPrimaryContext()
		if err != nil {
			return fail(err)
		}
		g.ctxs[r] = c
		err = c.Do(func() error {
			p, err := cudaext.MemAlloc(max(bytes, 16))
			if err != nil {
				return err
			}
			g.bufs[r] = p
			flags := cudaext.EventInterprocess | cudaext.EventDisableTiming
			if g.ready[r], err = cudaext.NewEvent(flags); err != nil {
				return err
			}
			g.done[r], err = cudaext.NewEvent(flags)
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("rank %d on GPU %d: %w", r, dev, err))
		}
	}
	linked := ring.Linked(cudaext.Info()) // NVLink from NVML, else peer access
	g.pos = ring.Order(n, func(a, b int) bool { return linked(devs[a], devs[b]) })
	ctxs := make([]*cudaext.Context, n)
	for p, r := range g.pos {
		ctxs[p] = g.ctxs[r]
	}
	rg, err := ring.NewGPU(ctxs, nil)
	if err != nil {
		return fail(err)
	}
	g.ring = rg
	return g, nil
}

func (g *gradCUDA) describe(r int, m *ipc.GradRegistered) []int {
	m.Memory = ipc.MemoryCUDA
	m.CUDADevice = uint32(g.ctxs[r].Device.Ordinal)
	g.ctxs[r].Do(func() error {
		h, err := cudaext.IPCMemHandleOf(g.bufs[r])
		if err == nil {
			m.MemHandle = h[:]
		}
		if e, err := g.ready[r].IPCHandle(); err == nil {
			m.Ready = e[:]
		}
		if e, err := g.done[r].IPCHandle(); err == nil {
			m.Done = e[:]
		}
		return nil
	})
	for _, l := range g.ring.Links() {
		m.Links = append(m.Links, fmt.Sprintf("rank %d (GPU %d) -> rank %d (GPU %d): %s",
			g.pos[l.From], l.FromDev, g.pos[l.To], l.ToDev, l.Via))
	}
	return nil
}

// reduce waits on the host until every trainer's "ready" event is done,
// enqueues the ring and records "done"; it does not wait for the ring: the
// trainers' streams wait on "done". The wait is on the host, not the ring
// streams' wait on "ready": a trainer killed with its record still queued
// behind its backward pass never completes it, and a stream of loaderd's
// waiting on it would wait forever, with every call that synchronises the
// GPU's primary context, the slot rings' too (docs/gpu.md, "A trainer killed
// mid-step").
func (g *gradCUDA) reduce(ctx context.Context, count int64, dt ring.DType, op ring.Op) error {
	bufs := make([]cudaext.DevicePtr, len(g.pos))
	for p, r := range g.pos {
		bufs[p] = g.bufs[r]
		if err := awaitEvent(ctx, g.ctxs[r], g.ready[r]); err != nil {
			return fmt.Errorf("rank %d's gradients: %w", r, err)
		}
	}
	if err := g.ring.AllReduce(bufs, count, dt, op); err != nil {
		return err
	}
	for p, r := range g.pos {
		if err := g.ctxs[r].Do(func() error { return g.done[r].Record(g.ring.Stream(p)) }); err != nil {
			return err
		}
	}
	return nil
}

func (g *gradCUDA) close() {
	if g.ring != nil {
		g.ring.Sync()
		g.ring.Close()
	}
	for r, c := range g.ctxs {
		if c == nil {
			continue
		}
		c.Do(func() error {
			if g.bufs[r] != 0 {
				cudaext.MemFree(g.bufs[r])
			}
			g.ready[r].Destroy()
			g.done[r].Destroy()
			return nil
		})
		c.Release()
	}
}

// awaitEvent waits on the host until e (an event of context c) is done,
// or ctx ends (cudaext.PollUntil).
func awaitEvent(ctx context.Context, c *cudaext.Context, e *cudaext.Event) error {
	return cudaext.PollUntil(ctx, func() (done bool, err error) {
		err = c.Do(func() error {
			done, err = e.Done()
			return err
		})
		return done, err
	})
}
