package serve

// The GPU path with edge features (edge_attr, edge_weight gathered by e_id
// from their pinned copies) and with link batches.

import (
	"testing"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
)

// TestCUDAEdgeFeaturesMatchCPU: on every way of filling GPU slots, a
// dataset's edge_attr and edge_weight come through CUDA slots byte for byte
// as through shared memory (every region of every batch compared).
func TestCUDAEdgeFeaturesMatchCPU(t *testing.T) {
	cudatest.Devices(t)
	dir := edgeDataset(t)
	for _, g := range []GPUConfig{
		{Sampling: "gpu", SweepPlan: "gpu", SweepBatches: 3},
		{Sampling: "cpu", SweepPlan: "gpu", SweepBatches: 3},
		{Sampling: "cpu", SweepPlan: "cpu", SweepBatches: 3},
	} {
		t.Run(g.Sampling+"_sampling_"+g.SweepPlan+"_plan", func(t *testing.T) {
			srv, src := gpuServerOf(t, dir, Config{}, g)
			if src.stores["edge_attr"] == nil || src.stores["edge_weight"] == nil {
				t.Fatalf("pinned tables %v, want edge_attr and edge_weight among them", src.stores)
			}
			checkPinnedTables(t, src, dir)
			req := openReq()
			req.Slots = 6
			n := compareRequest(t, srv, src, req, true, true)
			t.Logf("%d batches with edge features identical on both paths", n)
		})
	}
}

// TestCUDALinkBatchesMatchCPU: link batches (binary and triplet negatives)
// on CUDA slots equal the shared-memory ones, edge features included.
func TestCUDALinkBatchesMatchCPU(t *testing.T) {
	cudatest.Devices(t)
	spec := "synthetic:citation2:0.002:4"
	for _, split := range []string{"link:valid:binary:1", "link:valid:triplet:3"} {
		t.Run(split, func(t *testing.T) {
			srv, src := gpuServerOf(t, spec, Config{}, GPUConfig{SweepBatches: 2})
			req := openReq()
			req.Split, req.Slots, req.BatchSize = split, 4, 64
			n := compareRequest(t, srv, src, req, true, false)
			if n == 0 {
				t.Fatal("no link batches")
			}
			t.Logf("%d link batches identical on both paths", n)
		})
	}
}
