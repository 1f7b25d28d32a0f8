package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

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

// gradConn is one rank's gradient connection.
type gradConn struct {
	ss    *session
	state ipc.GradState
	rank  int
}

func (gc *gradConn) write(m ipc.Msg, fds ...int) error {
	if err := gc.state.Next(ipc.FromDaemon, m); err != nil {
		return err
	}
	return writeErr(gc.ss.conn.WriteMsg(m, fds...), gc.ss.srv.cfg.WriteTimeout)
}

func (gc *gradConn) fail(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
		return
	}
	gc.ss.log.Warn("gradient connection failed", "rank", gc.rank, "err", err)
	if gc.state.Phase != ipc.GradClosed {
		gc.ss.conn.WriteMsg(ipc.ErrorMsg(err))
	}
}

func (gc *gradConn) serve(ctx context.Context, rg *ipc.RegisterGrad) error {
	if err := gc.state.Next(ipc.FromClient, rg); err != nil {
		return err
	}
	if err := rg.Validate(); err != nil {
		return err
	}
	gc.rank = int(rg.Rank)
	dev, _ := ipc.ParseDevice(rg.Device)
	if dev >= 0 {
		if _, err := ProbeGPU(); err != nil {
			return perrf(ipc.CodeBadRequest, "RegisterGrad: device %q: no GPU for gradients here: %v", rg.Device, err)
		}
	}
	// Client-sized: the group's rank table (world_size entries) and the
	// buffers. A job has at most as many ranks as the daemon has trainers,
	// and every rank's buffer counts against the memory budget.
	srv := gc.ss.srv
	if rg.WorldSize > uint32(srv.cfg.MaxTrainers) {
		return perrf(ipc.CodeLimit, "RegisterGrad: world_size %d exceeds the %d trainers this daemon serves (--max-trainers)", rg.WorldSize, srv.cfg.MaxTrainers)
	}
	if rg.Bytes > maxGradBytes {
		return perrf(ipc.CodeLimit, "RegisterGrad: %d bytes, at most %d", rg.Bytes, uint64(maxGradBytes))
	}
	if err := srv.reserve(int64(rg.Bytes), "gradient buffer"); err != nil {
		return err
	}
	defer srv.unreserve(int64(rg.Bytes))
	gs := srv.gradGroups()
	g, err := gs.join(rg, dev, srv.cfg.MaxTrainers)
	if err != nil {
		return err
	}
	defer gs.leave(g)
	gc.ss.log.Info("gradient rank registered", "job", g.job, "rank", rg.Rank, "world", g.world, "device", rg.Device)
	// The last rank to join builds the backend for all.
	g.mu.Lock()
	if g.joined == g.world && g.backend == nil && g.err == nil {
		var b gradBackend
		if g.device == "cpu" {
			b, err = newGradShm(g.world, int64(g.bytes))
		} else {
			b, err = newGradCUDA(g.devs, int64(g.bytes))
		}
		if err != nil {
			g.err = perrf(ipc.CodeInternal, "gradient buffers: %v", err)
			close(g.broken)
		} else {
			g.backend = b
			close(g.full)
		}
	}
	g.mu.Unlock()
	// Wait for the other ranks, watching the connection meanwhile: a rank
	// that hangs up (or sends anything) before its GradRegistered leaves at
	// once, giving back its rank and its share of the memory budget. The
	// connection is read by a goroutine of its own from here on, so that a
	// rank that dies in the middle of an all-reduce is seen at once too
	// (allReduce), not only by its next read.
	msgs := make(chan gradRead, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			m, fds, err := gc.ss.conn.ReadMsg()
			select {
			case msgs <- gradRead{m, fds, err}:
			case <-quit:
				ipc.CloseFDs(fds)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-g.full:
	case <-g.broken:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	case r := <-msgs:
		ipc.CloseFDs(r.fds)
		if r.err != nil {
			return r.err
		}
		return perrf(ipc.CodeOutOfOrder, "%s before GradRegistered", r.m.Type())
	}
	reg := &ipc.GradRegistered{Bytes: g.bytes}
	fds := g.backend.describe(gc.rank, reg)
	if err := gc.write(reg, fds...); err != nil {
		return err
	}
	for {
		var r gradRead
		select {
		case r = <-msgs:
		case <-ctx.Done():
			return ctx.Err()
		}
		ipc.CloseFDs(r.fds)
		if r.err != nil {
			return r.err
		}
		if err := gc.state.Next(ipc.FromClient, r.m); err != nil {
			return err
		}
		switch m := r.m.(type) {
		case *ipc.Goodbye:
			return nil
		case *ipc.AllReduce:
			if err := gc.allReduce(ctx, g, m, msgs); err != nil {
				return err
			}
		default:
			return perrf(ipc.CodeOutOfOrder, "%s on a gradient connection", m.Type())
		}
	}
}

// gradRead is one read of a gradient connection.
type gradRead struct {
	m   ipc.Msg
	fds []int
	err error
}

// leftMidRound handles what a rank's connection delivered while an
// all-reduce was under way: it hung up (the rank died or closed) or sent
// something, which the protocol does not allow before AllReduceDone. Either
// way the group breaks, so the other ranks get an error instead of waiting
// for this rank's GPU work, which may never finish.
func (gc *gradConn) leftMidRound(g *gradGroup, r gradRead) error {
	ipc.CloseFDs(r.fds)
	err := r.err
	if err == nil {
		err = perrf(ipc.CodeOutOfOrder, "%s during an all-reduce", r.m.Type())
	}
	g.fail(perrf(ipc.CodeInternal, "rank %d of job %q left during an all-reduce", gc.rank, g.job))
	return err
}

// allReduce joins the group's round for m and answers when it is done. msgs
// is the connection's reads: anything on it before the answer ends the
// round for every rank (leftMidRound).
func (gc *gradConn) allReduce(ctx context.Context, g *gradGroup, m *ipc.AllReduce, msgs <-chan gradRead) error {
	if err := m.Validate(); err != nil {
		return err
	}
	dt, _ := ring.ParseDType(m.DType)
	op, _ := ring.ParseOp(m.Op)
	if m.Count*uint64(dt.Size()) > g.bytes {
		return perrf(ipc.CodeBadRequest, "AllReduce: %d x %s is more than the %d-byte buffer", m.Count, m.DType, g.bytes)
	}
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return g.err
	}
	r := g.round
	if r == nil {
		r = &gradRound{req: *m, done: make(chan struct{})}
		g.round = r
	} else if r.req != *m {
		g.mu.Unlock()
		err := perrf(ipc.CodeBadRequest, "AllReduce %+v differs from another rank's %+v", *m, r.req)
		g.fail(err)
		return err
	}
	r.arrived++
	last := r.arrived == g.world
	if last {
		g.round = nil
	}
	g.mu.Unlock()
	if last {
		// The reduce may wait on the ranks' GPU work: it ends when this
		// connection's context does, the group breaks (another rank left)
		// or this rank's own connection delivers anything (it left).
		rctx, cancel := context.WithCancel(ctx)
		early := make(chan gradRead, 1)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-g.broken:
			case rd := <-msgs:
				early <- rd
			case <-rctx.Done():
			}
			cancel()
		}()
		r.err = g.backend.reduce(rctx, int64(m.Count), dt, op)
		cancel()
		<-watched
		select {
		case rd := <-early:
			err := gc.leftMidRound(g, rd)
			close(r.done)
			return err
		default:
		}
		close(r.done)
	}
	select {
	case <-r.done:
	case <-g.broken:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	case rd := <-msgs:
		return gc.leftMidRound(g, rd)
	}
	if r.err != nil {
		g.mu.Lock()
		gerr := g.err
		g.mu.Unlock()
		if gerr != nil {
			return gerr // the round ended because the group broke
		}
		return perrf(ipc.CodeInternal, "all-reduce: %v", r.err)
	}
	return gc.write(&ipc.AllReduceDone{Seq: m.Seq})
}

// maxGradBytes caps a gradient buffer.
const maxGradBytes = 64 << 30

// gradShm is the CPU path: one memfd per rank, reduced by ring.ReduceCPU.
type gradShm struct {
	fds  []int
	bufs [][]byte
}

func newGradShm(world int, bytes int64) (gradBackend, error) {
	g := &gradShm{}
	for r := 0; r < world; r++ {
		fd, err := unix.MemfdCreate(fmt.Sprintf("gnnloader-grad%d", r), unix.MFD_CLOEXEC)
		if err == nil {
			if err = unix.Ftruncate(fd, bytes); err != nil {
				unix.Close(fd)
			}
		}
		var b []byte
		if err == nil {
			if b, err = unix.Mmap(fd, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			g.close()
			return nil, err
		}
		g.fds = append(g.fds, fd)
		g.bufs = append(g.bufs, b)
	}
	return g, nil
}

func (g *gradShm) describe(r int, m *ipc.GradRegistered) []int {
	m.Memory = ipc.MemoryShm
	m.Links = []string{"cpu"}
	return []int{g.fds[r]}
}

func (g *gradShm) reduce(_ context.Context, count int64, dt ring.DType, op ring.Op) error {
	return ring.ReduceCPU(g.bufs, count, dt, op)
}

func (g *gradShm) close() {
	for _, b := range g.bufs {
		unix.Munmap(b)
	}
	for _, fd := range g.fds {
		unix.Close(fd)
	}
}
