// Package stages attributes a CPU profile of the daemon to the stages of its
// batch pipeline, so a benchmark can print where the core time of a batch
// goes (issue 15's CPU budget): every sample is charged to the first stage
// whose function appears on its stack, from the leaf up, so a helper
// goroutine of the sampler counts as sampling and a GC assist inside the
// structure writer counts as garbage collection. Safe for concurrent use (no
// state).
package stages

import (
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// A rule charges a sample to Stage when its stack holds a function whose
// name contains Match.
type rule struct {
	Stage string
	Match []string
}

// rules in order of precedence, leaf-most match first per frame.
var rules = []rule{
	{"gc", []string{"runtime.gcBgMarkWorker", "runtime.gcAssist", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge", "runtime.mallocgc"}},
	{"sample/degrees", []string{"sampler.(*scratch).degrees"}},
	{"sample/draw", []string{"sampler.sampleChunk"}},
	{"sample/dedup", []string{"sampler.(*scratch).dedup", "sampler.(*scratch).shardChunk", "sampler.(*scratch).assignChunk", "sampler.(*scratch).resolve", "sampler.(*table)"}},
	{"sample/order", []string{"sampler.(*scratch).order", "sampler.(*scratch).keysChunk", "sampler.(*scratch).permuteChunk", "sampler.(*scratch).bucketsChunk", "sampler.sortBucket"}},
	{"sample/other", []string{"sampler."}},
	{"structure", []string{"batch.(*NodeBatch).WriteStructure", "batch.pieces"}},
	{"sweep plan", []string{"gather.PlanSweep", "gather.(*planChunk)", "gather.(*SweepPlan)", "gather.SortOrder"}},
	{"gather cpu", []string{"gather.(*CPU)"}},
	{"gather launch", []string{"gather.(*CUDA)", "cudaext."}},
	{"slots", []string{"pingpong."}},
	{"protocol", []string{"ipc.", "serve.(*session).send"}},
	{"pipeline", []string{"serve.(*pipeline)", "serve.(*cudaRing)", "serve.(*shmRing)"}},
	{"runtime", []string{"runtime."}},
}

// Budget is CPU time per stage.
type Budget map[string]time.Duration

// Attribute reads a CPU profile (as runtime/pprof writes it) and returns the
// CPU time of each stage, and the total.
func Attribute(r io.Reader) (Budget, time.Duration, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, 0, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		idx = len(p.SampleType) - 1
	}
	b := Budget{}
	var total time.Duration
	for _, s := range p.Sample {
		d := time.Duration(s.Value[idx]) // nanoseconds
		total += d
		b[classify(s)] += d
	}
	return b, total, nil
}

// classify finds the stage of one sample: the first rule matched by the
// leaf-most frame that matches a rule. Generic runtime frames (memmove, the
// scheduler) are passed over, so their time goes to the code that called
// them; a stack of runtime frames alone is "runtime".
func classify(s *profile.Sample) string {
	runtimeOnly := false
	for _, loc := range s.Location { // leaf first
		for i := len(loc.Line) - 1; i >= 0; i-- { // inlined frames, innermost first
			if loc.Line[i].Function == nil {
				continue
			}
			name := loc.Line[i].Function.Name
			if stage := match(name); stage != "" {
				if stage != "runtime" {
					return stage
				}
				runtimeOnly = true
			}
		}
	}
	if runtimeOnly {
		return "runtime"
	}
	return "other"
}

func match(name string) string {
	for _, r := range rules {
		for _, m := range r.Match {
			if strings.Contains(name, m) {
				return r.Stage
			}
		}
	}
	return ""
}

// Stages returns the budget's stages, largest first.
func (b Budget) Stages() []string {
	var names []string
	for k := range b {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return b[names[i]] > b[names[j]] })
	return names
}
