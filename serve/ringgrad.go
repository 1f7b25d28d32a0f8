package serve

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/ring"
)

// Gradient exchange: a trainer's connection that sends RegisterGrad right
// after the handshake becomes a gradient connection (docs/protocol.md,
// "Gradient exchange"). The trainers of a job form a group; once all
// WorldSize ranks registered, each gets its buffer (a memfd for "cpu", a
// CUDA allocation on its GPU shared by IPC handle for "cuda:N"), and every
// AllReduce that all ranks asked for runs the ring all-reduce over the
// buffers: ring.ReduceCPU for the CPU path, the GPU ring (ringgrad_cuda.go)
// otherwise.

// gradGroups are a server's groups by job.
type gradGroups struct {
	mu    sync.Mutex
	m     map[string]*gradGroup
	ranks int // registered ranks over all groups
}

var serverGroups sync.Map // *Server -> *gradGroups

func (s *Server) gradGroups() *gradGroups {
	g, _ := serverGroups.LoadOrStore(s, &gradGroups{m: map[string]*gradGroup{}})
	return g.(*gradGroups)
}

// gradBackend is where a group's buffers live and how they are reduced.
type gradBackend interface {
	// describe fills GradRegistered for rank r and returns the fds to pass.
	describe(r int, m *ipc.GradRegistered) []int
	// reduce all-reduces the first count elements of every rank's buffer;
	// a wait on the trainers (their GPU work) ends with ctx.
	reduce(ctx context.Context, count int64, dt ring.DType, op ring.Op) error
	close()
}

// gradGroup is one job's ranks.
type gradGroup struct {
	job    string
	world  int
	bytes  uint64
	device string // "cpu" or "cuda"
	devs   []int  // per rank, the device ordinal (cuda)

	mu      sync.Mutex
	joined  int
	left    int
	full    chan struct{} // closed once every rank joined and the backend is ready
	backend gradBackend
	err     error // set when the group broke (a rank left, a backend failed)
	broken  chan struct{}
	round   *gradRound
	timeout time.Duration // Config.GradTimeout (<= 0: none)
	waiting *time.Timer   // breaks the group if not every rank registers in time
}

// gradRound is one all-reduce: the ranks that asked, and its result.
type gradRound struct {
	req     ipc.AllReduce
	arrived int
	in      []bool // per rank, whether it asked
	done    chan struct{}
	err     error
	timer   *time.Timer // breaks the group if the round does not end in time
}

// end marks the round done (its err set) and stops its timer.
func (r *gradRound) end() {
	if r.timer != nil {
		r.timer.Stop()
	}
	close(r.done)
}

// roundTimedOut breaks the group when round r has not ended within the
// group's timeout, naming the ranks that did not ask for it, or, when all
// did, the reduce that did not finish (a rank's gradients never ready).
func (g *gradGroup) roundTimedOut(r *gradRound) {
	select {
	case <-r.done:
		return
	default:
	}
	missing := g.ranksWhere(func(rank int) bool { return !r.in[rank] })
	if len(missing) > 0 {
		g.fail(perrf(ipc.CodeBadRequest, "all-reduce %d of job %q: rank(s) %v did not ask for it within %v (--grad-timeout): the job's gradient ring is broken",
			r.req.Seq, g.job, missing, g.timeout))
		return
	}
	g.fail(perrf(ipc.CodeBadRequest, "all-reduce %d of job %q did not finish within %v (--grad-timeout; a rank's gradients never became ready on its device): the job's gradient ring is broken",
		r.req.Seq, g.job, g.timeout))
}

// ranksWhere lists the group's ranks for which cond holds, under g.mu.
func (g *gradGroup) ranksWhere(cond func(rank int) bool) []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ranks []int
	for rank := range g.world {
		if cond(rank) {
			ranks = append(ranks, rank)
		}
	}
	return ranks
}

// registrationTimedOut breaks the group when not every rank registered
// within the group's timeout, naming the ones missing.
func (g *gradGroup) registrationTimedOut() {
	missing := g.ranksWhere(func(rank int) bool { return g.devs[rank] == -2 })
	if len(missing) > 0 {
		g.fail(perrf(ipc.CodeBadRequest, "job %q: rank(s) %v of %d did not register within %v (--grad-timeout): the job's gradient ring is broken",
			g.job, missing, g.world, g.timeout))
	}
}

func (g *gradGroup) rankTaken(r int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.devs[r] != -2
}

func (g *gradGroup) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
		close(g.broken)
	}
	if g.round != nil && g.round.timer != nil {
		g.round.timer.Stop() // a round the group's end cut short
	}
	if g.waiting != nil {
		g.waiting.Stop()
	}
}

// join adds rank r to the job's group (creating it), checking that it agrees
// with the ranks before it.
func (gs *gradGroups) join(m *ipc.RegisterGrad, dev int, maxRanks int, timeout time.Duration) (*gradGroup, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.ranks >= maxRanks {
		return nil, perrf(ipc.CodeBusy, "RegisterGrad: %d gradient ranks are registered already (limit %d, --max-trainers)", gs.ranks, maxRanks)
	}
	kind := "cpu"
	if dev >= 0 {
		kind = "cuda"
	}
	g := gs.m[m.Job]
	if g != nil {
		select {
		case <-g.broken:
			// A broken group whose ranks have not all left yet: this rank
			// starts the job's next group (the old one goes with its last
			// rank; leave checks that it is still the job's).
			g = nil
		default:
		}
	}
	if g == nil {
		g = &gradGroup{job: m.Job, world: int(m.WorldSize), bytes: m.Bytes, device: kind,
			devs: make([]int, m.WorldSize), full: make(chan struct{}), broken: make(chan struct{}), timeout: timeout}
		for i := range g.devs {
			g.devs[i] = -2 // not joined
		}
		if timeout > 0 {
			g.waiting = time.AfterFunc(timeout, g.registrationTimedOut)
		}
		gs.m[m.Job] = g
	}
	switch {
	case g.world != int(m.WorldSize) || g.bytes != m.Bytes || g.device != kind:
		return nil, perrf(ipc.CodeBadRequest, "RegisterGrad: job %q has world_size %d, bytes %d on %s; this rank asked for %d, %d on %s",
			m.Job, g.world, g.bytes, g.device, m.WorldSize, m.Bytes, kind)
	case g.rankTaken(int(m.Rank)):
		return nil, perrf(ipc.CodeBadRequest, "RegisterGrad: rank %d of job %q is already registered", m.Rank, m.Job)
	}
	g.mu.Lock()
	g.devs[m.Rank] = dev
	g.joined++
	if g.joined == g.world && g.waiting != nil {
		g.waiting.Stop()
	}
	g.mu.Unlock()
	gs.ranks++
	return g, nil
}

// leave drops one rank's interest; the last one frees the group.
func (gs *gradGroups) leave(g *gradGroup) {
	gs.mu.Lock()
	gs.ranks--
	g.mu.Lock()
	g.left++
	last := g.left == g.joined
	g.mu.Unlock()
	if last && gs.m[g.job] == g {
		delete(gs.m, g.job)
	}
	gs.mu.Unlock()
	g.fail(errors.New("a rank of the job left the gradient ring"))
	if last && g.backend != nil {
		g.backend.close()
	}
}

// serveGradIf turns the session into a gradient connection when m is a
// RegisterGrad sent right after the handshake, serves it until it ends, and
// reports true; otherwise it reports false (the session goes on as usual).
func (ss *session) serveGradIf(ctx context.Context, m ipc.Msg) bool {
	rg, ok := m.(*ipc.RegisterGrad)
	if !ok {
		return false
	}
	ss.mu.Lock()
	phase := ss.state.Phase()
	ss.mu.Unlock()
	if phase != ipc.PhaseOpen {
		return false // the session's State refuses it as out of order
	}
	ss.srv.handshakeDone(ss)
	gc := &gradConn{ss: ss}
	if err := gc.serve(ctx, rg); err != nil {
		gc.fail(err)
	}
	return true
}

// maxGradBytes caps a gradient buffer.
const maxGradBytes = 64 << 30
