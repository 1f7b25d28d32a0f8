package serve

// Disjoint and temporal batches through CUDA slots: sampled by the CPU
// (sampler.Disjoint), their features and labels gathered on the GPU.

import (
	"path/filepath"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// TestCUDATemporalMatchesCPU: disjoint, temporal (node_time, uniform and
// last) batches on cuda:0 equal the shared-memory ones region for region
// (batch included), with sweeps planned on the GPU and on the CPU
// (TestTemporalNodeTime and TestDisjoint check the CPU path's batches).
func TestCUDATemporalMatchesCPU(t *testing.T) {
	cudatest.Devices(t)
	d, err := datasets.Generate(datasets.GenOptions{Like: "cora", Scale: 0.5, Seed: 3, Time: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cora-timed")
	if err := datasets.Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	for _, plan := range []string{"gpu", "cpu"} {
		for _, tc := range []struct{ temporal, attr string }{
			{ipc.TemporalDisjoint, ""}, {ipc.TemporalUniform, ipc.TimeAttrNode}, {ipc.TemporalLast, ipc.TimeAttrNode},
		} {
			t.Run(plan+"_plan_"+tc.temporal, func(t *testing.T) {
				srv, src := gpuServerOf(t, dir, Config{}, GPUConfig{SweepPlan: plan, SweepBatches: 3})
				o := openReq()
				o.Slots, o.Temporal, o.TimeAttr = 6, tc.temporal, tc.attr
				n := compareRequest(t, srv, src, o, true, false)
				t.Logf("%d %s batches identical on both paths", n, tc.temporal)
			})
		}
	}
}
