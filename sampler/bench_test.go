package sampler

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/internal/cputime"
)

// Benchmarks run on a papers100M-shaped synthetic graph from
// datasets.Generate. GNNLOADER_BENCH_SCALE sets the scale (default 0.01:
// 1.1 M nodes, 16 M edges); GNNLOADER_BENCH_LIKE the preset.
var bench struct {
	once  sync.Once
	g     *datasets.Graph
	seeds []int64
	err   error
}

func benchGraph(b *testing.B) (*datasets.Graph, []int64) {
	bench.once.Do(func() {
		scale := 0.01
		if s := os.Getenv("GNNLOADER_BENCH_SCALE"); s != "" {
			scale, bench.err = strconv.ParseFloat(s, 64)
			if bench.err != nil {
				return
			}
		}
		like := "papers100M"
		if s := os.Getenv("GNNLOADER_BENCH_LIKE"); s != "" {
			like = s
		}
		d, err := datasets.Generate(datasets.GenOptions{Like: like, Scale: scale, Seed: 1, NoFeatures: true})
		if err != nil {
			bench.err = err
			return
		}
		bench.g = &d.Graph
		bench.seeds = d.Splits[datasets.SplitTrain]
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.g, bench.seeds
}

func benchPlan(b *testing.B, seeds []int64) *Plan {
	p, err := NewPlan(seeds, EpochConfig{BatchSize: 1024, Shuffle: true, Seed: 1}, 0)
	if err != nil || p.NumBatches() == 0 {
		b.Fatalf("plan: %d batches, %v", p.NumBatches(), err)
	}
	return p
}

// report adds the domain metrics. cpu is the process CPU time the loop
// used: cpu-ms/batch shows the parallel phases' extra work independently of
// how busy the machine is.
func report(b *testing.B, batches, edges, nodes int64, cpu time.Duration) {
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(batches), "cpu-ms/batch")
	b.ReportMetric(float64(edges)/sec, "edges/s")
	b.ReportMetric(float64(batches)/sec, "batches/s")
	b.ReportMetric(float64(nodes)/float64(batches), "nodes/batch")
	b.ReportMetric(float64(edges)/float64(batches), "edges/batch")
}

// BenchmarkSample samples GraphSAGE batches ([15,10,5], 1024 seeds):
//
//	serial   one goroutine, Workers 1: the per-core rate
//	intra    one batch at a time, Workers GOMAXPROCS: one trainer's latency
//	batches  GOMAXPROCS batches in flight, Workers 1 each: one process's rate
//
// Run with -cpu 1,2,... to vary GOMAXPROCS; GNNLOADER_BENCH_WORKERS sets
// the intra run's Workers instead of GOMAXPROCS.
func BenchmarkSample(b *testing.B) {
	g, seeds := benchGraph(b)
	plan := benchPlan(b, seeds)
	fanouts := []int{15, 10, 5}
	for _, mode := range []string{"serial", "intra"} {
		b.Run(mode, func(b *testing.B) {
			w := 1
			if mode == "intra" {
				w = 0 // GOMAXPROCS
				if s := os.Getenv("GNNLOADER_BENCH_WORKERS"); s != "" {
					w, _ = strconv.Atoi(s)
				}
			}
			s, err := New(g, Options{Fanouts: fanouts, Workers: w})
			if err != nil {
				b.Fatal(err)
			}
			var out Batch
			for i := 0; i < plan.NumBatches(); i++ { // warm the buffers
				s.Sample(plan.Batch(i), plan.Key(i), &out)
			}
			b.ReportAllocs()
			var edges, nodes int64
			i := 0
			cpu0 := cputime.Process()
			for b.Loop() {
				bi := i % plan.NumBatches()
				if err := s.Sample(plan.Batch(bi), plan.Key(bi), &out); err != nil {
					b.Fatal(err)
				}
				edges += int64(len(out.Src))
				nodes += int64(len(out.NID))
				i++
			}
			report(b, int64(i), edges, nodes, cputime.Process()-cpu0)
		})
	}
	b.Run("batches", func(b *testing.B) {
		s, err := New(g, Options{Fanouts: fanouts, Workers: 1})
		if err != nil {
			b.Fatal(err)
		}
		// One warm Batch per goroutine, kept across RunParallel rounds.
		// Warm them concurrently so that the Sampler pools one scratch per
		// goroutine before the clock starts.
		outs := make([]Batch, runtime.GOMAXPROCS(0))
		var wg sync.WaitGroup
		for i := range outs {
			wg.Go(func() { s.Sample(plan.Batch(i%plan.NumBatches()), plan.Key(i), &outs[i]) })
		}
		wg.Wait()
		cpu0 := cputime.Process()
		var next, edges, nodes, slot atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			out := &outs[int(slot.Add(1)-1)%len(outs)]
			for pb.Next() {
				bi := int(next.Add(1)-1) % plan.NumBatches()
				if err := s.Sample(plan.Batch(bi), plan.Key(bi), out); err != nil {
					b.Error(err)
					return
				}
				edges.Add(int64(len(out.Src)))
				nodes.Add(int64(len(out.NID)))
			}
		})
		report(b, next.Load(), edges.Load(), nodes.Load(), cputime.Process()-cpu0)
	})
}
