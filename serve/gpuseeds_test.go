package serve

// What the GPU sampler may be given: its buffers are sized for a batch of
// distinct seeds (sampler.GPU.Sample), so a trainer's custom seeds that
// repeat a node go to the CPU sampler even on a device that samples.

import (
	"testing"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// TestRepeatedSeedsNotSampledOnGPU: on a daemon whose device samples (here a
// shared-memory ring stands for the GPU ring), a cuda:0 trainer whose custom
// seeds repeat a node, as a hostile or careless client may send (a batch of
// one node many times over that reaches the whole graph would pass the GPU
// sampler's buffers), is sampled on the CPU and gets its epoch; the same
// seeds without the repeat are sampled on the device.
func TestRepeatedSeedsNotSampledOnGPU(t *testing.T) {
	srv, src := testServer(t, Config{}, func(srv *Server) {
		srv.gpuSampling = func(int) bool { return true }
		srv.newCUDARing = func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
			cpu := *req
			cpu.device = -1
			return srv.newRing(&cpu, layout, sl)
		}
	})
	n := src.Data.Graph.NumNodes
	onDevice := func(ids []int64) (bool, *client) {
		c := dial(t, srv)
		c.hello()
		c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
		o := customOpen()
		o.Device = "cuda:0"
		c.send(&o)
		opened, ok := c.recv().(*ipc.Opened)
		if !ok {
			t.Fatalf("seeds %v: no Opened", ids)
		}
		c.opened = opened
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for ss := range srv.sessions {
			if ss.req != nil && len(ss.req.seeds) == len(ids) && ss.req.seeds[0] == ids[0] {
				return ss.req.onDevice, c
			}
		}
		t.Fatalf("seeds %v: no session", ids)
		return false, nil
	}
	repeated := []int64{n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1}
	dev, c := onDevice(repeated)
	if dev {
		t.Fatal("custom seeds repeating one node were given to the GPU sampler")
	}
	// Its epoch comes whole (batches of 4 seeds: two), from the CPU sampler.
	c.send(&ipc.StartEpoch{})
	batches := 0
	for {
		m := c.recv()
		if _, end := m.(*ipc.EpochEnd); end {
			break
		}
		b, ok := m.(*ipc.BatchReady)
		if !ok {
			t.Fatalf("got %#v inside the epoch, want BatchReady", m)
		}
		batches++
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if batches != 2 {
		t.Fatalf("%d batches for 8 repeated seeds in batches of 4, want 2", batches)
	}
	if dev, _ := onDevice([]int64{n - 2, 0, 1, 2, 3, 4, 5, 6}); !dev {
		t.Fatal("distinct custom seeds on a sampling device were not sampled there: the check above tells nothing")
	}
}
