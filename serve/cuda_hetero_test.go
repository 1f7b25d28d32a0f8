package serve

// Heterogeneous batches through CUDA slots: each node type's features and
// labels gathered on the GPU by the sweeps of its n_id.

import (
	"testing"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
)

// TestCUDAHeteroMatchesCPU: a mag-like dataset's batches on cuda:0 equal
// the shared-memory ones, every region (each type's x, y, n_id, each edge
// type's edge_index and e_id, input_id) byte for byte, with sweeps planned
// on the GPU and on the CPU (TestHeteroServed checks the CPU path against
// the dataset).
func TestCUDAHeteroMatchesCPU(t *testing.T) {
	cudatest.Devices(t)
	for _, plan := range []string{"gpu", "cpu"} {
		t.Run(plan+"_plan", func(t *testing.T) {
			srv, src := gpuServerOf(t, magSpec, Config{}, GPUConfig{SweepPlan: plan, SweepBatches: 3})
			if src.Hetero == nil || len(src.stores) == 0 {
				t.Fatalf("%s: hetero %v, pinned tables %v", magSpec, src.Hetero != nil, src.stores)
			}
			o := heteroOpen()
			o.Slots = 6
			n := compareRequest(t, srv, src, o, true, false)
			t.Logf("%d heterogeneous batches identical on both paths (%d pinned tables)", n, len(src.stores))
		})
	}
}
