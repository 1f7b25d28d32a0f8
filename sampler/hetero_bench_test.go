package sampler

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// benchMag is an ogbn-mag-shaped graph made two-way (as PyG's
// ToUndirected would), GNNLOADER_BENCH_MAG_SCALE of ogbn-mag (default 0.02).
var benchMag = sync.OnceValues(func() (*datasets.Hetero, error) {
	scale := 0.02
	if s := os.Getenv("GNNLOADER_BENCH_MAG_SCALE"); s != "" {
		var err error
		if scale, err = strconv.ParseFloat(s, 64); err != nil {
			return nil, err
		}
	}
	h, err := datasets.GenerateHetero(datasets.GenOptions{Like: "mag", Scale: scale, Seed: 1})
	if err != nil {
		return nil, err
	}
	for _, t := range h.NodeTypes {
		t.Features, t.FeatureDim = nil, 0 // only the graph is sampled
	}
	return h.ToUndirected(runtime.GOMAXPROCS(0))
})

// BenchmarkHeteroSample samples batches of 1024 papers, fanouts [15, 10]
// for every edge type, one batch at a time on all workers and on one, and
// reports batches/s and sampled edges/s.
func BenchmarkHeteroSample(b *testing.B) {
	h, err := benchMag()
	if err != nil {
		b.Fatal(err)
	}
	train := h.NodeTypes[0].Splits[datasets.SplitTrain]
	for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run("workers="+strconv.Itoa(w), func(b *testing.B) {
			s, err := NewHetero(h, HeteroOptions{Fanouts: uniformFanouts(h, 15, 10), Workers: w})
			if err != nil {
				b.Fatal(err)
			}
			var out HeteroBatch
			edges := 0
			for i := 0; b.Loop(); i++ {
				lo := (i * 1024) % max(len(train)-1024, 1)
				if err := s.Sample(0, train[lo:lo+1024], uint64(i), &out); err != nil {
					b.Fatal(err)
				}
				for _, e := range out.Edges {
					edges += len(e.Src)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
			b.ReportMetric(float64(edges)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}
