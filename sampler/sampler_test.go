package sampler

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// batchesEqual reports the first difference between two batches.
func batchesEqual(a, b *Batch) error {
	switch {
	case !slices.Equal(a.NID, b.NID):
		return fmt.Errorf("NID differs (len %d vs %d)", len(a.NID), len(b.NID))
	case !slices.Equal(a.NumSampledNodes, b.NumSampledNodes):
		return fmt.Errorf("NumSampledNodes %v vs %v", a.NumSampledNodes, b.NumSampledNodes)
	case !slices.Equal(a.NumSampledEdges, b.NumSampledEdges):
		return fmt.Errorf("NumSampledEdges %v vs %v", a.NumSampledEdges, b.NumSampledEdges)
	case !slices.Equal(a.Src, b.Src):
		return fmt.Errorf("Src differs")
	case !slices.Equal(a.Dst, b.Dst):
		return fmt.Errorf("Dst differs")
	case !slices.Equal(a.Order, b.Order):
		return fmt.Errorf("Order differs")
	case a.EID != nil && b.EID != nil && !slices.Equal(a.EID, b.EID):
		return fmt.Errorf("EID differs")
	}
	return nil
}

// digest hashes every output field of b.
func digest(b *Batch) [32]byte {
	h := sha256.New()
	for _, s := range [][]int64{b.NID} {
		binary.Write(h, binary.LittleEndian, s)
	}
	for _, s := range [][]int{b.NumSampledNodes, b.NumSampledEdges} {
		for _, x := range s {
			binary.Write(h, binary.LittleEndian, int64(x))
		}
	}
	for _, s := range [][]int32{b.Src, b.Dst, b.Order} {
		binary.Write(h, binary.LittleEndian, int64(len(s)))
		binary.Write(h, binary.LittleEndian, s)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

func testSeeds(g *datasets.Graph, n int, seed uint64) []int64 {
	r := rng{mix64(seed)}
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(r.below(uint64(g.NumNodes)))
	}
	return s
}

var (
	graphsOnce sync.Once
	graph32    *datasets.Graph
	graph64    *datasets.Graph
)

// testGraphs returns a 32-bit and a 64-bit power-law graph of 50k nodes.
func testGraphs() []*datasets.Graph {
	graphsOnce.Do(func() {
		graph32 = powerLawGraph(50_000, 12, 3000, 1, false)
		graph64 = powerLawGraph(50_000, 12, 3000, 2, true)
	})
	return []*datasets.Graph{graph32, graph64}
}

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

// checkBatch checks every structural property of a batch against the graph.
func checkBatch(t *testing.T, g *datasets.Graph, fanouts []int, seeds []int64, b *Batch) {
	t.Helper()
	if len(b.NumSampledNodes) != len(fanouts)+1 || len(b.NumSampledEdges) != len(fanouts) {
		t.Fatalf("per-hop counts: %d nodes, %d edges entries for %d hops", len(b.NumSampledNodes), len(b.NumSampledEdges), len(fanouts))
	}
	if !slices.Equal(b.NID[:len(seeds)], seeds) || b.NumSampledNodes[0] != len(seeds) {
		t.Fatal("seeds are not first in seed order")
	}
	total := 0
	for _, x := range b.NumSampledNodes {
		total += x
	}
	if total != len(b.NID) {
		t.Fatalf("NumSampledNodes sums to %d, len(NID) = %d", total, len(b.NID))
	}
	etotal := 0
	for _, x := range b.NumSampledEdges {
		etotal += x
	}
	if etotal != len(b.Src) || len(b.Src) != len(b.Dst) {
		t.Fatalf("NumSampledEdges sums to %d, %d src, %d dst", etotal, len(b.Src), len(b.Dst))
	}
	// Unique nodes (repeated seeds aside) and first local id per seed.
	first := map[int64]int32{}
	for i, v := range b.NID {
		if _, ok := first[v]; ok {
			if i >= len(seeds) {
				t.Fatalf("node %d appears twice in NID (local %d)", v, i)
			}
			continue
		}
		first[v] = int32(i)
	}
	// Per hop: edges point from hop-h nodes (or earlier) to the frontier of
	// hop h; new nodes appear in order of first use as a source.
	nodeLo, nodeHi := 0, b.NumSampledNodes[0]
	e := 0
	for h, k := range fanouts {
		nextNew := nodeHi
		perDst := map[int32][]int64{}
		var dstOrder []int32
		for j := 0; j < b.NumSampledEdges[h]; j, e = j+1, e+1 {
			s, d := b.Src[e], b.Dst[e]
			if d < int32(nodeLo) || d >= int32(nodeHi) {
				t.Fatalf("hop %d edge %d: dst %d outside frontier [%d, %d)", h+1, e, d, nodeLo, nodeHi)
			}
			if s < 0 || int(s) >= nodeHi+b.NumSampledNodes[h+1] {
				t.Fatalf("hop %d edge %d: src %d out of range", h+1, e, s)
			}
			if int(s) >= nodeHi {
				if int(s) > nextNew {
					t.Fatalf("hop %d edge %d: new node %d before %d", h+1, e, s, nextNew)
				}
				if int(s) == nextNew {
					nextNew++
				}
			}
			if first[b.NID[s]] != s {
				t.Fatalf("edge %d: src %d is not the local id of node %d", e, s, b.NID[s])
			}
			if len(dstOrder) == 0 || dstOrder[len(dstOrder)-1] != d {
				if _, seen := perDst[d]; seen {
					t.Fatalf("hop %d: edges of dst %d not contiguous", h+1, d)
				}
				dstOrder = append(dstOrder, d)
			}
			perDst[d] = append(perDst[d], b.NID[s])
		}
		if nextNew != nodeHi+b.NumSampledNodes[h+1] {
			t.Fatalf("hop %d: %d new nodes used as sources, %d counted", h+1, nextNew-nodeHi, b.NumSampledNodes[h+1])
		}
		if !slices.IsSorted(dstOrder) {
			t.Fatalf("hop %d: dsts not in frontier order", h+1)
		}
		for p := nodeLo; p < nodeHi; p++ {
			v := b.NID[p]
			var row []int64
			for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
				row = append(row, g.Neighbor(i))
			}
			got := slices.Clone(perDst[int32(p)])
			want := len(row)
			if k >= 0 && want > k {
				want = k
			}
			if len(got) != want {
				t.Fatalf("hop %d node %d: %d neighbours sampled, want %d (degree %d, fanout %d)", h+1, v, len(got), want, len(row), k)
			}
			slices.Sort(got)
			if len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("hop %d node %d: repeated neighbour", h+1, v)
			}
			slices.Sort(row)
			for _, u := range got {
				if _, ok := slices.BinarySearch(row, u); !ok {
					t.Fatalf("hop %d: edge %d -> %d is not in the graph", h+1, u, v)
				}
			}
			if len(got) == len(row) && !slices.Equal(got, row) {
				t.Fatalf("hop %d node %d: fanout >= degree but not every neighbour", h+1, v)
			}
		}
		nodeLo, nodeHi = nodeHi, nodeHi+b.NumSampledNodes[h+1]
	}
	// Order: a permutation listing NID ascending.
	if len(b.Order) != len(b.NID) {
		t.Fatalf("Order has %d entries, NID %d", len(b.Order), len(b.NID))
	}
	seen := make([]bool, len(b.NID))
	for i, o := range b.Order {
		if o < 0 || int(o) >= len(b.NID) || seen[o] {
			t.Fatalf("Order is not a permutation at %d", i)
		}
		seen[o] = true
		if i > 0 {
			a, c := b.NID[b.Order[i-1]], b.NID[o]
			if a > c || (a == c && b.Order[i-1] > o) {
				t.Fatalf("Order not ascending at %d", i)
			}
		}
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

// chiSquareCritical is the upper alpha quantile of chi-square with df
// degrees of freedom (Wilson-Hilferty), for z the normal quantile of 1-alpha.
func chiSquareCritical(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestUniformity draws the neighbours of one high-degree node under many
// keys and runs a chi-square test (significance level 0.001, fixed keys so
// the outcome is reproducible) on how often each neighbour is picked. Every
// neighbour must be picked with probability fanout/degree.
func TestUniformity(t *testing.T) {
	for _, c := range []struct{ deg, fanout, draws int }{
		{200, 10, 20000}, // Floyd, positions on the stack
		{300, 40, 5000},  // Floyd, position set
		{50, 49, 2000},   // almost all
		{64, 1, 64000},   // one pick
	} {
		t.Run(fmt.Sprintf("d%d_k%d", c.deg, c.fanout), func(t *testing.T) {
			n := int64(c.deg + 1)
			indptr := make([]int64, n+1)
			idx := make([]int32, 0, c.deg)
			for i := 1; i <= c.deg; i++ {
				idx = append(idx, int32(i))
			}
			for v := int64(1); v <= n; v++ {
				indptr[v] = int64(c.deg)
			}
			g := &datasets.Graph{NumNodes: n, Indptr: indptr, Indices32: idx}
			s, err := New(g, Options{Fanouts: []int{c.fanout}, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]float64, c.deg)
			var b Batch
			seeds := []int64{0}
			for key := 0; key < c.draws; key++ {
				if err := s.Sample(seeds, uint64(key)*0x1234567, &b); err != nil {
					t.Fatal(err)
				}
				for _, src := range b.Src {
					counts[b.NID[src]-1]++
				}
			}
			expect := float64(c.draws) * float64(c.fanout) / float64(c.deg)
			// One draw of a k-subset of d (p = k/d) gives indicator
			// covariance p(1-p)*d/(d-1)*(I - J/d), so the Pearson statistic
			// divided by (1-p)*d/(d-1) is chi-square with d-1 degrees of
			// freedom for many draws.
			p := float64(c.fanout) / float64(c.deg)
			scale := (1 - p) * float64(c.deg) / float64(c.deg-1)
			chi := 0.0
			for _, x := range counts {
				chi += (x - expect) * (x - expect) / (expect * scale)
			}
			crit := chiSquareCritical(c.deg-1, 3.0902) // alpha = 0.001
			t.Logf("chi2 = %.1f, df = %d, critical(0.001) = %.1f", chi, c.deg-1, crit)
			if chi > crit {
				t.Fatalf("neighbour counts not uniform: chi2 %.1f > %.1f", chi, crit)
			}
		})
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

// TestSubsetUniformity checks the stronger property: every k-subset of the
// row is equally likely (d = 7, k = 3: 35 subsets; chi-square, alpha 0.001).
func TestSubsetUniformity(t *testing.T) {
	const d, k, draws = 7, 3, 35000
	idx := []int32{1, 2, 3, 4, 5, 6, 7}
	indptr := []int64{0, d, d, d, d, d, d, d, d}
	g := &datasets.Graph{NumNodes: 8, Indptr: indptr, Indices32: idx}
	s, err := New(g, Options{Fanouts: []int{k}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]float64{}
	var b Batch
	for key := uint64(0); key < draws; key++ {
		if err := s.Sample([]int64{0}, key, &b); err != nil {
			t.Fatal(err)
		}
		mask := 0
		for _, src := range b.Src {
			mask |= 1 << b.NID[src]
		}
		counts[mask]++
	}
	if len(counts) != 35 {
		t.Fatalf("%d distinct subsets, want 35", len(counts))
	}
	expect := float64(draws) / 35
	chi := 0.0
	for _, x := range counts {
		chi += (x - expect) * (x - expect) / expect
	}
	crit := chiSquareCritical(34, 3.0902)
	t.Logf("chi2 = %.1f, df = 34, critical(0.001) = %.1f", chi, crit)
	if chi > crit {
		t.Fatalf("subsets not uniform: chi2 %.1f > %.1f", chi, crit)
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
