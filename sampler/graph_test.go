package sampler

import (
	"math"
	"slices"
	"sync"

	"github.com/gnnloader/gnnloader/datasets"
)

// powerLawGraph builds a CSR graph with n nodes, Pareto-distributed degrees
// of mean about avgDeg (capped at maxDeg), a mix of uniform and skewed
// (low-id-heavy) neighbours, no repeated neighbour within a row, some
// self-loops and some isolated nodes. wide stores 64-bit indices.
func powerLawGraph(n int64, avgDeg float64, maxDeg int64, seed uint64, wide bool) *datasets.Graph {
	r := rng{mix64(seed)}
	unif := func() float64 { return float64(r.next()>>11) / (1 << 53) }
	indptr := make([]int64, n+1)
	var idx []int64
	row := make([]int64, 0, 64)
	xm := avgDeg / 3 // Pareto alpha 1.5 has mean 3*xm
	for v := int64(0); v < n; v++ {
		u := max(unif(), 1e-12)
		d := int64(xm / math.Pow(u, 1/1.5))
		if v%97 == 0 {
			d = 0
		}
		d = min(d, maxDeg, n)
		row = row[:0]
		for int64(len(row)) < d {
			var w int64
			if r.next()&1 == 0 {
				w = int64(r.below(uint64(n)))
			} else {
				x := unif()
				w = int64(float64(n) * x * x * x)
			}
			row = append(row, w)
		}
		slices.Sort(row)
		row = slices.Compact(row)
		// shuffle so rows are not sorted
		for i := len(row) - 1; i > 0; i-- {
			j := int(r.below(uint64(i + 1)))
			row[i], row[j] = row[j], row[i]
		}
		idx = append(idx, row...)
		indptr[v+1] = int64(len(idx))
	}
	g := &datasets.Graph{NumNodes: n, Indptr: indptr}
	if wide {
		g.Indices64 = idx
	} else {
		g.Indices32 = make([]int32, len(idx))
		for i, x := range idx {
			g.Indices32[i] = int32(x)
		}
	}
	return g
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
