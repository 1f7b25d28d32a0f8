package cudaext

import (
	"context"
	"time"
)

// EventFlags are cuEventCreate's flags.
type EventFlags uint

const (
	EventDefault       EventFlags = 0x0
	EventBlockingSync  EventFlags = 0x1
	EventDisableTiming EventFlags = 0x2
	// EventInterprocess needs EventDisableTiming too.
	EventInterprocess EventFlags = 0x4
)

// IPCEventHandle is the 64-byte handle another process opens an event with.
type IPCEventHandle [64]byte

// NewEvents fills events with new events of flags in the current context.
// On an error it destroys the ones it made, leaves events nil, and returns
// the error.
func NewEvents(events []*Event, flags EventFlags) error {
	for i := range events {
		e, err := NewEvent(flags)
		if err != nil {
			for _, made := range events[:i] {
				made.Destroy()
			}
			clear(events[:i])
			return err
		}
		events[i] = e
	}
	return nil
}

// PollUntil calls done until it reports true or an error, sleeping between
// calls (20 us, doubling up to 200 us), or until ctx ends (its error). It
// is for waiting on the host for GPU work that may never finish, such as
// another process's event records, where a stream's wait or
// Event.Synchronize could block forever.
func PollUntil(ctx context.Context, done func() (bool, error)) error {
	for wait := time.Duration(0); ; {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		wait = min(max(2*wait, minPoll), maxPoll)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PollUntil's intervals. An event a waiter polls is usually done by its
// first query; otherwise the work before it is milliseconds from its end.
const (
	minPoll = 20 * time.Microsecond
	maxPoll = 200 * time.Microsecond
)
