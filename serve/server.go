package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gnnloader/gnnloader/batch"
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
	// GPUSlots is the default for a trainer on a GPU (0 = 32: the GPU fills
	// up to half of them in one sweep while the trainer works through the
	// others; measured fastest on an H100, for the loader and for training,
	// docs/training.md). A trainer that takes the default and does not fit
	// the memory budget or the GPU is given half as many, down to 2.
	GPUSlots int
	// MaxSlots caps the slots a trainer may ask for (0 = 64: a GPU trainer
	// with 64 slots gets sweeps of 32 batches, gather.MaxSweepParts).
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
	// AllowGIDs is set). AllowUIDs and AllowGIDs get read-write access
	// through POSIX ACL entries on the socket.
	SocketMode os.FileMode
	// MaxPending caps connections that have not finished their handshake
	// (not yet Opened, nor registered for gradients): more are answered
	// Error(busy) and closed at once, so idle or stalled connections
	// cannot exhaust the daemon's descriptors or memory (0 = 64).
	MaxPending int
	// HandshakeTimeout is how long a connection may take from accept to
	// its Open or RegisterGrad (0 = 10 s). Past it the connection is closed
	// with Error(limit).
	HandshakeTimeout time.Duration
	// WriteTimeout is how long one message to a trainer may wait for the
	// trainer to read (0 = 10 s). A trainer that stops reading for longer
	// is disconnected; its slots are freed.
	WriteTimeout time.Duration
	// ShutdownTimeout is how long Serve waits, once cancelled, for its
	// sessions to say goodbye before it closes their connections (0 = 5 s).
	ShutdownTimeout time.Duration
	// GradTimeout is how long a job's gradient ranks wait for each other:
	// from the first rank's RegisterGrad for the last one, and from a
	// round's first AllReduce for the round to end (every rank asking, and
	// the reduce, which on a GPU waits for each rank's gradients). Past it
	// the job's ring breaks and every waiting rank gets an Error naming
	// the ranks that did not come (0 = 10 minutes, as torch.distributed's
	// default; negative = no limit).
	GradTimeout time.Duration
	// FillTrace, when set, gets a line per slot fill, for lining the
	// daemon's work up with a trainer's steps (bench-train.sh FILL_TRACE=1):
	// "fill UNIX_NS BATCHES HOST_NS HELD CONN ANNOUNCED_NS" (the fill's
	// start, wall clock in ns; its batches; the host time it took to fill
	// and enqueue them; the batches the trainer held, announced and not
	// released, as it began; the trainer's connection, as the logs' conn;
	// the host time from its start until its last batch was announced: on
	// a GPU that samples, after the sampling's counts came back). A fill
	// whose announcement failed (a connection going down) leaves no line.
	// Writes are serialised; a failed write turns the trace off (logged).
	FillTrace io.Writer
}

func (c Config) withDefaults() Config {
	if c.Prefetch <= 0 {
		c.Prefetch = 2
	}
	if c.Slots <= 0 {
		c.Slots = 2
	}
	if c.GPUSlots <= 0 {
		c.GPUSlots = 32
	}
	if c.MaxSlots <= 0 {
		c.MaxSlots = 64
	}
	if c.MaxTrainers <= 0 {
		c.MaxTrainers = 64
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 32 << 30
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 64
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.GradTimeout == 0 {
		c.GradTimeout = 10 * time.Minute
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

	ln           *ownedSocket
	mu           sync.Mutex
	conns        map[*session]struct{} // every live connection
	pending      int                   // connections still in their handshake
	sessions     map[*session]struct{} // trainers with admitted slot rings
	budgetUsed   int64                 // bytes of the memory budget taken (slots, batches in flight, seeds, gradients)
	slotBytes    int64                 // of which slots
	leavingN     int                   // sessions in close(), giving back what they hold
	leftN        uint64                // sessions that have finished closing
	leaveChanged chan struct{}         // closed as a session starts or finishes closing (made by a waiter)
	closeHook    func()                // tests: runs as each session's close begins, before it counts as closing
	leaveHook    func()                // tests: runs as each session starts to close, still holding what it was given
	nextID       atomic.Uint64
	wg           sync.WaitGroup
	stats        Stats
	metrics      *metrics

	// peerCred reads a connection's credentials (SO_PEERCRED and
	// SO_PEERGROUPS); tests inject other identities here.
	peerCred atomic.Pointer[peerCredFunc]

	// newCUDARing makes a GPU slot ring; nil when the daemon has no GPU
	// backend, and gpuUnavailable then says why.
	newCUDARing    func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error)
	gpuUnavailable string
	gpu            *gpuBackend        // the GPU path, when enabled
	fillTrace      *fillTrace         // Config.FillTrace; nil: off
	gpuPlansSweeps bool               // GPU fills plan their sweeps on the GPU (no address order needed)
	gpuSampling    func(dev int) bool // trainers on GPU dev are sampled there (nil: none)
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
	Fills         atomic.Int64 // fills (a sweep of one or more batches on the GPU path)
}

// New makes a server for src. A nil logger discards logs.
func New(src *Source, cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg.withDefaults(), src: src, log: log, sessions: map[*session]struct{}{},
		conns: map[*session]struct{}{}, gpuUnavailable: "not built in"}
	pc := peerCredFunc(readPeer)
	s.peerCred.Store(&pc)
	s.metrics = newMetrics(s)
	if cfg.FillTrace != nil {
		s.fillTrace = &fillTrace{w: cfg.FillTrace, log: log}
	}
	return s
}

// Stats returns the server's live counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Listen creates the socket (listenSocket: under a lock, a stale socket of
// a dead daemon replaced, a live one refused, mode and ACL narrowed before
// any peer can connect).
func (s *Server) Listen() error {
	if s.cfg.Socket == "" {
		return errors.New("serve: no socket path")
	}
	ln, err := listenSocket(s.cfg.Socket, s.access(), s.log)
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

func (s *Server) access() socketAccess {
	return socketAccess{Mode: s.cfg.SocketMode, UIDs: s.cfg.AllowUIDs, GIDs: s.cfg.AllowGIDs}
}

// Serve accepts trainers until ctx is cancelled, then tells every trainer
// the daemon is stopping, waits for the sessions to end (closing their
// connections after Config.ShutdownTimeout), and removes the socket.
// Cancellation is not an error; sessions that outlive their closed
// connections by another ShutdownTimeout are.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.log.Info("listening", "socket", s.cfg.Socket, "mode", fmt.Sprintf("%#o", s.cfg.SocketMode),
		"allow_uids", s.cfg.AllowUIDs, "allow_gids", s.cfg.AllowGIDs)
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
		sess := s.accept(c)
		if sess == nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sess.run(ctx)
		}()
	}
	cancel()
	err := s.drain()
	s.ln.Close()
	if err == nil && s.gpu != nil {
		s.gpu.close() // every session, so every ring, is gone
	}
	s.log.Info("stopped", "socket", s.cfg.Socket)
	return err
}

// accept registers a new connection as a session in its handshake, or, when
// Config.MaxPending connections are already in theirs, answers Error(busy)
// and closes it at once (nil).
func (s *Server) accept(c *net.UnixConn) *session {
	s.stats.Connections.Add(1)
	s.metrics.connections.Inc()
	s.mu.Lock()
	if s.pending >= s.cfg.MaxPending {
		s.mu.Unlock()
		s.stats.Refused.Add(1)
		s.metrics.refused.Inc()
		s.metrics.errors.WithLabelValues(ipc.CodeBusy.String()).Inc()
		s.log.Debug("refused a connection: too many handshakes in progress", "limit", s.cfg.MaxPending)
		conn := ipc.NewConn(c, s.cfg.Limits)
		conn.SetWriteTimeout(100 * time.Millisecond)
		conn.WriteMsg(&ipc.Error{Code: ipc.CodeBusy, Message: fmt.Sprintf(
			"daemon busy: %d connections are already in their handshake (--max-pending); try again", s.cfg.MaxPending)})
		c.Close()
		return nil
	}
	s.pending++
	sess := s.newSession(c)
	s.conns[sess] = struct{}{}
	s.mu.Unlock()
	return sess
}

// handshakeDone ends sess's handshake: it no longer counts against
// MaxPending and its reads have no deadline.
func (s *Server) handshakeDone(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.pending {
		sess.pending = false
		s.pending--
		sess.conn.UnixConn().SetReadDeadline(time.Time{})
	}
}

// forget drops a closed session from the live connections.
func (s *Server) forget(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.pending {
		sess.pending = false
		s.pending--
	}
	delete(s.conns, sess)
}

// drain waits for every session to end after a shutdown. Sessions say
// goodbye on their own (session.shutdown); those still running after
// ShutdownTimeout get their connections closed, which ends any read or
// write they are blocked in.
func (s *Server) drain() error {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	timeout := s.cfg.ShutdownTimeout
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
	}
	s.mu.Lock()
	n := len(s.conns)
	for sess := range s.conns {
		sess.conn.Close()
	}
	s.mu.Unlock()
	s.log.Warn("sessions still running at the shutdown timeout: closing their connections", "sessions", n, "timeout", timeout)
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		s.mu.Lock()
		n = len(s.conns)
		s.mu.Unlock()
		return fmt.Errorf("serve: %d sessions still running %v after their connections were closed", n, timeout)
	}
}

// gpuSamples reports whether trainers on GPU dev are sampled there.
func (s *Server) gpuSamples(dev int) bool { return s.gpuSampling != nil && s.gpuSampling(dev) }

func perrf(code ipc.Code, format string, args ...any) error {
	return &ipc.ProtocolError{Code: code, Msg: fmt.Sprintf(format, args...)}
}
