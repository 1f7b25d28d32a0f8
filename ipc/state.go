package ipc

// Dir is the direction of a message.
type Dir uint8

const (
	FromClient Dir = iota // client (trainer) to daemon
	FromDaemon            // daemon to client
)

func (d Dir) String() string {
	if d == FromClient {
		return "client"
	}
	return "daemon"
}

// Phase is a connection's protocol state; see docs/protocol.md.
type Phase uint8

const (
	PhaseHello   Phase = iota // waiting for the client's Hello
	PhaseWelcome              // Hello received, waiting for the daemon's Welcome
	PhaseOpen                 // handshake done, waiting for the client's Open
	PhaseOpened               // Open received, waiting for the daemon's Opened
	PhaseIdle                 // between epochs: StartEpoch or late Release
	PhaseEpoch                // inside an epoch: BatchReady, Release, EpochEnd
	PhaseClosed               // Error or Goodbye seen; nothing more may be sent
)

var phaseNames = [...]string{"hello", "welcome", "open", "opened", "idle", "epoch", "closed"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase?"
}

// State checks the order of messages on one connection. Feed it every
// message in the order this side sends or receives it; both sides can use
// it, since each direction is ordered and every state change waits for an
// answer from the other side. The zero State is a fresh connection. A State
// is not safe for concurrent use.
type State struct {
	phase Phase
}

// Phase returns the current phase.
func (s *State) Phase() Phase { return s.phase }

// Next records a message of type t sent in direction dir. If the message is
// not allowed in the current phase it returns a *ProtocolError with
// CodeOutOfOrder and the state does not change. Error and Goodbye are
// allowed in every phase but PhaseClosed, and move to PhaseClosed.
func (s *State) Next(dir Dir, t Type) error {
	next, ok := s.step(dir, t)
	if !ok {
		return perr(CodeOutOfOrder, "%s from the %s in phase %s", t, dir, s.phase)
	}
	s.phase = next
	return nil
}

func (s *State) step(dir Dir, t Type) (Phase, bool) {
	if s.phase == PhaseClosed {
		return s.phase, false
	}
	if t == TypeError || t == TypeGoodbye {
		return PhaseClosed, true
	}
	type key struct {
		p   Phase
		dir Dir
		t   Type
	}
	switch (key{s.phase, dir, t}) {
	case key{PhaseHello, FromClient, TypeHello}:
		return PhaseWelcome, true
	case key{PhaseWelcome, FromDaemon, TypeWelcome}:
		return PhaseOpen, true
	case key{PhaseOpen, FromClient, TypeSeeds}: // custom seeds come before their Open
		return PhaseOpen, true
	case key{PhaseOpen, FromClient, TypeOpen}:
		return PhaseOpened, true
	case key{PhaseOpened, FromDaemon, TypeOpened}:
		return PhaseIdle, true
	case key{PhaseIdle, FromClient, TypeStartEpoch}:
		return PhaseEpoch, true
	case key{PhaseIdle, FromClient, TypeRelease}, // releases of the last batches may follow EpochEnd
		key{PhaseEpoch, FromClient, TypeRelease},
		key{PhaseEpoch, FromDaemon, TypeBatchReady}:
		return s.phase, true
	case key{PhaseEpoch, FromDaemon, TypeEpochEnd}:
		return PhaseIdle, true
	}
	return s.phase, false
}
