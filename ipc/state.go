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
	next, ok := transitionMap[transitionKey{s.phase, dir, t}]
	return next, ok
}

// transition is one allowed message besides Error and Goodbye (which close
// the connection from any phase but PhaseClosed): in phase From, a message
// of Type sent in direction Dir moves to phase To.
type transition struct {
	From Phase
	Dir  Dir
	Type Type
	To   Phase
}

// transitions is the data connection's state machine (docs/protocol.md,
// "State machine"). The Python client's copy is generated from it (go
// generate ./ipc writes python/gnnloader/_schema.py).
var transitions = []transition{
	{PhaseHello, FromClient, TypeHello, PhaseWelcome},
	{PhaseWelcome, FromDaemon, TypeWelcome, PhaseOpen},
	{PhaseOpen, FromClient, TypeSeeds, PhaseOpen}, // custom seeds come before their Open
	{PhaseOpen, FromClient, TypeOpen, PhaseOpened},
	{PhaseOpened, FromDaemon, TypeOpened, PhaseIdle},
	{PhaseIdle, FromClient, TypeStartEpoch, PhaseEpoch},
	{PhaseIdle, FromClient, TypeRelease, PhaseIdle}, // releases of the last batches may follow EpochEnd
	{PhaseEpoch, FromClient, TypeRelease, PhaseEpoch},
	{PhaseEpoch, FromDaemon, TypeBatchReady, PhaseEpoch},
	{PhaseEpoch, FromDaemon, TypeEpochEnd, PhaseIdle},
}

type transitionKey struct {
	p   Phase
	dir Dir
	t   Type
}

var transitionMap = func() map[transitionKey]Phase {
	m := make(map[transitionKey]Phase, len(transitions))
	for _, tr := range transitions {
		m[transitionKey{tr.From, tr.Dir, tr.Type}] = tr.To
	}
	return m
}()
