package datasets

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// impRandomGraph makes a CSR graph with unsorted rows, duplicates, self
// loops and a few high-degree rows.
func impRandomGraph(seed uint64, n int64, edges int) (indptr []int64, src, dst []int64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	src, dst = make([]int64, edges), make([]int64, edges)
	for i := range src {
		src[i], dst[i] = rng.Int64N(n), rng.Int64N(n)
		switch rng.IntN(10) {
		case 0:
			dst[i] = src[i]
		case 1:
			src[i] = 3 % n // a hub
		}
	}
	return nil, src, dst
}

func impGraphFromEdges(n int64, src, dst []int64, wide bool) Graph {
	indptr := make([]int64, n+1)
	for _, s := range src {
		indptr[s+1]++
	}
	for v := int64(0); v < n; v++ {
		indptr[v+1] += indptr[v]
	}
	cur := slices.Clone(indptr[:n])
	g := Graph{NumNodes: n, Indptr: indptr}
	if wide {
		g.Indices64 = make([]int64, len(src))
	} else {
		g.Indices32 = make([]int32, len(src))
	}
	for i, s := range src { // edge order, so rows are unsorted
		if wide {
			g.Indices64[cur[s]] = dst[i]
		} else {
			g.Indices32[cur[s]] = int32(dst[i])
		}
		cur[s]++
	}
	return g
}

func TestMakeUndirected(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		edges int
	}{{1, 0}, {1, 5}, {5, 0}, {7, 40}, {1000, 20_000}, {20_000, 150_000}} {
		_, src, dst := impRandomGraph(uint64(tc.n), tc.n, tc.edges)
		wantPtr, wantIdx := impRefCSR(tc.n, src, dst, true)
		for _, variant := range []string{"narrow", "wide", "sorted"} {
			wide := variant == "wide"
			g := impGraphFromEdges(tc.n, src, dst, wide)
			if variant == "sorted" {
				for v := int64(0); v < tc.n; v++ {
					slices.Sort(g.Indices32[g.Indptr[v]:g.Indptr[v+1]])
				}
			}
			before := slices.Clone(g.Indices32)
			for _, workers := range []int{1, 2, 5, 16} {
				u, err := MakeUndirected(&g, workers)
				if err != nil {
					t.Fatal(err)
				}
				if err := u.Validate(); err != nil {
					t.Fatal(err)
				}
				got32 := u.Indices32
				if wide {
					if u.Indices64 == nil || u.Indices32 != nil {
						t.Fatal("index width not kept")
					}
					got32 = make([]int32, len(u.Indices64))
					for i, v := range u.Indices64 {
						got32[i] = int32(v)
					}
				}
				if !slices.Equal(u.Indptr, wantPtr) || !slices.Equal(got32, wantIdx) {
					t.Fatalf("n=%d edges=%d wide=%v workers=%d: result differs from the reference", tc.n, tc.edges, wide, workers)
				}
			}
			if !wide && !slices.Equal(before, g.Indices32) {
				t.Fatal("input modified")
			}
		}
	}
}

func TestMakeUndirectedBad(t *testing.T) {
	g := Graph{NumNodes: 3, Indptr: []int64{0, 1, 2, 3}, Indices32: []int32{1, 3, 0}}
	if _, err := MakeUndirected(&g, 2); err == nil || !strings.Contains(err.Error(), "edge 1 -> 3 out of range [0, 3)") {
		t.Errorf("out of range: %v", err)
	}
	g = Graph{NumNodes: 3, Indptr: []int64{0, 1, 2}, Indices32: []int32{1, 2}}
	if _, err := MakeUndirected(&g, 2); err == nil {
		t.Error("short indptr accepted")
	}
	g = Graph{NumNodes: 2, Indptr: []int64{0, 0, 0}}
	u, err := MakeUndirected(&g, 0)
	if err != nil || u.NumEdges() != 0 || u.Validate() != nil {
		t.Errorf("empty graph: %v %v", u, err)
	}
}

func BenchmarkMakeUndirected(b *testing.B) {
	const n, e = 1_000_000, 10_000_000
	rng := rand.New(rand.NewPCG(1, 2)) // uniform: no hub
	src, dst := make([]int64, e), make([]int64, e)
	for i := range src {
		src[i], dst[i] = rng.Int64N(n), rng.Int64N(n)
	}
	g := impGraphFromEdges(n, src, dst, false)
	b.Run("unsorted", func(b *testing.B) {
		impBenchLoop(b, 4*e, func() error { _, err := MakeUndirected(&g, 0); return err })
		b.ReportMetric(float64(e)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medges/s")
	})
	for v := int64(0); v < n; v++ { // as importers and generators make them
		slices.Sort(g.Indices32[g.Indptr[v]:g.Indptr[v+1]])
	}
	b.Run("sorted", func(b *testing.B) {
		impBenchLoop(b, 4*e, func() error { _, err := MakeUndirected(&g, 0); return err })
		b.ReportMetric(float64(e)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medges/s")
	})
}

func TestRowChunks(t *testing.T) {
	indptr := []int64{0, 0, 0, 10, 10, 11, 30, 30, 30, 30, 30, 31}
	for _, target := range []int64{1, 2, 5, 10, 100} {
		ch := rowChunks(indptr, target)
		next := int64(0)
		for _, c := range ch {
			if c[0] != next || c[1] <= c[0] || c[1]-c[0] > target {
				t.Fatalf("target %d: chunks %v", target, ch)
			}
			next = c[1]
		}
		if next != int64(len(indptr)-1) {
			t.Fatalf("target %d: chunks %v end at %d", target, ch, next)
		}
	}
}
