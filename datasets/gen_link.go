package datasets

import (
	"math"
	"slices"
)

// streamLink keys the link split draws (after gen_edges.go's streams).
const (
	streamLinkSource uint64 = iota + 96
	streamLinkPick
	streamLinkNeg
)

// linkSplits holds edges out of d's graph for link prediction when the
// preset has link splits (citation2), as OGB's ogbl-citation2 does:
//
//   - valid and test: for each of the scaled preset's LinkValid (LinkTest)
//     source nodes, distinct nodes of at least two stored neighbours in a
//     keyed random order, one stored entry drawn at random is removed from
//     the graph (in an undirected graph its reverse too) and becomes the
//     pair (Src = the neighbour, Dst = the node), with LinkNeg negative
//     destinations drawn uniformly from all nodes;
//   - train: every entry left in the graph, as pairs in CSR order.
//
// Per-edge arrays follow the removal; a split's Time is its edges'
// edge_time when there is one. Like the rest, every draw is a pure
// function of the seed and an index.
func (g *generator) linkSplits(d *Data, scale float64) {
	p := g.preset
	if p.LinkValid == 0 {
		return
	}
	gr := &d.Graph
	n := gr.NumNodes
	round := func(x int64) int64 { return max(int64(math.Round(float64(x)*scale)), 1) }
	sizes := []int64{round(p.LinkValid), round(p.LinkTest)}
	perm := newFeistel(uint64(n), streamKey(g.seed, streamLinkSource))
	pick := streamKey(g.seed, streamLinkPick)
	removed := make([]bool, gr.NumEdges())
	d.LinkSplits = map[string]*LinkSplit{}
	next := uint64(0)
	var held []int64 // the removed positions, in split order
	for k, name := range []string{SplitValid, SplitTest} {
		l := &LinkSplit{NumNeg: p.LinkNeg}
		for ; int64(len(l.Src)) < sizes[k] && next < uint64(n); next++ {
			v := int64(perm.at(next))
			deg := gr.Degree(v)
			if deg < 2 {
				continue
			}
			pos := gr.Indptr[v] + below(hashAt(pick, uint64(v)), deg)
			u := gr.Neighbor(pos)
			if removed[pos] || u == v {
				continue
			}
			removed[pos] = true
			if !d.Directed {
				if q, ok := findEntry(gr, u, v); ok {
					removed[q] = true
				}
			}
			l.Src, l.Dst = append(l.Src, u), append(l.Dst, v)
			held = append(held, pos)
		}
		if d.EdgeTime != nil {
			l.Time = make([]int64, len(l.Src))
			for i := range l.Time {
				l.Time[i] = d.EdgeTime[held[int64(len(held))-l.Len()+int64(i)]]
			}
		}
		neg := streamKey(g.seed, streamLinkNeg+uint64(k)<<32)
		l.NegDst = make([]int64, l.Len()*int64(l.NumNeg))
		for i := range l.NegDst {
			l.NegDst[i] = below(hashAt(neg, uint64(i)), n)
		}
		d.LinkSplits[name] = l
	}
	// What is left is the graph and the train split.
	keep := make([]int64, 0, gr.NumEdges())
	ip := make([]int64, n+1)
	for v := int64(0); v < n; v++ {
		for q := gr.Indptr[v]; q < gr.Indptr[v+1]; q++ {
			if !removed[q] {
				keep = append(keep, q)
			}
		}
		ip[v+1] = int64(len(keep))
	}
	train := &LinkSplit{Src: make([]int64, len(keep)), Dst: make([]int64, len(keep))}
	for v := int64(0); v < n; v++ {
		for q := ip[v]; q < ip[v+1]; q++ {
			train.Src[q], train.Dst[q] = gr.Neighbor(keep[q]), v
		}
	}
	ng := Graph{NumNodes: n, Indptr: ip}
	if gr.Indices64 != nil {
		ng.Indices64 = permute(gr.Indices64, keep)
	} else {
		ng.Indices32 = permute(gr.Indices32, keep)
	}
	d.Graph = ng
	d.permuteEdges(keep)
	if d.EdgeTime != nil {
		train.Time = slices.Clone(d.EdgeTime)
	}
	d.LinkSplits[SplitTrain] = train
}

// findEntry finds v in row u of a graph with sorted rows.
func findEntry(g *Graph, u, v int64) (int64, bool) {
	lo, hi := g.Indptr[u], g.Indptr[u+1]
	for lo < hi {
		m := (lo + hi) / 2
		if g.Neighbor(m) < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < g.Indptr[u+1] && g.Neighbor(lo) == v
}
