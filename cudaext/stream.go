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
