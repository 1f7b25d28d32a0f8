package sampler

import (
	"sort"

	"github.com/gnnloader/gnnloader/datasets"
)

// refDisjoint is the deliberately simple reference for Disjoint, written the
// way PyG's sampler works: one frontier over the whole batch, nodes keyed by
// (subgraph, node id) in one Go map, and the draw rules written out again
// (eligibility by the seed's time, Floyd's algorithm with a map, "last" by a
// sort). It shares only the RNG contract (subgraphKey, nodeSeed, rng.below).
func refDisjoint(g *datasets.Graph, o DisjointOptions, seeds, times []int64, key uint64) *DisjointBatch {
	type node struct {
		sub int32
		id  int64
	}
	temporal := o.NodeTime != nil || o.EdgeTime != nil
	if temporal && times == nil {
		for _, v := range seeds {
			times = append(times, o.NodeTime[v])
		}
	}
	timeOf := func(pos int64) int64 {
		if o.EdgeTime != nil {
			return o.EdgeTime[pos]
		}
		return o.NodeTime[g.Neighbor(pos)]
	}
	b := &DisjointBatch{}
	local := map[node]int32{}
	for i, v := range seeds {
		b.NID = append(b.NID, v)
		b.Subgraph = append(b.Subgraph, int32(i))
		local[node{int32(i), v}] = int32(i)
	}
	b.NumSampledNodes = append(b.NumSampledNodes, len(seeds))
	lo := 0
	for h, k := range o.Fanouts {
		hi := len(b.NID)
		frontierPos := map[int32]int{} // per subgraph: its next node's position in the hop's frontier
		edges := 0
		for q := lo; q < hi; q++ {
			v, s := b.NID[q], b.Subgraph[q]
			p := frontierPos[s]
			frontierPos[s]++
			var cand []int64
			for pos := g.Indptr[v]; pos < g.Indptr[v+1]; pos++ {
				if !temporal || timeOf(pos) <= times[s] {
					cand = append(cand, pos)
				}
			}
			picks := cand
			switch {
			case temporal && o.Strategy == Last:
				sort.SliceStable(picks, func(i, j int) bool {
					ti, tj := timeOf(picks[i]), timeOf(picks[j])
					return ti < tj || ti == tj && picks[i] < picks[j]
				})
				if k >= 0 && len(picks) > k {
					picks = picks[len(picks)-k:]
				}
			case k >= 0 && len(cand) > k:
				picks = nil
				r := rng{nodeSeed(subgraphKey(key, int(s)), h+1, p)}
				chosen := map[int]bool{}
				for j := len(cand) - k; j < len(cand); j++ {
					t := int(r.below(uint64(j + 1)))
					if chosen[t] {
						t = j
					}
					chosen[t] = true
					picks = append(picks, cand[t])
				}
			}
			for _, pos := range picks {
				u := g.Neighbor(pos)
				l, ok := local[node{s, u}]
				if !ok {
					l = int32(len(b.NID))
					local[node{s, u}] = l
					b.NID = append(b.NID, u)
					b.Subgraph = append(b.Subgraph, s)
				}
				b.Src = append(b.Src, l)
				b.Dst = append(b.Dst, int32(q))
				b.EID = append(b.EID, pos)
				edges++
			}
		}
		b.NumSampledEdges = append(b.NumSampledEdges, edges)
		b.NumSampledNodes = append(b.NumSampledNodes, len(b.NID)-hi)
		lo = hi
	}
	addressOrder(&b.Batch)
	return b
}
