package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// Config is the daemon's configuration; cmd/loaderd maps it one to one onto
// flags. Zero values mean the documented defaults.
type Config struct {
	// Socket is the Unix socket path trainers connect to.
	Socket string
	// SamplerThreads is the goroutines one batch's sampling may use
	// (0 = GOMAXPROCS).
	SamplerThreads int
	// Prefetch is the batches each trainer's sampler runs ahead of the
	// gather (0 = 2): sample t+2 while gathering t+1 and training t.
	Prefetch int
	// Slots is the default slots per trainer when the client asks for 0
	// (0 = 2: ping-pong).
	Slots int
	// GPUSlots is the default for a trainer on a GPU (0 = 6: while the
	// trainer uses one and three are ready, the GPU fills the other two,
	// or three at a time in one sweep; GPUConfig.SweepBatches).
	GPUSlots int
	// MaxSlots caps the slots a trainer may ask for (0 = 16).
	MaxSlots int
	// MaxTrainers caps concurrent trainer connections (0 = 64).
	MaxTrainers int
	// MemoryBudget caps the bytes of all trainers' slots together
	// (0 = 32 GiB). A trainer whose slots do not fit is refused.
	MemoryBudget int64
	// Limits bound frames and requests (zero fields = ipc defaults).
	Limits ipc.Limits
	// AllowUIDs and AllowGIDs are the peers allowed besides the daemon's own
	// uid (checked with SO_PEERCRED on every connection).
	AllowUIDs, AllowGIDs []int
	// SocketMode is the socket's permission bits (0 = 0600, or 0660 when
	// AllowGIDs is set).
	SocketMode os.FileMode
}

func (c Config) withDefaults() Config {
	if c.Prefetch <= 0 {
		c.Prefetch = 2
	}
	if c.Slots <= 0 {
		c.Slots = 2
	}
	if c.GPUSlots <= 0 {
		c.GPUSlots = 6
	}
	if c.MaxSlots <= 0 {
		c.MaxSlots = 16
	}
	if c.MaxTrainers <= 0 {
		c.MaxTrainers = 64
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 32 << 30
	}
	c.Limits = c.Limits.WithDefaults()
	if c.SocketMode == 0 {
		c.SocketMode = 0o600
		if len(c.AllowGIDs) > 0 {
			c.SocketMode = 0o660
		}
	}
	return c
}

// Server serves one Source to trainers over a Unix socket.
type Server struct {
	cfg Config
	src *Source
	log *slog.Logger

	ln       *net.UnixListener
	mu       sync.Mutex
	sessions map[*session]struct{}
	slotMem  int64 // bytes of slots of live sessions
	nextID   atomic.Uint64
	wg       sync.WaitGroup
	stats    Stats
	metrics  *metrics

	// newCUDARing makes a GPU slot ring; nil when the daemon has no GPU
	// backend, and gpuUnavailable then says why.
	// peerCred reads a connection's credentials (SO_PEERCRED); tests inject
	// other identities here.
	peerCred atomic.Pointer[peerCredFunc]

	newCUDARing    func(dev int, m *ipc.Open, slots int, l pingpong.Layout) (slotRing, error)
	gpuUnavailable string
}

// Stats are the server's counters (atomic; read with Stats()).
type Stats struct {
	Connections   atomic.Int64
	Refused       atomic.Int64
	BatchesServed atomic.Int64
	SampleNanos   atomic.Int64
	GatherNanos   atomic.Int64
	WaitNanos     atomic.Int64 // gather stage waiting for a free slot
	SweptBatches  atomic.Int64 // batches filled in a sweep with others (GPU path)
}

// New makes a server for src. A nil logger discards logs.
func New(src *Source, cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg.withDefaults(), src: src, log: log, sessions: map[*session]struct{}{},
		gpuUnavailable: "not built in"}
	pc := peerCredFunc(ipc.PeerCred)
	s.peerCred.Store(&pc)
	s.metrics = newMetrics(s)
	return s
}

type peerCredFunc func(*net.UnixConn) (pid, uid, gid int, err error)

// Stats returns the server's live counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Listen creates the socket: its directory if missing, a stale socket file
// of a dead daemon removed (a live daemon is an error), mode narrowed before
// any peer can connect.
func (s *Server) Listen() error {
	if s.cfg.Socket == "" {
		return errors.New("serve: no socket path")
	}
	ln, err := listenSocket(s.cfg.Socket, s.cfg.SocketMode)
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// listenSocket creates a Unix socket at path with the given mode: its
// directory if missing, a stale socket of a dead daemon replaced (a live
// one, or a file that is not a socket, is an error), the mode narrowed
// before any peer can connect. The socket is removed when the listener
// closes.
func listenSocket(path string, mode os.FileMode) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("serve: %s exists and is not a socket: not replacing it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("serve: %s: another daemon is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("serve: removing stale socket: %w", err)
		}
	}
	// Create the socket with no permissions for anyone else, then open it
	// up to exactly the configured mode.
	old := umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	umask(old)
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts trainers until ctx is cancelled, then tells every trainer
// the daemon is stopping, waits for the sessions to end, and removes the
// socket. Cancellation is not an error.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.log.Info("listening", "socket", s.cfg.Socket, "mode", fmt.Sprintf("%#o", s.cfg.SocketMode))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	backoff := 5 * time.Millisecond
	for {
		c, aerr := s.ln.AcceptUnix()
		if aerr != nil {
			if ctx.Err() != nil || errors.Is(aerr, net.ErrClosed) {
				break
			}
			// Out of file descriptors, an aborted connection: wait and go
			// on, as net/http does; the trainers already served carry on.
			s.log.Warn("accept failed; retrying", "err", aerr, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.stats.Connections.Add(1)
		s.metrics.connections.Inc()
		sess := s.newSession(c)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sess.run(ctx)
		}()
	}
	cancel()
	s.wg.Wait()
	s.log.Info("stopped", "socket", s.cfg.Socket)
	return nil
}

// admit reserves slot memory for a session, within the trainer and memory
// budgets.
func (s *Server) admit(sess *session, bytes int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= s.cfg.MaxTrainers {
		return perrf(ipc.CodeBusy, "daemon already serves %d trainers (limit %d)", len(s.sessions), s.cfg.MaxTrainers)
	}
	if bytes > s.cfg.MemoryBudget {
		return perrf(ipc.CodeLimit, "slots of %d bytes exceed the whole memory budget of %d bytes: lower batch_size, fanouts or slots", bytes, s.cfg.MemoryBudget)
	}
	if s.slotMem+bytes > s.cfg.MemoryBudget {
		return perrf(ipc.CodeBusy, "slots of %d bytes do not fit the memory budget (%d of %d bytes in use)", bytes, s.slotMem, s.cfg.MemoryBudget)
	}
	s.sessions[sess] = struct{}{}
	s.slotMem += bytes
	return nil
}

// reserve takes bytes of the memory budget for something other than slots
// (a trainer's custom seed list); unreserve gives them back.
func (s *Server) reserve(bytes int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slotMem+bytes > s.cfg.MemoryBudget {
		return perrf(ipc.CodeBusy, "%d bytes of seeds do not fit the memory budget (%d of %d bytes in use)", bytes, s.slotMem, s.cfg.MemoryBudget)
	}
	s.slotMem += bytes
	return nil
}

func (s *Server) unreserve(bytes int64) {
	s.mu.Lock()
	s.slotMem -= bytes
	s.mu.Unlock()
}

func (s *Server) leave(sess *session, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess]; ok {
		delete(s.sessions, sess)
		s.slotMem -= bytes
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
	return s.slotMem
}

func perrf(code ipc.Code, format string, args ...any) error {
	return &ipc.ProtocolError{Code: code, Msg: fmt.Sprintf(format, args...)}
}
