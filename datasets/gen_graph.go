package datasets

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
)

// genID is the element type of generated CSR indices.
type genID interface{ ~int32 | ~int64 }

// buildGraph draws the directed graph straight into CSR: out-degrees first
// (their prefix sum is the indptr), then each row's targets.
func buildGraph[T genID](g *generator, labels []int32) (Graph, error) {
	n := g.sz.nodes
	indptr, err := g.indptr()
	if err != nil {
		return Graph{}, err
	}
	idx := make([]T, indptr[n])
	fillRows(g, labels, indptr, idx)
	gr := Graph{NumNodes: n, Indptr: indptr}
	switch idx := any(idx).(type) {
	case []int32:
		gr.Indices32 = idx
	case []int64:
		gr.Indices64 = idx
	}
	return gr, nil
}

// indptr draws the out-degrees and returns their prefix sums. Node v gets
// weight q_v (shifted Pareto(2), capped), and row v ends at
// floor(E * (q_0+...+q_v) / (q_0+...+q_{n-1})): every degree is the floor
// or the ceiling of v's exact share, and they add up to exactly E.
func (g *generator) indptr() ([]int64, error) {
	n, e := g.sz.nodes, g.sz.edges
	indptr := make([]int64, n+1)
	key := streamKey(g.seed, streamDegree)
	nch := (n + genChunk - 1) / genChunk
	sums := make([]int64, nch+1)
	genParallel(g.workers, n, genChunk, func(lo, hi int64) {
		var s int64
		for v := lo; v < hi; v++ {
			q := degreeWeight(hashAt(key, uint64(v)))
			indptr[v+1] = q
			s += q
		}
		sums[lo/genChunk+1] = s
	})
	for k := range nch {
		sums[k+1] += sums[k]
	}
	total := uint64(sums[nch])
	var overCap atomic.Bool
	genParallel(g.workers, n, genChunk, func(lo, hi int64) {
		p := uint64(sums[lo/genChunk])
		prev := int64(mulDiv(uint64(e), p, total))
		for v := lo; v < hi; v++ {
			p += uint64(indptr[v+1])
			end := int64(mulDiv(uint64(e), p, total))
			if end-prev > n-1 {
				overCap.Store(true)
			}
			indptr[v+1], prev = end, end
		}
	})
	if overCap.Load() {
		if err := capDegrees(indptr, n-1); err != nil {
			return nil, err
		}
	}
	return indptr, nil
}

// degreeWeight maps a random word to an out-degree weight in units of
// 1/genDegUnit: 1/sqrt(u) - genDegShift with u uniform in (0, 1], capped at
// genDegCap. Sqrt and division are correctly rounded everywhere, so the
// weight is the same on every platform.
func degreeWeight(x uint64) int64 {
	u := float64(x>>11+1) * 0x1p-53
	w := min(1/math.Sqrt(u)-genDegShift, genDegCap)
	return int64(w * genDegUnit)
}

// mulDiv is floor(a*b/c) for a*b/c < 2^64.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// capDegrees clips every degree at maxDeg and hands the excess out one edge
// at a time to rows below the cap, in node order (only tiny graphs get
// here).
func capDegrees(indptr []int64, maxDeg int64) error {
	n := int64(len(indptr) - 1)
	e := indptr[n]
	if e > n*maxDeg {
		return fmt.Errorf("gen: %d edges do not fit in a simple graph of %d nodes", e, n)
	}
	deg := make([]int64, n)
	var excess int64
	for v := range n {
		d := indptr[v+1] - indptr[v]
		deg[v] = min(d, maxDeg)
		excess += d - deg[v]
	}
	for v := int64(0); excess > 0; v = (v + 1) % n {
		if deg[v] < maxDeg {
			deg[v]++
			excess--
		}
	}
	for v := range n {
		indptr[v+1] = indptr[v] + deg[v]
	}
	return nil
}

// fillRows draws every row's targets, in parallel over row ranges of about
// rowChunkEdges edges.
func fillRows[T genID](g *generator, labels []int32, indptr []int64, idx []T) {
	n := g.sz.nodes
	const rowChunkEdges = 1 << 16
	var bounds []int64 // row ranges [bounds[i], bounds[i+1])
	for lo := int64(0); lo < n; {
		want := indptr[lo] + rowChunkEdges
		i, _ := slices.BinarySearch(indptr[lo+1:], want) // first row ending at or past want
		hi := min(lo+1+int64(i), n)
		bounds = append(bounds, lo)
		lo = hi
	}
	bounds = append(bounds, n)
	rf := rowFiller[T]{
		g:          g,
		n:          n,
		labels:     labels,
		classStart: g.classStart,
		key:        streamKey(g.seed, streamRows),
		homophily:  uint32(genHomophily * (1 << 32)),
	}
	genParallel(g.workers, int64(len(bounds)-1), 1, func(k, _ int64) {
		lo, hi := bounds[k], bounds[k+1]
		for v := lo; v < hi; v++ {
			rf.row(v, idx[indptr[v]:indptr[v+1]])
		}
		g.prog.Add(indptr[hi] - indptr[lo])
	})
}

type rowFiller[T genID] struct {
	g          *generator
	n          int64
	labels     []int32
	classStart []int64
	key        uint64
	homophily  uint32
}

// rounds of mixed draws before a row falls back to uniform targets.
const mixedRounds = 8

// row fills row v with len(row) distinct targets other than v, ascending.
func (f *rowFiller[T]) row(v int64, row []T) {
	d := int64(len(row))
	if d == 0 {
		return
	}
	rng := wyrand(hashAt(f.key, uint64(v)))
	if 2*d > f.n-1 { // dense row: select uniformly, in order
		need, left := d, f.n-1
		var i int64
		for u := int64(0); u < f.n && need > 0; u++ {
			if u == v {
				continue
			}
			if below(rng.next(), left) < need {
				row[i] = T(u)
				i++
				need--
			}
			left--
		}
		return
	}
	c := f.labels[v]
	cs, ce := f.classStart[c], f.classStart[c+1]
	var filled int64
	for round := 0; filled < d; round++ {
		for i := filled; i < d; i++ {
			row[i] = T(f.draw(&rng, v, cs, ce, round >= mixedRounds))
		}
		slices.Sort(row)
		filled = 1
		for i := int64(1); i < d; i++ {
			if row[i] != row[filled-1] {
				row[filled] = row[i]
				filled++
			}
		}
	}
}

// draw picks one target other than v. With probability genHomophily it is
// a member of v's class (rank positions [cs, ce)), otherwise a member of a
// class picked in proportion to class size; within the class, the member at
// position floor(size*u^2) with u uniform, so position p is drawn with
// density ~ p^(-1/2): a power law of in-degrees. uniform draws from all
// nodes.
func (f *rowFiller[T]) draw(rng *wyrand, v, cs, ce int64, uniform bool) int64 {
	for {
		x := rng.next()
		var t int64
		if uniform {
			t = below(x, f.n)
		} else {
			start, size := cs, ce-cs
			if uint32(x) >= f.homophily || size <= 1 {
				k := f.g.classAt(below(rng.next(), f.n))
				start, size = f.classStart[k], f.classStart[k+1]-f.classStart[k]
			}
			u := x >> 32
			t = int64(f.g.rank.at(uint64(start + below(u*u, size))))
		}
		if t != v {
			return t
		}
	}
}
