package serve

import (
	"slices"
	"testing"

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
	a.prepare(seeds, cfg, 2)
	a.prepare(seeds, cfg, 2) // again for the same epoch: the one under way stays
	first := a.next
	p, err := a.plan(seeds, cfg, 2)
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
	a.prepare(seeds, cfg, 3)
	ahead := a.next
	q, err := a.plan(seeds, cfg, 5) // the trainer skipped ahead (set_epoch)
	if err != nil {
		t.Fatal(err)
	}
	<-ahead.done
	if q == ahead.plan {
		t.Fatal("epoch 5 got the plan made for epoch 3")
	}
	same(5, q)
	// Bad configurations fail the same way made ahead or not.
	bad := sampler.EpochConfig{BatchSize: 0}
	a.prepare(seeds, bad, 0)
	if _, err := a.plan(seeds, bad, 0); err == nil {
		t.Fatal("a batch size of 0 planned ahead gave no error")
	}
}
