package serve

import (
	"slices"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/sampler"
)

// TestPlanAhead: a plan made ahead is the epoch's plan (NewPlan's, seed for
// seed) when the trainer asks for that epoch, is used once, and is dropped
// for a fresh one when the trainer asks for another epoch.
func TestPlanAhead(t *testing.T) {
	seeds := make([]int64, 5000)
	for i := range seeds {
		seeds[i] = int64(3*i + 1)
	}
	cfg := sampler.EpochConfig{BatchSize: 64, Shuffle: true, Seed: 9, Rank: 1, WorldSize: 3}
	same := func(epoch uint32, got *sampler.Plan) {
		t.Helper()
		want, err := sampler.NewPlan(seeds, cfg, int(epoch))
		if err != nil {
			t.Fatal(err)
		}
		if got.NumBatches() != want.NumBatches() {
			t.Fatalf("epoch %d: %d batches, want %d", epoch, got.NumBatches(), want.NumBatches())
		}
		for i := range want.NumBatches() {
			if !slices.Equal(got.Batch(i), want.Batch(i)) || !slices.Equal(got.Inputs(i), want.Inputs(i)) || got.Key(i) != want.Key(i) {
				t.Fatalf("epoch %d: batch %d differs from NewPlan's", epoch, i)
			}
		}
	}
	var a planAhead
	a.open(seeds, cfg, true, 2)
	a.prepare(2) // again for the same epoch: the one under way stays
	first := a.next
	p, err := a.plan(2)
	if err != nil {
		t.Fatal(err)
	}
	if first == nil || p != first.plan {
		t.Fatal("epoch 2 was planned again, not taken from the plan made ahead")
	}
	same(2, p)
	if a.next != nil {
		t.Fatal("the plan made ahead was not used up")
	}
	a.prepare(3)
	ahead := a.next
	q, err := a.plan(5) // the trainer skipped ahead (set_epoch)
	if err != nil {
		t.Fatal(err)
	}
	<-ahead.done
	if q == ahead.plan {
		t.Fatal("epoch 5 got the plan made for epoch 3")
	}
	same(5, q)
	// A split too large to plan ahead is planned when its epoch starts.
	var once planAhead
	once.open(seeds, cfg, false, 0)
	if once.next != nil {
		t.Fatal("planned ahead although plansBytes said not to")
	}
	if r, err := once.plan(0); err != nil {
		t.Fatal(err)
	} else {
		same(0, r)
	}
	// Bad configurations fail the same way made ahead or not.
	var bad planAhead
	bad.open(seeds, sampler.EpochConfig{BatchSize: 0}, true, 0)
	if _, err := bad.plan(0); err == nil {
		t.Fatal("a batch size of 0 planned ahead gave no error")
	}
}

// TestEpochStartMetric: each epoch's start (StartEpoch to its first
// BatchReady) is one observation of gnnloader_epoch_start_seconds, and two
// epochs of one trainer give two (the second from the plan made ahead).
func TestEpochStartMetric(t *testing.T) {
	srv, src := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	for e := range uint32(2) {
		if ids := c.epoch(src, e); len(ids) == 0 {
			t.Fatalf("epoch %d served no seeds", e)
		}
		n, sum := epochStarts(t, srv)
		if n != uint64(e)+1 || sum <= 0 {
			t.Fatalf("after epoch %d: %d epoch starts observed (sum %v s), want %d", e, n, sum, e+1)
		}
	}
}

// epochStarts is gnnloader_epoch_start_seconds' count and sum.
func epochStarts(t *testing.T, srv *Server) (uint64, float64) {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "gnnloader_epoch_start_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no gnnloader_epoch_start_seconds")
	return 0, 0
}

// TestPlansBytes: a request's epoch plans are charged twice (the next one
// made ahead) up to maxPlanAheadBytes a plan, once beyond (a huge link set
// is planned when its epoch starts); link plans cost their positions too.
func TestPlansBytes(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		link  bool
		bytes int64
		ahead bool
	}{
		{1000, false, 2 * 24 * 1000, true},
		{1000, true, 2 * 32 * 1000, true},
		{maxPlanAheadBytes / 24, false, 2 * 24 * (maxPlanAheadBytes / 24), true},
		{maxPlanAheadBytes/24 + 1, false, 24 * (maxPlanAheadBytes/24 + 1), false},
		{87_000_000, true, 32 * 87_000_000, false},
	} {
		b, ahead := plansBytes(tc.n, tc.link)
		if b != tc.bytes || ahead != tc.ahead {
			t.Errorf("plansBytes(%d, link %v) = %d, %v; want %d, %v", tc.n, tc.link, b, ahead, tc.bytes, tc.ahead)
		}
	}
}

// TestLeavingWaitsForThePlanMadeAhead: a trainer that opens and hangs up at
// once (a hostile client, over and over) leaves a plan being made ahead;
// its share of the memory budget comes back only once that plan is done,
// so the budget always counts every plan the daemon holds.
func TestLeavingWaitsForThePlanMadeAhead(t *testing.T) {
	gate := make(chan struct{})
	planAheadHook = func() { <-gate }
	t.Cleanup(func() { planAheadHook = nil })
	srv, _ := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq()) // its start epoch is being planned, held at the gate
	used := srv.BudgetUsed()
	if used == 0 {
		t.Fatal("an open trainer takes nothing from the budget")
	}
	c.conn.Close()
	time.Sleep(100 * time.Millisecond) // the session leaves, but for its plan
	if got := srv.BudgetUsed(); got != used {
		t.Fatalf("budget used %d while the plan is still being made, want %d", got, used)
	}
	close(gate)
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
}
