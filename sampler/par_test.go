package sampler

import (
	"sync/atomic"
	"testing"
)

// countRunner counts how often each chunk of the current phase runs.
type countRunner struct {
	phase atomic.Int32
	runs  []atomic.Int32
	wrong atomic.Int32 // chunks run under another phase's number
}

func (r *countRunner) runChunk(phase, chunk int) {
	if int32(phase) != r.phase.Load() {
		r.wrong.Add(1)
	}
	r.runs[chunk].Add(1)
}

// Every chunk of every phase runs exactly once, also when phases of
// different sizes follow each other quickly and helpers of a finished phase
// are still about: a helper that read the next phase's chunk count while the
// previous generation was current once ran a chunk of the new phase twice.
func TestTeamRunsEachChunkOnce(t *testing.T) {
	ensureHelpers(8)
	r := &countRunner{runs: make([]atomic.Int32, 64)}
	tm := newTeam(r)
	for p := 0; p < 20000; p++ {
		n := 2 + p%7*9 // sizes jump up and down
		for i := range r.runs[:n] {
			r.runs[i].Store(0)
		}
		r.phase.Store(int32(p))
		tm.run(p, n, 7)
		for i := range r.runs[:n] {
			if got := r.runs[i].Load(); got != 1 {
				t.Fatalf("phase %d: chunk %d of %d ran %d times", p, i, n, got)
			}
		}
		if r.wrong.Load() != 0 {
			t.Fatalf("phase %d: a chunk ran under the wrong phase", p)
		}
	}
}
