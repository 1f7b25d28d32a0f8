package gather

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/pinned"
)

// benchTable is one table of the gather benchmark.
type benchTable struct {
	name     string
	rows     int64
	rowBytes int
	cfg      BenchConfig
}

// benchTables: "full" is the benchmark (papers100M size needs about
// 60 GB of host memory); "small" is a quick check of the same code.
func benchTables(scale string) []benchTable {
	if scale == "small" {
		return []benchTable{
			{"small 1M x 512 B", 1 << 20, 512, BenchConfig{BatchRows: 100_000, SweepBatches: 3, Caps: []int{-1}}},
			{"small 1M x 400 B", 1 << 20, 400, BenchConfig{BatchRows: 100_000, SweepBatches: 3, SweepWidths: []int{4}, Variants: true}},
		}
	}
	const m16 = 16 << 20
	return []benchTable{
		{"(a) 16M x 512 B (128 x float32)", m16, 512, BenchConfig{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{2, 4, 6, 8}, Caps: []int{-1, 8, 24}}},
		{"16M x 400 B (100 x float32)", m16, 400, BenchConfig{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{2, 4, 6, 8}, Caps: []int{-1}, Variants: true}},
		{"16M x 256 B (128 x float16)", m16, 256, BenchConfig{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{4, 8}, Caps: []int{-1}}},
		{"16M x 254 B (127 x float16)", m16, 254, BenchConfig{BatchRows: 600_000, SweepBatches: 3, SweepWidths: []int{4, 8}, Caps: []int{-1, 32}}},
		{"(b) 111M x 512 B (128 x float32, papers100M)", 111_059_956, 512, BenchConfig{BatchRows: 700_000, SweepBatches: 3, SweepWidths: []int{4, 6, 8}, Caps: []int{-1, 12, 24}}},
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
		st, err := FillBenchTable(c, bt.rows, bt.rowBytes)
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
		if _, err := RunBench(context.Background(), c, st, bt.cfg, w); err != nil {
			st.Close()
			t.Fatalf("%s: %v", bt.name, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
