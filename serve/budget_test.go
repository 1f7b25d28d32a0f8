package serve

// The trainer and memory budgets: what is refused, and what a disconnect
// gives back.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
)

func TestDisconnectFreesSlots(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{})
	c.recv()
	if srv.Trainers() != 1 || srv.SlotBytes() == 0 {
		t.Fatalf("trainers %d slot bytes %d", srv.Trainers(), srv.SlotBytes())
	}
	c.conn.Close() // no Goodbye
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.SlotBytes() == 0 && srv.BudgetUsed() == 0 })
}

func TestMemoryBudgetAndTrainerLimit(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 1})
	a := dial(t, srv)
	a.handshake(openReq())
	b := dial(t, srv)
	b.send(&ipc.Hello{Version: ipc.Version})
	b.recv()
	o := openReq()
	b.send(&o)
	b.expectError(ipc.CodeBusy, "limit 1")

	// Slots that can never fit are a limit; slots that do not fit now,
	// beside another trainer's, make the daemon busy.
	srv2, _ := testServer(t, Config{MemoryBudget: 1024})
	c := dial(t, srv2)
	c.send(&ipc.Hello{Version: ipc.Version})
	c.recv()
	c.send(&o)
	c.expectError(ipc.CodeLimit, "exceed the whole memory budget")

	probe, _ := testServer(t, Config{})
	p := dial(t, probe)
	p.handshake(openReq())
	one := probe.BudgetUsed()
	srv3, _ := testServer(t, Config{MemoryBudget: one + one/2})
	first := dial(t, srv3)
	first.handshake(openReq())
	second := dial(t, srv3)
	second.send(&ipc.Hello{Version: ipc.Version})
	second.recv()
	second.send(&o)
	second.expectError(ipc.CodeBusy, "do not fit the memory budget")
}

// TestEpochPlanCountsAgainstTheBudget: besides slots and batches in flight,
// a request holds its epoch plans (24 bytes a seed each: the epoch's and
// the next one's, made ahead): the same request over two splits differs in
// the budget by exactly that.
func TestEpochPlanCountsAgainstTheBudget(t *testing.T) {
	srv, src := testServer(t, Config{})
	used := map[string]int64{}
	for _, split := range []string{"train", "test"} {
		c := dial(t, srv)
		req := openReq()
		req.Split = split
		c.handshake(req)
		used[split] = srv.BudgetUsed()
		c.conn.Close()
		waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
	}
	d := int64(len(src.Data.Splits["train"]) - len(src.Data.Splits["test"]))
	if d == 0 || used["train"]-used["test"] != 2*seedPlanBytes*d {
		t.Fatalf("budget over train %d, over test %d: want a difference of %d x %d seeds", used["train"], used["test"], 2*seedPlanBytes, d)
	}
}

// TestBatchSizeOverTheSeeds: a batch_size larger than the split sizes the
// slots by the split, not by batch_size (one batch holds every seed).
func TestBatchSizeOverTheSeeds(t *testing.T) {
	srv, src := testServer(t, Config{})
	seeds := len(src.Data.Splits["train"])
	c := dial(t, srv)
	o := openReq()
	o.BatchSize = uint32(8 * seeds)
	opened := c.handshake(o)
	if in := opened.Region("input_id"); in == nil || in.Shape[0] != uint64(seeds) {
		t.Fatalf("input_id %+v for a split of %d seeds and batch_size %d", in, seeds, o.BatchSize)
	}
	if opened.NumBatches != 1 {
		t.Fatalf("%d batches, want 1", opened.NumBatches)
	}
	c.send(&ipc.StartEpoch{Epoch: 0})
	b, ok := c.recv().(*ipc.BatchReady)
	if !ok {
		t.Fatal("no batch")
	}
	checkBatch(t, c, src, b)
	if n, _ := opened.Scalar(b, "batch_size"); int(n) != seeds {
		t.Fatalf("batch of %d seeds, want %d", n, seeds)
	}
}

// TestSweepWidth: the batches one GPU fill may cover, and so what the
// budget charges for the batches in flight.
func TestSweepWidth(t *testing.T) {
	for _, tc := range []struct{ batches, slots, want int }{
		{0, 2, 1}, {0, 3, 1}, {0, 6, 3}, {0, 16, 8}, {0, 32, 16}, {0, 64, gather.MaxSweepParts},
		{1, 16, 1}, {3, 16, 3}, {12, 8, 8}, {40, 64, gather.MaxSweepParts}, {-1, 16, 8},
	} {
		if got := sweepWidth(tc.batches, tc.slots); got != tc.want {
			t.Errorf("sweepWidth(%d, %d) = %d, want %d", tc.batches, tc.slots, got, tc.want)
		}
	}
	// A sweep on the GPU takes at most gather.MaxSweepIDs ids, counting each
	// batch's capacity: wide sweeps of large batches are narrowed to fit.
	const most = gather.MaxSweepIDs
	for _, tc := range []struct {
		width    int
		capacity int64
		want     int
	}{
		{32, 938_000, 32}, {32, most / 32, 32}, {32, most/32 + 1, 31}, {32, 40_000_000, 26},
		{32, most, 1}, {32, int64(gather.MaxPartRows), 16}, {16, 0, 16},
	} {
		if got := sweepFits(tc.width, tc.capacity); got != tc.want || int64(got)*tc.capacity > most && got > 1 {
			t.Errorf("sweepFits(%d, %d) = %d, want %d", tc.width, tc.capacity, got, tc.want)
		}
	}
}

// TestBatchesAloneOverTheBudget: an Open whose sampled batches in flight
// alone exceed the memory budget is told so (no number of slots would fit),
// is refused before anything is allocated, and takes nothing from the
// budget, however often it is sent.
func TestBatchesAloneOverTheBudget(t *testing.T) {
	srv, _ := testServer(t, Config{MemoryBudget: 4096})
	for range 20 {
		c := dial(t, srv)
		c.hello()
		o := openReq()
		c.send(&o)
		c.expectError(ipc.CodeLimit, "exceed the whole memory budget of 4096 bytes: lower batch_size or fanouts")
	}
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.BudgetUsed() == 0 && srv.SlotBytes() == 0 })
}

// holdFirstClose serves cfg with the first session to close held in its
// close (still holding what it was given: Server.leaveHook) from when it
// starts, which entered reports, until letGo (also run as the test ends, before
// the server stops). Later closes go through: an atomic flag, not a
// sync.Once, whose Do would hold them too.
func holdFirstClose(t *testing.T, cfg Config) (srv *Server, entered <-chan struct{}, letGo func()) {
	return holdFirst(t, cfg, func(s *Server, hook func()) { s.leaveHook = hook })
}

// holdFirst is holdFirstClose with the hook that holds the first session
// chosen by set (Server.leaveHook or Server.closeHook).
func holdFirst(t *testing.T, cfg Config, set func(s *Server, hook func())) (srv *Server, entered <-chan struct{}, letGo func()) {
	in, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	srv, _ = testServer(t, cfg, func(s *Server) {
		set(s, func() {
			if first.CompareAndSwap(false, true) {
				close(in)
				<-release
			}
		})
	})
	letGo = sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo)
	return srv, in, letGo
}

// sendOpen dials srv and sends the default Open after the handshake's
// Hello, without reading the answer.
func sendOpen(t *testing.T, srv *Server) *client {
	c := dial(t, srv)
	c.hello()
	o := openReq()
	c.send(&o)
	return c
}

// TestOpenWaitsForATrainerGoingAway: a trainer that hangs up holds its
// slots until its session has closed (on a GPU, after the fills in flight).
// A trainer that opens meanwhile is not refused for that memory or trainer
// count: its Open waits for the closing session and is admitted after it.
// The first session's close is held open by Server.leaveHook until the second
// Open has been sent, so without the wait the second would be refused.
func TestOpenWaitsForATrainerGoingAway(t *testing.T) {
	probe, _ := testServer(t, Config{})
	p := dial(t, probe)
	p.handshake(openReq())
	one := probe.BudgetUsed()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"trainer limit", Config{MaxTrainers: 1}},
		{"memory budget", Config{MemoryBudget: one + one/2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, entered, letGo := holdFirstClose(t, tc.cfg) // a's
			a := dial(t, srv)
			a.handshake(openReq())
			a.conn.Close()
			<-entered // a's session is closing and still holds its slots
			b := sendOpen(t, srv)
			time.Sleep(50 * time.Millisecond) // b's Open is read and waits
			if srv.Trainers() != 1 {
				t.Fatalf("%d trainers while a closes, want a's 1", srv.Trainers())
			}
			letGo()
			if m := b.recv(); m.Type() != ipc.TypeOpened {
				t.Fatalf("b got %#v, want Opened once a had gone", m)
			}
			if srv.Trainers() != 1 {
				t.Fatalf("%d trainers, want b's 1", srv.Trainers())
			}
		})
	}
}

// TestOpenRefusedWhenNoTrainerLeaves: with nobody closing, a refusal for
// want of trainers stands at once (no wait).
func TestOpenRefusedWhenNoTrainerLeaves(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 1})
	a := dial(t, srv)
	a.handshake(openReq())
	b := dial(t, srv)
	b.hello()
	o := openReq()
	start := time.Now()
	b.send(&o)
	b.expectError(ipc.CodeBusy, "limit 1")
	if d := time.Since(start); d > leaveWait/2 {
		t.Fatalf("refused after %v: it waited for no one", d)
	}
}

// TestOpenWaitsForAHangupNotYetRead: a trainer hangs up and another opens
// before the daemon has begun to close the first session (the two race on
// the daemon's side; Server.closeHook holds the close before it counts as
// closing). The Open waits hangupGrace for a session to start closing, and is
// admitted once the first has gone; without that grace it was refused at once.
func TestOpenWaitsForAHangupNotYetRead(t *testing.T) {
	srv, in, letGo := holdFirst(t, Config{MaxTrainers: 1}, func(s *Server, hook func()) { s.closeHook = hook })
	a := dial(t, srv)
	a.handshake(openReq())
	a.conn.Close()
	<-in // a's session has seen the hang-up, and has not started closing
	b := sendOpen(t, srv)
	time.Sleep(50 * time.Millisecond) // b's Open has been refused once by now, with no one closing (under hangupGrace)
	letGo()
	if m := b.recv(); m.Type() != ipc.TypeOpened {
		t.Fatalf("b got %#v, want Opened once a had gone", m)
	}
	waitFor(t, func() bool { return srv.Trainers() == 1 })
}

// TestOpenWakesAsEachTrainerLeaves: an Open waiting for closing sessions
// tries again as each one has closed, not only once all have: one whose
// close is stuck does not hold up an Open that another's departure let in.
func TestOpenWakesAsEachTrainerLeaves(t *testing.T) {
	srv, entered, letGo := holdFirstClose(t, Config{MaxTrainers: 2}) // stuck's
	stuck, gone := dial(t, srv), dial(t, srv)
	stuck.handshake(openReq())
	gone.handshake(openReq())
	stuck.conn.Close()
	<-entered
	b := sendOpen(t, srv)
	time.Sleep(50 * time.Millisecond) // b's Open waits: two trainers still admitted
	gone.conn.Close()                 // closes at once, giving back its place
	start := time.Now()
	if m := b.recv(); m.Type() != ipc.TypeOpened {
		t.Fatalf("b got %#v, want Opened once one trainer had gone", m)
	}
	if d := time.Since(start); d > leaveWait/2 {
		t.Fatalf("b admitted after %v: it waited for the stuck close too", d)
	}
	letGo()
}

// TestDefaultSlotCapHostile: the default daemon (--max-slots 64) refuses
// slot counts over the cap, up to the wire's largest, before it reserves
// anything; 64 slots are within it.
func TestDefaultSlotCapHostile(t *testing.T) {
	srv, _ := testServer(t, Config{})
	for _, slots := range []uint32{65, 1 << 20, math.MaxUint32} {
		c := dial(t, srv)
		c.hello()
		o := openReq()
		o.Slots = slots
		c.send(&o)
		c.expectError(ipc.CodeLimit, fmt.Sprintf("%d slots asked, limit 64", slots))
		if srv.BudgetUsed() != 0 || srv.Trainers() != 0 {
			t.Fatalf("%d slots refused, yet %d bytes and %d trainers taken", slots, srv.BudgetUsed(), srv.Trainers())
		}
	}
	c := dial(t, srv)
	o := openReq()
	o.Slots = 64
	if got := c.handshake(o); got.Slots != 64 {
		t.Fatalf("asked for 64 slots, got %d", got.Slots)
	}
}

// TestOpenWaitingTrainerHangsUp: a trainer whose Open waits for a closing
// one and that hangs up meanwhile leaves nothing behind once the wait ends
// (its ring, if made, is given back when its answer cannot be sent).
func TestOpenWaitingTrainerHangsUp(t *testing.T) {
	srv, entered, letGo := holdFirstClose(t, Config{MaxTrainers: 1}) // a's
	a := dial(t, srv)
	a.handshake(openReq())
	a.conn.Close()
	<-entered
	b := sendOpen(t, srv)
	time.Sleep(50 * time.Millisecond) // b's Open waits
	b.conn.Close()                    // and b hangs up
	letGo()
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.BudgetUsed() == 0 && srv.SlotBytes() == 0 })
	good := dial(t, srv) // the daemon carries on
	good.handshake(openReq())
}

// TestRefusedOpensHoldNothing: a full daemon given a burst of Opens (a
// hostile client, or many trainers at once) refuses each within about the
// hang-up grace, with no one closing, and keeps nothing of them: the
// trainer count and the budget are as before, and a later trainer that
// fits is served.
func TestRefusedOpensHoldNothing(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 1})
	a := dial(t, srv)
	a.handshake(openReq())
	used := srv.BudgetUsed()
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		c := sendOpen(t, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.expectError(ipc.CodeBusy, "limit 1")
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > leaveWait/2 {
		t.Fatalf("16 refusals took %v", d)
	}
	waitFor(t, func() bool { return srv.Trainers() == 1 && srv.BudgetUsed() == used })
	a.conn.Close()
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.BudgetUsed() == 0 })
	dial(t, srv).handshake(openReq())
}

// TestConnectionChurnKeepsNothing: a client that opens, starts an epoch
// and hangs up without a Goodbye, over and over, leaves the daemon nothing
// per connection: no trainer, no budget, no goroutine, no heap that the
// collector cannot take back (the daemon's RSS after 400 connections on
// arxiv stayed where it was after 100: docs/benchmarks.md, session 28).
func TestConnectionChurnKeepsNothing(t *testing.T) {
	srv, _ := testServer(t, Config{})
	// Each run of cycles is a subtest: the test clients' connections and
	// mappings (their cleanups) are gone before the heap is read.
	cycles := func(name string, n int) {
		t.Run(name, func(t *testing.T) {
			for range n {
				c := dial(t, srv)
				c.handshake(openReq())
				c.send(&ipc.StartEpoch{})
				c.recv()
				c.conn.Close() // no Goodbye
				waitFor(t, func() bool { return srv.Trainers() == 0 && srv.BudgetUsed() == 0 })
			}
		})
	}
	settled := func() (uint64, int) {
		var ms runtime.MemStats
		for range 3 { // the sessions' goroutines end just after the daemon lets them go
			runtime.GC()
			time.Sleep(20 * time.Millisecond)
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	cycles("warm", 20) // pools and buffers reach their size
	heap0, g0 := settled()
	const n = 200
	cycles("churn", n)
	heap1, g1 := settled()
	t.Logf("heap %d -> %d bytes, goroutines %d -> %d over %d connections", heap0, heap1, g0, g1, n)
	if g1 > g0+2 {
		t.Errorf("%d goroutines after %d more connections, %d before", g1, n, g0)
	}
	// 1 MiB over 200 connections: 5 KiB a connection would show.
	if heap1 > heap0+1<<20 {
		t.Errorf("live heap %d bytes after %d more connections, %d before", heap1, n, heap0)
	}
}
