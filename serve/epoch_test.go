package serve

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// failingRing is a shared-memory ring whose third fill fails, as a GPU fault
// would.
type failingRing struct {
	slotRing
	fills int
}

func (r *failingRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	r.fills++
	if r.fills == 3 {
		return errors.New("injected fill failure")
	}
	return r.slotRing.Fill(ctx, slots, bs)
}

// A fill error mid-epoch reaches the trainer as an Error frame at once (the
// sampler goroutines still running ahead must not keep the epoch from
// ending), and the daemon carries on.
func TestFillErrorReachesTheTrainer(t *testing.T) {
	srv, _ := testServer(t, Config{}, func(srv *Server) {
		srv.newCUDARing = func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
			cpu := *req
			cpu.device = -1
			r, err := srv.newRing(&cpu, layout, sl)
			return &failingRing{slotRing: r}, err
		}
	})
	c := dial(t, srv)
	o := openReq()
	o.Device = "cuda:0" // routed to the failing ring above
	o.Slots = 2
	c.handshake(o)
	c.send(&ipc.StartEpoch{})
	// Two slots: batches 0 and 1 fill; releasing batch 0 lets the third
	// fill run, and fail.
	b := c.recv().(*ipc.BatchReady)
	c.recv()
	c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	c.expectError(ipc.CodeInternal, "injected fill failure")
	good := dial(t, srv)
	good.handshake(openReq())
}

// A batch the trainer holds across the epoch boundary stays its own: the
// next epoch never refills that slot, and the late Release is accepted.
func TestHeldSlotSurvivesEpochBoundary(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	o := openReq()
	o.BatchSize = 400 // 813 train seeds: 3 batches an epoch
	c.handshake(o)
	c.send(&ipc.StartEpoch{Epoch: 0})
	var kept *ipc.BatchReady
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		if kept == nil {
			kept = b // hold the first batch
			continue
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	nodes, _, _, _ := c.sizes(kept)
	n := nodes * src.Data.RowBytes()
	snapshot := append([]byte(nil), c.region(kept.Slot, "x", n)...)
	c.send(&ipc.StartEpoch{Epoch: 1})
	for i := 0; i < 3; i++ {
		b := c.recv().(*ipc.BatchReady)
		if b.Slot == kept.Slot {
			t.Fatalf("held slot %d refilled in the next epoch", b.Slot)
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if string(snapshot) != string(c.region(kept.Slot, "x", n)) {
		t.Fatal("the held slot's contents changed")
	}
	c.send(&ipc.Release{Slot: kept.Slot, Epoch: kept.Epoch, Index: kept.Index})
	if _, ok := c.recv().(*ipc.EpochEnd); !ok {
		t.Fatal("epoch 1 did not end after the late release")
	}
}

// gpuWorkRing is a shared-memory ring that stands for a GPU ring's release
// records: the trainer's work on a slot it has released ends when done says
// (never, for a trainer killed mid-step). It checks that the pipeline waits
// for that work before it fills a slot again.
type gpuWorkRing struct {
	slotRing
	done func(slot int) bool

	mu       sync.Mutex
	filled   map[int]bool  // slots filled before, whose work must be awaited
	awaited  map[int]bool  // slots whose work has been awaited since their fill
	unawaits []int         // slots filled again without a wait: the pipeline's bug
	ended    chan error    // what each wait that never saw the work end returned
	blocked  chan struct{} // a wait has begun that will not see the work end
}

func (r *gpuWorkRing) AwaitReleased(ctx context.Context, slots []int) error {
	for _, s := range slots {
		r.mu.Lock()
		again := r.filled[s]
		r.mu.Unlock()
		if again && !r.done(s) {
			select {
			case r.blocked <- struct{}{}:
			default:
			}
			<-ctx.Done()
			r.ended <- ctx.Err()
			return ctx.Err()
		}
		r.mu.Lock()
		r.awaited[s] = true
		r.mu.Unlock()
	}
	return nil
}

func (r *gpuWorkRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	r.mu.Lock()
	for _, s := range slots {
		if r.filled[s] && !r.awaited[s] {
			r.unawaits = append(r.unawaits, s)
		}
		r.filled[s], r.awaited[s] = true, false
	}
	r.mu.Unlock()
	return r.slotRing.Fill(ctx, slots, bs)
}

// gpuWorkServer is a test server whose first "cuda:0" trainer gets a
// gpuWorkRing (sent on the channel) with the given done, and later ones an
// ordinary shared-memory ring; gpuWorkTrainer is such a trainer, two slots.
func gpuWorkServer(t *testing.T, done func(int) bool) (*Server, *Source, <-chan *gpuWorkRing) {
	rings := make(chan *gpuWorkRing, 1)
	var made atomic.Int32
	srv, src := testServer(t, Config{}, func(srv *Server) {
		srv.newCUDARing = func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
			cpu := *req
			cpu.device = -1
			r, err := srv.newRing(&cpu, layout, sl)
			if err != nil || made.Add(1) > 1 {
				return r, err
			}
			w := &gpuWorkRing{slotRing: r, done: done, filled: map[int]bool{}, awaited: map[int]bool{},
				ended: make(chan error, 1), blocked: make(chan struct{}, 1)}
			rings <- w
			return w, nil
		}
	})
	return srv, src, rings
}

func gpuWorkTrainer(t *testing.T, srv *Server) *client {
	c := dial(t, srv)
	o := openReq()
	o.Device = "cuda:0"
	o.Slots = 2
	c.handshake(o)
	return c
}

// stalledTrainer is a gpuWorkTrainer in its first epoch that has released
// its first batch (on a ring whose work never ends, a release its fills
// wait on) and holds the second.
func stalledTrainer(t *testing.T, srv *Server) *client {
	c := gpuWorkTrainer(t, srv)
	c.send(&ipc.StartEpoch{})
	b := c.recv().(*ipc.BatchReady)
	c.recv()
	c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	return c
}

// waitBlocked returns once the ring's pipeline waits on work that never
// ends (within 10 s): a trainer that goes before that moment leaves no such
// wait to end, and the tests below would wait for nothing.
func (r *gpuWorkRing) waitBlocked(t *testing.T) {
	select {
	case <-r.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline never waited on the trainer's released slot")
	}
}

// waitEnded is what a wait that never saw the work end returned, within 10 s.
func (r *gpuWorkRing) waitEnded(t *testing.T) error {
	select {
	case err := <-r.ended:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the wait on a trainer's GPU work did not end with its session")
		return nil
	}
}

// Every refill of a slot waits for the trainer's work on it first (an
// epoch over two slots refills each many times).
func TestRefillsAwaitTheTrainersWork(t *testing.T) {
	srv, src, rings := gpuWorkServer(t, func(int) bool { return true })
	c := gpuWorkTrainer(t, srv)
	c.epoch(src, 0)
	ring := <-rings
	ring.mu.Lock()
	defer ring.mu.Unlock()
	if len(ring.unawaits) > 0 {
		t.Fatalf("slots %v filled again without waiting for the trainer's work on them", ring.unawaits)
	}
	if len(ring.filled) != 2 {
		t.Fatalf("%d slots filled, want both", len(ring.filled))
	}
}

// A trainer that disconnects while its GPU work on a released slot never
// ends (killed mid-step) does not stall the daemon: the wait ends with the
// session, and the next trainer is served.
func TestTrainerGoneMidStepDoesNotStall(t *testing.T) {
	srv, src, rings := gpuWorkServer(t, func(int) bool { return false })
	c := stalledTrainer(t, srv)
	ring := <-rings
	ring.waitBlocked(t)
	c.conn.Close()
	if err := ring.waitEnded(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the wait on the gone trainer's work ended with %v, want the session's cancel", err)
	}
	gpuWorkTrainer(t, srv).epoch(src, 0)
	waitFor(t, func() bool { return srv.Trainers() == 1 })
}

// A trainer that stays connected while its GPU work on released slots
// never ends (a hostile client recording its releases behind an endless
// kernel, or a hung one) stalls only its own fills: another trainer of the
// daemon is served a whole epoch meanwhile, and the stalled one's slots and
// budget come back when it goes.
func TestEndlessTrainerWorkStallsOnlyItsSession(t *testing.T) {
	srv, src, rings := gpuWorkServer(t, func(int) bool { return false })
	hostile := stalledTrainer(t, srv)
	ring := <-rings
	ring.waitBlocked(t)
	gpuWorkTrainer(t, srv).epoch(src, 0)
	select {
	case err := <-ring.ended:
		t.Fatalf("the stalled trainer's wait ended (%v) while it was connected", err)
	default:
	}
	hostile.conn.Close()
	if err := ring.waitEnded(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the stalled trainer's wait ended with %v, want the session's cancel", err)
	}
	waitFor(t, func() bool { return srv.Trainers() == 1 })
}
