package sampler

import (
	"errors"
	"fmt"
)

// EpochConfig says how one rank walks through a split in an epoch.
type EpochConfig struct {
	// BatchSize is the number of seeds per batch (>= 1).
	BatchSize int
	// Shuffle permutes the seeds at every epoch, from (Seed, epoch).
	Shuffle bool
	// Seed seeds the shuffle and the batches' sampling keys.
	Seed uint64
	// Rank is this trainer's rank in [0, WorldSize).
	Rank int
	// WorldSize is the number of ranks; 0 means 1.
	WorldSize int
	// DropLast drops the tail of the split so that it divides evenly
	// between ranks (instead of padding) and drops each rank's last batch
	// when it is smaller than BatchSize.
	DropLast bool
}

// Plan is one rank's batches of one epoch. It is immutable and safe for
// concurrent use.
type Plan struct {
	seeds     []int64 // this rank's seeds, in order
	inputs    []int64 // and the position of each in the split (PyG's input_id)
	batchSize int
	batches   int
	base      uint64 // key of the epoch
	rank      int
	world     int
}

// NewPlan plans epoch (>= 0) of the split seeds for one rank. seeds is not
// modified or kept. See the package documentation for the exact semantics.
func NewPlan(seeds []int64, cfg EpochConfig, epoch int) (*Plan, error) {
	if epoch < 0 {
		return nil, errors.New("sampler: negative epoch")
	}
	world, err := cfg.world()
	if err != nil {
		return nil, err
	}
	n := len(seeds)
	// The shuffle permutes positions in the split; the seeds follow them.
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(i)
	}
	if cfg.Shuffle {
		shuffle(order, cfg.Seed, epoch)
	}
	perRank, batches := cfg.counts(n, world)
	mine, inputs := make([]int64, perRank), make([]int64, perRank)
	if n > 0 {
		for j := range mine {
			at := order[(cfg.Rank+j*world)%n]
			mine[j], inputs[j] = seeds[at], at
		}
	}
	return &Plan{
		seeds:     mine,
		inputs:    inputs,
		batchSize: cfg.BatchSize,
		batches:   batches,
		base:      mix64(mix64(cfg.Seed) ^ mix64(uint64(epoch)+golden)),
		rank:      cfg.Rank,
		world:     world,
	}, nil
}

// world checks cfg and returns its world size (0 means 1).
func (cfg EpochConfig) world() (int, error) {
	world := cfg.WorldSize
	if world == 0 {
		world = 1
	}
	switch {
	case cfg.BatchSize < 1:
		return 0, fmt.Errorf("sampler: batch size %d, want >= 1", cfg.BatchSize)
	case world < 0:
		return 0, fmt.Errorf("sampler: world size %d", cfg.WorldSize)
	case cfg.Rank < 0 || cfg.Rank >= world:
		return 0, fmt.Errorf("sampler: rank %d outside [0, %d)", cfg.Rank, world)
	}
	return world, nil
}

// counts is a rank's seeds and batches an epoch of a split of n seeds.
// DistributedSampler: drop the tail or pad by repeating from the start.
func (cfg EpochConfig) counts(n, world int) (perRank, batches int) {
	if cfg.DropLast {
		perRank = n / world
		return perRank, perRank / cfg.BatchSize
	}
	perRank = (n + world - 1) / world
	return perRank, (perRank + cfg.BatchSize - 1) / cfg.BatchSize
}

// NumBatches is the number of batches of one rank an epoch of a split of
// n seeds has (every epoch: NewPlan(...).NumBatches()), without planning
// it; the errors are NewPlan's.
func NumBatches(n int, cfg EpochConfig) (int, error) {
	world, err := cfg.world()
	if err != nil {
		return 0, err
	}
	_, batches := cfg.counts(n, world)
	return batches, nil
}

// shuffle is a Fisher-Yates shuffle driven by a SplitMix64 stream seeded
// from (seed, epoch).
func shuffle(s []int64, seed uint64, epoch int) {
	r := rng{mix64(seed) ^ mix64(uint64(epoch)^0x5851F42D4C957F2D)}
	for i := len(s) - 1; i > 0; i-- {
		j := int(r.below(uint64(i + 1)))
		s[i], s[j] = s[j], s[i]
	}
}

// NumBatches is the number of batches of this rank; every rank of the same
// epoch has the same number.
func (p *Plan) NumBatches() int { return p.batches }

// NumSeeds is the number of seeds this rank gets in the epoch (after
// padding or dropping, before dropping a short last batch).
func (p *Plan) NumSeeds() int { return len(p.seeds) }

// Batch returns the seeds of batch i (0 <= i < NumBatches). The slice is a
// view into the Plan: do not modify it; it stays valid while the Plan lives.
func (p *Plan) Batch(i int) []int64 {
	lo := i * p.batchSize
	hi := min(lo+p.batchSize, len(p.seeds))
	return p.seeds[lo:hi:hi]
}

// Inputs returns the positions in the split of the seeds of batch i (PyG's
// input_id): Batch(i)[j] is seeds[Inputs(i)[j]] of the split NewPlan was
// given. A view into the Plan, as Batch's.
func (p *Plan) Inputs(i int) []int64 {
	lo := i * p.batchSize
	hi := min(lo+p.batchSize, len(p.inputs))
	return p.inputs[lo:hi:hi]
}

// Key returns the sampling key of batch i: a hash of (Seed, epoch, global
// batch position i*WorldSize+Rank). The global position numbers the batches
// of all ranks of the epoch without gaps or repeats, so no two batches of an
// epoch share a key, and the key never depends on the number of goroutines.
func (p *Plan) Key(i int) uint64 {
	g := uint64(i)*uint64(p.world) + uint64(p.rank)
	return mix64(p.base ^ mix64(g+golden))
}
