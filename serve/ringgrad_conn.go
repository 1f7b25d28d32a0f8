package serve

// A rank's gradient connection: registering, the all-reduce rounds, and a
// rank that leaves in the middle of one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/ring"
)

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
	g, err := gs.join(rg, dev, srv.cfg.MaxTrainers, srv.cfg.GradTimeout)
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
	quit, readerDone := make(chan struct{}), make(chan struct{})
	defer func() {
		// Stop the reader before returning, and close the descriptors of
		// whatever it read that nobody will handle (a frame after Goodbye,
		// or one read while the round ended): an unread frame's descriptors
		// would go with the socket, a read one's stay open in this process.
		close(quit)
		gc.ss.conn.UnixConn().SetReadDeadline(time.Unix(1, 0))
		<-readerDone
		select {
		case r := <-msgs:
			ipc.CloseFDs(r.fds)
		default:
		}
	}()
	go func() {
		defer close(readerDone)
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
		select {
		case <-g.broken: // full, then a rank left before this one got here
			return g.err
		default:
		}
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
		case <-g.broken:
			// Broken while this rank was between rounds (another rank
			// left, or one did not come in time): told now, it leaves, so
			// its rank and budget are free for the job to start again.
			return g.err
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
			if err := gc.allReduce(ctx, g, m, msgs); errors.Is(err, errGoodbyeMidRound) {
				return nil
			} else if err != nil {
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

// errGoodbyeMidRound ends a connection whose rank said Goodbye during an
// all-reduce (no Error goes back to it).
var errGoodbyeMidRound = errors.New("serve: Goodbye during an all-reduce")

// leftMidRound handles what a rank's connection delivered while an
// all-reduce was under way: it hung up (the rank died or closed), said
// Goodbye, or sent something else, which the protocol does not allow before
// AllReduceDone. Any of them breaks the group, so the other ranks get an
// error instead of waiting for this rank's GPU work, which may never finish.
func (gc *gradConn) leftMidRound(g *gradGroup, r gradRead) error {
	ipc.CloseFDs(r.fds)
	var why string
	err := r.err
	switch m := r.m; {
	case err != nil:
		why = "hung up"
	case m.Type() == ipc.TypeGoodbye:
		why, err = "said Goodbye", errGoodbyeMidRound
		gc.state.Next(ipc.FromClient, m) // closed: no Error is written back
	default:
		why = fmt.Sprintf("sent %s", m.Type())
		err = perrf(ipc.CodeOutOfOrder, "%s during an all-reduce", m.Type())
	}
	g.fail(perrf(ipc.CodeBadRequest, "rank %d of job %q %s during an all-reduce: the job's gradient ring is broken", gc.rank, g.job, why))
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
		r = &gradRound{req: *m, done: make(chan struct{}), in: make([]bool, g.world)}
		if g.timeout > 0 {
			r.timer = time.AfterFunc(g.timeout, func() { g.roundTimedOut(r) })
		}
		g.round = r
	} else if r.req != *m {
		g.mu.Unlock()
		err := perrf(ipc.CodeBadRequest, "AllReduce %+v differs from another rank's %+v", *m, r.req)
		g.fail(err)
		return err
	}
	r.arrived++
	r.in[gc.rank] = true
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
		g.mu.Lock()
		if r.err == nil && g.err != nil {
			// The group broke while the reduce ran (a rank left, or the
			// round timed out) and the ranks waiting in the round were told
			// so: this rank is told the same, not AllReduceDone.
			r.err = g.err
		}
		g.mu.Unlock()
		select {
		case rd := <-early:
			// A round that finished is answered before the group breaks;
			// one cut short breaks it first, so the others learn why.
			if r.err == nil {
				r.end()
			}
			err := gc.leftMidRound(g, rd)
			if r.err != nil {
				r.end()
			}
			return err
		default:
			r.end()
		}
	}
	select {
	case <-r.done:
	case <-g.broken:
		select {
		case <-r.done: // the round finished before the group broke
		default:
			return g.err
		}
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
