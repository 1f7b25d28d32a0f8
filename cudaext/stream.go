package cudaext

import (
	"context"
	"runtime"
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

// PollUntil calls done until it reports true or an error, or until ctx ends
// (its error). It is for waiting on the host for GPU work that may never
// finish, such as another process's event records, where a stream's wait or
// Event.Synchronize could block forever. For the first spinPoll it asks again
// at once, yielding the processor between calls; after that it sleeps
// sleepPoll between calls. (A Go timer shorter than a millisecond sleeps
// about a millisecond when the process has nothing else to run: sleeping
// from the first miss made every wait that missed once cost a millisecond,
// e.g. a gradient all-reduce waiting for its trainers' copies, docs/ring.md.)
func PollUntil(ctx context.Context, done func() (bool, error)) error {
	start := time.Now()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(start) < spinPoll {
			runtime.Gosched()
			continue
		}
		t := time.NewTimer(sleepPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PollUntil's phases. An event a waiter polls is usually done by its first
// query, or within microseconds (a copy the trainer enqueued just before
// saying so); otherwise the work before it is milliseconds from its end.
const (
	spinPoll  = 500 * time.Microsecond
	sleepPoll = time.Millisecond
)
