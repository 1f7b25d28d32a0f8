package datasets

import (
	"cmp"
	"fmt"
	"slices"
)

// Per-edge arrays (Data.EdgeAttr, EdgeWeight, EdgeTime) are stored in CSR
// order: entry p belongs to the edge at position p of the indices array,
// the edge id (e_id) the sampler reports. Whatever reorders the edges
// (Transpose, MakeUndirectedEdges) hands back the permutation, and the
// arrays follow it (Data.permuteEdges).

// HasEdgeArrays reports whether d carries any per-edge array.
func (d *Data) HasEdgeArrays() bool {
	return d.EdgeDim > 0 || d.EdgeWeight != nil || d.EdgeTime != nil
}

// EdgeRowBytes is the size of one edge_attr row in bytes.
func (d *Data) EdgeRowBytes() int { return d.EdgeDim * d.EdgeDType.Size() }

// permuteEdges reorders every per-edge array of d by perm: entry p of the
// result is entry perm[p] of the old array.
func (d *Data) permuteEdges(perm []int64) {
	if d.EdgeAttr != nil {
		d.EdgeAttr = PermuteRows(d.EdgeAttr, d.EdgeRowBytes(), perm)
	}
	d.EdgeWeight = permute(d.EdgeWeight, perm)
	d.EdgeTime = permute(d.EdgeTime, perm)
}

// permute returns s in the order perm gives (nil stays nil).
func permute[T any](s []T, perm []int64) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(perm))
	for p, q := range perm {
		out[p] = s[q]
	}
	return out
}

// makeUndirected is an import's --undirected: d's graph symmetrised
// (symmetrise), marked undirected, and its Source saying how.
func (d *Data) makeUndirected(workers int, reduce EdgeReduce) error {
	if err := d.symmetrise(workers, reduce); err != nil {
		return err
	}
	d.Directed = false
	d.Source += " --undirected"
	if reduce == ReduceSum {
		d.Source += " --undirected-reduce sum"
	}
	return nil
}

// symmetrise symmetrises d's graph like MakeUndirected, carrying the
// per-edge arrays (MakeUndirectedEdges) when there are any: each edge
// keeps its first copy's values, or with ReduceSum the sum of its copies'
// edge_attr and edge_weight (edge_time stays the first copy's).
func (d *Data) symmetrise(workers int, reduce EdgeReduce) error {
	if _, err := ParseEdgeReduce(string(reduce)); err != nil {
		return fmt.Errorf("undirected: reduce %w", err)
	}
	if !d.HasEdgeArrays() {
		g, err := MakeUndirected(&d.Graph, workers)
		d.Graph = g
		return err
	}
	// The arrays are read by edge position below: their lengths first.
	if err := d.validateEdges(true); err != nil {
		return fmt.Errorf("undirected: %w", err)
	}
	sum := reduce == ReduceSum && (d.EdgeDim > 0 || d.EdgeWeight != nil)
	if sum && d.EdgeDim > 0 && !summable(d.EdgeDType) {
		return fmt.Errorf("undirected: edge_attr of dtype %s cannot be summed (--undirected-reduce first keeps the first copy's)", d.EdgeDType)
	}
	g, origin, copies, err := makeUndirectedEdges(&d.Graph, workers, sum)
	if err != nil {
		return err
	}
	d.Graph = g
	if !sum {
		d.permuteEdges(origin)
		return nil
	}
	d.EdgeTime = permute(d.EdgeTime, origin)
	if d.EdgeWeight != nil {
		w := make([]float32, len(origin))
		for p := range w {
			for _, q := range copies.of(p) {
				w[p] += d.EdgeWeight[q]
			}
		}
		d.EdgeWeight = w
	}
	if d.EdgeDim > 0 {
		d.EdgeAttr = sumRows(d.EdgeAttr, d.EdgeDType, d.EdgeDim, copies)
	}
	return nil
}

// MakeUndirectedEdges is MakeUndirected (the same graph) with the origin of
// every edge: the edge at position p of the result, v -> u, comes from the
// edge at position origin[p] of g, which is g's first entry u in row v when
// there is one, else g's first entry v in row u. Per-edge arrays follow with
// PermuteRows; an edge stored both ways keeps its two values. It sorts 2E
// (row, column, origin) triples: O(E log E) time and 48 bytes per edge of g,
// more than MakeUndirected needs, so it is for graphs with per-edge arrays.
func MakeUndirectedEdges(g *Graph, workers int) (Graph, []int64, error) {
	out, origin, _, err := makeUndirectedEdges(g, workers, false)
	return out, origin, err
}

// edgeCopies lists, for every edge of a symmetrised graph, the edges of the
// input it merges: all[offs[p]:offs[p+1]] for edge p (its first copy first).
type edgeCopies struct {
	offs, all []int64
}

func (c *edgeCopies) of(p int) []int64 { return c.all[c.offs[p]:c.offs[p+1]] }

// makeUndirectedEdges is MakeUndirectedEdges; with copies set it also lists
// every input edge each output edge merges.
func makeUndirectedEdges(g *Graph, workers int, copies bool) (Graph, []int64, *edgeCopies, error) {
	if err := g.validate(workerCount(workers)); err != nil {
		return Graph{}, nil, nil, fmt.Errorf("undirected: %w", err)
	}
	type ent struct {
		col int64
		key int64 // reversed<<62 | origin: forward entries first
	}
	n, e := g.NumNodes, g.NumEdges()
	cnt := make([]int64, n+1)
	for v := int64(0); v < n; v++ {
		for p := g.Indptr[v]; p < g.Indptr[v+1]; p++ {
			if u := g.Neighbor(p); u != v {
				cnt[v+1]++
				cnt[u+1]++
			}
		}
	}
	for v := int64(0); v < n; v++ {
		cnt[v+1] += cnt[v]
	}
	ents := make([]ent, cnt[n])
	cur := slices.Clone(cnt[:n])
	for v := int64(0); v < n; v++ {
		for p := g.Indptr[v]; p < g.Indptr[v+1]; p++ {
			if u := g.Neighbor(p); u != v {
				ents[cur[v]] = ent{u, p}
				cur[v]++
				ents[cur[u]] = ent{v, 1<<62 | p}
				cur[u]++
			}
		}
	}
	cur = nil
	ip := make([]int64, n+1)
	origin := make([]int64, 0, min(int64(len(ents)), 2*e))
	var cp *edgeCopies
	if copies {
		cp = &edgeCopies{offs: []int64{0}, all: make([]int64, 0, len(ents))}
	}
	out := Graph{NumNodes: n, Indptr: ip}
	var idx64 []int64
	var idx32 []int32
	for v := int64(0); v < n; v++ {
		row := ents[cnt[v]:cnt[v+1]]
		slices.SortFunc(row, func(a, b ent) int {
			return cmp.Or(cmp.Compare(a.col, b.col), cmp.Compare(a.key, b.key))
		})
		for i, x := range row {
			if cp != nil {
				if i > 0 && row[i-1].col != x.col { // the previous output edge's copies end
					cp.offs = append(cp.offs, int64(len(cp.all)))
				}
				cp.all = append(cp.all, x.key&(1<<62-1))
			}
			if i > 0 && row[i-1].col == x.col {
				continue
			}
			origin = append(origin, x.key&(1<<62-1))
			if g.Indices64 != nil {
				idx64 = append(idx64, x.col)
			} else {
				idx32 = append(idx32, int32(x.col))
			}
		}
		ip[v+1] = int64(len(origin))
		if cp != nil && len(row) > 0 {
			cp.offs = append(cp.offs, int64(len(cp.all)))
		}
	}
	if g.Indices64 != nil {
		out.Indices64 = idx64
		if idx64 == nil {
			out.Indices64 = []int64{}
		}
	} else {
		out.Indices32 = idx32
		if idx32 == nil {
			out.Indices32 = []int32{}
		}
	}
	return out, origin, cp, nil
}

// validateEdges checks the per-edge arrays against the graph; edges false
// leaves out edge_attr and edge_weight (opened with NoEdgeFeatures).
func (d *Data) validateEdges(edges bool) error {
	e := d.Graph.NumEdges()
	switch {
	case d.EdgeDim < 0:
		return fmt.Errorf("edge_attr: edge_dim %d is negative", d.EdgeDim)
	case d.EdgeDim == 0 && (d.EdgeAttr != nil || d.EdgeDType != ""):
		return fmt.Errorf("edge_attr: data or dtype %q without edge_dim", d.EdgeDType)
	case d.EdgeDim > 0 && !d.EdgeDType.Valid():
		return fmt.Errorf("edge_attr: unknown dtype %q", d.EdgeDType)
	}
	if d.EdgeDim > 0 && (edges || d.EdgeAttr != nil) {
		if want := e * int64(d.EdgeRowBytes()); int64(len(d.EdgeAttr)) != want {
			return inArray(roleEdgeAttr, fmt.Errorf("edge_attr: %d bytes, want %d edges x %d bytes = %d", len(d.EdgeAttr), e, d.EdgeRowBytes(), want))
		}
	}
	if d.EdgeWeight != nil && int64(len(d.EdgeWeight)) != e {
		return inArray(roleEdgeWeight, fmt.Errorf("edge_weight: %d entries for %d edges", len(d.EdgeWeight), e))
	}
	if d.EdgeTime != nil && int64(len(d.EdgeTime)) != e {
		return inArray(roleEdgeTime, fmt.Errorf("edge_time: %d entries for %d edges", len(d.EdgeTime), e))
	}
	if d.NodeTime != nil && int64(len(d.NodeTime)) != d.Graph.NumNodes {
		return inArray(roleNodeTime, fmt.Errorf("node_time: %d entries for %d nodes", len(d.NodeTime), d.Graph.NumNodes))
	}
	return nil
}
