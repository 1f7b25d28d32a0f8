package sampler

// The sampler against refSample byte for byte, and against itself under
// other GOMAXPROCS, worker counts and concurrent calls.

import (
	"runtime"
	"sync"
	"testing"
)

// TestDifferential compares the sampler with refSample byte for byte.
func TestDifferential(t *testing.T) {
	fanouts := [][]int{{15, 10, 5}, {40, -1}, {3, 3, 3, 3}}
	for gi, g := range testGraphs() {
		for _, f := range fanouts {
			want := map[uint64]*Batch{}
			seeds := testSeeds(g, 700, uint64(gi))
			for key := uint64(0); key < 3; key++ {
				want[key] = refSample(g, f, seeds, key)
			}
			for _, w := range []int{1, 2, 3, 8, 16} {
				for _, eids := range []bool{false, true} {
					s, err := New(g, Options{Fanouts: f, Workers: w, EdgeIDs: eids})
					if err != nil {
						t.Fatal(err)
					}
					var b Batch
					for key := uint64(0); key < 3; key++ {
						if err := s.Sample(seeds, key, &b); err != nil {
							t.Fatal(err)
						}
						if err := batchesEqual(&b, want[key]); err != nil {
							t.Fatalf("graph %d fanouts %v workers %d key %d: %v", gi, f, w, key, err)
						}
						if eids != (len(b.EID) == len(b.Src)) || eids && b.EID == nil {
							t.Fatalf("EdgeIDs %v: %d edge ids for %d edges", eids, len(b.EID), len(b.Src))
						}
						if !eids && len(b.EID) != 0 {
							t.Fatalf("edge ids filled without Options.EdgeIDs")
						}
					}
				}
			}
		}
	}
}

// TestDeterminism samples the same batches under GOMAXPROCS 1, 2 and 16
// and Workers 1, 2, 5 and 16, and wants identical bytes.
func TestDeterminism(t *testing.T) {
	g := testGraphs()[0]
	seeds := testSeeds(g, 1024, 11)
	fanouts := []int{15, 10, 5}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var want [][32]byte
	for _, procs := range []int{1, 2, 16} {
		runtime.GOMAXPROCS(procs)
		for _, w := range []int{1, 2, 5, 16} {
			s, err := New(g, Options{Fanouts: fanouts, Workers: w})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			for key := uint64(0); key < 2; key++ {
				if err := s.Sample(seeds, key, &b); err != nil {
					t.Fatal(err)
				}
				d := digest(&b)
				if procs == 1 && w == 1 {
					want = append(want, d)
				} else if d != want[key] {
					t.Fatalf("GOMAXPROCS %d workers %d key %d: different bytes", procs, w, key)
				}
			}
		}
	}
	if err := batchesEqual(refSample(g, fanouts, seeds, 1), func() *Batch {
		s, _ := New(g, Options{Fanouts: fanouts, Workers: 16})
		var b Batch
		s.Sample(seeds, 1, &b)
		return &b
	}()); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentSample runs many Sample calls on one Sampler at once.
func TestConcurrentSample(t *testing.T) {
	g := testGraphs()[1]
	fanouts := []int{10, 5}
	s, err := New(g, Options{Fanouts: fanouts, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	seeds := make([][]int64, n)
	want := make([][32]byte, n)
	for i := range seeds {
		seeds[i] = testSeeds(g, 300, uint64(100+i))
		want[i] = digest(refSample(g, fanouts, seeds[i], uint64(i)))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var b Batch
			for rep := 0; rep < 3; rep++ {
				if err := s.Sample(seeds[i], uint64(i), &b); err != nil {
					t.Error(err)
					return
				}
				if digest(&b) != want[i] {
					t.Errorf("goroutine %d: different bytes", i)
					return
				}
			}
		})
	}
	wg.Wait()
}
