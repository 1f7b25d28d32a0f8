package serve

import (
	"context"
	"errors"
	"sync"

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
}

// gradRound is one all-reduce: the ranks that asked, and its result.
type gradRound struct {
	req     ipc.AllReduce
	arrived int
	done    chan struct{}
	err     error
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
}

// join adds rank r to the job's group (creating it), checking that it agrees
// with the ranks before it.
func (gs *gradGroups) join(m *ipc.RegisterGrad, dev int, maxRanks int) (*gradGroup, error) {
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
	if g == nil {
		g = &gradGroup{job: m.Job, world: int(m.WorldSize), bytes: m.Bytes, device: kind,
			devs: make([]int, m.WorldSize), full: make(chan struct{}), broken: make(chan struct{})}
		for i := range g.devs {
			g.devs[i] = -2 // not joined
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
