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

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/sampler"
)

// session is one trainer connection: handshake, slot ring, epochs.
//
// Goroutines: run reads the client's messages; an epoch's pipeline (sampler
// goroutines and the gather loop) writes BatchReady and EpochEnd. Writes and
// the protocol state are serialised by mu.
type session struct {
	srv  *Server
	conn *ipc.Conn
	log  *slog.Logger
	id   uint64
	pid  int

	mu    sync.Mutex
	state ipc.State

	open      *ipc.Open
	seeds     []int64
	custom    []int64 // from a Seeds message (seeds.go), for Open.Split == ipc.CustomSplit
	seedBytes int64   // memory budget taken by custom
	sampler   *sampler.Sampler
	ring      slotRing
	admitted  [2]int64 // slot bytes and other bytes taken from the memory budget (Server.admit)

	queued        atomic.Int64       // batches sampled, not yet gathered
	batchesServed prometheus.Counter // this trainer's gnnloader_batches_served_total
	readyAt       []atomic.Int64     // per slot, when it was announced (unix ns, for hold times)
	heldSlots     atomic.Int64       // slots announced and not released

	resumeBatch int // first batch of the first epoch (resume), see runEpoch

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
				if ss.open != nil {
					ss.log.Info("trainer disconnected without goodbye", "rank", ss.open.Rank, "pid", ss.pid)
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
	if ss.open == nil {
		return -1
	}
	return int(ss.open.Rank)
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
		return ss.handleOpen(m)
	case *ipc.StartEpoch:
		ss.startEpoch(ctx, m.Epoch)
		return nil
	case *ipc.Release:
		if err := ss.ring.Release(int(m.Slot), pingpong.Tag{Epoch: m.Epoch, Index: m.Index}); err != nil {
			return perrf(ipc.CodeBadRequest, "%v", err)
		}
		ss.heldSlots.Add(-1)
		ss.srv.metrics.trainerHold.Observe(seconds(time.Duration(time.Now().UnixNano() - ss.readyAt[m.Slot].Load())))
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
	return f
}

func (ss *session) handleOpen(m *ipc.Open) error {
	if err := m.Validate(); err != nil {
		return err
	}
	cfg := ss.srv.cfg
	d := ss.srv.src.Data
	seeds, ok := d.Splits[m.Split]
	if m.Split == ipc.CustomSplit {
		if seeds, ok = ss.custom, true; seeds == nil {
			return perrf(ipc.CodeBadRequest, "split %q needs a Seeds message before Open", ipc.CustomSplit)
		}
	}
	if !ok {
		var names []string
		for _, s := range datasets.SplitNames {
			if _, ok := d.Splits[s]; ok {
				names = append(names, s)
			}
		}
		return perrf(ipc.CodeNotFound, "dataset %s has no split %q (it has %v)", d.Name, m.Split, names)
	}
	if len(seeds) == 0 {
		return perrf(ipc.CodeBadRequest, "split %q of dataset %s is empty", m.Split, d.Name)
	}
	if m.FeatureDType != "" && m.FeatureDType != string(d.FeatureDType) && m.FeatureDType != NoFeatures {
		return perrf(ipc.CodeBadRequest, "feature dtype %q: dataset %s stores %s and the daemon does not convert", m.FeatureDType, d.Name, d.FeatureDType)
	}
	slots := int(m.Slots)
	if slots == 0 {
		slots = cfg.Slots
		if dev, err := ipc.ParseDevice(m.Device); err == nil && dev >= 0 {
			slots = min(cfg.GPUSlots, cfg.MaxSlots)
		}
	}
	if slots > cfg.MaxSlots {
		return perrf(ipc.CodeLimit, "%d slots asked, limit %d", slots, cfg.MaxSlots)
	}
	fanouts := make([]int, len(m.Fanouts))
	for i, f := range m.Fanouts {
		fanouts[i] = int(f)
	}
	smp, err := sampler.New(&d.Graph, sampler.Options{Fanouts: fanouts, Workers: cfg.SamplerThreads})
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	plan, err := sampler.NewPlan(seeds, ss.epochConfig(m), 0)
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	if int(m.StartBatch) > plan.NumBatches() {
		return perrf(ipc.CodeBadRequest, "resume at batch %d of epoch %d, but an epoch has %d batches", m.StartBatch, m.StartEpoch, plan.NumBatches())
	}
	ss.resumeBatch = int(m.StartBatch)
	maxNodes, maxEdges := pingpong.Capacity(int(m.BatchSize), fanouts, ss.srv.src.MaxDegree, d.Graph.NumNodes, d.Graph.NumEdges())
	if maxNodes > 1<<31-1 || maxEdges > 1<<31-1 {
		return perrf(ipc.CodeLimit, "batches of up to %d nodes and %d edges exceed the protocol's 2^31 limit: lower batch_size or fanouts", maxNodes, maxEdges)
	}
	layout, err := pingpong.NewLayout(maxNodes, maxEdges, len(fanouts), d.FeatureDim, string(d.FeatureDType), d.RowBytes())
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	// The budget covers what the request makes the daemon hold: the slots,
	// and the sampled batches in flight (runEpoch's pool, each at most
	// maxNodes ids and orders and maxEdges edges).
	inFlight := int64(2*cfg.Prefetch + min(slots, gather.MaxSweepParts))
	slotBytes, extra := layout.SlotBytes*int64(slots), inFlight*(12*maxNodes+8*maxEdges)
	if err := ss.srv.admit(ss, slotBytes, extra); err != nil {
		return err
	}
	ss.admitted = [2]int64{slotBytes, extra}
	newRing := ss.srv.newRing
	if m.FeatureDType == NoFeatures {
		newRing = ss.srv.newStructRing // batches without features (table.go)
	}
	ring, err := newRing(m, slots, layout)
	if err != nil {
		return err
	}
	ss.open, ss.seeds, ss.sampler, ss.ring = m, seeds, smp, ring
	ss.readyAt = make([]atomic.Int64, slots)
	ss.batchesServed = ss.srv.metrics.batches.WithLabelValues(rankLabel(m.Rank))
	opened := &ipc.Opened{
		NumBatches: uint32(plan.NumBatches()),
		Slots:      uint32(slots),
		SlotBytes:  uint64(layout.SlotBytes),
		MaxNodes:   uint32(maxNodes),
		MaxEdges:   uint32(maxEdges),
		Hops:       uint16(len(fanouts)),
	}
	for _, r := range layout.Regions {
		reg := ipc.Region{Name: r.Name, Offset: uint64(r.Offset), Bytes: uint64(r.Bytes), DType: r.DType}
		switch r.Name {
		case "x":
			reg.Shape = []uint64{uint64(maxNodes), uint64(d.FeatureDim)}
		case "edge_index":
			reg.Shape = []uint64{2, uint64(maxEdges)}
		default:
			reg.Shape = []uint64{uint64(maxNodes)}
		}
		opened.Regions = append(opened.Regions, reg)
	}
	ss.log.Info("trainer connected", "rank", m.Rank, "world_size", m.WorldSize, "pid", ss.pid, "job", m.Job,
		"split", m.Split, "batch_size", m.BatchSize, "fanouts", fanouts, "slots", slots, "slot_bytes", layout.SlotBytes,
		"batches_per_epoch", plan.NumBatches())
	fds := ring.Describe(opened)
	if err := ss.send(opened, fds...); err != nil {
		return err
	}
	ss.srv.handshakeDone(ss)
	return nil
}

func (ss *session) epochConfig(m *ipc.Open) sampler.EpochConfig {
	return sampler.EpochConfig{
		BatchSize: int(m.BatchSize), Shuffle: m.Shuffle, Seed: m.Seed,
		Rank: int(m.Rank), WorldSize: int(m.WorldSize), DropLast: m.DropLast,
	}
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
	ss.stopEpoch()
	ss.conn.Close()
	ss.srv.forget(ss)
	if ss.ring != nil {
		ss.ring.Close()
	}
	ss.srv.leave(ss, ss.admitted[0], ss.admitted[1])
	ss.srv.unreserve(ss.seedBytes)
}

// startEpoch starts the pipeline of one epoch in the background.
func (ss *session) startEpoch(ctx context.Context, epoch uint32) {
	ss.stopEpoch()
	// Slots the trainer still holds stay its own across the epoch boundary
	// (docs/protocol.md): only its Release frees them.
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	ss.epochCancel, ss.epochDone = cancel, done
	go func() {
		defer close(done)
		if err := ss.runEpoch(ctx, epoch); err != nil && ctx.Err() == nil {
			ss.fail(err)
			ss.conn.Close()
		}
	}()
}

func (ss *session) stopEpoch() {
	if ss.epochCancel != nil {
		ss.epochCancel()
		<-ss.epochDone
		ss.epochCancel, ss.epochDone = nil, nil
	}
}

// runEpoch is the pipeline of one epoch: Prefetch sampler goroutines run
// ahead (goroutine k samples batches k, k+Prefetch, ...), the gather loop
// takes their batches in order, waits for a free slot, fills it and
// announces it. Channels are bounded: at most 2*Prefetch batches are in
// flight, whatever the trainer's pace.
func (ss *session) runEpoch(ctx context.Context, epoch uint32) error {
	plan, err := sampler.NewPlan(ss.seeds, ss.epochConfig(ss.open), int(epoch))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := plan.NumBatches()
	// A trainer that reconnects resumes its first epoch at Open.StartBatch,
	// the batch after the last one it consumed; every later epoch is whole.
	first := 0
	if ss.resumeBatch > 0 && epoch == ss.open.StartEpoch {
		first = ss.resumeBatch
	}
	ss.resumeBatch = 0
	k := ss.srv.cfg.Prefetch
	width := 1 // batches one fill may cover (a GPU sweep)
	sweeper, _ := ss.ring.(sweepRing)
	if sweeper != nil {
		width = sweeper.SweepWidth()
	}
	outs := make([]chan *sampler.Batch, k)
	pool := make(chan *sampler.Batch, 2*k+width)
	for i := 0; i < 2*k+width; i++ {
		pool <- new(sampler.Batch)
	}
	errc := make(chan error, k)
	var wg sync.WaitGroup
	for w := 0; w < k; w++ {
		outs[w] = make(chan *sampler.Batch, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(outs[w])
			for i := first + w; i < n; i += k {
				var b *sampler.Batch
				select {
				case b = <-pool:
				case <-ctx.Done():
					return
				}
				start := time.Now()
				b.Reset()
				if err := ss.sampler.Sample(plan.Batch(i), plan.Key(i), b); err != nil {
					errc <- fmt.Errorf("sampling batch %d of epoch %d: %w", i, epoch, err)
					return
				}
				took := time.Since(start)
				ss.srv.stats.SampleNanos.Add(int64(took))
				ss.srv.metrics.sample.Observe(seconds(took))
				ss.queued.Add(1)
				select {
				case outs[w] <- b:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	// On the way out (done, or a sampling or fill error) the sampler
	// goroutines must stop before the wait, or an error would leave them
	// blocked on their channels and the trainer without its Error frame.
	defer func() {
		cancel()
		wg.Wait()
	}()
	// The fill loop takes batches in order. A fill covers one batch, or
	// (sweepRing) up to width of them: while the trainer's earlier fills
	// still run on the GPU, more sampled batches and freed slots join the
	// next one; when the GPU is idle it goes at once.
	var group []*sampler.Batch
	var slots []int
	defer func() {
		for _, slot := range slots {
			ss.ring.Abandon(slot)
		}
	}()
	take := func(i int, wait time.Duration) (bool, error) { // batch i into group
		var b *sampler.Batch
		var ok bool
		if wait < 0 {
			b, ok = <-outs[(i-first)%k]
		} else {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case b, ok = <-outs[(i-first)%k]:
			case <-t.C:
				return false, nil
			}
		}
		if !ok {
			select {
			case err := <-errc:
				return false, err
			default:
				return false, ctx.Err()
			}
		}
		group = append(group, b)
		return true, nil
	}
	acquire := func(wait time.Duration) (bool, error) { // one more slot
		start := time.Now()
		actx := ctx
		if wait >= 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, wait)
			defer cancel()
		}
		slot, err := ss.ring.Acquire(actx)
		if err != nil {
			if wait >= 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return false, nil
			}
			return false, err
		}
		took := time.Since(start)
		ss.srv.stats.WaitNanos.Add(int64(took))
		ss.srv.metrics.slotWait.Observe(seconds(took))
		slots = append(slots, slot)
		return true, nil
	}
	const poll = time.Millisecond
	for i := first; i < n; {
		if len(group) == 0 {
			if _, err := take(i, -1); err != nil {
				return err
			}
		}
		if len(slots) == 0 {
			if _, err := acquire(-1); err != nil {
				return err
			}
		}
		for len(slots) < width && i+len(slots) < n && sweeper.Busy() {
			var err error
			if len(group) == len(slots) {
				_, err = take(i+len(group), poll)
			} else {
				_, err = acquire(poll)
			}
			if err != nil {
				return err
			}
		}
		m := min(len(group), len(slots))
		bs, fillSlots := group[:m], slots[:m]
		filled := time.Now()
		ss.queued.Add(-int64(m))
		var err error
		if m == 1 {
			err = ss.ring.Fill(fillSlots[0], bs[0])
		} else {
			err = sweeper.FillSweep(fillSlots, bs)
		}
		if err != nil {
			return err
		}
		took := time.Since(filled)
		ss.srv.stats.GatherNanos.Add(int64(took))
		if m > 1 {
			ss.srv.stats.SweptBatches.Add(int64(m))
			ss.srv.metrics.swept.Add(float64(m))
		}
		for j, b := range bs {
			ss.srv.metrics.gather.Observe(seconds(took) / float64(m))
			ss.srv.metrics.gatherBytes.Add(float64(len(b.NID) * ss.srv.src.Data.RowBytes()))
			ready := batchReady(fillSlots[j], epoch, i+j, b)
			pool <- b
			ss.ring.Publish(fillSlots[j], pingpong.Tag{Epoch: epoch, Index: uint32(i + j)})
			ss.readyAt[fillSlots[j]].Store(time.Now().UnixNano())
			ss.heldSlots.Add(1)
			if err := ss.send(ready); err != nil {
				slots = slots[j+1:]
				group = group[j+1:]
				return err
			}
			ss.srv.stats.BatchesServed.Add(1)
			ss.batchesServed.Inc()
		}
		group = append(group[:0], group[m:]...)
		slots = append(slots[:0], slots[m:]...)
		i += m
	}
	return ss.send(&ipc.EpochEnd{Epoch: epoch, NumBatches: uint32(n)})
}

func batchReady(slot int, epoch uint32, i int, b *sampler.Batch) *ipc.BatchReady {
	m := &ipc.BatchReady{
		Slot: uint32(slot), Epoch: epoch, Index: uint32(i),
		BatchSize: uint32(b.NumSampledNodes[0]), NumNodes: uint32(len(b.NID)), NumEdges: uint32(len(b.Src)),
	}
	for _, v := range b.NumSampledNodes {
		m.NumSampledNodes = append(m.NumSampledNodes, uint32(v))
	}
	for _, v := range b.NumSampledEdges {
		m.NumSampledEdges = append(m.NumSampledEdges, uint32(v))
	}
	return m
}
