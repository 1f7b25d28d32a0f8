package sampler

import (
	"sync"
	"sync/atomic"
)

// This file is the parallel-for used inside one batch. A batch's work is cut
// into numbered chunks; the goroutine that calls Sample runs chunks itself and
// posts tickets so that idle helper goroutines can join in. Which goroutine
// runs which chunk never changes the result: every phase writes each chunk's
// output to a place fixed by the chunk number. Helpers are package-wide,
// started once and never stopped (they block on a channel when idle), so a
// batch starts no goroutine and allocates nothing.

// runner runs one chunk of one phase.
type runner interface {
	runChunk(phase, chunk int)
}

// team is one Sample call's parallel-for. word packs the generation of the
// current phase (high 32 bits) and the next unclaimed chunk (low 32 bits), so
// that a helper holding a ticket of a finished phase can never claim a chunk
// of a later one.
type team struct {
	r      runner
	word   atomic.Uint64
	n      atomic.Int32
	phase  atomic.Int32
	done   atomic.Int32
	doneCh chan struct{}
}

type ticket struct {
	t   *team
	gen uint32
}

var helpers struct {
	mu sync.Mutex
	n  int
	ch chan ticket
}

// ensureHelpers makes sure at least k helper goroutines exist.
func ensureHelpers(k int) {
	helpers.mu.Lock()
	defer helpers.mu.Unlock()
	if helpers.ch == nil {
		helpers.ch = make(chan ticket, 4096)
	}
	for helpers.n < k {
		go helperLoop(helpers.ch)
		helpers.n++
	}
}

func helperLoop(ch chan ticket) {
	for tk := range ch {
		tk.t.work(tk.gen)
	}
}

func newTeam(r runner) *team {
	return &team{r: r, doneCh: make(chan struct{}, 1)}
}

// run runs chunks 0..n-1 of phase and returns when all are done. At most
// extra helpers join the caller.
func (t *team) run(phase, n, extra int) {
	if n <= 0 {
		return
	}
	if extra <= 0 || n == 1 {
		for i := 0; i < n; i++ {
			t.r.runChunk(phase, i)
		}
		return
	}
	// Publish the new generation closed first, then the phase's fields, then
	// open it. A helper still working on the previous generation cannot
	// claim a chunk once the word changed (its CompareAndSwap fails), and a
	// helper that sees the new generation sees the new fields.
	gen := uint32(t.word.Load()>>32) + 1
	t.word.Store(uint64(gen)<<32 | closedChunk)
	t.phase.Store(int32(phase))
	t.n.Store(int32(n))
	t.done.Store(0)
	t.word.Store(uint64(gen) << 32)
	extra = min(extra, n-1)
post:
	for i := 0; i < extra; i++ {
		select {
		case helpers.ch <- ticket{t, gen}:
		default:
			break post // every helper is busy: the caller does the rest
		}
	}
	t.work(gen)
	<-t.doneCh
}

// closedChunk in the low half of word means no chunk may be claimed.
const closedChunk = 1<<32 - 1

// work claims and runs chunks of generation gen until none is left.
func (t *team) work(gen uint32) {
	for {
		w := t.word.Load()
		if uint32(w>>32) != gen {
			return
		}
		n := t.n.Load()
		i := uint32(w)
		if i >= uint32(n) {
			return
		}
		if !t.word.CompareAndSwap(w, w+1) {
			continue
		}
		t.r.runChunk(int(t.phase.Load()), int(i))
		if t.done.Add(1) == n {
			t.doneCh <- struct{}{}
		}
	}
}

// span returns the bounds of chunk c when n items are cut into k chunks.
func span(n, k, c int) (int, int) {
	return c * n / k, (c + 1) * n / k
}

// numChunks picks how many chunks n items are cut into: about four per
// worker for load balance, none smaller than minSize items.
func numChunks(n, workers, minSize int) int {
	if workers <= 1 || n <= minSize {
		return 1
	}
	return max(1, min(4*workers, n/minSize))
}
