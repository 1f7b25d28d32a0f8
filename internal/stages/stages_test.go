package stages

import (
	"bytes"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// A profile of sampling alone is charged to the sampling stages, not to
// "other": the rules know the sampler's functions.
func TestSamplingIsChargedToSampling(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "products", Scale: 0.05, Seed: 1, NoFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sampler.New(&d.Graph, sampler.Options{Fanouts: []int{15, 10, 5}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("CPU profiling unavailable: %v", err)
	}
	seeds := d.Splits[datasets.SplitTrain]
	var b sampler.Batch
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		for i := 0; i+1024 <= len(seeds); i += 1024 {
			s.Sample(seeds[i:i+1024], uint64(i), &b)
		}
	}
	pprof.StopCPUProfile()
	budget, total, err := Attribute(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sampling time.Duration
	for k, v := range budget {
		if len(k) > 6 && k[:6] == "sample" {
			sampling += v
		}
	}
	t.Logf("total %v: %v", total, budget)
	// Under the race detector most of the time is the detector's own, in
	// runtime and C frames: the shares say nothing there. scripts/test.sh
	// runs this test again without -race, where they are checked.
	if !raceEnabled && (total < 300*time.Millisecond || sampling < total*8/10) {
		t.Fatalf("sampling %v of %v charged to sampling stages: %v", sampling, total, budget)
	}
	if budget["sample/dedup"] == 0 || budget["sample/draw"] == 0 {
		t.Fatalf("no dedup or draw time: %v", budget)
	}
}
