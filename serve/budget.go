package serve

// The memory and trainer budgets: what a trainer or a request takes, and
// gives back.

import (
	"context"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// admit takes a trainer's memory from the budget, within the trainer and
// memory budgets: slots bytes of slot rings and extra bytes of host memory
// the request makes the daemon hold (sampled batches in flight).
func (s *Server) admit(sess *session, slots, extra int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bytes := slots + extra
	if len(s.sessions) >= s.cfg.MaxTrainers {
		return perrf(ipc.CodeBusy, "daemon already serves %d trainers (limit %d)", len(s.sessions), s.cfg.MaxTrainers)
	}
	if bytes > s.cfg.MemoryBudget {
		if extra >= s.cfg.MemoryBudget { // no number of slots fits
			return perrf(ipc.CodeLimit, "sampled batches of %d bytes exceed the whole memory budget of %d bytes: lower batch_size or fanouts", extra, s.cfg.MemoryBudget)
		}
		return slotMemoryErrorf(ipc.CodeLimit, "slots and sampled batches of %d bytes exceed the whole memory budget of %d bytes: lower batch_size, fanouts or slots", bytes, s.cfg.MemoryBudget)
	}
	if s.budgetUsed+bytes > s.cfg.MemoryBudget {
		return slotMemoryErrorf(ipc.CodeBusy, "slots and sampled batches of %d bytes do not fit the memory budget (%d of %d bytes in use)", bytes, s.budgetUsed, s.cfg.MemoryBudget)
	}
	s.sessions[sess] = struct{}{}
	s.budgetUsed += bytes
	s.slotBytes += slots
	return nil
}

// slotMemoryError is a refusal for want of memory for a trainer's slots
// (the memory budget, a GPU's slot memory or its free memory): one with
// fewer slots may fit. It is the ProtocolError it wraps on the wire.
type slotMemoryError struct{ error }

func (e slotMemoryError) Unwrap() error { return e.error }

func slotMemoryErrorf(code ipc.Code, format string, args ...any) error {
	return slotMemoryError{perrf(code, format, args...)}
}

// reserve takes bytes of the memory budget for something other than a
// trainer's slots (what: a custom seed list, a gradient buffer); unreserve
// gives them back.
func (s *Server) reserve(bytes int64, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fitsLocked(bytes, what); err != nil {
		return err
	}
	s.budgetUsed += bytes
	return nil
}

// fits checks, as reserve does, that bytes of what fit the memory budget
// now, without taking them: for memory a request makes before its admit
// takes it.
func (s *Server) fits(bytes int64, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fitsLocked(bytes, what)
}

func (s *Server) fitsLocked(bytes int64, what string) error {
	if bytes > s.cfg.MemoryBudget {
		return perrf(ipc.CodeLimit, "%d bytes of %s exceed the whole memory budget of %d bytes (--memory-budget)", bytes, what, s.cfg.MemoryBudget)
	}
	if s.budgetUsed+bytes > s.cfg.MemoryBudget {
		return perrf(ipc.CodeBusy, "%d bytes of %s do not fit the memory budget (%d of %d bytes in use)", bytes, what, s.budgetUsed, s.cfg.MemoryBudget)
	}
	return nil
}

func (s *Server) unreserve(bytes int64) {
	s.mu.Lock()
	s.budgetUsed -= bytes
	s.mu.Unlock()
}

// leave gives back what admit took.
func (s *Server) leave(sess *session, slots, extra int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess]; ok {
		delete(s.sessions, sess)
		s.budgetUsed -= slots + extra
		s.slotBytes -= slots
	}
}

// Trainers is the number of trainers with open slot rings.
func (s *Server) Trainers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// SlotBytes is the memory held by live trainers' slots.
func (s *Server) SlotBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slotBytes
}

// BudgetUsed is the part of the memory budget in use: slots, sampled
// batches in flight, custom seed lists and gradient buffers.
func (s *Server) BudgetUsed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.budgetUsed
}

// A trainer that goes away holds its slots and budget until its session has
// closed its ring: on a GPU, after the fills in flight finish (a sweep of 32
// batches takes over 100 ms). A loader closed and at once opened again (the
// next epoch's, the validation split's, a benchmark's next variant) would be
// refused for that memory, or given half its default slots. So an Open
// refused for want of memory or trainers while sessions are closing tries
// again each time one of them has closed (awaitLeave), for up to leaveWait.
// The old connection's hang-up may also not have been read yet when the new
// Open comes (the two race on the daemon's side), so with none closing an
// Open still waits hangupGrace for one to start closing.
const (
	leaveWait   = 10 * time.Second
	hangupGrace = 250 * time.Millisecond
)

// beginLeave counts a session as closing; endLeave, once it has given back
// what it held, counts it as gone. Both wake the Opens waiting in
// awaitLeave.
func (s *Server) beginLeave() {
	s.mu.Lock()
	s.leavingN++
	s.wakeLeaveWaiters()
	s.mu.Unlock()
}

func (s *Server) endLeave() {
	s.mu.Lock()
	s.leavingN--
	s.leftN++
	s.wakeLeaveWaiters()
	s.mu.Unlock()
}

// wakeLeaveWaiters wakes the awaitLeave calls (s.mu held).
func (s *Server) wakeLeaveWaiters() {
	if s.leaveChanged != nil {
		close(s.leaveChanged)
		s.leaveChanged = nil
	}
}

// awaitLeave waits until a session has finished closing (given back what
// it held), and says so. While none is closing it waits only until grace
// for one to start; it gives up (false) at deadline, or when ctx ends
// (daemon shutdown).
func (s *Server) awaitLeave(ctx context.Context, deadline, grace time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.leftN
	for s.leftN == start {
		until := deadline
		if s.leavingN == 0 {
			until = grace
		}
		if !time.Now().Before(until) {
			return false
		}
		if s.leaveChanged == nil {
			s.leaveChanged = make(chan struct{})
		}
		ch := s.leaveChanged
		s.mu.Unlock()
		t := time.NewTimer(time.Until(until))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}
