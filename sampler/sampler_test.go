package sampler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

func TestNewValidates(t *testing.T) {
	g := testGraphs()[0]
	bad := []Options{
		{},
		{Fanouts: []int{-2}},
		{Fanouts: []int{1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{Fanouts: []int{5}, Workers: -1},
	}
	for _, o := range bad {
		if _, err := New(g, o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	if _, err := New(nil, Options{Fanouts: []int{1}}); err == nil {
		t.Error("New(nil graph) succeeded")
	}
	if _, err := New(&datasets.Graph{NumNodes: 2, Indptr: []int64{0, 1}}, Options{Fanouts: []int{1}}); err == nil {
		t.Error("New with short indptr succeeded")
	}
	if _, err := New(g, Options{Fanouts: []int{-1, 1, 1, 1, 1, 1, 1, 1}}); err != nil {
		t.Errorf("New with 8 hops: %v", err)
	}
	s, _ := New(g, Options{Fanouts: []int{3}})
	var b Batch
	if err := s.Sample([]int64{0, g.NumNodes}, 1, &b); err == nil {
		t.Error("Sample with an out-of-range seed succeeded")
	}
}

func TestInvariants(t *testing.T) {
	cases := []struct {
		fanouts []int
		batch   int
	}{
		{[]int{15, 10, 5}, 512},
		{[]int{-1, 3}, 64},
		{[]int{40, 2}, 128}, // fanout above smallFanout: the set path of Floyd
		{[]int{1, 1, 1, 1, 1, 1, 1, 1}, 32},
		{[]int{2000}, 8}, // fanout above most degrees
	}
	for gi, g := range testGraphs() {
		for _, c := range cases {
			for _, w := range []int{1, 4} {
				t.Run(fmt.Sprintf("g%d/%v/w%d", gi, c.fanouts, w), func(t *testing.T) {
					s, err := New(g, Options{Fanouts: c.fanouts, Workers: w})
					if err != nil {
						t.Fatal(err)
					}
					seeds := testSeeds(g, c.batch, 7)
					seeds = append(seeds, seeds[3], seeds[0]) // repeated seeds stay in place
					var b Batch
					for key := uint64(0); key < 3; key++ {
						if err := s.Sample(seeds, key, &b); err != nil {
							t.Fatal(err)
						}
						checkBatch(t, g, c.fanouts, seeds, &b)
					}
				})
			}
		}
	}
}

func TestEmptyAndIsolated(t *testing.T) {
	g := &datasets.Graph{NumNodes: 3, Indptr: []int64{0, 0, 1, 1}, Indices32: []int32{2}}
	s, err := New(g, Options{Fanouts: []int{2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	if err := s.Sample(nil, 1, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.NID) != 0 || !slices.Equal(b.NumSampledNodes, []int{0, 0, 0}) || !slices.Equal(b.NumSampledEdges, []int{0, 0}) {
		t.Fatalf("empty batch: %+v", b)
	}
	if err := s.Sample([]int64{0, 1}, 1, &b); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, g, []int{2, 2}, []int64{0, 1}, &b)
	if !slices.Equal(b.NID, []int64{0, 1, 2}) || !slices.Equal(b.Src, []int32{2}) || !slices.Equal(b.Dst, []int32{1}) {
		t.Fatalf("got %+v", b)
	}
}

// TestNoAllocs wants zero allocations per batch once buffers are warm.
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	g := testGraphs()[0]
	for _, w := range []int{1, 4} {
		s, err := New(g, Options{Fanouts: []int{15, 10, 5}, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		seeds := [][]int64{testSeeds(g, 512, 1), testSeeds(g, 512, 2)}
		var b Batch
		for i := 0; i < 4; i++ {
			s.Sample(seeds[i%2], uint64(i%2), &b)
		}
		i := 0
		allocs := testing.AllocsPerRun(20, func() {
			if err := s.Sample(seeds[i%2], uint64(i%2), &b); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("workers %d: %.1f allocations per batch", w, allocs)
		}
	}
}

func TestSortBucket(t *testing.T) {
	r := rng{5}
	for _, n := range []int{0, 1, 47, 48, 49, 1000, 5000} {
		for _, nbits := range []uint{0, 5, 11, 12, 23, 30} {
			const shift = 13
			a := make([]uint64, n)
			for i := range a {
				hi := r.next() & (1<<nbits - 1)
				a[i] = 7<<(shift+nbits) | hi<<shift | uint64(i) // as order() makes them: low bits ascending
			}
			want := slices.Clone(a)
			slices.Sort(want)
			got := sortBucket(a, make([]uint64, n), shift, nbits)
			if !slices.Equal(got, want) {
				t.Fatalf("n %d nbits %d: not sorted", n, nbits)
			}
		}
	}
}

// TestEdgeIDs: every edge id names the CSR position of its edge (the row of
// its target holds its source there), and no edge of a target repeats one.
func TestEdgeIDs(t *testing.T) {
	for gi, g := range testGraphs() {
		for _, f := range [][]int{{15, 10, 5}, {-1, 2}, {40, 3}} {
			s, err := New(g, Options{Fanouts: f, Workers: 4, EdgeIDs: true})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			if err := s.Sample(testSeeds(g, 300, 5), 9, &b); err != nil {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			for j, e := range b.EID {
				dst, src := b.NID[b.Dst[j]], b.NID[b.Src[j]]
				if e < g.Indptr[dst] || e >= g.Indptr[dst+1] || g.Neighbor(e) != src {
					t.Fatalf("graph %d fanouts %v edge %d: id %d is not an edge %d -> %d", gi, f, j, e, src, dst)
				}
				if seen[e] && b.Dst[j] >= int32(b.NumSampledNodes[0]) {
					t.Fatalf("graph %d fanouts %v: edge id %d sampled twice", gi, f, e)
				}
				seen[e] = true
			}
		}
	}
}
