package cudaext

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
