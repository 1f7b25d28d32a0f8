package serve

// A session's close that waits on a trainer gone mid-step.
//
// A trainer on a GPU records each slot's "released" event on its own
// stream, after the kernels that read the slot, then says Release; the
// ring's stream waits on that event before it fills the slot again. A
// trainer killed in the middle of a step (SIGKILL, the OOM killer) can take
// records still queued behind its kernels down with its context: the ring's
// stream would then wait forever, and so would the session's close, which
// ends the epoch (its fills wait on that stream) and synchronises the ring
// before freeing it, and the memory budget the trainer holds. So a close
// still running after unstickAfter records every released event from the
// daemon's side (the trainer is gone: nothing of its reads the slots any
// more), which ends those waits, and goes on waiting.

import (
	"time"
)

// unsticker is a ring whose close may wait on the trainer's GPU work.
type unsticker interface {
	// Unstick ends every wait of the ring's streams on the trainer's
	// release records.
	Unstick() error
}

// unstickAfter is how long a close may wait on the trainer's GPU work
// before the daemon releases its slots itself: far above a training step,
// so that a trainer only slow to finish (a close after a protocol error)
// is waited for.
var unstickAfter = 10 * time.Second

// watchClose watches a close of ss, whose ring is u, until the returned
// stop is called: past unstickAfter it unsticks u, and past twice that it
// says the close is still stuck.
func (ss *session) watchClose(u unsticker) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(unstickAfter)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		ss.log.Warn("the trainer's GPU work has not finished since it left; loaderd releases its slots itself (was it killed mid-step?)",
			"rank", ss.rank(), "pid", ss.pid, "waited", unstickAfter)
		ss.srv.metrics.unstuck.Inc()
		if err := u.Unstick(); err != nil {
			ss.log.Error("releasing a gone trainer's slots", "rank", ss.rank(), "pid", ss.pid, "err", err)
		}
		t.Reset(unstickAfter)
		select {
		case <-done:
			ss.log.Info("closed the gone trainer's session", "rank", ss.rank(), "pid", ss.pid)
		case <-t.C:
			ss.log.Error("the gone trainer's session is still not closed: its GPU memory and budget stay held",
				"rank", ss.rank(), "pid", ss.pid, "waited", 2*unstickAfter)
		}
	}()
	return func() { close(done) }
}
