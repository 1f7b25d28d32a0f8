package serve

// An epoch's plan (the order of its seeds: a shuffle of the split) takes
// tens of milliseconds on papers100M's 1.2 M training seeds, and every
// batch of the epoch waits for it. So a session plans the epoch a trainer
// will most likely ask for next ahead of time: its start epoch when it
// opens, and the next one as each epoch starts.

import (
	"sync"

	"github.com/gnnloader/gnnloader/sampler"
)

// nextPlan is one epoch's plan, made in the background.
type nextPlan struct {
	epoch uint32
	done  chan struct{} // closed once plan and err are set
	plan  *sampler.Plan
	err   error
}

// planAhead makes a session's epoch plans, the next one ahead where
// plansBytes allows; safe for concurrent use once open has run.
type planAhead struct {
	seeds []int64 // the Open's split, and how its epochs walk it
	cfg   sampler.EpochConfig
	ahead bool // plans are made ahead (plansBytes)

	mu   sync.Mutex
	next *nextPlan
}

// open sets the split the session plans, and plans its start epoch ahead.
func (a *planAhead) open(seeds []int64, cfg sampler.EpochConfig, ahead bool, start uint32) {
	a.seeds, a.cfg, a.ahead = seeds, cfg, ahead
	a.prepare(start)
}

// prepare starts planning epoch in the background (when plans are made
// ahead), replacing any plan made ahead for another epoch.
func (a *planAhead) prepare(epoch uint32) {
	if !a.ahead {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next != nil && a.next.epoch == epoch {
		return
	}
	n := &nextPlan{epoch: epoch, done: make(chan struct{})}
	a.next = n
	go func() {
		defer close(n.done)
		if planAheadHook != nil {
			planAheadHook()
		}
		n.plan, n.err = sampler.NewPlan(a.seeds, a.cfg, int(epoch))
	}()
}

// planAheadHook, when set (tests), runs before each plan made ahead.
var planAheadHook func()

// wait waits for the plan being made ahead, if any: a session that leaves
// gives its plans' share of the memory budget back only once no plan of
// its own is still being made (a trainer that opens and leaves at once,
// over and over, would otherwise hold plans the budget no longer counts).
func (a *planAhead) wait() {
	a.mu.Lock()
	n := a.next
	a.mu.Unlock()
	if n != nil {
		<-n.done
	}
}

// plan returns epoch's plan: the one made ahead when it is for this epoch
// (waiting for it to be done), else a new one. Either way the plan made
// ahead is used up.
func (a *planAhead) plan(epoch uint32) (*sampler.Plan, error) {
	a.mu.Lock()
	n := a.next
	a.next = nil
	a.mu.Unlock()
	if n != nil && n.epoch == epoch {
		<-n.done
		return n.plan, n.err
	}
	return sampler.NewPlan(a.seeds, a.cfg, int(epoch))
}
