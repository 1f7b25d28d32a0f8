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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// session is one trainer connection: the handshake and the messages of the
// connection (here), the Open (open.go), the epochs (epoch.go), or the
// gradient exchange (ringgrad.go).
//
// Goroutines: run reads the client's messages; an epoch's pipeline (sampler
// goroutines and the fill loop) writes BatchReady and EpochEnd. Writes and
// the protocol state are serialised by mu.
type session struct {
	srv  *Server
	conn *ipc.Conn
	log  *slog.Logger
	id   uint64
	pid  int

	mu    sync.Mutex
	state ipc.State

	custom    []int64  // from a Seeds message (seeds.go), for Open.Split == ipc.CustomSplit
	times     []int64  // the Seeds message's seed times (Seeds.Times), one per custom id, for a temporal Open
	seedBytes int64    // memory budget taken by custom
	req       *request // the Open (open.go), once handled
	mode      batch.Mode
	ring      slotRing
	admitted  [2]int64 // slot bytes and other bytes taken from the memory budget (Server.admit)

	queued        atomic.Int64       // batches sampled, not yet gathered
	batchesServed prometheus.Counter // this trainer's gnnloader_batches_served_total
	readyAt       []atomic.Int64     // per slot, when it was announced (unix ns, for hold times)
	heldSlots     atomic.Int64       // slots announced and not released
	releases      releasePace        // when the trainer releases slots (growSweep's stall guard)
	plans         planAhead          // the plan of the epoch the trainer will likely ask for next

	pending bool // in its handshake (counted in Server.pending); guarded by srv.mu

	epochCancel context.CancelFunc
	epochDone   chan struct{}
}

// newSession wraps an accepted connection: reads are capped at the size of
// the largest client frame, writes at WriteTimeout, and the handshake must
// finish within HandshakeTimeout. Called with s.mu held.
func (s *Server) newSession(c *net.UnixConn) *session {
	sess := &session{srv: s, conn: ipc.NewConn(c, s.cfg.Limits), id: s.nextID.Add(1), pending: true}
	sess.log = s.log.With("conn", sess.id)
	sess.conn.LimitReadFrame(ipc.MaxClientFrame)
	sess.conn.SetWriteTimeout(s.cfg.WriteTimeout)
	c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	return sess
}

// run serves the connection until the client leaves, breaks the protocol,
// or ctx ends (daemon shutdown).
func (ss *session) run(ctx context.Context) {
	defer ss.close()
	if err := ss.checkPeer(); err != nil {
		ss.srv.stats.Refused.Add(1)
		ss.srv.metrics.refused.Inc()
		ss.fail(err)
		return
	}
	// A shutdown says goodbye and closes the connection soon after, which
	// ends the blocking read below.
	stop := context.AfterFunc(ctx, ss.shutdown)
	defer stop()
	for {
		m, fds, err := ss.conn.ReadMsg()
		if err == nil && ctx.Err() != nil {
			ipc.CloseFDs(fds) // shutting down: what the trainer still sends is dropped
			continue
		}
		if err == nil && m.Type() == ipc.TypeSeeds {
			if err, fds = ss.takeSeeds(m.(*ipc.Seeds), fds), nil; err == nil { // seeds.go; closes the memfd
				continue
			}
		}
		ipc.CloseFDs(fds)
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
				if ss.req != nil {
					ss.log.Info("trainer disconnected without goodbye", "rank", ss.rank(), "pid", ss.pid)
				}
			case errors.Is(err, net.ErrClosed):
			case errors.Is(err, os.ErrDeadlineExceeded):
				ss.fail(perrf(ipc.CodeLimit, "handshake not finished within %v of connecting", ss.srv.cfg.HandshakeTimeout))
			default:
				ss.fail(err)
			}
			return
		}
		if ss.serveGradIf(ctx, m) { // ringgrad.go: RegisterGrad makes this a gradient connection
			return
		}
		if err := ss.handle(ctx, m); err != nil {
			if errors.Is(err, errGoodbye) {
				ss.log.Info("trainer said goodbye", "rank", ss.rank(), "pid", ss.pid)
			} else {
				ss.fail(err)
			}
			return
		}
	}
}

var errGoodbye = errors.New("goodbye")

// rankLabel is a trainer's rank as a metric label; ranks from maxRankLabel
// up share one label, so clients cannot grow the registry without bound.
func rankLabel(rank uint32) string {
	if rank >= maxRankLabel {
		return fmt.Sprintf("%d+", maxRankLabel)
	}
	return fmt.Sprint(rank)
}

const maxRankLabel = 1024

// held is the number of slots the trainer holds.
func (ss *session) held() int { return int(ss.heldSlots.Load()) }

func (ss *session) rank() int {
	if ss.req == nil {
		return -1
	}
	return ss.req.rank()
}

func (ss *session) checkPeer() error {
	p, err := (*ss.srv.peerCred.Load())(ss.conn.UnixConn())
	if err != nil {
		return perrf(ipc.CodeDenied, "cannot read peer credentials: %v", err)
	}
	ss.pid = p.pid
	if ss.srv.allowed(p) {
		return nil
	}
	ss.log.Warn("refused peer", "pid", p.pid, "uid", p.uid, "gid", p.gid, "groups", p.groups)
	return perrf(ipc.CodeDenied, "uid %d gid %d is not allowed to use this daemon", p.uid, p.gid)
}

// shutdown says goodbye to the trainer when the daemon stops. A trainer
// that does not read cannot hold it up: the write deadline is cut to a
// short grace, which also frees an epoch write blocked on that trainer (it
// holds ss.mu). The write side is then shut, and the connection closed
// after the grace: what the trainer sends meanwhile (a Release in flight)
// is read and dropped, so the trainer reads the Goodbye, not a broken pipe.
func (ss *session) shutdown() {
	grace := min(shutdownGrace, ss.srv.cfg.WriteTimeout)
	ss.conn.SetWriteTimeout(grace)
	ss.conn.UnixConn().SetWriteDeadline(time.Now().Add(grace))
	ss.send(&ipc.Goodbye{Reason: "daemon shutting down"})
	ss.conn.UnixConn().CloseWrite()
	time.AfterFunc(grace, func() { ss.conn.Close() })
}

// shutdownGrace bounds how long a stopping daemon waits on one trainer to
// take its Goodbye and hang up.
const shutdownGrace = time.Second

// handle processes one client message.
func (ss *session) handle(ctx context.Context, m ipc.Msg) error {
	ss.mu.Lock()
	err := ss.state.Next(ipc.FromClient, m.Type())
	ss.mu.Unlock()
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *ipc.Hello:
		if m.Version != ipc.Version {
			return perrf(ipc.CodeUnsupportedVersion, "client speaks protocol version %d, daemon speaks %d", m.Version, ipc.Version)
		}
		return ss.send(&ipc.Welcome{Version: ipc.Version, DaemonVersion: "loaderd " + Version, Dataset: ss.datasetFacts()})
	case *ipc.Open:
		return ss.handleOpen(ctx, m)
	case *ipc.StartEpoch:
		ss.startEpoch(ctx, m.Epoch)
		return nil
	case *ipc.Release:
		if err := ss.ring.Release(int(m.Slot), pingpong.Tag{Epoch: m.Epoch, Index: m.Index}, m.Deferred); err != nil {
			return perrf(ipc.CodeBadRequest, "%v", err)
		}
		ss.heldSlots.Add(-1)
		now := time.Now()
		ss.releases.released(now)
		ss.srv.metrics.trainerHold.Observe(seconds(time.Duration(now.UnixNano() - ss.readyAt[m.Slot].Load())))
		return nil
	case *ipc.Goodbye:
		return errGoodbye
	case *ipc.Error:
		ss.log.Warn("trainer reported an error", "rank", ss.rank(), "code", m.Code, "message", m.Message)
		return errGoodbye
	}
	return perrf(ipc.CodeOutOfOrder, "%s is not a message a client sends", m.Type())
}

// Version is the daemon's version string, set by cmd/loaderd.
var Version = "dev"

func (ss *session) datasetFacts() ipc.Dataset {
	if h := ss.srv.src.Hetero; h != nil {
		return heteroFacts(h)
	}
	d := ss.srv.src.Data
	f := ipc.Dataset{
		Name: d.Name, NumNodes: uint64(d.Graph.NumNodes), NumEdges: uint64(d.Graph.NumEdges()),
		FeatureDim: uint32(d.FeatureDim), FeatureDType: string(d.FeatureDType), NumClasses: uint32(d.NumClasses),
	}
	for _, s := range datasets.SplitNames {
		if ids, ok := d.Splits[s]; ok {
			f.Splits = append(f.Splits, ipc.Split{Name: s, Size: uint64(len(ids))})
		}
	}
	for _, s := range datasets.SplitNames { // link splits, sized in pairs
		if l, ok := d.LinkSplits[s]; ok {
			f.Splits = append(f.Splits, ipc.Split{Name: LinkPrefix + s, Size: uint64(l.Len())})
		}
	}
	f.NodeTime, f.EdgeTime = d.NodeTime != nil, d.EdgeTime != nil
	return f
}

// heteroFacts describes a heterogeneous dataset (protocol 3): its node
// types with their features, classes and splits, its edge types in the
// dataset's order (the order Open.EdgeFanouts uses), and the totals.
func heteroFacts(h *datasets.Hetero) ipc.Dataset {
	f := ipc.Dataset{Name: h.Name}
	for _, t := range h.NodeTypes {
		info := ipc.NodeTypeInfo{Name: t.Name, NumNodes: uint64(t.NumNodes), NumClasses: uint32(t.NumClasses)}
		if t.FeatureDim > 0 {
			info.FeatureDim, info.FeatureDType = uint32(t.FeatureDim), string(t.FeatureDType)
		}
		for _, s := range datasets.SplitNames {
			if ids, ok := t.Splits[s]; ok {
				info.Splits = append(info.Splits, ipc.Split{Name: s, Size: uint64(len(ids))})
			}
		}
		f.NumNodes += uint64(t.NumNodes)
		f.NodeTime = f.NodeTime || t.Time != nil
		f.NodeTypes = append(f.NodeTypes, info)
	}
	for _, r := range h.Relations {
		f.NumEdges += uint64(r.Graph.NumEdges())
		f.EdgeTypes = append(f.EdgeTypes, ipc.EdgeTypeInfo{Src: r.Src, Rel: r.Rel, Dst: r.Dst, NumEdges: uint64(r.Graph.NumEdges())})
	}
	return f
}

// send writes one message to the client, checking it against the protocol
// state.
func (ss *session) send(m ipc.Msg, fds ...int) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.state.Next(ipc.FromDaemon, m.Type()); err != nil {
		return err
	}
	return writeErr(ss.conn.WriteMsg(m, fds...), ss.srv.cfg.WriteTimeout)
}

// writeErr says what a write that timed out means.
func writeErr(err error, timeout time.Duration) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the trainer did not read for %v (write timeout): %w", timeout, err)
	}
	return err
}

// fail answers a protocol violation or a refused request with an Error frame
// (the connection is closed by run's caller).
func (ss *session) fail(err error) {
	code := ipc.CodeOf(err)
	ss.srv.metrics.errors.WithLabelValues(code.String()).Inc()
	ss.log.Info("closing connection with error", "rank", ss.rank(), "pid", ss.pid, "code", code, "err", err)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.state.Phase() == ipc.PhaseClosed {
		return
	}
	ss.state.Next(ipc.FromDaemon, ipc.TypeError)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return // the trainer stopped reading: an Error frame would wait as long again
	}
	ss.conn.WriteMsg(&ipc.Error{Code: code, Message: err.Error()})
}

func (ss *session) close() {
	if ss.srv.closeHook != nil {
		ss.srv.closeHook()
	}
	ss.srv.beginLeave()
	defer ss.srv.endLeave()
	if ss.srv.leaveHook != nil {
		ss.srv.leaveHook()
	}
	ss.stopEpoch()
	ss.conn.Close()
	ss.srv.forget(ss)
	if ss.ring != nil {
		ss.ring.Close()
	}
	ss.plans.wait() // no plan of this session's is made after its budget is back
	ss.srv.leave(ss, ss.admitted[0], ss.admitted[1])
	ss.srv.unreserve(ss.seedBytes)
}
