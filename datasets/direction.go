package datasets

import (
	"fmt"
	"slices"
)

// Which way a stored CSR row points.
//
// Row v of a stored Graph lists the nodes v receives messages from: the
// sampler draws v's neighbours from row v, and every sampled edge runs from
// the neighbour to v (in PyG terms edge_index[0] is the neighbour, the
// source, and edge_index[1] is v, the target: flow "source_to_target"). A
// row is therefore a list of incoming neighbours.
//
// An importer reads an input edge (i, j), a nonzero A[i, j] of an adjacency
// matrix or a "src,dst" row of an edge list, one of two ways:
//
//   - EdgeIn (the default, what gnnloader always did): row i of the input is
//     row i of the dataset, so (i, j) is read as the edge j -> i and node i
//     aggregates from j.
//   - EdgeOut: (i, j) is the edge i -> j, as PyG's from_scipy_sparse_matrix
//     and OGB's edge_index read it, so j aggregates from i: the dataset
//     stores the transpose, and the sampler gives exactly the neighbourhoods
//     PyG's NeighborLoader gives on the same input.
//
// For an undirected graph the two are the same.

// EdgeDirection says how an importer reads the input's edges.
type EdgeDirection string

const (
	// EdgeIn reads input row i as node i's incoming neighbours.
	EdgeIn EdgeDirection = "in"
	// EdgeOut reads input row i as node i's out-neighbours (PyG's reading).
	EdgeOut EdgeDirection = "out"
)

// ParseEdgeDirection parses "in" or "out" ("" is EdgeIn).
func ParseEdgeDirection(s string) (EdgeDirection, error) {
	switch EdgeDirection(s) {
	case "", EdgeIn:
		return EdgeIn, nil
	case EdgeOut:
		return EdgeOut, nil
	}
	return "", fmt.Errorf("unknown edge direction %q (want in or out)", s)
}

// Transpose returns the transpose of g (row u lists every v whose row in g
// holds u, as often as it does, ascending; for a bipartite g a row per
// source node) and the edge permutation perm:
// the edge at position p of the result is the edge at position perm[p] of
// g, so per-edge arrays follow with PermuteRows. It keeps g's index width;
// g is not modified. Equal entries of one row keep g's order.
func Transpose(g *Graph, workers int) (Graph, []int64, error) {
	if err := g.validate(workerCount(workers)); err != nil {
		return Graph{}, nil, fmt.Errorf("transpose: %w", err)
	}
	// A bipartite graph's transpose has a row per source node listing
	// destination ids.
	n, ns, e := g.NumNodes, g.SrcNodes(), g.NumEdges()
	ip := make([]int64, ns+1)
	for i := int64(0); i < e; i++ {
		ip[g.Neighbor(i)+1]++
	}
	for v := int64(0); v < ns; v++ {
		ip[v+1] += ip[v]
	}
	cur := slices.Clone(ip[:ns])
	perm := make([]int64, e)
	out := Graph{NumNodes: ns, Indptr: ip}
	if g.NumSrcNodes > 0 {
		out.NumSrcNodes = n
	}
	if g.NumSrcNodes > 0 && Wide(n) || g.NumSrcNodes == 0 && g.Indices64 != nil {
		out.Indices64 = make([]int64, e)
	} else {
		out.Indices32 = make([]int32, e)
	}
	// Rows of g in order: every transposed row comes out ascending.
	for v := int64(0); v < n; v++ {
		for p := g.Indptr[v]; p < g.Indptr[v+1]; p++ {
			u := g.Neighbor(p)
			q := cur[u]
			cur[u]++
			perm[q] = p
			if out.Indices64 != nil {
				out.Indices64[q] = v
			} else {
				out.Indices32[q] = int32(v)
			}
		}
	}
	return out, perm, nil
}

// PermuteRows returns the rows of b (fixed rows of rowBytes bytes) in the
// order perm gives: row p of the result is row perm[p] of b.
func PermuteRows(b []byte, rowBytes int, perm []int64) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(perm)*rowBytes)
	rb := int64(rowBytes)
	for p, q := range perm {
		copy(out[int64(p)*rb:(int64(p)+1)*rb], b[q*rb:(q+1)*rb])
	}
	return out
}

// orient stores the transpose of d's graph when dir is EdgeOut (see
// EdgeDirection), carrying the per-edge arrays along, and records it in
// d.Source.
func (d *Data) orient(dir EdgeDirection, workers int) error {
	switch dir {
	case "", EdgeIn:
		return nil
	case EdgeOut:
	default:
		return fmt.Errorf("unknown edge direction %q (want in or out)", dir)
	}
	if err := d.validateEdges(true); err != nil { // permuteEdges reads them by edge position
		return err
	}
	g, perm, err := Transpose(&d.Graph, workers)
	if err != nil {
		return err
	}
	d.Graph = g
	d.permuteEdges(perm)
	d.Source += " --edge-direction out"
	return nil
}
