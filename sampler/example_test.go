package sampler_test

import (
	"fmt"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

// An epoch of one rank: plan the batches, sample each into a reused Batch.
func Example() {
	// 0 -> {1, 2, 3}, 1 -> {0}, 2 -> {0, 3}, 3 -> {}
	g := &datasets.Graph{NumNodes: 4, Indptr: []int64{0, 3, 4, 6, 6}, Indices32: []int32{1, 2, 3, 0, 0, 3}}
	s, err := sampler.New(g, sampler.Options{Fanouts: []int{-1, 1}, Workers: 2})
	if err != nil {
		panic(err)
	}
	plan, err := sampler.NewPlan([]int64{0, 1, 2, 3}, sampler.EpochConfig{BatchSize: 2, Rank: 0, WorldSize: 2}, 0)
	if err != nil {
		panic(err)
	}
	var b sampler.Batch
	for i := 0; i < plan.NumBatches(); i++ {
		if err := s.Sample(plan.Batch(i), plan.Key(i), &b); err != nil {
			panic(err)
		}
		fmt.Println("seeds", plan.Batch(i), "n_id", b.NID, "nodes/hop", b.NumSampledNodes, "edges/hop", b.NumSampledEdges)
		fmt.Println("edge_index", b.Src, b.Dst, "address order", b.Order)
	}
	// Output:
	// seeds [0 2] n_id [0 2 1 3] nodes/hop [2 2 0] edges/hop [5 1]
	// edge_index [2 1 3 0 3 0] [0 0 0 1 1 2] address order [0 2 1 3]
}
