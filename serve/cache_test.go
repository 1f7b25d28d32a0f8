package serve

import (
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/sampler"
)

// topNodes takes the most sampled nodes, then by in-degree, then by id,
// whatever k cuts through.
func TestTopNodes(t *testing.T) {
	counts := []uint32{0, 5, 0, 2, 5, 0, 2, 1, 0, 0}
	indeg := []uint32{9, 1, 3, 4, 0, 3, 7, 0, 70000, 3}
	for k, want := range map[int64][]int64{
		1:  {1},                      // count 5, smaller id first
		2:  {1, 4},                   // both count 5
		3:  {1, 4, 6},                // count 2: in-degree 7 before 4
		5:  {1, 3, 4, 6, 7},          // then count 1
		6:  {1, 3, 4, 6, 7, 8},       // then count 0 by in-degree (capped: 70000 > 9)
		8:  {0, 1, 3, 4, 6, 7, 8, 2}, // in-degree 3 three times: smallest id first
		10: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		20: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		slices.Sort(want)
		if got := topNodes(counts, indeg, k); !slices.Equal(got, want) {
			t.Errorf("k=%d: got %v, want %v", k, got, want)
		}
	}
}

// The cache's pre-sample draws batches the trainer will not see: neither its
// first epoch's batches (seeds and sampling keys) nor, for a trainer that
// does not shuffle, its fixed order.
func TestPresampleIsNotTheTrainersEpoch(t *testing.T) {
	seeds := make([]int64, 10000)
	for i := range seeds {
		seeds[i] = int64(i)
	}
	for _, shuffle := range []bool{true, false} {
		req := &request{seeds: seeds, epochs: sampler.EpochConfig{BatchSize: 64, Shuffle: shuffle, Seed: 7, WorldSize: 1}}
		pre, err := presamplePlan(req)
		if err != nil {
			t.Fatal(err)
		}
		if pre.NumBatches() != 157 {
			t.Fatalf("shuffle=%v: pre-sample plan of %d batches, want the split's 157", shuffle, pre.NumBatches())
		}
		for epoch := range 3 {
			own, err := sampler.NewPlan(seeds, req.epochs, epoch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if slices.Equal(pre.Batch(i), own.Batch(i)) {
					t.Errorf("shuffle=%v: pre-sample batch %d has the seeds of the trainer's epoch %d", shuffle, i, epoch)
				}
				if pre.Key(i) == own.Key(i) {
					t.Errorf("shuffle=%v: pre-sample batch %d has the sampling key of the trainer's epoch %d", shuffle, i, epoch)
				}
			}
		}
	}
}
