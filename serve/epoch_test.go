package serve

import (
	"context"
	"errors"
	"testing"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// failingRing is a shared-memory ring whose third fill fails, as a GPU fault
// would.
type failingRing struct {
	slotRing
	fills int
}

func (r *failingRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	r.fills++
	if r.fills == 3 {
		return errors.New("injected fill failure")
	}
	return r.slotRing.Fill(ctx, slots, bs)
}

// A fill error mid-epoch reaches the trainer as an Error frame at once (the
// sampler goroutines still running ahead must not keep the epoch from
// ending), and the daemon carries on.
func TestFillErrorReachesTheTrainer(t *testing.T) {
	srv, _ := testServer(t, Config{}, func(srv *Server) {
		srv.newCUDARing = func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
			cpu := *req
			cpu.device = -1
			r, err := srv.newRing(&cpu, layout, sl)
			return &failingRing{slotRing: r}, err
		}
	})
	c := dial(t, srv)
	o := openReq()
	o.Device = "cuda:0" // routed to the failing ring above
	o.Slots = 2
	c.handshake(o)
	c.send(&ipc.StartEpoch{})
	// Two slots: batches 0 and 1 fill; releasing batch 0 lets the third
	// fill run, and fail.
	b := c.recv().(*ipc.BatchReady)
	c.recv()
	c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	c.expectError(ipc.CodeInternal, "injected fill failure")
	good := dial(t, srv)
	good.handshake(openReq())
}

// A batch the trainer holds across the epoch boundary stays its own: the
// next epoch never refills that slot, and the late Release is accepted.
func TestHeldSlotSurvivesEpochBoundary(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	o := openReq()
	o.BatchSize = 400 // 813 train seeds: 3 batches an epoch
	c.handshake(o)
	c.send(&ipc.StartEpoch{Epoch: 0})
	var kept *ipc.BatchReady
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		if kept == nil {
			kept = b // hold the first batch
			continue
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	nodes, _, _, _ := c.sizes(kept)
	n := nodes * src.Data.RowBytes()
	snapshot := append([]byte(nil), c.region(kept.Slot, "x", n)...)
	c.send(&ipc.StartEpoch{Epoch: 1})
	for i := 0; i < 3; i++ {
		b := c.recv().(*ipc.BatchReady)
		if b.Slot == kept.Slot {
			t.Fatalf("held slot %d refilled in the next epoch", b.Slot)
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if string(snapshot) != string(c.region(kept.Slot, "x", n)) {
		t.Fatal("the held slot's contents changed")
	}
	c.send(&ipc.Release{Slot: kept.Slot, Epoch: kept.Epoch, Index: kept.Index})
	if _, ok := c.recv().(*ipc.EpochEnd); !ok {
		t.Fatal("epoch 1 did not end after the late release")
	}
}
