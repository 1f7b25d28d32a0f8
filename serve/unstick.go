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
// before freeing it, holding the trainer's place in the memory budget.
//
// So a close still running after unstickAfter, once the trainer's process
// is gone (a live trainer's GPU work is waited for, however long), records
// every released event from the daemon's side and goes on waiting; if it is
// still stuck as long again, the session gives its place in the budget back
// (its GPU memory stays allocated, and is logged) so that other trainers are
// not refused for it.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// unsticker is a ring whose close may wait on the trainer's GPU work.
type unsticker interface {
	// Unstick ends the ring's streams' waits on the trainer's release
	// records, as far as it can; n is the events it recorded (none once
	// the ring is closed).
	Unstick() (n int, err error)
}

// unstickAfter is how long a close may wait on a gone trainer's GPU work
// before the daemon releases its slots itself, and then before it gives
// the trainer's place in the budget back.
var unstickAfter = 10 * time.Second

// watchClose watches a close of ss, whose ring is u, until the returned
// stop is called (once).
func (ss *session) watchClose(u unsticker) (stop func()) {
	after := unstickAfter
	done := make(chan struct{})
	go func() {
		finished := func() bool { // waits after, or for the close to finish
			t := time.NewTimer(after)
			defer t.Stop()
			select {
			case <-done:
				return true
			case <-t.C:
				return false
			}
		}
		for warned := false; ; warned = true {
			if finished() {
				return
			}
			if ss.trainerGone() {
				break
			}
			if !warned {
				ss.log.Info("the session's close waits on the trainer's GPU work (its process is alive)", "rank", ss.rank(), "pid", ss.pid)
			}
		}
		n, err := u.Unstick()
		if err != nil {
			ss.log.Error("releasing a gone trainer's slots", "rank", ss.rank(), "pid", ss.pid, "err", err)
		}
		if n > 0 {
			ss.srv.metrics.unstuck.Inc()
			ss.log.Warn("the gone trainer's GPU work never finished; loaderd released its slots itself (was it killed mid-step?)",
				"rank", ss.rank(), "pid", ss.pid, "slots", n, "waited", after)
		}
		if finished() {
			if n > 0 {
				ss.log.Info("closed the gone trainer's session", "rank", ss.rank(), "pid", ss.pid)
			}
			return
		}
		ss.srv.leave(ss, ss.admitted[0], ss.admitted[1])
		ss.log.Error("the gone trainer's session is still not closed: its slots no longer count against the budget, but their GPU memory stays allocated",
			"rank", ss.rank(), "pid", ss.pid, "slot_bytes", ss.admitted[0], "waited", 2*after)
	}()
	return func() { close(done) }
}

// trainerGone reports whether the session's trainer process has ended (its
// GPU context with it): no such process, or a zombie; where the pid is
// unknown, whether its end of the connection closed without a goodbye.
func (ss *session) trainerGone() bool {
	if ss.pid <= 0 {
		return ss.vanished.Load()
	}
	return processGone(ss.pid)
}

// processGone reports whether process pid has exited: it no longer exists,
// or it is a zombie (exited, not yet reaped by its parent; its memory and
// GPU contexts are gone already).
func processGone(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil { // gone since the kill above where /proc exists; elsewhere, not known to be gone
		_, perr := os.Stat("/proc/self/stat")
		return perr == nil && errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the
	// state is the first field after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}
