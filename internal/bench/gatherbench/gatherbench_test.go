package gatherbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/pinned"
)

// benchTable is one table of the gather benchmark.
type benchTable struct {
	name     string
	rows     int64
	rowBytes int
	cfg      Config
}

// benchTables: "full" is the benchmark (papers100M size needs about
// 60 GB of host memory); "small" is a quick check of the same code.
func benchTables(scale string) []benchTable {
	if scale == "small" {
		return []benchTable{
			{"small 1M x 512 B", 1 << 20, 512, Config{BatchRows: 100_000, SweepBatches: 3, Caps: []int{-1}}},
			{"small 1M x 400 B", 1 << 20, 400, Config{BatchRows: 100_000, SweepBatches: 3, SweepWidths: []int{4}, Variants: true}},
		}
	}
	const m16 = 16 << 20
	return []benchTable{
		{"(a) 16M x 512 B (128 x float32)", m16, 512, Config{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{2, 4, 6, 8}, Caps: []int{-1, 8, 24}}},
		{"16M x 400 B (100 x float32)", m16, 400, Config{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{2, 4, 6, 8}, Caps: []int{-1}, Variants: true}},
		{"16M x 256 B (128 x float16)", m16, 256, Config{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{4, 8}, Caps: []int{-1}}},
		{"16M x 254 B (127 x float16)", m16, 254, Config{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{4, 8}, Caps: []int{-1, 32}}},
		{"(b) 111M x 512 B (128 x float32, papers100M)", 111_059_956, 512, Config{BatchRows: 700_000, SweepBatches: 3, SweepWidths: []int{4, 6, 8}, Caps: []int{-1, 12, 24}}},
	}
}

// TestBenchGather runs the gather benchmark when GNNLOADER_BENCH=1
// (scripts/gpu-check.sh sets it). GNNLOADER_BENCH_SCALE=small|full (default
// full); GNNLOADER_BENCH_ONLY=substring picks tables; GNNLOADER_BENCH_OUT
// names a file that gets the tables too.
func TestBenchGather(t *testing.T) {
	if os.Getenv("GNNLOADER_BENCH") != "1" {
		t.Skip("set GNNLOADER_BENCH=1 to run the gather benchmark")
	}
	c := cudatest.Context(t)
	var w io.Writer = os.Stdout
	if p := os.Getenv("GNNLOADER_BENCH_OUT"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	scale := os.Getenv("GNNLOADER_BENCH_SCALE")
	fmt.Fprintf(w, "gather benchmark, %s, scale %q\n", time.Now().UTC().Format(time.RFC3339), scale)
	for _, bt := range benchTables(scale) {
		if only := os.Getenv("GNNLOADER_BENCH_ONLY"); only != "" && !strings.Contains(bt.name, only) {
			continue
		}
		st, err := FillTable(c, bt.rows, bt.rowBytes)
		if err != nil {
			t.Fatalf("%s: %v", bt.name, err)
		}
		fmt.Fprintf(w, "\n== table %s: %.1f GB, fill %.1f s, cuMemHostRegister %.2f s\n", bt.name,
			float64(len(st.Rows))/1e9, st.LoadTime.Seconds(), st.RegisterTime.Seconds())
		if os.Getenv("GNNLOADER_BENCH_LOAD") != "0" && bt.rows*int64(bt.rowBytes) < 16<<30 {
			// pinned.Load: copy the table once more into fresh pinned memory and register it.
			ls, err := pinned.Load(st.Rows, bt.rowBytes, bt.rows, &pinned.Options{Context: c})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(w, "pinned.Load of the same table: copy %.2f s (%.1f GB/s), register %.2f s\n", ls.LoadTime.Seconds(),
				float64(len(ls.Rows))/ls.LoadTime.Seconds()/1e9, ls.RegisterTime.Seconds())
			ls.Close()
		}
		bt.cfg.Seed = 42
		if _, err := Run(context.Background(), c, st, bt.cfg, w); err != nil {
			st.Close()
			t.Fatalf("%s: %v", bt.name, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSampleBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nid := SampleBatch(r, 5000, 6000)
	seen := map[int64]bool{}
	for _, v := range nid {
		if v < 0 || v >= 6000 || seen[v] {
			t.Fatalf("id %d out of range or repeated", v)
		}
		seen[v] = true
	}
	if len(nid) != 5000 || slices.IsSorted(nid) {
		t.Fatalf("%d ids, sorted %v: want 5000 in sampled order", len(nid), slices.IsSorted(nid))
	}
}

// reportRate adds the delivered feature bytes and rows per second.
func reportRate(b *testing.B, rows, rowBytes int) {
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)*float64(rows*rowBytes)/sec/1e9, "GB/s")
	b.ReportMetric(float64(b.N)*float64(rows)/sec, "rows/s")
}

// BenchmarkGatherCPU is the CPU gather (GOMAXPROCS goroutines) of one
// sampled batch, 64 K rows of 512 bytes out of 256 K, in address order and
// in sampled order: the CPU path's gather and Run's CPU baseline.
func BenchmarkGatherCPU(b *testing.B) {
	const rows, rowBytes, batch = 1 << 18, 512, 1 << 16
	tab := gather.Table{Rows: make([]byte, rows*rowBytes), RowBytes: rowBytes, NumRows: rows}
	for i := range tab.Rows {
		tab.Rows[i] = byte(i*7 + 1)
	}
	nid := SampleBatch(rand.New(rand.NewPCG(42, 0x9e37)), batch, rows)
	dst := make([]byte, batch*rowBytes)
	for _, o := range []struct {
		name  string
		order []int32
	}{{"sorted", gather.SortOrder(nid)}, {"sampled", nil}} {
		b.Run(o.name, func(b *testing.B) {
			var cpu gather.CPU
			if err := cpu.Gather(dst, tab, nid, o.order); err != nil { // warm-up: dst's pages
				b.Fatal(err)
			}
			b.SetBytes(batch * rowBytes)
			for b.Loop() {
				if err := cpu.Gather(dst, tab, nid, o.order); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, batch, rowBytes)
		})
	}
}

// BenchmarkGatherCUDA is the CUDA backend through its API, wall clock per
// call and Sync: one sorted batch of 300 K rows of 512 bytes out of 4 M,
// and a sweep of three such batches (its planning on the CPU included).
// Run's figures, timed with CUDA events, are the ones docs/benchmarks.md
// records. It skips without a GPU.
func BenchmarkGatherCUDA(b *testing.B) {
	c := cudatest.Context(b)
	const rows, rowBytes, batch = 1 << 22, 512, 300_000
	st, err := FillTable(c, rows, rowBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	g, err := gather.NewCUDA(c, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	r := rand.New(rand.NewPCG(42, 0x9e37))
	parts := make([]gather.SweepPart, 3)
	for k := range parts {
		var p cudaext.DevicePtr
		if err := c.Do(func() (err error) { p, err = cudaext.MemAlloc(batch * rowBytes); return err }); err != nil {
			b.Fatal(err)
		}
		defer c.Do(func() error { return cudaext.MemFree(p) })
		nid := SampleBatch(r, batch, rows)
		parts[k] = gather.SweepPart{Dst: gather.Dest{Device: p, DeviceBytes: batch * rowBytes}, Nid: nid, Order: gather.SortOrder(nid)}
	}
	ctx := context.Background()
	// Warm-up: the backend's staging grows to these sizes once.
	if _, err := g.Sweep(ctx, parts); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(g.Gather(ctx, parts[0].Dst, parts[0].Nid, parts[0].Order), g.Sync()); err != nil {
		b.Fatal(err)
	}
	b.Run("sorted", func(b *testing.B) {
		b.SetBytes(batch * rowBytes)
		for b.Loop() {
			if err := errors.Join(g.Gather(ctx, parts[0].Dst, parts[0].Nid, parts[0].Order), g.Sync()); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, batch, rowBytes)
	})
	b.Run("sweep3", func(b *testing.B) {
		b.SetBytes(3 * batch * rowBytes)
		for b.Loop() {
			if _, err := g.Sweep(ctx, parts); err != nil {
				b.Fatal(err)
			}
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, 3*batch, rowBytes)
	})
}
