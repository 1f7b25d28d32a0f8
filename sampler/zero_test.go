package sampler

import (
	"slices"
	"testing"
)

// A fanout of 0 is a hop that samples nothing (PyG's 0): its edge and node
// counts are 0, later hops have an empty frontier, and the batch equals the
// reference's.
func TestZeroFanout(t *testing.T) {
	g := testGraphs()[0]
	seeds := testSeeds(g, 50, 3)
	for _, fanouts := range [][]int{{0}, {0, 5}, {5, 0}, {3, 0, -1}} {
		s, err := New(g, Options{Fanouts: fanouts, EdgeIDs: true})
		if err != nil {
			t.Fatalf("fanouts %v: %v", fanouts, err)
		}
		var b Batch
		if err := s.Sample(seeds, 7, &b); err != nil {
			t.Fatal(err)
		}
		if err := batchesEqual(&b, refSample(g, fanouts, seeds, 7)); err != nil {
			t.Fatalf("fanouts %v: %v", fanouts, err)
		}
		zero := slices.Index(fanouts, 0)
		if b.NumSampledEdges[zero] != 0 || b.NumSampledNodes[zero+1] != 0 {
			t.Fatalf("fanouts %v: hop %d sampled %d edges, %d nodes", fanouts, zero+1, b.NumSampledEdges[zero], b.NumSampledNodes[zero+1])
		}
		for h := zero + 1; h < len(fanouts); h++ {
			if b.NumSampledEdges[h] != 0 {
				t.Fatalf("fanouts %v: hop %d after an empty one sampled %d edges", fanouts, h+1, b.NumSampledEdges[h])
			}
		}
	}
}
