package sampler

import (
	"fmt"
	"slices"
	"testing"
)

// torchDistributed is a line-by-line transcription of PyTorch's
// DistributedSampler.__iter__ over an already permuted index list, followed
// by DataLoader batching (drop_last drops a short last batch).
func torchDistributed(perm []int64, world, rank, batch int, dropLast bool) [][]int64 {
	n := len(perm)
	var numSamples int
	if dropLast && n%world != 0 {
		numSamples = (n - world + world - 1) / world // math.ceil((n - world) / world)
	} else {
		numSamples = (n + world - 1) / world
	}
	total := numSamples * world
	indices := slices.Clone(perm)
	if !dropLast {
		pad := total - len(indices)
		if pad <= len(indices) {
			indices = append(indices, indices[:pad]...)
		} else {
			var rep []int64
			for k := 0; k < (pad+len(indices)-1)/len(indices); k++ {
				rep = append(rep, indices...)
			}
			indices = append(indices, rep[:pad]...)
		}
	} else {
		indices = indices[:total]
	}
	var mine []int64
	for i := rank; i < total; i += world {
		mine = append(mine, indices[i])
	}
	var out [][]int64
	for i := 0; i < len(mine); i += batch {
		b := mine[i:min(i+batch, len(mine))]
		if dropLast && len(b) < batch {
			break
		}
		out = append(out, b)
	}
	return out
}

func TestPlanMatchesDistributedSampler(t *testing.T) {
	for _, n := range []int{1, 3, 10, 17, 100, 1000} {
		seeds := make([]int64, n)
		for i := range seeds {
			seeds[i] = int64(1000 + 7*i)
		}
		for _, world := range []int{1, 2, 3, 8} {
			for _, batch := range []int{1, 4, 32} {
				for _, drop := range []bool{false, true} {
					for _, shuf := range []bool{false, true} {
						if drop && n < world {
							continue // PyTorch gives every rank 0 samples here too; covered below
						}
						name := fmt.Sprintf("n%d/w%d/b%d/drop%v/shuf%v", n, world, batch, drop, shuf)
						perm := slices.Clone(seeds)
						if shuf {
							shuffle(perm, 42, 3)
						}
						nb := -1
						for rank := 0; rank < world; rank++ {
							cfg := EpochConfig{BatchSize: batch, Shuffle: shuf, Seed: 42, Rank: rank, WorldSize: world, DropLast: drop}
							p, err := NewPlan(seeds, cfg, 3)
							if err != nil {
								t.Fatal(err)
							}
							want := torchDistributed(perm, world, rank, batch, drop)
							if p.NumBatches() != len(want) {
								t.Fatalf("%s rank %d: %d batches, want %d", name, rank, p.NumBatches(), len(want))
							}
							if nb >= 0 && nb != p.NumBatches() {
								t.Fatalf("%s: ranks disagree on the batch count", name)
							}
							nb = p.NumBatches()
							for i := range want {
								if !slices.Equal(p.Batch(i), want[i]) {
									t.Fatalf("%s rank %d batch %d: %v, want %v", name, rank, i, p.Batch(i), want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestPlanProperties(t *testing.T) {
	seeds := make([]int64, 1001)
	for i := range seeds {
		seeds[i] = int64(i)
	}
	orig := slices.Clone(seeds)
	const world = 4
	cfg := EpochConfig{BatchSize: 64, Shuffle: true, Seed: 9, WorldSize: world}
	keys := map[uint64]bool{}
	covered := map[int64]int{}
	for rank := 0; rank < world; rank++ {
		cfg.Rank = rank
		p, err := NewPlan(seeds, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.NumBatches() != 4 { // ceil(ceil(1001/4)=251 / 64)
			t.Fatalf("rank %d: %d batches", rank, p.NumBatches())
		}
		for i := 0; i < p.NumBatches(); i++ {
			k := p.Key(i)
			if keys[k] {
				t.Fatalf("rank %d batch %d: key repeats", rank, i)
			}
			keys[k] = true
			for _, v := range p.Batch(i) {
				covered[v]++
			}
		}
		q, _ := NewPlan(seeds, cfg, 0)
		if q.Key(1) != p.Key(1) || !slices.Equal(q.Batch(1), p.Batch(1)) {
			t.Fatal("same config, different plan")
		}
	}
	if len(covered) != len(seeds) {
		t.Fatalf("%d of %d seeds covered", len(covered), len(seeds))
	}
	if !slices.Equal(seeds, orig) {
		t.Fatal("NewPlan modified its input")
	}
	cfg.Rank = 0
	p0, _ := NewPlan(seeds, cfg, 0)
	p1, _ := NewPlan(seeds, cfg, 1)
	if slices.Equal(p0.Batch(0), p1.Batch(0)) || p0.Key(0) == p1.Key(0) {
		t.Fatal("epochs 0 and 1 give the same batch")
	}
	cfg.Shuffle = false
	p, _ := NewPlan(seeds, cfg, 5)
	if !slices.Equal(p.Batch(0)[:3], []int64{0, 4, 8}) {
		t.Fatalf("unshuffled rank 0 starts %v", p.Batch(0)[:3])
	}
	// Fewer seeds than ranks with DropLast: nobody gets a batch.
	p, err := NewPlan(seeds[:3], EpochConfig{BatchSize: 2, WorldSize: 4, DropLast: true}, 0)
	if err != nil || p.NumBatches() != 0 {
		t.Fatalf("3 seeds, 4 ranks, drop last: %v batches, %v", p.NumBatches(), err)
	}
	for _, bad := range []EpochConfig{{BatchSize: 0}, {BatchSize: 1, Rank: 2, WorldSize: 2}, {BatchSize: 1, Rank: -1}, {BatchSize: 1, WorldSize: -1}} {
		if _, err := NewPlan(seeds, bad, 0); err == nil {
			t.Errorf("NewPlan(%+v) succeeded", bad)
		}
	}
}

// Inputs are the seeds' positions in the split, also with repeated ids and
// padding: seeds[Inputs(i)[j]] is Batch(i)[j].
func TestPlanInputs(t *testing.T) {
	seeds := []int64{7, 3, 7, 9, 1, 3, 0, 5, 2, 7, 8}
	for _, cfg := range []EpochConfig{
		{BatchSize: 3},
		{BatchSize: 4, Shuffle: true, Seed: 3},
		{BatchSize: 2, Shuffle: true, Seed: 1, Rank: 2, WorldSize: 3},
		{BatchSize: 2, Shuffle: true, Rank: 1, WorldSize: 4, DropLast: true},
	} {
		p, err := NewPlan(seeds, cfg, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.NumBatches(); i++ {
			b, in := p.Batch(i), p.Inputs(i)
			if len(in) != len(b) {
				t.Fatalf("%+v batch %d: %d inputs for %d seeds", cfg, i, len(in), len(b))
			}
			for j, at := range in {
				if seeds[at] != b[j] {
					t.Fatalf("%+v batch %d: input %d is position %d (%d), seed is %d", cfg, i, j, at, seeds[at], b[j])
				}
			}
		}
	}
	p, _ := NewPlan(seeds, EpochConfig{BatchSize: 4}, 0)
	if !slices.Equal(p.Inputs(1), []int64{4, 5, 6, 7}) {
		t.Fatalf("unshuffled batch 1 inputs %v", p.Inputs(1))
	}
}

// TestNumBatches: NumBatches counts what NewPlan plans, padding, dropping
// and ranks included, and refuses what NewPlan refuses.
func TestNumBatches(t *testing.T) {
	for _, n := range []int{0, 1, 7, 64, 65, 1000} {
		for _, world := range []int{0, 1, 3, 8} {
			for _, drop := range []bool{false, true} {
				for _, bs := range []int{1, 10, 64} {
					w := max(world, 1)
					for rank := range w {
						cfg := EpochConfig{BatchSize: bs, WorldSize: world, Rank: rank, DropLast: drop, Shuffle: true}
						p, err := NewPlan(make([]int64, n), cfg, 1)
						if err != nil {
							t.Fatal(err)
						}
						got, err := NumBatches(n, cfg)
						if err != nil || got != p.NumBatches() {
							t.Fatalf("n %d %+v: NumBatches %d (%v), the plan has %d", n, cfg, got, err, p.NumBatches())
						}
					}
				}
			}
		}
	}
	for _, cfg := range []EpochConfig{{BatchSize: 0}, {BatchSize: 1, WorldSize: -1}, {BatchSize: 1, WorldSize: 2, Rank: 2}} {
		if _, err := NumBatches(10, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
		if _, err := NewPlan(make([]int64, 10), cfg, 0); err == nil {
			t.Errorf("%+v: NewPlan gave no error", cfg)
		}
	}
}
