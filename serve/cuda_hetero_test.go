package serve

// Heterogeneous batches through CUDA slots: each node type's features and
// labels gathered on the GPU by the sweeps of its n_id.

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// TestCUDAHeteroMatchesCPU: a mag-like dataset's batches on cuda:0 equal
// the shared-memory ones, every region (each type's x, y, n_id, each edge
// type's edge_index and e_id, input_id) byte for byte, with sweeps planned
// on the GPU and on the CPU (TestHeteroServed checks the CPU path against
// the dataset), and the pinned tables equal an unpinned opening's.
func TestCUDAHeteroMatchesCPU(t *testing.T) {
	cudatest.Devices(t)
	for _, plan := range []string{"gpu", "cpu"} {
		t.Run(plan+"_plan", func(t *testing.T) {
			srv, src := gpuServerOf(t, magSpec, Config{}, GPUConfig{SweepPlan: plan, SweepBatches: 3})
			if src.Hetero == nil || len(src.stores) == 0 {
				t.Fatalf("%s: hetero %v, pinned tables %v", magSpec, src.Hetero != nil, src.stores)
			}
			checkPinnedTables(t, src, magSpec)
			o := heteroOpen()
			o.Slots = 6
			n := compareRequest(t, srv, src, o, true, false)
			t.Logf("%d heterogeneous batches identical on both paths (%d pinned tables)", n, len(src.stores))
		})
	}
}

// TestCUDAHeteroLabelsWithoutFeatures: a node type with labels and no
// features (here the input type, paper) gets a sweep of labels alone, over
// a table of another type; read from a dataset directory.
func TestCUDAHeteroLabelsWithoutFeatures(t *testing.T) {
	cudatest.Devices(t)
	dir := labelsOnlyMag(t)
	srv, src := gpuServerOf(t, dir, Config{}, GPUConfig{SweepBatches: 3})
	if src.stores["paper/x"] != nil || src.Hetero.NodeType("paper").Labels == nil {
		t.Fatal("paper still has features, or lost its labels")
	}
	checkPinnedTables(t, src, dir)
	o := heteroOpen()
	o.Slots = 6
	n := compareRequest(t, srv, src, o, true, false)
	t.Logf("%d batches with paper/y but no paper/x identical on both paths", n)
}

// labelsOnlyMag writes a mag-like dataset whose papers have labels and no
// features.
func labelsOnlyMag(t *testing.T) string {
	t.Helper()
	h, err := datasets.GenerateHetero(datasets.GenOptions{Like: "mag", Scale: 0.002, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := h.NodeType("paper")
	p.FeatureDim, p.FeatureDType, p.Features = 0, "", nil
	dir := filepath.Join(t.TempDir(), "mag-labels-only")
	if err := datasets.WriteHetero(context.Background(), dir, h, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPinnedTables: every table of src (pinned for the GPU path) holds the
// bytes an unpinned opening of spec has, under the same name, the dataset
// reads the pinned copy itself, and the labels are the same.
func checkPinnedTables(t *testing.T, src *Source, spec string) {
	t.Helper()
	plain, err := OpenSource(spec, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	want, got := plain.tables(), src.tables()
	if len(want) != len(got) {
		t.Fatalf("tables %d pinned, %d unpinned", len(got), len(want))
	}
	for name, w := range want {
		g, st := got[name], src.stores[name]
		switch {
		case st == nil:
			t.Fatalf("table %s is not pinned", name)
		case !bytes.Equal(g.Rows, w.Rows) || g.RowBytes != w.RowBytes || g.NumRows != w.NumRows:
			t.Fatalf("table %s: the pinned copy differs from the dataset's", name)
		case len(g.Rows) > 0 && unsafe.SliceData(g.Rows) != unsafe.SliceData(st.Rows):
			t.Fatalf("table %s: the dataset does not read its pinned copy", name)
		}
	}
	wl, gl := plain.labelTables(), src.labelTables()
	for name, w := range wl {
		if !slices.Equal(gl[name], w) {
			t.Fatalf("labels %s differ", name)
		}
	}
}

// TestGPUMetricsHetero: a GPU daemon over a heterogeneous dataset (no
// homogeneous feature table) exports its metrics: pinned bytes are every
// type's features, sweep bytes count each type's rows.
func TestGPUMetricsHetero(t *testing.T) {
	cudatest.Devices(t)
	srv, src := gpuServerOf(t, magSpec, Config{}, GPUConfig{})
	c := dial(t, srv)
	o := heteroOpen()
	o.Device = "cuda:0"
	c.handshake(o)
	c.send(&ipc.StartEpoch{Epoch: 0})
	if _, ok := c.recv().(*ipc.BatchReady); !ok {
		t.Fatal("no batch")
	}
	// The sweep counters are read without waiting for the fill's stream.
	waitFor(t, func() bool { return metricSums(t, srv)["gnnloader_gpu_pcie_read_bytes_total"] > 0 })
	got := metricSums(t, srv)
	var pinned int
	for _, st := range src.stores {
		pinned += len(st.Rows)
	}
	if got["gnnloader_pinned_bytes"] != float64(pinned) || pinned == 0 {
		t.Errorf("gnnloader_pinned_bytes %v, want %d", got["gnnloader_pinned_bytes"], pinned)
	}
}
