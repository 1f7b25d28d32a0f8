package pingpong

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

type slotState uint8

const (
	slotFree slotState = iota
	slotFilling
	slotHeld
	slotReleasing // released by the trainer (Deferred), not yet covered
)

// Tag names the batch a held slot carries.
type Tag struct{ Epoch, Index uint32 }

// ErrClosed is returned by a closed ring.
var ErrClosed = errors.New("pingpong: ring closed")

// slotStates is the slot lifecycle of a ring: free, filling (acquired by the
// gather stage) or held (announced to the trainer). Only a release by the
// trainer returns a held slot to free; a deferred release (ipc.Release's
// Deferred) leaves it releasing until the next release that is not
// deferred, which frees them all and becomes their cover. Safe for
// concurrent use.
type slotStates struct {
	mu      sync.Mutex
	state   []slotState
	tags    []Tag
	cover   []int // per slot: the slot whose released event covers its last release
	pending []int // slots releasing, in the order of their releases
	next    int   // where acquire starts looking: slots are handed out in turn
	freed   chan struct{}
	done    chan struct{}
	closed  bool
}

func newSlotStates(n int) slotStates {
	cover := make([]int, n)
	for i := range cover {
		cover[i] = i
	}
	return slotStates{state: make([]slotState, n), tags: make([]Tag, n), cover: cover,
		freed: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *slotStates) len() int { return len(s.state) }

func (s *slotStates) acquire(ctx context.Context) (int, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return -1, ErrClosed
		}
		// In turn, not lowest first: a slot the trainer gives back at once
		// may still be in use by the work that filled it (on a GPU), and
		// the next fill should not have to wait for it.
		for k := range s.state {
			i := (s.next + k) % len(s.state)
			if s.state[i] == slotFree {
				s.state[i] = slotFilling
				s.next = (i + 1) % len(s.state)
				s.mu.Unlock()
				return i, nil
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-s.freed:
		case <-s.done:
		}
	}
}

func (s *slotStates) publish(i int, tag Tag) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[i] != slotFilling {
		panic(fmt.Sprintf("pingpong: publish of slot %d in state %d", i, s.state[i]))
	}
	s.state[i], s.tags[i] = slotHeld, tag
}

func (s *slotStates) abandon(i int) {
	s.mu.Lock()
	if s.state[i] == slotFilling {
		s.state[i] = slotFree
	}
	s.mu.Unlock()
	s.signal()
}

// release takes a held slot back (the tag must match). Deferred, it stays
// releasing; otherwise it and every slot releasing before it are free, with
// slot i their cover.
func (s *slotStates) release(i int, tag Tag, deferred bool) error {
	s.mu.Lock()
	if i < 0 || i >= len(s.state) {
		s.mu.Unlock()
		return fmt.Errorf("release of slot %d: there are %d slots", i, len(s.state))
	}
	if s.state[i] != slotHeld || s.tags[i] != tag {
		st, tg := s.state[i], s.tags[i]
		s.mu.Unlock()
		if st != slotHeld {
			return fmt.Errorf("release of slot %d, which is not held by the trainer", i)
		}
		return fmt.Errorf("release of slot %d for batch %d of epoch %d, but it holds batch %d of epoch %d", i, tag.Index, tag.Epoch, tg.Index, tg.Epoch)
	}
	if deferred {
		s.state[i] = slotReleasing
		s.pending = append(s.pending, i)
		s.mu.Unlock()
		return nil
	}
	for _, p := range s.pending {
		s.state[p], s.cover[p] = slotFree, i
	}
	s.pending = s.pending[:0]
	s.state[i], s.cover[i] = slotFree, i
	s.mu.Unlock()
	s.signal()
	return nil
}

// coverOf is the slot whose released event covers slot i's last release.
func (s *slotStates) coverOf(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cover[i]
}

// releasing is the number of slots released deferred and not yet covered.
func (s *slotStates) releasing() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *slotStates) releaseAll() {
	s.mu.Lock()
	for i, st := range s.state {
		if st == slotHeld || st == slotReleasing {
			s.state[i], s.cover[i] = slotFree, i
		}
	}
	s.pending = s.pending[:0]
	s.mu.Unlock()
	s.signal()
}

func (s *slotStates) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.state {
		if st == slotHeld {
			n++
		}
	}
	return n
}

func (s *slotStates) signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// close marks the states closed; it reports whether this call closed them.
func (s *slotStates) close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	close(s.done)
	return true
}
