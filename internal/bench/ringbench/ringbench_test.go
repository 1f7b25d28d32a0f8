package ringbench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/ring"
)

// TestBenchRing is the ring benchmark (GNNLOADER_BENCH=1; scripts/ring-bench.sh
// runs it): see Run. GNNLOADER_BENCH_SCALE=small stops at 64 MiB;
// GNNLOADER_RING_{PIECE,BLOCKS,PULL,PUSH_MIN} set GPUOptions; GNNLOADER_BENCH_OUT
// names a file for the table.
func TestBenchRing(t *testing.T) {
	if os.Getenv("GNNLOADER_BENCH") != "1" {
		t.Skip("set GNNLOADER_BENCH=1")
	}
	all := cudatest.Contexts(t)
	cfg := Config{MaxBytes: 1 << 30}
	if v := os.Getenv("GNNLOADER_BENCH_SCALE"); v == "small" {
		cfg.MaxBytes = 64 << 20
	}
	if v, err := strconv.Atoi(os.Getenv("GNNLOADER_RING_PIECE")); err == nil {
		cfg.Options.PieceBytes = v
	}
	if v, err := strconv.Atoi(os.Getenv("GNNLOADER_RING_BLOCKS")); err == nil {
		cfg.Options.MaxBlocks = v
	}
	cfg.Options.Pull = os.Getenv("GNNLOADER_RING_PULL") == "1"
	if v, err := strconv.ParseInt(os.Getenv("GNNLOADER_RING_PUSH_MIN"), 10, 64); err == nil {
		cfg.Options.PushMinBytes = v
	}
	w := os.Stdout
	if p := os.Getenv("GNNLOADER_BENCH_OUT"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	if _, err := Run(w, all, cfg); err != nil {
		t.Fatal(err)
	}
}

// reportBW adds nccl-tests' figures for one all-reduce of bytes over ranks:
// algbw = bytes / time, busbw = algbw x 2(ranks-1)/ranks.
func reportBW(b *testing.B, bytes int64, ranks int) {
	alg := float64(bytes) * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(alg, "algbw-GB/s")
	b.ReportMetric(alg*2*float64(ranks-1)/float64(ranks), "busbw-GB/s")
}

// BenchmarkReduceCPU is the CPU ring (ring.ReduceCPU: the no-GPU path and
// the GPU ring's reference) over 4 ranks of 4 MiB float32 buckets.
func BenchmarkReduceCPU(b *testing.B) {
	const ranks, n = 4, 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	bufs := make([][]byte, ranks)
	for i := range bufs {
		bufs[i] = make([]byte, n*ring.Float32.Size())
		for e := 0; e < n; e++ {
			ring.Float32.Store(bufs[i], e, r.Float64()*2-1)
		}
	}
	b.SetBytes(n * int64(ring.Float32.Size()))
	for b.Loop() {
		// Avg keeps the values where they are, however many rounds run.
		if err := ring.ReduceCPU(bufs, n, ring.Float32, ring.Avg); err != nil {
			b.Fatal(err)
		}
	}
	reportBW(b, n*int64(ring.Float32.Size()), ranks)
}

// BenchmarkAllReduceGPU is the GPU ring over every GPU (two ranks sharing
// it when there is one), float32 sum in place, wall clock per AllReduce and
// Sync, at 1 MiB (pull kernels) and 64 MiB (push kernels where every link
// has peer access). Run's figures, timed with CUDA events, are the ones
// docs/benchmarks.md records. It skips without a GPU.
func BenchmarkAllReduceGPU(b *testing.B) {
	ctxs := cudatest.Contexts(b)
	if len(ctxs) == 1 {
		ctxs = append(ctxs, ctxs[0])
	}
	g, err := ring.NewGPU(ctxs, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	const most = 64 << 20
	bufs := make([]cudaext.DevicePtr, len(ctxs))
	for i, c := range ctxs {
		err := c.Do(func() (err error) {
			if bufs[i], err = cudaext.MemAlloc(most); err != nil {
				return err
			}
			return cudaext.MemsetD8Async(bufs[i], 0, most, g.Stream(i))
		})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Do(func() error { return cudaext.MemFree(bufs[i]) })
	}
	for _, size := range []int64{1 << 20, most} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := g.AllReduce(bufs, size/4, ring.Float32, ring.Sum); err != nil {
					b.Fatal(err)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			reportBW(b, size, len(ctxs))
		})
	}
}
