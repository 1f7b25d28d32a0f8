package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/sampler"
)

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

// runEpoch runs the pipeline of one epoch and ends it with EpochEnd.
func (ss *session) runEpoch(ctx context.Context, epoch uint32) error {
	started := time.Now()
	plan, err := ss.plans.plan(epoch)
	if err != nil {
		return err
	}
	planned := time.Since(started)
	ss.plans.prepare(epoch + 1) // the trainer's likely next epoch
	// A trainer that reconnects resumes its first epoch at its start batch,
	// the batch after the last one it consumed; every later epoch is whole.
	first := 0
	if ss.req.startBatch > 0 && epoch == ss.req.startEpoch {
		first = ss.req.startBatch
	}
	ss.req.startBatch = 0
	p := newPipeline(ss, epoch, plan, first)
	p.started, p.planned = started, planned
	g, gctx := errgroup.WithContext(ctx)
	for w := range p.k {
		g.Go(func() error { return p.sample(gctx, w) })
	}
	g.Go(func() error { return p.fill(gctx) })
	if err := g.Wait(); err != nil {
		return err
	}
	return ss.send(&ipc.EpochEnd{Epoch: epoch, NumBatches: uint32(plan.NumBatches())})
}

// pipeline is one epoch of one trainer, in two stages joined by bounded
// channels:
//
//	sample  k = Config.Prefetch goroutines; goroutine w samples batches
//	        w, w+k, ... (from first) into batches taken from a pool
//	fill    takes the batches in order, acquires free slots, fills them
//	        (several in one sweep while the GPU is busy with earlier fills,
//	        when the ring can) and announces each with BatchReady
//
// At most 2k+width batches exist, whatever the trainer's pace.
type pipeline struct {
	ss       *session
	epoch    uint32
	plan     *sampler.Plan
	first, n int
	k, width int
	outs     []chan batch.Batch // per sampler goroutine, its batches in order
	pool     chan batch.Batch   // empty batches

	// the fill stage's
	group  []batch.Batch // sampled batches taken, not yet filled
	slots  []int         // slots acquired, not yet filled
	meta   batch.Meta
	keeps  int // the most batches the trainer held while it stalled this epoch (trainerAhead)
	stalls int // fills in a row that went because the trainer stalled

	started time.Time     // when the epoch was asked for
	planned time.Duration // its plan (the seeds' order) took
}

func newPipeline(ss *session, epoch uint32, plan *sampler.Plan, first int) *pipeline {
	p := &pipeline{ss: ss, epoch: epoch, plan: plan, first: first, n: plan.NumBatches(),
		k: ss.srv.cfg.Prefetch, width: ss.ring.SweepWidth()}
	p.outs = make([]chan batch.Batch, p.k)
	for w := range p.outs {
		p.outs[w] = make(chan batch.Batch, 1)
	}
	p.pool = make(chan batch.Batch, 2*p.k+p.width)
	for range 2*p.k + p.width {
		p.pool <- ss.mode.NewBatch()
	}
	return p
}

// sample is sampler goroutine w.
func (p *pipeline) sample(ctx context.Context, w int) error {
	defer close(p.outs[w])
	srv := p.ss.srv
	for i := p.first + w; i < p.n; i += p.k {
		var b batch.Batch
		select {
		case b = <-p.pool:
		case <-ctx.Done():
			return nil
		}
		start := time.Now()
		if in, ok := b.(batch.Inputs); ok {
			in.SetInputs(p.plan.Inputs(i))
		}
		if err := p.ss.mode.Sample(p.plan.Batch(i), p.plan.Key(i), b); err != nil {
			return fmt.Errorf("sampling batch %d of epoch %d: %w", i, p.epoch, err)
		}
		took := time.Since(start)
		srv.stats.SampleNanos.Add(int64(took))
		srv.metrics.sample.Observe(seconds(took))
		p.ss.queued.Add(1)
		select {
		case p.outs[w] <- b:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// fill is the fill stage. A fill covers one batch or, when the ring sweeps,
// up to width of them: while the trainer's earlier fills still run on the
// GPU, or while the trainer has more than the ring's SweepAhead batches
// announced and not released, more sampled batches and freed slots join the
// next one (growSweep); otherwise it goes at once.
func (p *pipeline) fill(ctx context.Context) error {
	defer func() {
		for _, slot := range p.slots {
			p.ss.ring.Abandon(slot)
		}
	}()
	const poll = time.Millisecond
	ring := p.ss.ring
	for i := p.first; i < p.n; {
		if len(p.group) == 0 {
			if _, err := p.take(ctx, i, -1); err != nil {
				return err
			}
		}
		if len(p.slots) == 0 {
			if _, err := p.acquire(ctx, -1); err != nil {
				return err
			}
		}
		waited := false // for the trainer, at some point of this fill's growth
		width := rampWidth(p.width, i-p.first)
		for {
			ahead := p.trainerAhead()
			if !growSweep(len(p.slots), width, p.n-i, ahead, ring.Busy) {
				break
			}
			waited = waited || ahead
			var err error
			if len(p.group) == len(p.slots) {
				_, err = p.take(ctx, i+len(p.group), poll)
			} else {
				_, err = p.acquire(ctx, poll)
			}
			if err != nil {
				return err
			}
		}
		if held := p.ss.held(); stalledFill(len(p.slots), width, p.n-i, waited, held, p.aheadFloor()) {
			// Twice in a row, the floor rises to what the trainer holds, so
			// that later fills do not wait for the stall again.
			if p.stalls++; p.stalls >= 2 {
				p.keeps = max(p.keeps, held)
			}
		} else {
			p.stalls = 0
		}
		m := min(len(p.group), len(p.slots))
		if err := p.fillAndAnnounce(ctx, i, m); err != nil {
			return err
		}
		i += m
	}
	return nil
}

// fillAndAnnounce fills the first m slots with the first m batches of the
// group (batches i, i+1, ...) and announces them.
func (p *pipeline) fillAndAnnounce(ctx context.Context, i, m int) error {
	ss, srv := p.ss, p.ss.srv
	bs, slots := p.group[:m], p.slots[:m]
	// Waiting for the trainer's GPU work on the slots counts as waiting
	// for the slots (Stats.WaitNanos; gnnloader_release_wait_seconds on a
	// GPU), not as filling them.
	awaited := time.Now()
	if err := ss.ring.AwaitReleased(ctx, slots); err != nil {
		return err
	}
	waited := time.Since(awaited)
	srv.stats.WaitNanos.Add(int64(waited))
	if ss.req.device >= 0 {
		srv.metrics.releaseWait.Observe(seconds(waited))
	}
	filled, held := time.Now(), ss.held()
	ss.queued.Add(-int64(m))
	if err := ss.ring.Fill(ctx, slots, bs); err != nil {
		return err
	}
	took := time.Since(filled)
	if i == p.first {
		defer p.logStart(m, filled, awaited, took)
	}
	srv.stats.GatherNanos.Add(int64(took))
	srv.stats.Fills.Add(1)
	srv.metrics.fills.Inc()
	for j, b := range bs {
		// Counted a batch at a time, as the gather's observations are: a
		// scrape between two of a fill's batches sees the same batches in
		// both (the sweep's count once read ahead of the observations).
		srv.metrics.gather.Observe(seconds(took) / float64(m))
		if m > 1 {
			srv.stats.SweptBatches.Add(1)
			srv.metrics.swept.Inc()
		}
		b.Meta(&p.meta)
		if db, ok := b.(batch.DeviceBatch); ok && db.Err() != nil {
			return fmt.Errorf("sampling batch %d of epoch %d on the GPU: %w", i+j, p.epoch, db.Err())
		}
		srv.metrics.gatherBytes.Add(float64(gatheredBytes(ss.mode.Layout(), &p.meta)))
		ready := batchReady(slots[j], p.epoch, i+j, &p.meta, ss.ring.ReadyValue(slots[j]))
		p.pool <- b
		ss.ring.Publish(slots[j], pingpong.Tag{Epoch: p.epoch, Index: uint32(i + j)})
		ss.readyAt[slots[j]].Store(time.Now().UnixNano())
		ss.heldSlots.Add(1)
		if err := ss.send(ready); err != nil {
			p.slots = p.slots[j+1:]
			p.group = p.group[j+1:]
			return err
		}
		srv.stats.BatchesServed.Add(1)
		ss.batchesServed.Inc()
	}
	srv.fillTrace.fill(filled, m, took, time.Since(filled), held, ss.id)
	p.group = append(p.group[:0], p.group[m:]...)
	p.slots = append(p.slots[:0], p.slots[m:]...)
	return nil
}

// logStart records the epoch's start (gnnloader_epoch_start_seconds) and
// logs (at debug level) where it went, once its first fill is announced:
// the plan, sampling the first batches and acquiring their slots, the wait
// for their release, the fill, and the batches' counts (a GPU-sampled
// batch's wait for its sampling).
func (p *pipeline) logStart(m int, filled, awaited time.Time, fill time.Duration) {
	p.ss.srv.metrics.epochStart.Observe(seconds(time.Since(p.started)))
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	p.ss.srv.log.Debug("epoch's first batches announced", "epoch", p.epoch, "batches", m,
		"after_ms", ms(time.Since(p.started)), "plan_ms", ms(p.planned), "taken_ms", ms(awaited.Sub(p.started)-p.planned),
		"release_wait_ms", ms(filled.Sub(awaited)), "fill_ms", ms(fill), "announce_ms", ms(time.Since(filled)-fill))
}

// take adds batch i to the group, waiting for it at most wait (< 0: as
// long as it takes); it reports whether it came in time.
func (p *pipeline) take(ctx context.Context, i int, wait time.Duration) (bool, error) {
	out := p.outs[(i-p.first)%p.k]
	var b batch.Batch
	var ok bool
	if wait < 0 {
		select {
		case b, ok = <-out:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	} else {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case b, ok = <-out:
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if !ok {
		// The sampler goroutine stopped early: it failed or was cancelled,
		// and the group's context ends as soon as its error is recorded.
		<-ctx.Done()
		return false, ctx.Err()
	}
	p.group = append(p.group, b)
	return true, nil
}

// acquire adds one more free slot, waiting for it at most wait (< 0: as
// long as it takes); it reports whether one came in time.
func (p *pipeline) acquire(ctx context.Context, wait time.Duration) (bool, error) {
	srv := p.ss.srv
	start := time.Now()
	actx := ctx
	if wait >= 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	slot, err := p.ss.ring.Acquire(actx)
	if err != nil {
		if wait >= 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return false, nil
		}
		return false, err
	}
	took := time.Since(start)
	srv.stats.WaitNanos.Add(int64(took))
	srv.metrics.slotWait.Observe(seconds(took))
	p.slots = append(p.slots, slot)
	return true, nil
}

// gatheredBytes is the bytes of a batch's gathered regions (features).
func gatheredBytes(l *batch.Layout, m *batch.Meta) int64 {
	var n int64
	for r, reg := range l.Regions {
		if reg.Table != "" {
			n += reg.DataBytes(int(m.Counts[r]))
		}
	}
	return n
}

// batchReady is the announcement of a filled slot: the batch's counts,
// scalars and lists in the order of its layout (and of Opened), and the
// value the slot's ready word takes (slotRing.ReadyValue).
func batchReady(slot int, epoch uint32, i int, m *batch.Meta, readyValue uint32) *ipc.BatchReady {
	br := &ipc.BatchReady{Slot: uint32(slot), Epoch: epoch, Index: uint32(i), ReadyValue: readyValue,
		Counts: append([]uint32(nil), m.Counts...), Scalars: append([]int64(nil), m.Scalars...)}
	for _, l := range m.Lists {
		br.Lists = append(br.Lists, append([]uint32(nil), l...))
	}
	return br
}
